"""The benchmark and report tools' own logic: shape parsing, cost cells, CPU projections, the plot's
reading of bench rows, the learning-check table, the trace summary (no GPU)."""

import argparse
import gzip
import json
import os

import numpy as np
import pytest

from boxjax import runs
from boxjax.bench import (
    block,
    block_timing,
    cpu,
    learn_report,
    plot_block,
    run_report,
    seed_table,
    solve_report,
    trace_report,
)
from boxjax.bench import rows as bench_rows
from boxjax.cli import bench as cli_bench
from boxjax.cli import stance


@pytest.mark.parametrize("platform", ["cpu", "gpu"])
def test_stance_defaults_to_its_tuned_ppo_settings_and_the_command_line_wins(platform):
    tuned = stance.ppo_config(stance.arguments(["--platform", platform]))
    assert (tuned.init_log_std, tuned.desired_kl) == (-1.6, 0.04)
    chosen = stance.ppo_config(stance.arguments(["--platform", platform, "--ppo", "desired_kl=0.01"]))
    assert (chosen.init_log_std, chosen.desired_kl) == (-1.6, 0.01)


def test_stance_gpu_batch_defaults_to_2048_worlds_by_16_steps_and_the_command_line_wins():
    shape = stance.ppo_config(stance.arguments(["--platform", "gpu"]))
    assert (shape.num_envs, shape.unroll_length, shape.minibatch_size) == (2048, 16, 2048)
    chosen = stance.ppo_config(stance.arguments(["--platform", "gpu", "--envs", "1024", "--unroll", "32"]))
    assert (chosen.num_envs, chosen.unroll_length, chosen.minibatch_size) == (1024, 32, 2048)


def test_stance_defaults_to_its_tuned_window_and_the_command_line_wins():
    from boxjax.envs.stance.env import StanceConfig

    assert StanceConfig(**stance.env_options(stance.arguments([]))).wait_episodes == 0.5
    chosen = stance.env_options(stance.arguments(["--env", "wait_episodes=2", "--env", "levels=4"]))
    assert StanceConfig(**chosen).wait_episodes == 2.0 and chosen["levels"] == 4
    seed = StanceConfig(**stance.env_options(stance.arguments(["--rule", "seed"])))
    assert seed.wait_episodes == StanceConfig().wait_episodes == 2.0  # the seed's two episodes per world
    args = stance.arguments(["--platform", "cpu", "--envs", "8", "--ppo", "desired_kl=0.01"])
    settings = stance.effective_settings(stance.ppo_config(args), stance.env_options(args))
    assert settings == {
        "worlds": 8,
        "unroll": 16,
        "init_log_std": -1.6,
        "desired_kl": 0.01,
        "wait_episodes": 0.5,
    }


def test_setup_marks_reach_the_summary_in_order(monkeypatch):
    monkeypatch.setattr(runs, "SETUP_MARKS_S", {})
    runs.mark("first")
    runs.mark("second")
    args = argparse.Namespace(ppo=[], env=[])
    head = runs.summary_head(args, [{"setup_s": 1.0, "iteration": 1.0, "episode/return": 0.0}])
    marks = head["setup_marks_s"]
    assert 0.0 < marks["first"] <= marks["second"]


def test_bench_variants_leave_out_the_part_they_name():
    from boxjax.envs.block import BlockConfig, vision

    for name in (*block_timing.VARIANTS, "no_ik"):
        env = block_timing.variant_env(name, "simple", 2)
        assert env.config.ablate == ((block_timing.ABLATED[name],) if name in block_timing.ABLATED else ())
        # the ablated parts return before reading their inputs
        if name == "no_vision":
            np.testing.assert_array_equal(env._see(None), np.zeros(vision.FRAME_SIZE, np.float32))
        if name == "no_scoring":
            score, gap = env._score(None, None, None, None, None)
            assert float(score) == 0.0 and float(gap) > env.config.reach_m  # never within reach
        if name == "no_ik":
            pose, pose_id, offset, residual = env._fit_command(None, None, None)
            np.testing.assert_array_equal(pose, env.me.stance_ctrl)
            assert int(pose_id) == 0 and not np.any(offset) and float(residual) == 0.0
    with pytest.raises(ValueError, match="unknown parts \\['rays'\\]; valid: vision, scoring, ik"):
        BlockConfig(ablate=("rays",))
    assert "ablate" not in BlockConfig().to_dict()  # a full run describes itself as before ablations
    assert BlockConfig(ablate=("ik",)).to_dict()["ablate"] == ["ik"]


def test_shapes_parse_and_bad_ones_are_named():
    assert block.parse_shapes("2048x16,4096x8") == [(2048, 16), (4096, 8)]
    for bad in ("2048", "2048x", "x16", "2048*16"):
        with pytest.raises(SystemExit, match="WORLDSxSTEPS"):
            block.parse_shapes(bad)


def test_dollar_cells_from_seconds_and_price():
    figures = {"s_per_iteration": 0.36, "steps_per_s": 100_000.0}
    # 1,000 iterations of 0.36 s = 0.1 h; a million steps = 10 s
    assert block.dollars(figures, ("card", 3.0)) == f"{0.3:.3f} | {10 / 3600 * 3.0:.4f}"
    assert block.dollars(figures, None) == "n/a | n/a"


def test_warm_up_waits_for_two_quiet_iterations_in_a_row():
    def counting(captures):
        seen = iter(captures)
        return lambda: next(seen)

    assert (
        block_timing.warm_up(counting([0, 0, 5])) == 2
    )  # quiet from the start (the CPU: nothing to capture)
    assert (
        block_timing.warm_up(counting([3, 0, 2, 0, 0, 7])) == 5
    )  # one quiet iteration between captures is not enough
    assert (
        block_timing.warm_up(counting([1] * 20), most=8) == 8
    )  # a bench that keeps capturing is timed anyway


