"""Where boxjax PPO's iteration goes on a Playground environment: `python experiments/profile_ppo.py ENV`
(`boxjax.bench.profile_ppo`)."""

from boxjax.bench import profile_ppo
from boxjax.cli.common import run_main

if __name__ == "__main__":
    raise SystemExit(run_main(profile_ppo.main))
