"""Walk task, the walk observation of any fighter, the walking teacher, and PPO distillation (CPU)."""

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from boxjax import envs, mjcf
from boxjax.envs.toy import PointReach
from boxjax.envs.walk import env as walk
from boxjax.envs.walk import teacher
from boxjax.envs.wrappers import autoreset_step, batch_reset
from boxjax.models import checkpoint
from boxjax.models.distributions import gaussian_log_prob
from boxjax.models.networks import ActorCritic
from boxjax.rl import ppo
from boxjax.rl.losses import LossBatch, distill_loss, ppo_loss
from boxjax.rl.train_step import make_network

WORLDS = 4
CONFIG = ppo.PPOConfig(
    num_envs=WORLDS, unroll_length=4, minibatch_size=8, num_epochs=1, policy_hidden=(32,), value_hidden=(32,)
)
TOY = ppo.PPOConfig(
    num_envs=16,
    unroll_length=10,
    minibatch_size=40,
    learning_rate=1e-2,
    desired_kl=0.0,
    policy_hidden=(32,),
    value_hidden=(32,),
)
OBS_ATOL = 1e-4
"""Walk observations of the same fighter state in two models (one fighter / two fighters): only the
contact solve for the touch sensors differs between them."""


@functools.cache
def env():
    return envs.make("walk", body="simple", impl="jax", num_worlds=WORLDS, episode_s=0.5)


@functools.cache
def params():
    return env().default_params()


@functools.cache
def jitted():
    e = env()
    reset = jax.jit(lambda p, keys: batch_reset(e, p, keys))
    step = jax.jit(lambda p, s, f, a: autoreset_step(e, p, s, f, a))
    return reset, step


@pytest.fixture(scope="module")
def walk_run(tmp_path_factory):
    """A 1-iteration walk training, checkpointed: (checkpoint dir, policy, history)."""
    ckpt = str(tmp_path_factory.mktemp("walk") / "run")
    policy, history = ppo.train(env(), CONFIG, jax.random.PRNGKey(0), iterations=1, checkpoint_dir=ckpt)
    return ckpt, policy, history


def _float64_leaves(tree):
    return [x for x in jax.tree.leaves(tree) if hasattr(x, "dtype") and x.dtype == np.float64]


# -- the environment ----------------------------------------------------------------------------------
STEP_OBS_ATOL, STEP_REWARD_ATOL = 1e-2, 5e-2
"""Three control steps from the same reset: MuJoCo C (float64) against MJX (float32). Measured on this
test's worlds (seed 8): 7.5e-5 on observations and 2.3e-4 on rewards with XLA's default flags, but 4.9e-3
(joint velocities) and 2.1e-2 under the suite's fast-compile flags (`conftest.TEST_XLA_FLAGS`), where MJX's
4-iteration contact solve amplifies the changed float32 rounding in one world on its feet; the controls
written into MuJoCo are checked exactly."""


def test_walk_runs_on_the_cpu_path_like_the_jax_env():
    """The generic CPU adapter runs the walk task's own halves around MuJoCo's C engine."""
    from boxjax.envs.cpu import CpuEnv
    from boxjax.physics.cpu import view_of

    reset, step = jitted()
    state = reset(params(), jax.random.split(jax.random.PRNGKey(8), WORLDS))
    cpu = CpuEnv(env().config, num_worlds=WORLDS)
    assert cpu.describe() == {**env().describe(), "physics": "cpu"}
    cpu.reset()
    cpu.state = state.replace(data=view_of(state.data, cpu.derived), metrics={})
    cpu._load(cpu.state, np.arange(WORLDS))
    actions = 0.3 * np.asarray(
        jax.random.uniform(jax.random.PRNGKey(9), (3, WORLDS, env().action_size)) - 0.5
    )
    for action in actions:
        state, stepped = step(params(), state, state, action)
        out = cpu.step(action)
        np.testing.assert_array_equal(cpu.worlds.ctrl, np.asarray(stepped.data.ctrl, np.float64))
        np.testing.assert_allclose(out.next_obs, np.asarray(stepped.obs), atol=STEP_OBS_ATOL)
        np.testing.assert_allclose(out.reward, np.asarray(stepped.reward), atol=STEP_REWARD_ATOL)
        np.testing.assert_array_equal(out.done, np.asarray(stepped.done))


