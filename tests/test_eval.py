"""`boxjax eval`: the counts it reports are the block task's own per-step figures summed over the same
rollout, every per-tag figure a sum of cells that adds up to the totals, the tags read on the states each
step reached (before a finished world restarts); the Wilson interval on hand-worked numbers; the JAX
path's compiled rollout (a stand-in env whose every step is known) restarts finished worlds and reads the
punch tags after each step; the guard runs without a policy, a tiny untrained policy from a checkpoint, a
run's every checkpoint and a policy file; bad input is one `error:` line.

The block task runs on the CPU path only (MuJoCo C, the simple body, 4 worlds everywhere so its halves
compile once), with the task's defaults: the guard falls, so worlds restart within the few steps."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from boxjax.bench.defence import report, rollout, tally
from boxjax.cli import common, policies
from boxjax.cli import eval as eval_cli
from boxjax.envs.base import State
from boxjax.envs.block.config import BlockConfig
from boxjax.envs.block.punches import TAGS

WORLDS = 4
STEPS = 200
"""The guard's rollout: about 12 punches arrive and 6 episodes end in falls (the simple body's PD base
alone does not stand)."""
CONFIG = BlockConfig(body="simple", teacher="")
"""The task config of `boxjax eval --baseline guard --body simple`."""


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run `boxjax eval` in a scratch folder, `platform.configure` reduced to its GPU check (the real one
    would point this process's compile cache elsewhere)."""
    from boxjax import platform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(platform, "configure", lambda name, cache=None: None)
    return tmp_path


