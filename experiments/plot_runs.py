"""Learning curves of training runs in one PNG: `python experiments/plot_runs.py runs/A runs/B ... [--out F]`
(`boxjax.bench.plot_runs`)."""

from boxjax.bench import plot_runs
from boxjax.cli.common import run_main

if __name__ == "__main__":
    raise SystemExit(run_main(plot_runs.main))
