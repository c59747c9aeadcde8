"""Train the walking teacher: the same as `boxjax train --task walk` (`boxjax.cli.walk`), same flags."""

from boxjax.cli import common, walk

if __name__ == "__main__":
    raise SystemExit(common.run_main(walk.main))
