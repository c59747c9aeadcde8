"""`make bench`: the stance speed table of this machine, per body and world count (`boxjax.bench.stance`)."""

from boxjax.bench import stance

if __name__ == "__main__":
    raise SystemExit(stance.main())
