"""Watch a trained fighter: the same as `boxjax watch` (`boxjax.cli.watch`), same flags."""

from boxjax.cli import common, watch

if __name__ == "__main__":
    raise SystemExit(common.run_main(watch.main))
