"""Block task speed: the whole PPO iteration, and where its time goes (`boxjax.bench.block`)."""

from boxjax.bench import block

if __name__ == "__main__":
    raise SystemExit(block.main())