def test_iteration_table_shows_parts_and_graph_captures():
    figures = {
        "s_per_iteration": 0.36,
        "s_per_iteration_median": 0.37,
        "steps_per_s": 100_000.0,
        "it_physics_s": 0.2,
        "it_graph_captures": 2.0,
    }
    rows = [
        {"body": "muscular", "opponent": "simulated", "worlds": 2048, "metric": k, "value": v}
        for k, v in figures.items()
    ]
    lines = block.markdown(rows, ("card", 3.0)).splitlines()
    header, rule, row = lines[lines.index("") + 1 : lines.index("") + 4]
    assert header.split(" | ")[-3] == "graphs/it" and header.count("|") == rule.count("|") == row.count("|")
    cells = row.strip("| ").split(" | ")
    assert cells[:7] == ["muscular", "simulated", "2048", "0.360", "0.370", "100,000", "0.200"]
    assert cells[-3] == "2.0"


def test_cpu_projections_to_96_vcpus():
    scaled = dict((m, v) for m, v, _ in cpu.scaled_rows(10_000.0, 16))
    assert scaled["scaled_steps_per_s_96vcpu"] == pytest.approx(60_000.0)
    assert scaled["scaled_s_per_iteration_96vcpu"] == pytest.approx(27648 / 60_000.0)
    # 100 us per world-step over 72 collectors at 80 %; 1 ms per sample over 24 learners at 70 % + 16 x 3 ms
    model = dict((m, v) for m, v, _ in cpu.projection_rows(90.0, 10.0, 1e-3))
    assert model["projected_collect_s_96vcpu"] == pytest.approx(27648 * 100e-6 / 57.6)
    assert model["projected_update_s_96vcpu"] == pytest.approx(27648 * 1e-3 / 16.8 + 0.048)
    assert model["projected_s_per_iteration_96vcpu"] == pytest.approx(model["projected_update_s_96vcpu"])
    one = {"profile/collector_policy_s": 0.01, "profile/env_step_us_per_world": 500.0}
    measured = {
        (1, "serial", "fp32"): {**one, "profile/learner_update_s": 0.05, "steps_per_s": 1_000.0},
        (4, "decoupled", "fp32"): {**one, "profile/learner_update_s": 0.05, "steps_per_s": 3_000.0},
        (16, "decoupled", "fp32"): {**one, "profile/learner_update_s": 0.05, "steps_per_s": 10_000.0},
        (16, "decoupled", "bf16"): {**one, "profile/learner_update_s": 0.05, "steps_per_s": 99_000.0},
    }
    rows = {m: (v, extra) for m, v, _, extra in cpu.projections(measured)}
    value, extra = rows["scaled_steps_per_s_96vcpu"]
    assert value == pytest.approx(60_000.0) and extra["from_cores"] == 16  # the fp32 run of 16, not bf16
    assert extra["speedup_vs_1_cpu"] == pytest.approx(10.0)
    assert "projected_s_per_iteration_96vcpu" in rows
    assert len(cpu.projections({k: v for k, v in measured.items() if k[0] == 1})) == 4  # model only


