"""Train the block task: the same as `boxjax train --task block` (`boxjax.cli.block`), same flags."""

from boxjax.cli import block, common

if __name__ == "__main__":
    raise SystemExit(common.run_main(block.main))
