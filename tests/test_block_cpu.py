"""The block task on the CPU path: `boxjax.envs.cpu.CpuEnv` (MuJoCo C physics around the JAX task code)
against `BlockEnv` on MJX's JAX physics, its restarts, and `boxjax train --task block --platform cpu`.

Simple body, 4 worlds, 12-step episodes. CPU environments of one config share their compiled functions,
so the file compiles the CPU step and reset once (the CLI run reuses them) and the MJX step once. The punch
outcomes of whole episodes on both engines: `test_block_outcomes.py`.
"""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from boxjax.cli import block as block_cli
from boxjax.envs import cpu as cpu_env
from boxjax.envs.base import State
from boxjax.envs.block import env as block
from boxjax.envs.block.env import BlockConfig
from boxjax.envs.cpu import CpuEnv
from boxjax.models import checkpoint
from boxjax.physics import cpu as mujoco_c
from boxjax.physics import mjx

WORLDS = 4
OPTIONS = {"episode_s": 0.3, "shove_at_s": (0.1, 0.1), "recover_s": 0.1, "arrival_lag_s": 0.1}
"""12-step episodes: a forced punch is judged (its recorded impact at step 7, 0.1 s late), the shove (step 4)
and its recovery (step 9) fit in one, and every world reaches its time limit at step 12."""
CONFIG = BlockConfig(body="simple", **OPTIONS)
STEPS = 15
"""Control steps of each parity run: one whole episode and the first steps of the next."""
OBS_ATOL = {"command": 5e-3}
REWARD_ATOL = {"command": 1e-3}
"""MuJoCo C (float64) against MJX-JAX (float32, "highest" matmuls), which drift apart over the steps; per
kind, 5e-4 on observations and 1e-4 on rewards and per-step metrics unless named here. Measured over 30
steps in the two-fighter world (seeds 3 and 4): walk, bag and shove at most 4.5e-4 on observations (foot
touch over body weight) and 9.7e-5 on rewards; command 4.2e-3 and 8.5e-4 (the arm fit's pose held against
the parked opponent). Face episodes part further (0.84 on observations after 30 steps): with 4 solver
iterations the constraint forces depend on the solver's warm start, which amplifies the float32/float64
difference once the fighters and their feet press on many contacts. There each step starts both sides from the
CPU environment's state and warm start, a comparison of one step from identical states (measured over 15
steps: 9.3e-5 on observations, 6.9e-6 on rewards; 0.15 and 0.03 without the warm start)."""
RESYNCED_KINDS = ("face",)
CLI_ARGS = [
    "--platform", "cpu", "--mode", "serial", "--envs", str(WORLDS), "--unroll", "4", "--minibatch", "8",
    "--epochs", "1", "--ppo", "policy_hidden=16", "--ppo", "value_hidden=16", "--env", "episode_s=0.3",
    "--env", "shove_at_s=0.1,0.1", "--env", "recover_s=0.1", "--env", "arrival_lag_s=0.1",
]  # fmt: skip
"""The CLI's spelling of `CONFIG` on `WORLDS` worlds (so its collector reuses this file's compiles)."""


@pytest.fixture(scope="module")
def env():
    return CpuEnv(CONFIG, num_worlds=WORLDS, seed=1)


@pytest.fixture(scope="module")
def mjx_step(env):
    """The CPU environment's task built on MJX-JAX instead (its params hold the MJX model) and its own
    `step`, vmapped and jitted."""
    task = type(env.task)(CONFIG)
    return task.default_params(), jax.jit(jax.vmap(task.step, in_axes=(None, 0, 0)))


def _as_mjx(params, state: State, warmstart: np.ndarray | None = None) -> State:
    """A CPU environment's state (K worlds) for the MJX step: its physics in the template's `mjx.Data`,
    as `BlockEnv.reset` makes it, with the C engine's solver warm start (K, nv) when given."""

    def one(view, warm):
        return params.template.replace(
            qpos=view.qpos,
            qvel=view.qvel,
            ctrl=view.ctrl,
            mocap_pos=view.mocap_pos,
            mocap_quat=view.mocap_quat,
            qacc_warmstart=params.template.qacc_warmstart if warm is None else warm,
        )

    warm = None if warmstart is None else jnp.asarray(warmstart, jnp.float32)
    return state.replace(data=jax.vmap(one, in_axes=(0, None if warm is None else 0))(state.data, warm))


def _where(rows: np.ndarray, a, b):
    """Per world (`rows` (K,) bool): pytree `a`'s leaves where set, `b`'s elsewhere."""
    return jax.tree.map(lambda x, y: jnp.where(rows.reshape(-1, *(1,) * (x.ndim - 1)), x, y), a, b)


