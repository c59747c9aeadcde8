"""The training CLIs as a user meets them: bad input is one `error: ...` line with status 2 (the traceback
only with --debug) and every config field's range is checked; Ctrl-C on the CPU path checkpoints the last
finished iteration and exits with 130; a resumed run logs no iteration twice."""

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from boxjax import ranges, runs
from boxjax.cli import block, common, stance
from boxjax.envs.block.config import BlockConfig
from boxjax.envs.stance.env import StanceConfig
from boxjax.envs.walk.env import WalkConfig
from boxjax.rl.config import PPOConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """Run CLIs in a scratch folder, with `platform.configure` reduced to its GPU check: the real one
    would point this process's Warp kernel cache elsewhere (every later Warp test would compile anew)."""
    from boxjax import platform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        platform, "configure", lambda name, cache=None: name == "gpu" and platform.check_gpu()
    )
    return tmp_path


def _run(main, argv, capsys) -> tuple[int, str]:
    code = common.run_main(main, argv)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "wait_episodes=-1"], "error: StanceConfig.wait_episodes must be in (0, inf), got -1.0"),
        (["--ppo", "gamma=2"], "error: PPOConfig.gamma must be in [0, 1], got 2.0"),
        (["--ppo", "gamma=abc"], "error: bad value 'abc' for gamma: expected a float"),
        (["--ppo", "no_such=1"], "error: bad override 'no_such=1'"),
        (["--body", "nobody"], "error: argument --body: unknown body 'nobody'; valid: "),
        (["--platform", "gpu"], "error: --platform gpu needs an NVIDIA GPU and JAX's CUDA build"),
        (["--solver-loop", "unrolled"], "error: --solver-loop applies to --platform gpu only"),
        (["--block-dim", "ray=64"], "error: --block-dim applies to --platform gpu only"),
    ],
)
def test_bad_stance_input_is_one_error_line_with_status_2(argv, message, cli_env, capsys):
    code, err = _run(stance.main, [*argv, "--iterations", "1"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), err
    assert "Traceback" not in err


def test_block_cli_reports_a_bad_value_the_same_way(cli_env, capsys):
    code, err = _run(block.main, ["--env", "punch_gap_s=1.0,0.5", "--iterations", "1"], capsys)
    assert code == 2 and err.startswith(
        "error: BlockConfig.punch_gap_s expected (low, high) with low <= high"
    )


def test_debug_shows_the_traceback(cli_env):
    with pytest.raises(ValueError, match="wait_episodes"):
        common.run_main(stance.main, ["--env", "wait_episodes=-1", "--debug"])


def test_importing_the_networks_starts_no_jax_backend():
    """`--platform gpu` on a machine without CUDA must reach the one-line error, not die while importing."""
    code = "import boxjax.models.networks, boxjax.rl.ppo, jax; print(jax._src.xla_bridge._backends)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO}
    )
    assert out.returncode == 0 and out.stdout.strip() == "{}", out.stderr


def test_the_platform_holds_when_a_command_imported_jax_first(tmp_path):
    """The training commands import their task's defaults (and so JAX) before `platform.configure`: the
    platform it selects must still be the one JAX starts on."""
    code = (
        "import boxjax.cli.block, jax; from boxjax import platform; "
        f"platform.configure('cpu', {str(tmp_path)!r}); "
        "print(jax.config.jax_platforms, jax.default_backend())"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["cpu", "cpu"], out.stderr


@pytest.mark.parametrize("config", [StanceConfig, BlockConfig, WalkConfig, PPOConfig])
def test_every_numeric_config_field_has_a_range(config):
    covered = set(config.RANGES) | set(getattr(config, "BASE_RANGES", {}))
    assert set(ranges.numeric_fields(config)) <= covered


@pytest.mark.parametrize("config", [StanceConfig, BlockConfig, WalkConfig, PPOConfig])
def test_non_finite_values_are_refused_for_every_float_field(config):
    for field in dataclasses.fields(config):
        if isinstance(field.default, float):
            with pytest.raises(ValueError, match=f"{config.__name__}.{field.name} must be"):
                config(**{field.name: float("nan")})


def test_ranges_describe_themselves():
    assert ranges.POSITIVE.describe() == "in (0, inf)"
    assert ranges.UNIT.describe() == "in [0, 1]"
    assert ranges.COUNT.describe() == "an integer in [1, inf)"
    assert ranges.field_problem(True, ranges.COUNT) == "must be an integer in [1, inf), got True"


def test_resume_drops_the_metrics_rows_past_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"iteration": i}) + "\n" for i in range(1, 8)))
    runs.truncate_rows(str(path), 5)
    assert [json.loads(line)["iteration"] for line in path.read_text().splitlines()] == [1, 2, 3, 4, 5]


