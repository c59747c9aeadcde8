"""Write a trained policy as one small file: the same as `boxjax export` (`boxjax.cli.export`), same flags."""

from boxjax.cli import common, export

if __name__ == "__main__":
    raise SystemExit(common.run_main(export.main))