def test_plot_reads_the_newest_split_run_per_shape_teacher_and_cap(tmp_path):
    base = {"bench": "block", "device": "GPU", "body": "muscular", "worlds": 2048, "unroll": 16, "date": "1"}
    rows = [
        {**base, "teacher": "none", "metric": "s_per_iteration", "value": 0.5},
        {**base, "teacher": "none", "metric": "s_per_iteration", "value": 0.4},  # newer wins
        {**base, "teacher": "none", "metric": "it_physics_s", "value": 0.3},
        {**base, "date": "2", "teacher": "none", "metric": "s_per_iteration", "value": 0.2},  # newer, unsplit
        {**base, "date": "0", "teacher": "none", "metric": "s_per_iteration", "value": 0.6},  # older
        {**base, "date": "0", "teacher": "none", "metric": "it_physics_s", "value": 0.5},
        {**base, "teacher": "untrained", "metric": "s_per_iteration", "value": 0.45},  # not split: dropped
        {**base, "worlds": 4096, "unroll": 8, "metric": "env_step_ms", "value": 1.0},  # no iteration: dropped
        {"bench": "stance", "device": "GPU", "metric": "s_per_iteration", "value": 9.0},  # other bench
        {**base, "teacher": "none", "graph_mode": "warp_staged_ex", "metric": "s_per_iteration", "value": 1},
        {**base, "teacher": "none", "substep_calls": "one", "metric": "s_per_iteration", "value": 2.0},
        {
            **base,
            "teacher": "none",
            "mj_options": {"ccd_iterations": 8},
            "metric": "s_per_iteration",
            "value": 3,
        },  # another cap: its own shape, not split, dropped
        {
            **base,
            "teacher": "none",
            "mj_options": {"ccd_tolerance": 1e-5},
            "metric": "it_physics_s",
            "value": 1,
        },
        {**base, "teacher": "none", "ccd_iterations": 16, "metric": "s_per_iteration", "value": 0.35},
        {**base, "teacher": "none", "ccd_iterations": 16, "metric": "it_physics_s", "value": 0.25},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shapes = plot_block.load([str(path)])
    cap35, cap16 = ("GPU", "muscular", 2048, 16, "none", 35), ("GPU", "muscular", 2048, 16, "none", 16)
    assert set(shapes) == {cap35, cap16}
    assert shapes[cap35] == {"s_per_iteration": 0.4, "it_physics_s": 0.3}
    assert shapes[cap16] == {"s_per_iteration": 0.35, "it_physics_s": 0.25}
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(SystemExit, match="no block iteration rows"):
        plot_block.main([str(empty)])


def test_learn_report_windows_and_outcome_shares(tmp_path):
    assert [len(w) for w in learn_report.windows(list(range(10)), 3)] == [3, 4, 3]
    assert [len(w) for w in learn_report.windows(list(range(2)), 6)] == [1, 1]
    ended = {1: 1.0, 2: 0.0, 3: 2.0, 4: 1.0}  # iteration 2 ended no episode: it reports 0 and weighs nothing
    rows = [
        {
            "iteration": float(i), "episode/count": ended[i], "episode/return": 10.0 * i * (ended[i] > 0),
            "episode/fall_rate": 0.5 * (ended[i] > 0), "count/goals": i, "count/punches": 3.0 * i,
            "env/punch/arrived": 0.01, "env/punch/parried": 0.005, "loss/distill": 0.2,
            "env/punch/missed": 0.004 - 0.001 * (i > 2), "env/punch/hit": 0.001 + 0.001 * (i > 2),
            "env/punch/blocked": 0.005, "env/punch/clean": 0.001 * (i > 2),
            "env/punch/hit_score": 0.8 * (0.001 + 0.001 * (i > 2)),
        }
        for i in range(1, 5)
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = learn_report.table(rows, 2).splitlines()
    assert out[2].split(" | ")[:6] == ["| 1–2", "10", "50.0%", "0.5", "4", "1.5"]
    assert out[3].split(" | ")[:3] == ["| 3–4", "33", "50.0%"]  # (2 x 30 + 40) / 3 episodes
    # blocked, parried, missed, hit, clean, hit score, parried of reaching (5 of 5 + 2), distill
    want = ["50%", "50%", "30%", "20%", "10%", "0.80", "71%", "0.200 |"]
    assert out[3].split(" | ")[-8:] == want
    assert learn_report.main([str(tmp_path), "--windows", "2"]) == 0


def test_solve_rows_name_the_solve_and_refuse_a_run_that_did_not(tmp_path):
    rows = [
        {"iteration": float(i), "time_s": 10.0 + i, "s_per_iteration": 0.5 + (i == 1),
         "solved": float(i >= 4)}
        for i in range(1, 7)
    ]  # fmt: skip
    rows[0]["setup_s"] = 11.0  # the first row of a run's process only, as the host loop writes it
    labels = dict(device="d", body="simple", task="stance", worlds=8, commit="abc", caches="cold",
                  rule="seed", seed=0, command="c")  # fmt: skip
    got = {r["metric"]: r["value"] for r in run_report.solve_rows(rows, labels)}
    assert got == {"time_to_solve_s": 14.0, "setup_s_cold": 11.0, "train_s_to_solve": 3.0,
                   "iterations_to_solve": 4.0, "s_per_iteration": 0.5}  # fmt: skip
    with pytest.raises(ValueError, match="did not solve in its 3 iterations"):
        run_report.solve_rows(rows[:3], labels)
    with pytest.raises(ValueError, match="not a resumed one"):
        run_report.solve_rows(rows + [{**rows[0], "iteration": 7.0}], labels)  # a resumed process' row
    with pytest.raises(ValueError, match="need the labels commit"):
        run_report.solve_rows(rows, {k: v for k, v in labels.items() if k != "commit"})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rows.jsonl"
    args = [str(tmp_path), "--rows", str(out)] + [f"--label={k}={v}" for k, v in labels.items()]
    assert run_report.main(args) == 0
    assert [json.loads(line)["worlds"] for line in out.read_text().splitlines()] == [8] * 5


def _solve_row(worlds: int, seed: int, seconds: float, **labels) -> dict:
    row = {"bench": "solve", "device": "NVIDIA H200", "task": "stance", "body": "simple", "worlds": worlds,
           "unroll": 16, "rule": "seed", "seed": seed, "caches": "warm", "commit": "abc1234",
           "date": "2026-12-06T00:00"}  # fmt: skip
    return {**row, **labels, "metric": "time_to_solve_s", "value": seconds, "unit": "s"}


def test_solve_report_tables_the_cost_per_solve_and_plots_the_worlds_sweep(tmp_path):
    rows = [
        _solve_row(1024, 0, 60.0),
        _solve_row(1024, 1, 80.0),
        _solve_row(2048, 0, 90.0),
        {**_solve_row(2048, 0, 90.0), "metric": "setup_s_warm", "value": 12.0},  # not a solve time
        _solve_row(4096, 0, 150.0, caches="cold"),
        _solve_row(1024, 0, 300.0, device="Some Other GPU"),
        {"bench": "stance", "metric": "time_to_solve_s", "value": 1.0},  # another benchmark's row
    ]
    path = tmp_path / "solve.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    solves = solve_report.read_solves([str(path)])
    assert len(solves) == 5
    prices = {"H200 (test)": bench_rows.Price(3.6, "a test's rate", "2026-12")}
    table = solve_report.cost_table(solves, prices)
    # 1,024 worlds: mean of 60 and 80 s; at $3.60/h, 70 s cost $0.070
    line = "| NVIDIA H200 | simple | 1024 x 16 | seed | warm | $3.60/h | **70.0 s** "
    assert line + "(seed 0: 60.0 s, seed 1: 80.0 s) | $0.070 | abc1234, 2026-12-06 |" in table
    assert "| 4096 x 16 | seed | cold | $3.60/h | **150.0 s**" in table
    assert "| Some Other GPU | simple | 1024 x 16 | seed | warm | n/a |" in table
    assert "price 'H200 (test)': $3.60/h, a test's rate; 2026-12" in table
    # the seed's own rows, as its table prints them (set-up included)
    seed_row = (
        "| RTX 5090, vast.ai (the seed's fastest) | simple | – | seed | as the seed's | $0.69/h | 185 s "
    )
    seed_row += "| $0.053 | the seed's table |"
    assert seed_row in table and table.index(seed_row) < table.index("| NVIDIA H200 |")
    lines = solve_report.sweep_lines(solves)
    warm = lines["simple, seed rule, warm, x16 (NVIDIA H200)"]
    assert warm == [(1024, 70.0, [60.0, 80.0]), (2048, 90.0, [90.0])]
    png = solve_report.draw_sweep(solves, str(tmp_path / "sweep.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_every_price_names_its_source_and_date(tmp_path):
    prices = bench_rows.load_prices()  # the shipped prices.json
    assert prices and all(p.usd_per_hour > 0 and p.source and p.date for p in prices.values())
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"Card": {"usd_per_hour": 1.0}}))
    with pytest.raises(ValueError, match="usd_per_hour, source and date"):
        bench_rows.load_prices(str(bad))


def test_read_metrics_takes_plain_or_gzipped_rows(tmp_path):
    rows = [{"iteration": 1, "episode/return": 2.0}, {"iteration": 2, "episode/return": 3.0}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    plain, zipped = tmp_path / "plain", tmp_path / "zipped"
    plain.mkdir(), zipped.mkdir()
    (plain / "metrics.jsonl").write_text(text)
    with gzip.open(zipped / "metrics.jsonl.gz", "wt") as f:
        f.write(text)
    assert runs.read_metrics(str(plain)) == rows == runs.read_metrics(str(zipped))
    with pytest.raises(FileNotFoundError, match="metrics.jsonl.gz"):
        runs.read_metrics(str(tmp_path))


def test_teacher_time_leaves_out_the_cost_of_the_call_and_keeps_its_sign_and_spread(monkeypatch):
    """Best of the targets less best of the bare call, as measured (negative where the call's cost and its
    noise exceed the work, never clamped to 0), with the spread of the two timings (standard deviations
    in quadrature); none with a single repeat; (0, 0) without a teacher."""
    env = block_timing.variant_env("full", "simple", 2, "untrained")
    seconds = iter([[0.005, 0.007], [0.004, 0.004], [0.003, 0.003], [0.004, 0.006], [0.005], [0.004]])

    def scripted(fn, *args, repeats):
        return next(seconds)  # targets, then the bare call; three times

    monkeypatch.setattr(block_timing, "_timings", scripted)
    work_s, spread = block_timing.time_teacher(env, None, None, 2)
    assert work_s == pytest.approx(0.001) and spread == pytest.approx(2**0.5 * 0.001)
    work_s, spread = block_timing.time_teacher(env, None, None, 2)
    assert work_s == pytest.approx(-0.001) and spread == pytest.approx(2**0.5 * 0.001)
    assert block_timing.time_teacher(env, None, None, 1) == (pytest.approx(0.001), None)
    assert block_timing.time_teacher(block_timing.variant_env("full", "simple", 2), None, None, 1) == (
        0.0,
        0.0,
    )
    monkeypatch.undo()
    assert len(block_timing._timings(lambda x: x + 1, np.zeros(2), repeats=3)) == 3
    it = {"compile": 1.0, "iteration": 0.5, "iteration_median": 0.5, "collect": 0.4, "overflow": 0.0}
    it.update(graph_captures=0.0, teacher=-0.016, teacher_sd=0.02)
    rows = {name: value for name, value, _ in block_timing.iteration_figures(it, 2, 16)}
    assert rows["it_teacher_s"] == -0.016 and rows["it_teacher_sd_s"] == 0.02
    assert "it_teacher_sd_s" not in {
        r[0] for r in block_timing.iteration_figures({**it, "teacher_sd": None}, 2, 16)
    }


def _write_trace(path, events) -> str:
    meta = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 2, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
    ]
    with gzip.open(path, "wt") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": meta + events}, f)
    return str(path)


def test_trace_summary_merges_overlaps_and_ranks_names(tmp_path):
    def x(pid, tid, ts, dur, name):
        return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name}

    events = [
        x(1, 7, 0, 400, "step_kernel"),  # the stream: busy 0-400 and 500-1000 of a 1,000 µs span
        x(1, 7, 100, 100, "nested"),
        x(1, 7, 500, 500, "step_kernel"),
        x(2, 1, 0, 2000, "PjitFunction(iteration)"),
    ]
    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    path = _write_trace(folder / trace_report.TRACE_NAME, events)
    assert trace_report.find_trace(str(tmp_path)) == path
    assert trace_report.busy_us([(0, 4), (1, 2), (3, 6), (8, 9)]) == 7
    host, stream = trace_report.thread_times(path)  # busiest first
    assert (stream.thread, stream.events, stream.busy_ms, stream.span_ms) == ("Stream #7", 3, 0.9, 1.0)
    assert stream.idle_share == pytest.approx(0.1) and host.idle_share == 0.0
    assert trace_report.top_names(path, "/device:", 1) == [("step_kernel", 0.9, 2)]
    text = trace_report.report(path)
    assert "| /device:GPU:0 | Stream #7 | 3 | 0.9 | 1.0 | 10% |" in text and "PjitFunction(iteration)" in text
    with pytest.raises(FileNotFoundError, match="no perfetto_trace.json.gz under"):
        trace_report.find_trace(str(tmp_path / "plugins" / "profile" / "none"))