def _compiles() -> tuple[int, ...]:
    """How many variants of the CPU path's jitted pieces this process has compiled."""
    jitted = (cpu_env._FRESH, cpu_env._MERGE, cpu_env._BEFORE, cpu_env._AFTER)
    return tuple(f._cache_size() for f in jitted)


def _placed(env, value: np.ndarray) -> jax.Array:
    """`value` placed like the CPU environment's state, so its jitted step does not compile again."""
    return jax.device_put(value, env.state.info.step.sharding)


def _only(env, kind: str):
    weights = np.eye(len(block.KINDS), dtype=np.float32)[block.KINDS.index(kind)]
    return env.params.replace(kind_weights=jnp.asarray(weights))


@pytest.mark.parametrize("kind", block.KINDS)
def test_cpu_env_steps_like_the_mjx_env_through_an_episode_and_a_restart(env, mjx_step, kind, monkeypatch):
    params, step = mjx_step
    monkeypatch.setattr(env, "params", _only(env, kind))
    env.reset()
    if kind == "face":  # every world throws the fast jab at once: vision, arrival and score on both sides
        jab = env.task.library.names.index("jab-head-fast")
        punch, frame = (
            _placed(env, np.full(WORLDS, jab, np.int32)),
            _placed(env, np.full(WORLDS, -1, np.int32)),
        )
        env.state = env.state.replace(info=env.state.info.replace(punch=punch, frame=frame))
    ref = _as_mjx(params, env.state)
    actions = 0.3 * jax.random.uniform(jax.random.PRNGKey(3), (STEPS, WORLDS, env.action_size), minval=-1)
    totals = {k: 0.0 for k in ("punch/arrived", "shove/shoved", "done")}
    warmstart = env.worlds.batch.bind("qacc_warmstart")
    for t, action in enumerate(np.asarray(actions)):
        out = env.step(action)
        ref = step(params, ref, action)
        where = f"{kind}, step {t + 1}"
        obs_atol, reward_atol = OBS_ATOL.get(kind, 5e-4), REWARD_ATOL.get(kind, 1e-4)
        np.testing.assert_allclose(out.next_obs, np.asarray(ref.obs), atol=obs_atol, err_msg=where)
        np.testing.assert_allclose(out.reward, np.asarray(ref.reward), atol=reward_atol, err_msg=where)
        np.testing.assert_array_equal(out.done, np.asarray(ref.done), err_msg=where)
        np.testing.assert_array_equal(out.truncation, np.asarray(ref.truncation), err_msg=where)
        # the same figures but each backend's own overflow read-out (none overflowed on either)
        assert set(out.metrics) - set(mujoco_c.FIGURE_NAMES) == set(ref.metrics) - set(mjx.FIGURE_NAMES)
        for name, value in out.metrics.items():
            expected = 0.0 if name in mujoco_c.FIGURE_NAMES else np.asarray(ref.metrics[name])
            np.testing.assert_allclose(value, expected, atol=reward_atol, err_msg=name)
        for name in totals:
            totals[name] += float((out.done if name == "done" else out.metrics[name]).sum())
        # finished worlds (every world, for a resynced kind) go on from the CPU environment's state
        if kind in RESYNCED_KINDS:
            ref = _as_mjx(params, env.state, warmstart)
        else:
            ref = _where(out.done > 0.5, _as_mjx(params, env.state), ref.replace(metrics={}))
    assert totals["done"] == WORLDS  # every world timed out at step 12 and went on in a new episode
    assert totals["punch/arrived"] == (WORLDS if kind == "face" else 0.0)
    assert totals["shove/shoved"] == (WORLDS if kind == "shove" else 0.0)
    np.testing.assert_array_equal(np.asarray(env.state.info.kind), block.KINDS.index(kind))


