"""Errors a newcomer meets first, each naming what they typed: a count flag by its flag, an unknown
`FIELD=VALUE` override with the valid fields."""

import dataclasses

import pytest

from boxjax.cli import common, stance
from boxjax.envs.block.config import BlockConfig
from boxjax.envs.stance.env import StanceConfig
from boxjax.envs.walk.env import WalkConfig
from boxjax.rl.config import PPOConfig


@pytest.mark.parametrize("flag", ["--envs", "--unroll", "--minibatch", "--epochs", "--seeds"])
def test_count_flag_error_names_the_flag(flag, capsys):
    with pytest.raises(SystemExit) as stop:
        stance.arguments([flag, "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "positive integer" in err
    assert "PPOConfig" not in err


@pytest.mark.parametrize(
    "defaults", [PPOConfig(), StanceConfig(), BlockConfig(), WalkConfig()], ids=lambda d: type(d).__name__
)
def test_unknown_override_lists_the_valid_fields(defaults):
    with pytest.raises(ValueError) as err:
        common.field_values(["nosuchfield=1"], defaults)
    message = str(err.value)
    assert "nosuchfield" in message
    assert all(field.name in message for field in dataclasses.fields(defaults))


@pytest.mark.parametrize("what", ["text file", "missing"])
def test_foreign_init_leaves_no_run_folder(what, tmp_path, monkeypatch, capsys):
    from boxjax import platform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(platform, "configure", lambda name, cache=None: None)
    source = tmp_path / "notes.txt"
    if what == "text file":
        source.write_text("not a checkpoint\n")
    argv = ["--init", str(source), "--name", "foreign", "--iterations", "1"]
    assert common.run_main(stance.main, argv) == 2
    assert f"--init {source}" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "foreign").exists()


def test_watch_help_lists_the_shipped_blockers(tmp_path, monkeypatch):
    from boxjax.cli import policies, watch

    shipped = policies.shipped_bodies()
    assert shipped and "simple" not in shipped
    text = " ".join(watch.parser().format_help().split())
    assert "--body simple" not in text
    assert f"({' | '.join(shipped)})" in text
    (tmp_path / "block-other.msgpack").write_bytes(b"")
    monkeypatch.setattr(policies, "SHIPPED_DIR", str(tmp_path))
    assert "(other)" in " ".join(watch.parser().format_help().split())


@pytest.mark.parametrize(
    ("task", "abbreviations"),
    [
        ("stance", ["amp", "cwait", "ar"]),
        ("block", ["rec", "ovf", "cwait", "ar"]),
        ("walk", ["verr", "yerr"]),
    ],
)
def test_train_help_explains_the_progress_line(task, abbreviations, capsys):
    import importlib

    module = importlib.import_module(f"boxjax.cli.{task}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    legend = capsys.readouterr().out.partition("progress line, one per iteration")[2]
    rows = {line.split()[0]: line for line in legend.splitlines() if line.strip()}
    for abbreviation in ["s/it", "steps/s", "ret", "fall", "ep", "ETA", *abbreviations]:
        assert abbreviation in rows, abbreviation
    assert "(s)" in rows.get("cwait", "(s)") and "count per iteration" in rows.get(
        "ovf", "count per iteration"
    )


def test_a_refused_ppo_config_names_the_flags_that_set_its_fields():
    args = stance.arguments(["--envs", "4", "--unroll", "5", "--minibatch", "3"])
    with pytest.raises(ValueError, match=r"\(set by --envs, --unroll, --minibatch\)"):
        stance.ppo_config(args)


def test_ppo_num_envs_sizes_the_cpu_path_or_is_refused_beside_a_count_it_contradicts():
    config = stance.ppo_config(stance.arguments(["--ppo", "num_envs=16"]))
    assert config.num_envs == 16 and config.minibatch_size == 16 * config.unroll_length // 4
    same = stance.arguments(["--envs", "16", "--ppo", "num_envs=16", "--collectors", "2", "--worlds", "8"])
    assert stance.ppo_config(same).num_envs == 16
    with pytest.raises(ValueError, match="--envs 8 and --ppo num_envs=16 ask for different worlds"):
        stance.ppo_config(stance.arguments(["--envs", "8", "--ppo", "num_envs=16"]))
    with pytest.raises(ValueError, match=r"--ppo num_envs=16 != --collectors 1 x --worlds 4"):
        stance.ppo_config(stance.arguments(["--ppo", "num_envs=16", "--worlds", "4"]))


def test_a_short_flag_and_ppo_that_disagree_are_refused():
    """`--envs 64 --ppo num_envs=32` (or --unroll against unroll_length) on the fused path: refused naming
    both, no longer the --ppo value silently; agreeing values pass."""
    fused = ["--platform", "gpu"]
    with pytest.raises(ValueError, match="--envs 64 and --ppo num_envs=32 ask for different worlds"):
        common.ppo_overrides(stance.arguments([*fused, "--envs", "64", "--ppo", "num_envs=32"]))
    with pytest.raises(ValueError, match="--unroll 8 and --ppo unroll_length=4"):
        common.ppo_overrides(stance.arguments([*fused, "--unroll", "8", "--ppo", "unroll_length=4"]))
    agreed = common.ppo_overrides(stance.arguments([*fused, "--envs", "32", "--ppo", "num_envs=32"]))
    assert agreed["num_envs"] == 32