def test_trace_gaps_name_what_the_host_did_and_what_the_device_waited_for(tmp_path):
    def x(pid, tid, ts, dur, name):
        return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name}

    events = [
        x(1, 7, 0, 100, "solve"),  # the stream: idle 100-300 (host in a callback), 350-400 (no host event)
        x(1, 7, 20, 50, "nested"),
        x(1, 7, 300, 50, "factor"),
        x(1, 7, 400, 100, "solve"),
        x(1, 8, 0, 10, "copy"),  # a quieter stream is not the one read
        x(2, 1, 0, 340, "PjitFunction(iteration)"),
        x(2, 1, 150, 100, "warp_ffi_callback"),
    ]
    path = _write_trace(tmp_path / trace_report.TRACE_NAME, events)
    gaps = trace_report.idle_gaps(path)
    assert [(g.ms, g.before, g.after, g.host) for g in gaps] == [
        (0.2, "solve", "factor", "warp_ffi_callback"),
        (0.05, "factor", "solve", trace_report.NO_HOST_EVENT),
    ]
    assert trace_report.idle_gaps(path, min_us=60) == gaps[:1]
    text = trace_report.report(path)
    assert "device idle gaps: 2, 0.2 ms in all" in text
    assert "      0.20       1  warp_ffi_callback" in text and "      0.20       1  factor" in text
    assert "     0.200  solve -> factor  (warp_ffi_callback)" in text