def test_reset_step_shapes_finite_float32_and_observation():
    reset, step = jitted()
    e = env()
    state = reset(params(), jax.random.split(jax.random.PRNGKey(0), WORLDS))
    assert state.obs.shape == (WORLDS, e.observation_size) == (WORLDS, 2 * e.nu + walk.EXTRA_OBS)
    action = jax.random.uniform(jax.random.PRNGKey(1), (WORLDS, e.action_size), minval=-1, maxval=1)
    nxt, stepped = step(params(), state, state, action)
    for s in (state, nxt, stepped):
        assert s.obs.dtype == jnp.float32 and s.reward.dtype == jnp.float32
        assert bool(jnp.all(jnp.isfinite(s.obs))) and bool(jnp.all(jnp.isfinite(s.reward)))
        assert not _float64_leaves((s.obs, s.reward, s.done, s.truncation, s.metrics, s.info))
    assert set(stepped.metrics) >= {"reward/track_lin", "walk/lin_error", "walk/yaw_error", "fall", "shove"}
    # The env's observation is the public function of the fighter's state and the command.
    again = jax.vmap(walk.walk_observation, in_axes=(None, 0, 0))(e.index, stepped.data, stepped.info.command)
    np.testing.assert_allclose(np.asarray(again), np.asarray(stepped.obs), atol=1e-6)
    np.testing.assert_array_equal(np.asarray(stepped.obs[:, -3:]), np.asarray(state.info.command))


def test_same_key_same_trajectory():
    reset, step = jitted()
    keys = jax.random.split(jax.random.PRNGKey(2), WORLDS)
    actions = jax.random.uniform(jax.random.PRNGKey(3), (3, WORLDS, env().action_size), minval=-1, maxval=1)

    def run():
        s = first = reset(params(), keys)
        for a in actions:
            s, _ = step(params(), s, first, a)
        return s

    a, b = run(), run()
    np.testing.assert_array_equal(np.asarray(a.data.qpos), np.asarray(b.data.qpos))
    np.testing.assert_array_equal(np.asarray(a.obs), np.asarray(b.obs))


def test_commands_stay_in_range_with_a_share_of_zeros():
    config = walk.WalkConfig(zero_command_share=0.25)
    commands = jax.vmap(functools.partial(walk.sample_command, config))(
        jax.random.split(jax.random.PRNGKey(4), 4000)
    )
    zero = np.all(np.asarray(commands) == 0.0, axis=1)
    assert commands.dtype == jnp.float32
    assert zero.mean() == pytest.approx(0.25, abs=0.03)
    for k, (low, high) in enumerate((config.forward_mps, config.lateral_mps, config.yaw_radps)):
        assert low <= float(commands[:, k].min()) and float(commands[:, k].max()) <= high
    with pytest.raises(ValueError, match="zero_command_share"):
        walk.WalkConfig(zero_command_share=1.5)
    with pytest.raises(ValueError, match="unknown WalkConfig options"):
        envs.make("walk", speed=2.0)


def _keyframe_data(model: mujoco.MjModel, key: str, root_velocity=None, index=None) -> mjx.Data:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(key).id)
    if root_velocity is not None:
        data.qvel[index.dof_adr : index.dof_adr + 3] = root_velocity
    mujoco.mj_forward(model, data)
    return mjx.put_data(model, data, impl="jax")


def test_walk_observation_of_either_fighter_of_a_two_fighter_arena():
    """In the guard, red alone, red of a pair and blue (facing red) all see the same; the heading frame
    turns with the fighter, so each one's forward velocity reads as forward."""
    one_model, one = mjcf.build("simple")
    two_model, two = mjcf.build("simple", opponent=True)
    command = jnp.asarray([0.5, -0.2, 0.3], jnp.float32)
    alone = walk.walk_observation(one.red, _keyframe_data(one_model, "stance"), command)
    pair = _keyframe_data(two_model, "stance")
    red = walk.walk_observation(two.red, pair, command)
    blue = walk.walk_observation(two.blue, pair, command)
    assert alone.shape == red.shape == (walk.walk_observation_size(two.red),) and red.dtype == jnp.float32
    np.testing.assert_allclose(red, alone, atol=OBS_ATOL)
    np.testing.assert_allclose(blue, red, atol=OBS_ATOL)
    linear = slice(2 * one.red.act_qpos_adr.shape[0] + 4, 2 * one.red.act_qpos_adr.shape[0] + 7)
    for index, world_velocity in ((two.red, (0.8, 0.0, 0.0)), (two.blue, (-0.8, 0.0, 0.0))):
        data = _keyframe_data(two_model, "stance", world_velocity, index)
        seen = walk.walk_observation(index, data, command)[linear]
        np.testing.assert_allclose(seen, [0.8, 0.0, 0.0], atol=1e-5)
    assert float(walk.heading(two.red, pair.qpos)) == pytest.approx(0.0, abs=1e-5)
    assert abs(float(walk.heading(two.blue, pair.qpos))) == pytest.approx(np.pi, abs=1e-5)
    jitted_obs = jax.jit(walk.walk_observation, static_argnums=0)(two.blue, pair, command)
    np.testing.assert_allclose(jitted_obs, blue, atol=1e-6)


