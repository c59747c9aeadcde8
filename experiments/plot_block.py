"""Where a blocking iteration's time goes: a PNG from `bench_block.py`'s rows (`boxjax.bench.plot_block`)."""

from boxjax.bench import plot_block

if __name__ == "__main__":
    raise SystemExit(plot_block.main())