def test_trace_graph_mode_and_substep_calls_need_the_iteration_only_bench():
    for flag in (
        ["--trace", "t"],
        ["--graph-mode", "warp_staged_ex"],
        ["--substep-calls", "one"],
        ["--mj-option", "ccd_iterations=12"],
        ["--init", "boxjax/data/blockers/block-muscular.msgpack"],
    ):
        with pytest.raises(SystemExit):
            block.parse(flag)
        assert block.parse([*flag, "--iteration-only"]).iteration_only
    assert block.parse([]).substep_calls == "each"
    physics = {"impl": "warp", "substeps_in_one_call": True, "mj_options": {"ccd_iterations": 12}}
    env = block_timing.variant_env("full", "simple", 2, physics=physics)
    assert env.backend.substeps_in_one_call
    assert env.default_params().model.opt._impl.ccd_iterations == 12  # MuJoCo Warp's model got it
    stubbed = block_timing.variant_env("no_vision", "simple", 2, physics=physics)
    assert stubbed.config.ablate == ("vision",) and stubbed.mj_model.opt.ccd_iterations == 12


def test_mj_options_are_typed_and_bad_ones_named():
    assert block.parse_mj_options(["ccd_iterations=12", "ccd_tolerance=1e-4"]) == {
        "ccd_iterations": 12,
        "ccd_tolerance": 1e-4,
    }
    for item, message in (
        ("ccd_iters=12", "NAME a field of mujoco.MjOption"),
        ("ccd_iterations", "expected NAME=VALUE"),
        ("ccd_iterations=1.5", "'1.5' is not a int"),
        ("timestep=0.01", "sets the control substeps"),
    ):
        with pytest.raises(ValueError, match=message):
            block.parse_mj_options([item])


def test_rows_name_the_commit_of_this_checkout_or_the_one_stated(monkeypatch):
    monkeypatch.delenv("BOXJAX_COMMIT", raising=False)
    found = bench_rows.commit()
    assert found == "unknown" or len(found.removesuffix("+dirty")) == 40
    monkeypatch.setenv("BOXJAX_COMMIT", "0123abc")
    assert bench_rows.commit() == "0123abc"


def test_every_kept_benchmark_row_names_its_device_body_task_worlds_and_commit():
    rows_dir = os.path.join(os.path.dirname(__file__), "..", "results", "bench")
    files = sorted(f for f in os.listdir(rows_dir) if f.endswith(".jsonl"))
    assert files
    for name in files:
        with open(os.path.join(rows_dir, name)) as f:
            for number, line in enumerate(f, 1):
                row = json.loads(line)
                missing = [k for k in ("device", "body", "task", "worlds", "commit") if k not in row]
                assert not missing, f"{name}:{number} lacks {missing}"
                # rows from before commits were recorded name the commit that added them instead
                recorded = row.get("recorded_in", "")
                assert row["commit"] != "unrecorded" or (
                    len(recorded) >= 7 and all(c in "0123456789abcdef" for c in recorded)
                ), f"{name}:{number}"