def test_leg_mask_covers_hips_knees_ankles_toes():
    e = env()
    names = [e.mj_model.actuator(int(a)).name for a in e.index.actuator_ids]
    legs = {n for n, dim in zip(names, e.index.action_group, strict=True) if e.leg_mask[dim] == 1.0}
    assert len(legs) == 14 and "red/knee_l" in legs and "red/toe_r" in legs
    assert not any(n.split("/")[1].startswith(("lumbar", "shoulder", "elbow", "neck")) for n in legs)


# -- the teacher ----------------------------------------------------------------------------------------
def test_walk_trains_and_checkpoints(walk_run):
    ckpt, _, history = walk_run
    assert checkpoint.latest_step(ckpt) == 1
    assert checkpoint.read_meta(ckpt)["env"] == "walk"
    figures = history[-1]
    assert all(np.isfinite(v) for v in figures.values())
    assert {"env/walk/lin_error", "env/walk/yaw_error", "episode/fall_rate", "loss/distill"} <= set(figures)
    assert figures["loss/distill"] == 0.0


def test_teacher_acts_as_the_trained_policy_inside_jit_and_vmap(walk_run):
    ckpt, policy, _ = walk_run
    t = teacher.load_teacher(ckpt, "simple")
    assert t.leg_mask.shape == (env().action_size,) and t.leg_mask.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(t.leg_mask), env().leg_mask)
    obs = jax.random.normal(jax.random.PRNGKey(5), (6, env().observation_size), jnp.float32)
    got = jax.jit(jax.vmap(teacher.teacher_action, in_axes=(None, 0)))(t, obs)
    want = ppo.make_policy(env(), CONFIG)(policy, obs)
    assert got.shape == (6, env().action_size) and got.dtype == jnp.float32
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_teacher_refuses_another_body_or_task(walk_run, tmp_path):
    ckpt, _, _ = walk_run
    with pytest.raises(checkpoint.CheckpointMismatchError, match="body: checkpoint has 'simple'"):
        teacher.load_teacher(ckpt, "muscular-fast")
    other = str(tmp_path / "reach")
    ppo.train(PointReach(), TOY, jax.random.PRNGKey(0), iterations=1, checkpoint_dir=other)
    with pytest.raises(checkpoint.CheckpointMismatchError, match="a teacher must be 'walk'"):
        teacher.load_teacher(other, "simple")
    with pytest.raises(FileNotFoundError):
        teacher.load_teacher(str(tmp_path / "missing"), "simple")
    squashed = {"env": "walk", "body": "simple", "ppo": {"action_distribution": "tanh_normal"}}
    with pytest.raises(
        checkpoint.CheckpointMismatchError, match="tanh_normal., a teacher acts with clipped_normal"
    ):
        teacher._check_task("walker", squashed, "simple")


def test_exported_teacher_file_acts_like_the_checkpoint_and_checks_the_body(walk_run, tmp_path, monkeypatch):
    ckpt, _, _ = walk_run
    path = str(tmp_path / "walk-simple.msgpack")
    meta = teacher.export_teacher(ckpt, "simple", path)
    assert meta["env"] == "walk" and meta["source_step"] == 1
    assert os.path.getsize(path) < 2_000_000
    direct, shipped = teacher.load_teacher(ckpt, "simple"), teacher.load_teacher(path, "simple")
    obs = jax.random.normal(jax.random.PRNGKey(6), (4, env().observation_size), jnp.float32)
    np.testing.assert_array_equal(teacher.teacher_action(shipped, obs), teacher.teacher_action(direct, obs))
    with pytest.raises(checkpoint.CheckpointMismatchError, match="body: checkpoint has 'simple'"):
        teacher.load_teacher(path, "muscular-fast")
    fresh = teacher.untrained_teacher("simple")
    assert teacher.teacher_action(fresh, obs).shape == (4, env().action_size)
    np.testing.assert_array_equal(fresh.leg_mask, shipped.leg_mask)
    monkeypatch.setattr(teacher, "SHIPPED_DIR", str(tmp_path))
    assert teacher.shipped_teacher("simple") == path
    with pytest.raises(FileNotFoundError, match=r"body 'muscular' \(shipped: simple\)"):
        teacher.shipped_teacher("muscular")