def test_a_world_at_its_time_limit_restarts_from_a_fresh_episode_alone(env):
    first = env.reset()
    zeros = np.zeros((WORLDS, env.action_size), np.float32)
    early = 2  # this world's clock runs 5 steps ahead: it reaches the time limit first, alone
    step = np.asarray(env.state.info.step).copy()
    step[early] = 5
    env.state = env.state.replace(info=env.state.info.replace(step=_placed(env, step)))
    for _ in range(CONFIG.max_steps - 6):
        assert not env.step(zeros).done.any()
    out = env.step(zeros)
    compiled = _compiles()  # the first restart compiled the merge and refilled the pool
    np.testing.assert_array_equal(out.truncation, np.eye(WORLDS)[early])
    np.testing.assert_array_equal(out.done, np.eye(WORLDS)[early])
    pool = jax.device_get(env.pool)  # refilled for this restart: the world took its first episode
    np.testing.assert_array_equal(out.obs[early], pool.obs[0])
    assert env.pool_next == 1
    others = np.arange(WORLDS) != early
    np.testing.assert_array_equal(out.obs[others], out.next_obs[others])
    assert not np.allclose(out.obs[early], out.next_obs[early]) and not np.allclose(
        out.obs[early], first[early]
    )
    assert not np.any(out.obs[early, env.task.obs_slices["prev_action"]])
    state = jax.device_get(env.state)
    np.testing.assert_array_equal(state.info.step, np.where(others, CONFIG.max_steps - 5, 0))
    # its MuJoCo world was posed as the fresh episode, at rest; the others kept their motion
    w = env.worlds
    np.testing.assert_array_equal(w.qpos[early], pool.data.qpos[0])
    np.testing.assert_array_equal(w.ctrl[early], pool.data.ctrl[0])
    np.testing.assert_array_equal(w.mocap_pos[early], pool.data.mocap_pos[0])
    assert np.all(w.qvel[early] == 0.0) and np.any(w.qvel[others] != 0.0)
    for _ in range(5):  # the other three time out together and take the pool's next episodes
        out = env.step(zeros)
    np.testing.assert_array_equal(out.done, others.astype(np.float32))
    np.testing.assert_array_equal(out.obs[others], pool.obs[1:WORLDS])
    assert env.pool_next == WORLDS
    assert _compiles() == compiled  # no retrace across later restarts


def test_cpu_env_describes_itself_and_gives_the_teachers_targets(env):
    assert env.describe() == {**env.task.describe(), "physics": "cpu"}
    assert not hasattr(env.task, "init_curriculum")
    assert env.update_curriculum(env.init_curriculum(), None) == env.init_curriculum()  # none to follow
    assert not hasattr(env, "distill_target")  # no teacher configured
    config = dataclasses.replace(CONFIG, teacher="shipped")
    taught = CpuEnv(config, num_worlds=WORLDS, seed=1)
    taught.reset()
    target, mask = taught.distill_target()
    jax_env = block.BlockEnv(config)  # the JAX environment's hook on the same fresh episodes
    params = jax_env.default_params()
    want_target, want_mask = jax.vmap(jax_env.distill_target, in_axes=(None, 0))(
        params, _as_mjx(params, taught.state)
    )
    np.testing.assert_allclose(target, np.asarray(want_target), atol=1e-5)
    np.testing.assert_array_equal(mask, np.asarray(want_mask))
    assert target.shape == (WORLDS, taught.action_size) and 0 < mask[0].sum() < taught.action_size


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """`boxjax train --task block`'s `main` in tmp_path (JAX already runs here: the platform is not set
    again)."""
    from boxjax import platform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(platform, "configure", lambda *args, **kwargs: None)
    return lambda *args: block_cli.main([*CLI_ARGS, *args])


def _log(run) -> list[dict]:
    with open(run / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def test_cli_trains_on_the_cpu_path_resumes_and_distils_a_teacher(env, cli, tmp_path, capsys):
    env.reset()
    env.step(np.zeros((WORLDS, env.action_size), np.float32))
    compiled = _compiles()
    assert cli("--iterations", "2", "--name", "run", "--checkpoint-every", "1", "--teacher", "none") == 0
    printed = capsys.readouterr().out
    assert "physics=mujoco-cpu" in printed and "cpu path: serial" in printed and "teacher=none" in printed
    run = tmp_path / "runs" / "run"
    log = _log(run)
    assert [f["iteration"] for f in log] == [1.0, 2.0]
    assert {"count/punches", "env/kind/face", "env/reward/alive", "profile/collector_step_s"} <= set(log[0])
    assert log[-1]["env/reward/alive"] > 0.0 and log[-1]["env/nan"] == 0.0
    meta = checkpoint.read_meta(str(run / "checkpoints"))
    assert meta["physics"] == "cpu" and meta["config"] == CONFIG.to_dict()
    assert checkpoint.latest_step(str(run / "checkpoints")) == 2
    assert json.loads((run / "summary.json").read_text())["iterations"] == 2
    resume = ("--iterations", "3", "--name", "run", "--resume", str(run / "checkpoints"), "--teacher", "none")
    assert cli(*resume) == 0
    assert [f["iteration"] for f in _log(run)] == [1.0, 2.0, 3.0]
    assert checkpoint.latest_step(str(run / "checkpoints")) == 3
    assert _compiles() == compiled  # the CLI's collector stepped with this file's compiles
    assert log[-1]["loss/distill"] == 0.0
    assert cli("--iterations", "1", "--name", "taught") == 0  # --teacher auto: the one shipped for simple
    assert "teacher=shipped" in capsys.readouterr().out
    taught = _log(tmp_path / "runs" / "taught")[-1]
    assert taught["loss/distill"] > 0.0 and np.isfinite(taught["loss/total"])