def test_seed_table_prices_bench_and_training_rows_and_labels_the_projection():
    """Synthetic rows: each commit's seed-world bench (median and best), a CPU training run's mean past the
    warm-up with its split, the 96-core projection from it; other worlds and shapes are left out."""
    common = {"bench": "block", "teacher": "shipped", "epochs": 4, "minibatch": 2048, **seed_table.WORLD}
    rows = [
        {
            **common,
            "device": "NVIDIA H200",
            "commit": "old",
            "date": "2026-12-01T00:00",
            "metric": "s_per_iteration",
            "value": 0.5,
        },
        {
            **common,
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:00",
            "metric": "s_per_iteration",
            "value": 0.30,
        },
        {
            **common,
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:00",
            "metric": "s_per_iteration_median",
            "value": 0.32,
        },
        {
            **common,
            "worlds": 4096,
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:01",
            "metric": "s_per_iteration",
            "value": 0.1,
        },
        {
            **common,
            "task_options": {"opponent_freeze_idle": True},
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:02",
            "metric": "s_per_iteration",
            "value": 0.25,
        },
        {
            **common,
            "task_options": {"solver": "cg"},
            "factor_trees": "all",
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:03",
            "metric": "s_per_iteration",
            "value": 0.2,
        },
        {
            **common,
            "task_options": {"kind_weights": [1, 0, 0, 0, 0]},  # another task: left out
            "device": "NVIDIA H200",
            "commit": "new",
            "date": "2026-12-05T00:04",
            "metric": "s_per_iteration",
            "value": 0.15,
        },
    ]
    metrics = [
        {
            "s_per_iteration": 9.0 if i < seed_table.WARMUP_ITERATIONS else 2.0,
            "steps_per_s": 15000.0,
            "profile/collect_s": 1.5,
            "profile/learner_update_s": 1.0,
            "profile/collector_wait_s": 0.5,
            "profile/learner_wait_s": 0.0,
        }
        for i in range(seed_table.WARMUP_ITERATIONS + 3)
    ]
    labels = {
        "device": "cpu:x86_64 x16",
        "platform": "cpu",
        "commit": "new",
        "date": "2026-12-05T01:00",
        "command": "block.py",
        "cores": 16,
        "run": "r",
        "price_key": "16 vCPU share of the seed's c8a spot",
    }
    rows += seed_table.run_rows(metrics, labels)
    figures = {r["metric"]: r["value"] for r in rows if r["bench"] == "block-train"}
    assert figures["s_per_iteration"] == 2.0 and figures["iterations"] == 3 and figures["collect_s"] == 1.5
    text = seed_table.table(rows, bench_rows.load_prices(), every=True)
    assert "| NVIDIA H200 | 3.50 " in text and "| 0.320 | 102,400 | 0.311 | bench, median" in text
    assert "(best 0.300 s), new, 2026-12-05 |" in text
    assert (
        "| 0.500 | 65,536 | 0.486 | bench, best of the iterations, old, 2026-12-01 |" in text
        and "| seed's world (every hinge of the opponent simulated) | NVIDIA H200 |" in text
    )
    current = seed_table.table(rows, bench_rows.load_prices())
    assert "| **the default** | NVIDIA H200 |" in current  # the newest per machine and options
    assert "| 0.320 |" in current and "| 0.500 |" not in current
    reverted = [
        {**r, "reverted": "x"} if r.get("commit") == "new" and r["bench"] == "block" else r for r in rows
    ]
    assert "| 0.500 |" in seed_table.table(reverted, bench_rows.load_prices())  # reverted code is not current
    assert "0.100" not in text  # another shape
    assert (
        "| 0.250 | 131,072 | 0.243 |" in text and "| **lighter world**: the opponent's 25 idle hinges" in text
    )
    assert (
        "| named option `--env solver=cg` (**physics changed**: the CG solver) | NVIDIA H200 | 3.50 "
        in current
    )
    assert "| 0.200 | 163,840 | 0.194 | bench, best" in text
    assert "0.150" not in text
    assert "| cpu:x86_64 x16 (16 cores) | 0.25 " in text and "| 2.000 | 15,000 | 0.137 |" in text
    # 96 cores: collect 1.5 s x 15 / 95 = 0.237 s, below the measured update (1.0 s), which sets the pace
    assert "**projection**: 96 cores" in text and "| 1.000 | 30,000 | 0.411 | not measured" in text
    assert "| 1.19 | 27,500 | 0.22 |" in text and "| 1.74 | 15,300 | 0.71 |" in text
    with pytest.raises(ValueError, match="none past the 5 of warm-up"):
        seed_table.run_rows(metrics[:5], labels)


def test_seed_table_reads_a_runs_physics_options_and_factor_from_its_summary(tmp_path):
    summary = {
        "overrides": {"ppo": [], "env": ["solver_iterations=2"]},
        "factor_trees": "all",
        "solver_loop": "unrolled",
        "block_dims": {"update_gradient_cholesky_blocked": 64, "linesearch_iterative": 64},
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    labels = seed_table.run_options(str(tmp_path))
    assert labels == {
        "task_options": {"solver_iterations": 2},
        "factor_trees": "all",
        "solver_loop": "unrolled",
        "block_dims": {"update_gradient_cholesky_blocked": 64, "linesearch_iterative": 64},
    }
    assert seed_table.variant_of(labels) == (
        "**physics changed**: solver cap 2 iterations (not the seed's rule); our kernel factors both "
        "fighters (same physics); the solver's loop unrolled (same physics); launch block sizes "
        "linesearch_iterative=64, update_gradient_cholesky_blocked=64 (same physics)"
    )
    assert "launch block sizes" not in seed_table.variant_of({"block_dims": {}})  # the defaults
    kept_row = {"factor_trees": "all", "hessian_tiles": "nonzero"}  # the dropped option's rows, kept
    assert seed_table.variant_of(kept_row).endswith("the Hessian's zero tiles skipped (same physics)")
    bench_row = {
        "factor_trees": "all",
        "solver_loop": "default",
        "policy": "data/blockers/block-muscular.msgpack",
    }
    assert seed_table.variant_of(bench_row) == (
        "seed's world (every hinge of the opponent simulated); our kernel factors both fighters (same "
        "physics); acting: block-muscular.msgpack"
    )
    assert seed_table.run_options(str(tmp_path / "none")) == {}
    summary["overrides"]["env"].append("punch_gap_s=0,0")
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"changed the task \(punch_gap_s\): not the seed's world"):
        seed_table.run_options(str(tmp_path))


