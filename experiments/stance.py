"""Train the stance task: the same as `boxjax train --task stance` (`boxjax.cli.stance`), same flags."""

from boxjax.cli import common, stance

if __name__ == "__main__":
    raise SystemExit(common.run_main(stance.main))
