"""`python -m boxjax COMMAND ...`: the `boxjax` command (`boxjax.cli.main`)."""

from boxjax.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