def test_seed_table_run_rows_hold_integer_labels_as_integers(tmp_path):
    """`--from-run` rows: labels given as text that rows hold as numbers (cores, worlds) become integers, and
    a missing label is named."""
    run = tmp_path / "run"
    run.mkdir()
    metric = {"s_per_iteration": 2.0, "steps_per_s": 15000.0}
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(metric) for _ in range(8)) + "\n")
    out = tmp_path / "rows.jsonl"
    labels = ["device=cpu", "platform=cpu", "commit=abc", "date=2026-12-06T00:00Z", "command=block.py"]
    argv = ["--from-run", str(run), "--out", str(out), *(f"--label={x}" for x in labels)]
    assert seed_table.main([*argv, "--label=cores=16", "--label=worlds=1920"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["cores"], r["worlds"], r["unroll"]) for r in rows} == {(16, 1920, 16)}
    with pytest.raises(SystemExit):
        seed_table.main(argv[:-1])  # no command label


def test_the_host_event_at_a_gap_is_the_shortest_running_then_first_of_ties():
    """`trace_report._innermost`'s sweep against the plain search, with ties and zero-length events."""
    rng = np.random.default_rng(0)
    events = [
        {"name": f"e{i}", "ts": float(rng.integers(0, 20)), "dur": float(rng.integers(0, 6))}
        for i in range(60)
    ]
    times = sorted(rng.uniform(0, 25, 200).tolist() + [5.0, 10.0])

    def plain(t):
        running = [e for e in events if e["ts"] <= t < e["ts"] + e["dur"]]
        return min(running, key=lambda e: e["dur"])["name"] if running else trace_report.NO_HOST_EVENT

    assert trace_report._innermost(events, times) == [plain(t) for t in times]


def test_alike_curves_weigh_episodes_and_punches_over_the_trailing_window():
    from boxjax.bench import plot_alike

    rows = [
        {"episode/count": 0.0, "episode/return": 0.0, "env/punch/arrived": 4.0, "env/punch/blocked": 1.0},
        {"episode/count": 1.0, "episode/return": 100.0, "episode/fall_rate": 1.0, "env/punch/arrived": 0.0},
        {
            "episode/count": 3.0,
            "episode/return": 500.0,
            "episode/fall_rate": 0.0,
            "env/punch/arrived": 4.0,
            "env/punch/blocked": 3.0,
            "env/punch/hit": 1.0,
        },
    ]
    curves = plot_alike.trailing_curves(rows, window=2)
    assert np.isnan(curves["return"][0])  # no episode ended yet
    assert curves["return"][1:].tolist() == [100.0, (100.0 + 3 * 500.0) / 4]  # weighted by episodes ended
    assert curves["falls"][2] == 0.25
    assert curves["blocked"].tolist() == [0.25, 0.25, 0.75]  # the window's punches, not a mean of shares
    assert curves["hit"][2] == 0.25
    assert plot_alike.named("CPU=a/b.jsonl.gz") == ("CPU", "a/b.jsonl.gz")