def _eval(argv: list[str], capsys) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `boxjax eval argv`."""
    code = common.run_main(eval_cli.main, argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _rows(folder) -> list[dict]:
    """Every row of the JSON Lines files under `folder`."""
    rows = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            with open(os.path.join(folder, name)) as f:
                rows += [json.loads(line) for line in f]
    return rows


def test_the_wilson_interval_on_hand_worked_numbers():
    z2 = tally.Z95**2  # 3.8415
    low, high = tally.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(z2 / (10 + z2))  # 0.2775
    assert tally.wilson(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    # 5 of 10: centre 0.5, half-width z / (1 + z2/10) * sqrt(0.025 + z2/400) = 0.2634
    assert tally.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    # the shipped muscular blocker's hits in defence-baseline: 541 of 1,268, 39.97-45.41 %
    assert tally.wilson(541, 1268) == pytest.approx((0.3997, 0.4541), abs=5e-5)
    assert tally.wilson(0, 0) == (0.0, 1.0)
    share = tally.Share.of(3.0, 4.0)
    assert (share.count, share.total, share.share) == (3, 4, 0.75) and tally.Share.of(0, 0).share is None


def test_one_step_is_counted_by_tags_outcome_score_and_episode():
    zero = np.zeros(3, np.float32)
    metrics = {name: zero for name in rollout.FIGURES}
    metrics.update({
        "punch/arrived": np.float32([1, 1, 1]), "punch/blocked": np.float32([1, 0, 0]),
        "punch/parried": np.float32([1, 0, 0]), "punch/missed": np.float32([0, 1, 0]),
        "punch/hit": np.float32([0, 0, 1]), "punch/hit_score": np.float32([0, 0, 0.97]),
        "success/goals": np.float32([1, 0, 1]),
    })  # fmt: skip
    tags = {"kind": np.int32([0, 5, 5]), "target": np.int32([1, 0, 0]), "speed": np.int32([2, 0, -1])}
    done, truncation = np.float32([0, 1, 1]), np.float32([0, 1, 0])
    counts = tally.add(tally.Tally.zeros(3), metrics, tags, done, truncation)
    d = tally.defence(counts)
    assert (d.arrived, d.blocked.count, d.parried.count, d.missed.count, d.hit.count) == (3, 1, 1, 1, 1)
    assert d.histogram == (0,) * 9 + (1,) and d.hit_score_mean == pytest.approx(0.97)
    assert (d.episodes, d.falls) == (2, 1)  # the third world fell; the second ran out of time
    assert {(c["kind"], c["target"], c["speed"]) for c in d.cells} == {
        ("jab", "body", "slow"), ("rear_uppercut", "head", "fast"), ("rear_uppercut", "head", "other")
    }  # fmt: skip
    by_tag = {(t.tag, t.value): t for t in d.by_tag}
    assert by_tag["speed", "other"].hit.count == 1 and by_tag["kind", "rear_uppercut"].arrived == 2
    goals = dict(zip(tally.TASK_FIGURES, np.asarray(counts.finished), strict=True))["success/goals"]
    assert goals == 1.0  # the first world's goal is in an episode still running


def test_the_other_kinds_count_per_episode_or_per_command():
    def counts(episodes: int, **finished: float) -> tally.Tally:
        zero = tally.Tally.zeros(1)
        totals = np.float32([finished.get(name.split("/")[1], 0.0) for name in tally.TASK_FIGURES])
        return zero.replace(episodes=np.float32(episodes), finished=totals)

    command = tally.kind_figures("command", counts(4, commands_held=5, presses=3))
    assert (command.count, command.trials, command.per) == (5, 7, "command/presses")  # 4 first commands + 3
    assert command.interval == pytest.approx(tally.wilson(5, 7))
    bag = tally.kind_figures("bag", counts(3, bag_hits=9))
    assert (bag.rate, bag.interval) == (3.0, None)  # several hits an episode: no share, no interval
    with pytest.raises(ValueError, match="a share of 3 successes in 2 trials"):
        tally.wilson(3, 2)
    assert "| command | success/commands_held | 5 / 7 commands |" in report.kinds_table([command, bag])


@struct.dataclass
class _Params:
    kind_weights: jax.Array


class _KnownEnv:
    """A stand-in block env whose worlds all live the same known episode: 7 steps, the punch tag advancing
    one a step (tags read after the step), a punch arriving every second step with the outcome of its tag,
    the episode ended by a fall where the tag is odd."""

    action_size = 2
    LENGTH = 7

    def default_params(self):
        return _Params(kind_weights=jnp.ones(5))

    def reset(self, params, key):
        del params, key
        zero = jnp.zeros((), jnp.float32)
        info = {"t": jnp.zeros((), jnp.int32), "punch": jnp.zeros((), jnp.int32)}
        metrics = {name: zero for name in rollout.FIGURES}
        return State(
            data=zero, obs=jnp.zeros(3), reward=zero, done=zero, truncation=zero, metrics=metrics, info=info
        )

    def step(self, params, state, action):
        t, punch = state.info["t"] + 1, (state.info["punch"] + 1) % 6
        arrived = (t % 2 == 0).astype(jnp.float32)
        outcome = [arrived * (punch % 3 == i) for i in range(3)]
        done = (t >= self.LENGTH).astype(jnp.float32)
        metrics = {**state.metrics, "punch/arrived": arrived, "punch/blocked": outcome[0],
                   "punch/missed": outcome[1], "punch/hit": outcome[2], "punch/hit_score": 0.55 * outcome[2],
                   "success/goals": (t == 2).astype(jnp.float32)}  # fmt: skip
        return state.replace(
            info={"t": t, "punch": punch}, done=done, truncation=done * (punch % 2 == 0), metrics=metrics
        )

    def punch_tags(self, params, state):
        punch = state.info["punch"]
        return {"kind": punch, "target": punch % 2, "speed": jnp.where(punch == 4, -1, punch % 3)}


def test_the_jax_rollout_restarts_worlds_and_reads_the_tags_after_each_step():
    env, steps = _KnownEnv(), 17
    counts = rollout.jax_tally(env, rollout.actor(env, None, False), None, "face", 3, steps, 0)
    cells = np.zeros((7, 3, 4, 4))
    t = punch = episodes = falls = goals = 0
    for _ in range(steps):
        t, punch = t + 1, (punch + 1) % 6
        if t % 2 == 0:
            outcome = [punch % 3 == i for i in range(3)]
            cells[punch, punch % 2, 3 if punch == 4 else punch % 3] += [1, *outcome]
        if t >= _KnownEnv.LENGTH:
            episodes, falls, goals = episodes + 1, falls + punch % 2, goals + 1
            t = punch = 0
    np.testing.assert_array_equal(counts.cells, 3 * cells)
    assert (float(counts.episodes), float(counts.falls)) == (3 * episodes, 3 * falls)
    assert float(counts.finished[tally.TASK_FIGURES.index("success/goals")]) == 3 * goals
    d = tally.defence(counts)
    assert (d.arrived, d.blocked.count, d.missed.count, d.hit.count) == (21, 6, 6, 9)
    assert d.hit_score_mean == pytest.approx(0.55) and d.histogram[5] == d.hit.count


@pytest.fixture
def guard_counts():
    """The guard's tally on the CPU path; the task's own figures summed over the same rollout; and, at each
    step where a world ended, the episode steps of the states the step reached and of those it continues."""
    from boxjax.envs import cpu

    task = cpu.task_env(CONFIG)
    counts = rollout.cpu_tally(CONFIG, rollout.actor(task, None, False), None, "face", WORLDS, STEPS, 0)
    env = cpu.CpuEnv(CONFIG, num_worlds=WORLDS, seed=0)
    env.params = policies.forced_kind(env.params, "face")
    env.reset()
    sums, done, fell, restarts = dict.fromkeys(tally.PUNCH_EVENTS, 0.0), 0.0, 0.0, []
    for _ in range(STEPS):
        out = env.step(np.zeros((WORLDS, env.action_size), np.float32))
        sums = {k: v + out.metrics[k].sum() for k, v in sums.items()}
        done, fell = done + out.done.sum(), fell + (out.done * (1 - out.truncation)).sum()
        if out.done.any():
            restarts.append((out.done, np.asarray(env.reached.info.step), np.asarray(env.state.info.step)))
    return counts, sums, done, fell, restarts


def test_the_counts_are_the_task_s_own_figures_summed_and_split_by_tag(guard_counts):
    counts, sums, done, fell, restarts = guard_counts
    np.testing.assert_allclose(counts.events, [sums[k] for k in tally.PUNCH_EVENTS], rtol=1e-6)
    d = tally.defence(counts)
    assert d.arrived > 0 and d.episodes == done > 0 and d.falls == fell
    assert d.blocked.count + d.missed.count + d.hit.count == d.arrived
    assert d.parried.count + d.blocked_low_score.count == d.blocked.count
    assert sum(d.histogram) == d.hit.count
    for tag in TAGS:  # every tag's figures add up to the totals
        rows = [t for t in d.by_tag if t.tag == tag]
        assert sum(t.arrived for t in rows) == d.arrived
        for outcome in ("blocked", "missed", "hit"):
            assert sum(getattr(t, outcome).count for t in rows) == getattr(d, outcome).count
    for outcome in tally.OUTCOMES:
        assert sum(c[outcome] for c in d.cells) == (
            getattr(d, outcome).count if outcome != "arrived" else d.arrived
        )
    assert "| kind | jab |" in report.tag_table(d) and "| hit |" in report.defence_table(d)
    assert restarts  # the tags are read on the states a step reached, before a finished world restarts:
    for ended, reached, continued in restarts:
        ended = ended > 0.5
        assert np.all(reached[ended] > 0) and np.all(continued[ended] == 0)  # its last step; a fresh episode
        np.testing.assert_array_equal(reached[~ended], continued[~ended])


def test_the_guard_runs_without_a_policy_and_writes_its_row_and_chart(cli, capsys):
    argv = ["--baseline", "guard", "--body", "simple", "--worlds", str(WORLDS), "--steps", "40",
            "--punches", "classic"]  # fmt: skip
    code, out, err = _eval(argv, capsys)
    assert code == 0, err
    assert "guard (zero action), simple, classic punches" in out
    (row,) = _rows(cli / "results" / "eval")
    assert (row["measure"], row["baseline"], row["punches"], row["body"]) == (
        "defence",
        "guard",
        "classic",
        "simple",
    )
    assert row["blocked"]["count"] + row["missed"]["count"] + row["hit"]["count"] == row["arrived"]
    assert row["worlds"] == WORLDS and row["steps"] == 40 and row["commit"] and row["device"]
    assert [f for f in os.listdir(cli / "results" / "eval") if f.endswith(".png")]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> str:
    """A run folder holding two checkpoints (steps 0 and 3) of an untrained simple-body block policy (a
    small network) and the metrics of its 3 iterations."""
    from boxjax import envs
    from boxjax.models import checkpoint
    from boxjax.rl import ppo
    from boxjax.rl.train_step import init_train_state

    env = envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, teacher="")
    config = ppo.PPOConfig(
        num_envs=WORLDS, unroll_length=4, minibatch_size=4, policy_hidden=(16,), value_hidden=(16,)
    )
    run = tmp_path_factory.mktemp("runs") / "tiny"
    state = init_train_state(env, config, jax.random.PRNGKey(0))
    for step in (0, 3):
        checkpoint.save(str(run / "checkpoints"), step, {"train": state}, ppo.run_meta(env, config))
    with open(run / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps({"iteration": i, "s_per_iteration": 30.0}) + "\n" for i in (1, 2, 3))
    return str(run)


def test_a_policy_s_every_checkpoint_and_its_file_are_measured(tiny_run, cli, capsys):
    from boxjax.cli import export

    short = ["--worlds", str(WORLDS), "--steps", "20", "--punches", "classic"]
    code, out, err = _eval([tiny_run, "--checkpoints", *short], capsys)
    assert code == 0, err
    rows = [r for r in _rows(cli / "results" / "eval") if r["measure"] == "skill"]
    assert [(r["measure"], r["checkpoint_step"], r["train_minutes"]) for r in rows] == [
        ("skill", 0, None), ("skill", 3, 1.5)
    ]  # fmt: skip
    policy = str(cli / "policy.msgpack")
    assert export.main([tiny_run, policy]) == 0
    code, out, err = _eval([policy, *short, "--stochastic", "--png", str(cli / "tiny.png")], capsys)
    assert code == 0, err
    (row,) = [r for r in _rows(cli / "results" / "eval") if r["measure"] == "defence"]
    assert row["stochastic"] is True and row["source"] == policy and os.path.isfile(cli / "tiny.png")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--body", "muscular", "--punches", "nope"],
            "error: --punches: unknown punch set 'nope'; give classic",
        ),
        ([], "error: give a run, checkpoint or policy file, or --body for a shipped blocker"),
        (["--body", "simple"], "error: no trained blocker ships for body 'simple'"),
        (["--baseline", "guard"], "error: --baseline guard needs --body"),
        (["--body", "giant"], "error: argument --body: unknown body 'giant'"),
        (["--body", "muscular", "--worlds", "0"], "error: --worlds, --steps and --other-steps take counts"),
        (["--body", "muscular", "--checkpoints"], "error: --checkpoints takes a run folder or checkpoint"),
        (["runs/none"], "error: no checkpoint directory at 'runs/none'"),
        (["runs/none", "--checkpoints", "--other-kinds"], "error: --other-kinds measures one policy"),
        (["--baseline", "guard", "--body", "simple", "--stochastic"], "error: --stochastic samples a policy"),
    ],
)
def test_bad_input_is_one_error_line(argv, message, cli, capsys):
    code, out, err = _eval(argv, capsys)
    assert code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_the_default_punch_sets_go_on_without_a_held_out_set_and_a_named_one_is_an_error(monkeypatch, capsys):
    def build(args, meta, name):
        if name == "heldout":
            raise ValueError("the held-out set is not built yet")
        return f"{name} env"

    monkeypatch.setattr(eval_cli, "build_env", build)
    args = eval_cli.parser().parse_args(["--body", "muscular"])
    assert eval_cli.built_sets(args, {}, eval_cli.DEFAULT_PUNCHES) == [("classic", "classic env")]
    assert "no held-out set here (ValueError: the held-out set is not built yet)" in capsys.readouterr().out
    assert eval_cli.built_sets(args, {}, "heldout") == [("classic", "classic env")]
    args = eval_cli.parser().parse_args(["--body", "muscular", "--punches", "heldout,classic"])
    with pytest.raises(ValueError, match="not built yet"):
        eval_cli.built_sets(args, {}, eval_cli.DEFAULT_PUNCHES)
