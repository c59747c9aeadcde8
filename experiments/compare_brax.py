"""Brax PPO against boxjax PPO on a Playground environment: `python experiments/compare_brax.py ENV --steps N`
(`boxjax.bench.brax`)."""

from boxjax.bench import brax
from boxjax.cli.common import run_main

if __name__ == "__main__":
    raise SystemExit(run_main(brax.main))