def test_metrics_read_from_a_kept_file_or_a_run_folder(tmp_path):
    from boxjax import runs

    rows = [{"iteration": 1.0}, {"iteration": 2.0}]
    kept = tmp_path / "block-x.jsonl.gz"
    with gzip.open(kept, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(json.dumps(rows[0]) + "\n")
    assert runs.read_metrics(str(kept)) == rows
    assert runs.read_metrics(str(tmp_path / "run")) == rows[:1]


def test_profile_physics_names_the_fastest_block_sizes_only_past_the_noise():
    from boxjax.bench import profile_physics

    def rows(*timed):
        return [{"variant": variant, "step_ms": ms} for variant, ms in timed]

    cholesky = "block_dim.update_gradient_cholesky_blocked=64"
    both = "block_dim.update_gradient_cholesky_blocked=128;block_dim.linesearch_iterative=64"
    found = rows(("base", 10.0), (cholesky, 9.5), (both, 9.0), ("opt.iterations=2", 5.0))
    assert profile_physics.best_block_flags(found) == (
        "--block-dim update_gradient_cholesky_blocked=128 --block-dim linesearch_iterative=64"
    )  # the solver cap changes the physics: never the best block size, however fast
    assert profile_physics.best_block_flags(rows(("base", 10.0), (cholesky, 9.85))) == ""  # within 2 %
    assert profile_physics.best_block_flags(rows((cholesky, 9.0))) == ""  # no base to beat
    # MuJoCo Warp's own factorisation ("stock") sets no block size: never the best, nor hiding one that is
    assert profile_physics.best_block_flags(rows(("base", 10.0), ("stock", 8.0), (cholesky, 9.5))) == (
        "--block-dim update_gradient_cholesky_blocked=64"
    )
    assert profile_physics.mj_overrides("opt.iterations=2;block_dim.ray=64") == ["opt.iterations=2"]


def test_rows_writer_puts_the_common_fields_first_and_flushes_each_row(tmp_path):
    """`rows.Writer`: every row is the common fields then its own (its own win), each on disk as soon as it is
    written; `write_rows` appends; the folder is made."""
    path = tmp_path / "new" / "rows.jsonl"
    with bench_rows.Writer(str(path), {"bench": "b", "device": "d"}) as out:
        out.figures([("s_per_iteration", 0.5, "s"), ("steps_per_s", 64.0, "1/s")], body="simple", worlds=8)
        first = json.loads(path.read_text().splitlines()[0])  # flushed before the file is closed
        assert first == {"bench": "b", "device": "d", "body": "simple", "worlds": 8} | {
            "metric": "s_per_iteration",
            "value": 0.5,
            "unit": "s",
        }
        assert list(first) == ["bench", "device", "body", "worlds", "metric", "value", "unit"]
        out.write({"device": "other", "metric": "x"})
    assert [json.loads(line) for line in path.read_text().splitlines()] == out.rows
    assert out.rows[-1] == {"bench": "b", "device": "other", "metric": "x"}
    assert bench_rows.write_rows(str(path), [{"metric": "y"}], {"bench": "c"}) == [
        {"bench": "c", "metric": "y"}
    ]
    assert len(path.read_text().splitlines()) == 4
    assert bench_rows.figure_rows([("m", 1.0, "u")], task="t") == [
        {"task": "t", "metric": "m", "value": 1.0, "unit": "u"}
    ]


def test_bench_tools_share_one_parser_and_its_flags(capsys):
    p = bench_rows.parser("what it does", "tool")
    bench_rows.add_common_args(p, out=True, platform="auto", cache=True, price=True)
    bench_rows.add_worlds(p, "16,64")
    args = p.parse_args([])
    assert (args.out, args.platform, args.cache, args.price, args.debug) == (
        os.path.join("results", "bench"),
        "auto",
        None,
        None,
        False,
    )
    assert args.worlds == [16, 64] and p.parse_args(["--worlds", "8", "--debug"]).worlds == [8]
    with pytest.raises(SystemExit) as stop:
        p.parse_args(["--worlds", "8,many"])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: argument --worlds: expected a comma list of integers, got '8,many'")
    assert error.count("\n") == 1 and "boxjax bench tool --help" in error
    gpu = bench_rows.parser(None, "gpu-tool")
    bench_rows.add_common_args(gpu, platform="gpu", debug=False)
    assert vars(gpu.parse_args([])) == {"platform": "gpu"}
    with pytest.raises(SystemExit):
        gpu.parse_args(["--platform", "auto"])  # a tool without "auto" keeps its choices
    assert bench_rows.resolve_platform("cpu") == "cpu"


@pytest.mark.parametrize("tool", list(cli_bench.TOOLS))
def test_every_bench_tool_answers_help_through_the_shared_parser(tool, capsys):
    """`boxjax bench TOOL --help` for every tool (GPU-only tools too: their modules import without a GPU)."""
    with pytest.raises(SystemExit) as stop:
        cli_bench.run_tool(tool, ["--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: boxjax bench {tool} ") and "--debug" in text


def _bench_rows(folder) -> list[dict]:
    return [
        json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()
    ]


ROW_LABELS = ("bench", "device", "task", "command", "date", "versions", "commit", "body", "worlds")
"""What every speed benchmark's row names besides its figure (metric, value, unit)."""


def test_stance_cpu_and_block_rows_keep_their_fields(tmp_path, monkeypatch, capsys):
    """The rows the stance, CPU and block benches write, their measurements replaced by fixed figures: the
    same fields, labels and values as the benches have always written."""
    from boxjax import platform
    from boxjax.bench import stance as stance_bench

    monkeypatch.setattr(platform, "configure", lambda *args, **kwargs: None)
    monkeypatch.setenv("BOXJAX_COMMIT", "abc1234")
    figures = [("compile_s", 1.0, "s"), ("s_per_iteration", 0.5, "s"), ("steps_per_s", 256.0, "1/s")]
    monkeypatch.setattr(stance_bench, "measure", lambda *args: figures)
    argv = ["--platform", "cpu", "--worlds", "8,16", "--out", str(tmp_path / "stance")]
    assert stance_bench.main(argv) == 0
    rows = _bench_rows(tmp_path / "stance")
    own = ("platform", "unroll", "factor_asked", "cores", "factor", "devices", "metric", "value", "unit")
    assert all(set(r) == {*ROW_LABELS, *own} for r in rows) and len(rows) == 6
    assert rows[0]["command"] == "python experiments/bench.py " + " ".join(argv)
    assert [(r["worlds"], r["metric"], r["value"]) for r in rows[:3]] == [(8, m, v) for m, v, _ in figures]
    assert {(r["bench"], r["task"], r["body"], r["factor"], r["devices"], r["commit"]) for r in rows} == {
        ("stance", "stance", "simple", "stock", 1, "abc1234")
    }
    monkeypatch.setattr(cpu, "env_step_rows", lambda *args: [("env_step_us", 40.0, "us/world-step")])
    assert cpu.main(["--env-only", "--env-worlds", "4", "--out", str(tmp_path / "cpu")]) == 0
    (row,) = _bench_rows(tmp_path / "cpu")
    assert set(row) == {*ROW_LABELS, "cores", "metric", "value", "unit", "load_avg", "threads"}
    assert (row["bench"], row["worlds"], row["cores"], row["threads"], row["value"]) == ("cpu", 4, 1, 1, 40.0)
    monkeypatch.setattr(block, "case_figures", lambda args, case, physics: figures)
    argv = ["--platform", "cpu", "--shapes", "4x4", "--env", "opponent_freeze_idle=true", "--out"]
    assert block.main([*argv, str(tmp_path / "block")]) == 0
    rows = _bench_rows(tmp_path / "block")
    own = {"platform", "teacher", "policy", "graph_mode", "substep_calls", "solver_loop", "block_dims"}
    own |= {"mj_options", "task_options", "factor_asked", "rule", "ccd_iterations", "epochs", "minibatch"}
    own |= {"factor", "factor_trees", "opponent", "unroll", "metric", "value", "unit"}
    assert all(set(r) == {*ROW_LABELS, *own} for r in rows) and len(rows) == 3
    labels = {k: rows[0][k] for k in ("teacher", "policy", "rule", "task_options", "factor", "factor_trees")}
    assert labels == {
        "teacher": "none",
        "policy": "fresh",
        "rule": "fast",
        "task_options": {"opponent_freeze_idle": True},
        "factor": "stock",
        "factor_trees": "none",
    }
    assert (rows[0]["body"], rows[0]["opponent"], rows[0]["worlds"], rows[0]["unroll"]) == (
        "simple",
        "simulated",
        4,
        4,
    )
    assert "rows written to" in capsys.readouterr().out
