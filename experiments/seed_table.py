"""The seed's price-and-speed table for the blocking training, on boxjax (`boxjax.bench.seed_table`)."""

from boxjax.bench import seed_table

if __name__ == "__main__":
    raise SystemExit(seed_table.main())