# -- distillation ---------------------------------------------------------------------------------------
TARGET = (0.8, -0.8)
MASK = (1.0, 0.0)


class ReachWithTeacher(PointReach):
    """The toy task with a distillation hook: a 'teacher' that wants action dim 0 at 0.8 (dim 1 free)."""

    def distill_target(self, params, state):
        return jnp.asarray(TARGET, jnp.float32), jnp.asarray(MASK, jnp.float32)


def test_distill_loss_hand_worked():
    mean = jnp.asarray([[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]])
    target = jnp.asarray([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    mask = jnp.asarray([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    # Per sample: 1/1 = 1, (1 + 1)/2 = 1, 4/2 = 2; mean 4/3. An all-zero mask contributes 0.
    assert float(distill_loss(mean, target, mask)) == pytest.approx(4.0 / 3.0)
    assert float(distill_loss(mean, target, jnp.zeros_like(mask))) == 0.0
    batch = LossBatch(
        obs=jnp.zeros((3, 1)),
        action=jnp.zeros((3, 2)),
        log_prob=gaussian_log_prob(mean, jnp.zeros(2), jnp.zeros((3, 2))),
        advantage=jnp.asarray([1.0, -1.0, 0.5]),
        target=jnp.zeros(3),
    )
    kw = dict(clip_eps=0.2, value_coef=0.5, entropy_coef=0.01, normalize_advantages=False)
    plain = ppo_loss(mean, jnp.zeros(2), jnp.ones(3), batch, **kw)
    assert float(plain.distill) == 0.0
    assert float(ppo_loss(mean, jnp.zeros(2), jnp.ones(3), batch, distill_coef=3.0, **kw).total) == float(
        plain.total
    )
    pulled = batch.replace(distill_target=target, distill_mask=mask)
    terms = ppo_loss(mean, jnp.zeros(2), jnp.ones(3), pulled, distill_coef=3.0, **kw)
    assert float(terms.distill) == pytest.approx(4.0 / 3.0)
    assert float(terms.total) == pytest.approx(float(plain.total) + 4.0, rel=1e-6)


def _mean_action(policy, env, config, obs):
    net_obs = policy.normalizer(obs, config.normalize_observations)
    mean, _ = make_network(env, config).apply(policy.params, net_obs, method=ActorCritic.policy_only)
    return np.asarray(mean)


def test_distillation_pulls_the_masked_policy_mean_to_the_target():
    e, config = ReachWithTeacher(), dataclasses.replace(TOY, distill_coef=50.0)
    obs = jax.vmap(e.reset, in_axes=(None, 0))(
        e.default_params(), jax.random.split(jax.random.PRNGKey(6), 64)
    ).obs
    before, _ = ppo.train(e, config, jax.random.PRNGKey(0), iterations=0)
    after, history = ppo.train(e, config, jax.random.PRNGKey(0), iterations=3)
    gap_before = np.abs(_mean_action(before, e, config, obs)[:, 0] - TARGET[0]).mean()
    gap_after = np.abs(_mean_action(after, e, config, obs)[:, 0] - TARGET[0]).mean()
    assert gap_before > 0.6 and gap_after < 0.3 * gap_before
    distill = [h["loss/distill"] for h in history]
    assert distill[0] > 0.1 and distill[-1] < 0.3 * distill[0]


def test_without_the_hook_distillation_changes_nothing():
    """An env without `distill_target` trains to the same bits whatever `distill_coef` says."""
    plain, h0 = ppo.train(PointReach(), TOY, jax.random.PRNGKey(1), iterations=2)
    coef, h1 = ppo.train(
        PointReach(), dataclasses.replace(TOY, distill_coef=5.0), jax.random.PRNGKey(1), iterations=2
    )
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(coef), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert [h["loss/distill"] for h in h0 + h1] == [0.0] * 4
    assert [h["loss/total"] for h in h0] == [h["loss/total"] for h in h1]
