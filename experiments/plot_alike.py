"""The training-alike check as curves against iterations (`boxjax.bench.plot_alike`)."""

from boxjax.bench import plot_alike

if __name__ == "__main__":
    raise SystemExit(plot_alike.main())