def test_exit_status_of_a_run_a_signal_stopped():
    class Result:
        stopped_by = "SIGINT"

    assert common.exit_status(Result()) == 128 + signal.SIGINT == 130
    assert common.exit_status(object()) == 0


def test_sigint_on_the_cpu_path_checkpoints_and_a_resume_logs_no_row_twice(tmp_path):
    import argparse

    from boxjax.models import checkpoint

    run = [
        sys.executable, "-m", "boxjax", "train", "--task", "stance", "--platform", "cpu",
        "--mode", "serial", "--envs", "8", "--unroll", "8", "--iterations", "100000", "--name", "t",
        "--checkpoint-every", "1000",
    ]  # fmt: skip
    proc = subprocess.Popen(run, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    progress_lines = 0
    for line in proc.stdout:
        progress_lines += line.startswith("[")
        if progress_lines == 2:
            proc.send_signal(signal.SIGINT)
            break
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, out
    assert "SIGINT: stopped after iteration" in out and "Traceback" not in out
    stopped = int(out.split("SIGINT: stopped after iteration ")[1].split(";")[0])
    directory = str(tmp_path / "runs" / "t" / "checkpoints")
    assert checkpoint.latest_step(directory) == stopped >= 2
    metrics = tmp_path / "runs" / "t" / "metrics.jsonl"
    with open(metrics, "a") as f:  # a row logged after the checkpoint, as by a run killed outright
        f.write(json.dumps({"iteration": stopped + 1}) + "\n")
    args = argparse.Namespace(resume=directory, iterations=stopped + 5)
    runs.open_progress(args, str(tmp_path / "runs" / "t")).close()
    rows = [json.loads(line)["iteration"] for line in metrics.read_text().splitlines()]
    assert rows == list(range(1, stopped + 1))


def test_curves_are_drawn_from_a_metrics_file_and_runs_overlay(tmp_path):
    from boxjax.bench import plot_runs
    from boxjax.viz import curves

    for name, slope in (("a", 1.0), ("b", 2.0)):
        run = tmp_path / name
        run.mkdir()
        rows = [
            {"iteration": i, "env_steps": 64 * i, "episode/return": slope * i, "episode/fall_rate": 0.1,
             "curriculum/level": i // 3, "s_per_iteration": 0.2, "env/nonfinite_worlds": 0.0}
            for i in range(1, 11)
        ]  # fmt: skip
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = curves.write_curves(str(tmp_path / "a"))
    assert path.endswith("curves.png") and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    titles = [panel.title for panel, _ in curves.panels_with_data({"a": rows})]
    assert titles == ["episode return", "falls", "curriculum level", "s / iteration"]  # no problem world
    both = [{**r, "agent/blocker/reward": 0.5, "agent/opponent/reward": 0.1 * i} for i, r in enumerate(rows)]
    assert "self-play: reward per step" in [panel.title for panel, _ in curves.panels_with_data({"a": both})]
    out = str(tmp_path / "both.png")
    assert plot_runs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", out]) == 0
    assert os.path.getsize(out) > 10_000


def test_curves_name_their_units_draw_falls_in_percent_and_leave_flat_task_figures_out():
    import matplotlib.pyplot as plt

    from boxjax.viz import curves

    rows = [
        {"iteration": i, "env_steps": 64 * i, "episode/return": 10.0 * i, "episode/fall_rate": 1.0 - 0.1 * i,
         "curriculum/level": 0.0, "count/blocks": float(i % 3), "count/punches": 4.0, "count/goals": 0.0,
         "s_per_iteration": 0.2, "env/nonfinite_worlds": 0.0}
        for i in range(1, 6)
    ]  # fmt: skip
    fig = curves.figure({"run": rows})
    drawn = [ax for ax in fig.axes if ax.get_title()]
    titles = [ax.get_title() for ax in drawn]
    assert titles == ["episode return", "falls", "events per iteration", "s / iteration"]
    assert all(ax.get_ylabel() for ax in drawn), [ax.get_ylabel() for ax in drawn]
    falls = drawn[1]
    assert "%" in falls.get_ylabel()
    assert falls.lines[0].get_ydata().tolist() == pytest.approx([90.0, 80.0, 70.0, 60.0, 50.0])
    assert [line.get_label() for line in drawn[2].lines] == ["run: blocks"]  # punches 4 and goals 0 flat
    plt.close(fig)


def test_iterations_without_an_ended_episode_are_gaps_in_the_curves_not_zeros():
    from boxjax.viz import curves

    rows = [
        {"episode/count": n, "episode/return": r, "s_per_iteration": 0.5}
        for n, r in ((2.0, 5.0), (0.0, 0.0), (1.0, 7.0))
    ]
    returns = curves.figure_values(rows, "episode/return")
    assert returns[::2] == [5.0, 7.0] and math.isnan(returns[1])
    assert curves.figure_values(rows, "s_per_iteration") == [0.5, 0.5, 0.5]
    assert math.isnan(curves.figure_values(rows, "curriculum/level")[0])


def test_the_boxjax_command_dispatches_to_each_task_and_names_bad_input(cli_env, capsys, monkeypatch):
    from boxjax.cli import bench, main

    assert main.task_of(["--task", "block", "--body", "simple"]) == ("block", ["--body", "simple"])
    assert main.task_of(["--platform", "cpu", "--task=walk"]) == ("walk", ["--platform", "cpu"])
    seen = []
    monkeypatch.setattr(stance, "main", lambda argv: seen.append(argv) or 0)
    assert main.main(["train", "--task", "stance", "--iterations", "1"]) == 0
    assert seen == [["--iterations", "1"]]
    for argv, message in (
        (["train", "--body", "simple"], "error: boxjax train needs --task, one of stance, block, walk"),
        (["train", "--task", "box"], "error: unknown task 'box'; valid: stance, block, walk"),
        (["fight"], "error: unknown command 'fight'; valid: train, watch, export, bench, demo"),
        (["bench", "speed"], "error: unknown bench tool 'speed'; valid: stance, block, cpu"),
    ):
        assert main.main(argv) == 2
        assert capsys.readouterr().err.startswith(message)
    assert bench.default_tools(gpu=True) == ("stance", "factor", "block", "selfplay", "seed_table")
    assert bench.default_tools(gpu=False) == ("stance", "cpu", "seed_table")


def test_the_boxjax_command_runs_as_a_module():
    done = subprocess.run(
        [sys.executable, "-m", "boxjax", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "boxjax train --task stance|block|walk" in done.stdout


def test_warp_flags_map_to_the_physics_arguments():
    import argparse

    from boxjax.cli import common

    parser = argparse.ArgumentParser()
    common.add_warp_arguments(parser)
    expected = {
        "auto": (None, None),
        "fused": (True, None),
        "stock": (False, None),
        "fused-large": (True, "large"),
    }
    for flag, (fused, trees) in expected.items():
        options = common.warp_options(parser.parse_args(["--factor", flag]))
        assert options == {
            "fused_factor": fused,
            "fused_factor_trees": trees,
            "solver_loop": None,
            "block_dims": (),
        }
    assert set(expected) == set(common.FACTORS)
    assert common.warp_options(parser.parse_args(["--solver-loop", "unrolled"]))["solver_loop"] == "unrolled"
    argv = ["--block-dim", "update_gradient_cholesky_blocked=64", "--block-dim", " ray = 128"]
    assert common.warp_options(parser.parse_args(argv))["block_dims"] == (
        ("update_gradient_cholesky_blocked", 64),
        ("ray", 128),
    )
    for bad in ("ray", "ray=", "=64", "ray=6.4", "ray=-32"):
        with pytest.raises(ValueError, match=f"--block-dim wants KERNEL=THREADS \\(an int\\), got '{bad}'"):
            common.warp_options(parser.parse_args(["--block-dim", bad]))
