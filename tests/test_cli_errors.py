"""Errors a newcomer meets first, each naming what they typed: a count flag by its flag, an unknown
`FIELD=VALUE` override with the valid fields."""

import pytest

from boxjax.cli import stance


@pytest.mark.parametrize("flag", ["--envs", "--unroll", "--minibatch", "--epochs", "--seeds"])
def test_count_flag_error_names_the_flag(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        stance.arguments([flag, "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "positive integer" in err
    assert "PPOConfig" not in err
