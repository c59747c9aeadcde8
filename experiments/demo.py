"""The main job, small (`make demo`): the same as `boxjax demo` (`boxjax.cli.demo`), same flags."""

from boxjax.cli import common, demo

if __name__ == "__main__":
    raise SystemExit(common.run_main(demo.main))
