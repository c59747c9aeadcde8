"""Fault injection on the CPU: non-finite worlds, losses and environments, and a real SIGINT mid-run.

All on the physics-free toy task (`PointReach`), so each test compiles in seconds; the stance task's own
guard is tested in `test_stance.py`.
"""

import functools
import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from flax import struct
from mujoco import mjx

from boxjax.envs.base import NONFINITE_METRIC, EpisodeSummary, State, from_playground, quiet_models
from boxjax.envs.toy import PointReach, ReachParams
from boxjax.models import checkpoint
from boxjax.rl import guard, ppo
from boxjax.rl.losses import LossBatch
from boxjax.rl.rollout import NONFINITE_WORLDS, init_rollout, network_policy, rollout
from boxjax.rl.train_step import init_train_state, make_network, make_train_iteration, update

WORLDS = 8
CONFIG = ppo.PPOConfig(
    num_envs=WORLDS,
    unroll_length=4,
    minibatch_size=8,
    num_epochs=2,
    policy_hidden=(16,),
    value_hidden=(16,),
)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@struct.dataclass
class FaultParams:
    reach: ReachParams
    poisoned: jax.Array
    """() bool: every reset and step of every world is NaN."""


@struct.dataclass
class Iterations:
    count: jax.Array


class PoisonedReach(PointReach):
    """`PointReach` whose every observation turns NaN from iteration `poison_from` on (its curriculum
    counts the iterations): an environment that keeps producing NaN."""

    def __init__(self, poison_from: int):
        self.poison_from = poison_from

    def default_params(self) -> FaultParams:
        return FaultParams(reach=super().default_params(), poisoned=jnp.zeros((), bool))

    def init_curriculum(self) -> Iterations:
        return Iterations(count=jnp.zeros((), jnp.int32))

    def apply_curriculum(self, params: FaultParams, curriculum: Iterations) -> FaultParams:
        return params.replace(poisoned=curriculum.count >= self.poison_from)

    def update_curriculum(self, curriculum: Iterations, stats: EpisodeSummary) -> Iterations:
        return Iterations(count=curriculum.count + 1)

    def _poison(self, params: FaultParams, state: State) -> State:
        return state.replace(obs=jnp.where(params.poisoned, jnp.nan, state.obs))

    def reset(self, params: FaultParams, key: jax.Array) -> State:
        return self._poison(params, super().reset(params.reach, key))

    def step(self, params: FaultParams, state: State, action: jax.Array) -> State:
        return self._poison(params, super().step(params.reach, state, action))


@functools.cache
def toy_rollout():
    env = PointReach()
    net = make_network(env, CONFIG)

    def run(rollout_state, train_state, key):
        return rollout(
            env, env.default_params(), network_policy(net, train_state.params, train_state.normalizer, True),
            rollout_state, key, 1,
        )  # fmt: skip

    return env, jax.jit(run)


def test_a_nan_world_is_reset_counted_and_no_fall():
    env, run = toy_rollout()
    train_state = init_train_state(env, CONFIG, jax.random.PRNGKey(0))
    state = init_rollout(env, env.default_params(), jax.random.PRNGKey(1), WORLDS)
    poisoned = state.replace(env=state.env.replace(data=state.env.data.at[3].set(jnp.nan)))
    after, traj, summary, metrics = run(poisoned, train_state, jax.random.PRNGKey(2))
    assert float(metrics[NONFINITE_WORLDS]) == 1.0
    assert float(summary.episodes) == 0.0 and float(summary.terminated) == 0.0  # no episode, no fall
    steps = np.asarray(after.env.info.step)
    assert steps[3] == 0 and np.all(np.delete(steps, 3) == 1)  # only world 3 was reset
    assert bool(jnp.all(jnp.isfinite(after.env.data)))
    np.testing.assert_array_equal(np.asarray(traj.next_obs[0, 3]), np.asarray(state.env.obs[3]))
    assert float(traj.reward[0, 3]) == 0.0 and float(traj.termination[0, 3]) == 0.0
    assert float(traj.done[0, 3]) == 1.0


def test_training_goes_on_finite_past_a_nan_world():
    env = PointReach()
    iterate = make_train_iteration(env, CONFIG)
    train_state = init_train_state(env, CONFIG, jax.random.PRNGKey(0))
    state = init_rollout(env, env.default_params(), jax.random.PRNGKey(1), WORLDS)
    state = state.replace(env=state.env.replace(data=state.env.data.at[5].set(jnp.inf)))
    train_state, state = ppo.own_buffers((train_state, state))  # the iteration donates every leaf
    before = jax.tree.map(np.asarray, train_state.params)
    train_state, state, metrics = iterate(train_state, state, env.default_params())
    assert float(metrics["env/" + NONFINITE_WORLDS]) == 1.0
    assert float(metrics[guard.SKIPPED_STEPS]) == 0.0
    assert not guard.nonfinite_leaves(jax.device_get(train_state))
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, np.asarray(b)), before, train_state.params)
    assert any(jax.tree.leaves(changed))  # the update was applied


def _batch(key: jax.Array, advantage: jax.Array) -> LossBatch:
    k = jax.random.split(key, 3)
    n = advantage.shape[0]
    return LossBatch(
        obs=jax.random.normal(k[0], (n, PointReach.observation_size)),
        action=jax.random.normal(k[1], (n, PointReach.action_size)),
        log_prob=jnp.full((n,), -2.0),
        advantage=advantage,
        target=jax.random.normal(k[2], (n,)),
    )


def test_a_nan_loss_skips_its_gradient_steps():
    env = PointReach()
    net = make_network(env, CONFIG)
    ts = init_train_state(env, CONFIG, jax.random.PRNGKey(0))
    n, steps = CONFIG.batch_size, CONFIG.num_epochs * CONFIG.num_minibatches
    all_nan = _batch(jax.random.PRNGKey(1), jnp.full((n,), jnp.nan))
    params, opt_state, _, figures = update(net, CONFIG, ts, all_nan, jax.random.PRNGKey(2))
    for a, b in zip(
        jax.tree.leaves((params, opt_state)), jax.tree.leaves((ts.params, ts.opt_state)), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # nothing applied
    assert float(figures[guard.SKIPPED_STEPS]) == steps and float(figures[guard.UPDATE_SKIPPED]) == 1.0
    assert float(figures[guard.PREFIX + "loss"]) == steps
    one_nan = _batch(jax.random.PRNGKey(1), jax.random.normal(jax.random.PRNGKey(3), (n,)).at[0].set(jnp.nan))
    params, _, terms, figures = update(net, CONFIG, ts, one_nan, jax.random.PRNGKey(2))
    # the row sits in one minibatch per epoch; the others are applied and the figures stay finite
    assert float(figures[guard.SKIPPED_STEPS]) == CONFIG.num_epochs
    assert float(figures[guard.UPDATE_SKIPPED]) == 0.0
    assert np.isfinite(float(terms.total)) and not guard.nonfinite_leaves(jax.device_get(params))


def test_the_guard_leaves_a_finite_update_exactly_as_without_it(monkeypatch):
    """On finite data the guarded update is the update without any guard (each step applied as
    `apply_gradient` gives it): the checks only choose, they change no value. Two programs compiled apart
    may round a float differently (XLA fuses and orders them otherwise): 1.5e-6 relative on one weight of
    the update was seen, so 1e-5."""
    from boxjax.rl import train_step

    env = PointReach()
    net = make_network(env, CONFIG)
    ts = init_train_state(env, CONFIG, jax.random.PRNGKey(0))
    batch = _batch(jax.random.PRNGKey(1), jax.random.normal(jax.random.PRNGKey(3), (CONFIG.batch_size,)))
    guarded = update(net, CONFIG, ts, batch, jax.random.PRNGKey(2))

    def unguarded(config, optimizer, params, opt_state, grads, approx_kl, total):
        new = train_step.apply_gradient(config, optimizer, params, opt_state, grads, approx_kl)
        return *new, {"loss": jnp.zeros(())}, jnp.ones(())

    monkeypatch.setattr(train_step, "guarded_step", unguarded)
    monkeypatch.setattr(guard, "finite_or", lambda new, old: (new, jnp.ones((), bool)))
    plain = update(net, CONFIG, ts, batch, jax.random.PRNGKey(2))
    for a, b in zip(jax.tree.leaves(guarded[:3]), jax.tree.leaves(plain[:3]), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-10)
    assert float(guarded[3][guard.SKIPPED_STEPS]) == 0.0


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the step size, meant
def test_an_update_that_overflows_the_parameters_is_undone():
    """A step size beyond float32 (inf on the device) turns the parameters non-finite at the first step,
    whose loss and gradients were finite: the update is undone as a whole, counted as non-finite
    parameters and as an update skipped."""
    env = PointReach()
    config = ppo.PPOConfig(**{**CONFIG.to_dict(), "learning_rate": 1e39, "learning_rate_bounds": (1e-5, 1e39),
                              "desired_kl": 0.0, "policy_hidden": (16,), "value_hidden": (16,)})  # fmt: skip
    net = make_network(env, config)
    ts = init_train_state(env, config, jax.random.PRNGKey(0))
    batch = _batch(jax.random.PRNGKey(1), jax.random.normal(jax.random.PRNGKey(3), (config.batch_size,)))
    params, opt_state, _, figures = update(net, config, ts, batch, jax.random.PRNGKey(2))
    for a, b in zip(
        jax.tree.leaves((params, opt_state)), jax.tree.leaves((ts.params, ts.opt_state)), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(figures[guard.PREFIX + "parameters"]) == 1.0
    assert float(figures[guard.UPDATE_SKIPPED]) == 1.0
    assert guard.first_nonfinite({k: float(v) for k, v in figures.items()}) in ("loss", "parameters")


def test_an_env_that_keeps_producing_nan_stops_the_run_with_a_finite_checkpoint(tmp_path, capsys):
    env = PoisonedReach(poison_from=3)
    directory = str(tmp_path / "ckpt")
    with pytest.raises(guard.NonFiniteError, match=r"the first non-finite quantity was the observations at "):
        ppo.train_run(
            env, CONFIG, jax.random.PRNGKey(0), iterations=50, checkpoint_dir=directory,
            checkpoint_every=1, max_skipped_updates=2,
        )  # fmt: skip
    out = capsys.readouterr().out
    assert "NAN iteration 4:" in out and "CHECKPOINT 4 not written" in out
    step = checkpoint.latest_step(directory)
    assert step == 3  # the last iteration before the poison reached the rollout state
    template = ppo.fresh_rollout(env, env.default_params(), jax.random.PRNGKey(0), WORLDS)
    train = init_train_state(env, CONFIG, jax.random.PRNGKey(0))
    restored = checkpoint.restore(directory, {"train": train, "rollout": template})
    assert not guard.nonfinite_leaves(restored)
    result, _ = ppo.train_run(  # and it loads: the run resumes from it
        env, CONFIG, jax.random.PRNGKey(0), iterations=step, resume=directory
    )
    assert int(result.train_state.iteration) == step


def test_stop_on_nan_stops_at_the_first_non_finite_world():
    env = PoisonedReach(poison_from=1)
    with pytest.raises(guard.NonFiniteError, match="stop_on_nan.*NAN iteration 2"):
        ppo.train_run(env, CONFIG, jax.random.PRNGKey(0), iterations=10, stop_on_nan=True)


def test_guard_rejects_a_limit_that_never_stops():
    with pytest.raises(ValueError, match="max_skipped_updates"):
        guard.Guard(max_skipped_updates=0)


def test_adapted_warp_models_print_no_warnings():
    """A Playground-style env (and the wrapper around it) holding MuJoCo Warp models: the adapter makes
    each one quiet (no device printf per world); a JAX model is left alone."""
    mj = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><freejoint/><geom size=".1"/></body></worldbody></mujoco>'
    )

    class Inner:
        observation_size, action_size = 6, 2

        def __init__(self):
            self._mjx_model = mjx.put_model(mj, impl="warp")
            self.jax_model = mjx.put_model(mj, impl="jax")

    class Wrapper:
        def __init__(self, env):
            self.env = env
            self.observation_size, self.action_size = env.observation_size, env.action_size

    inner = Inner()
    assert inner._mjx_model.opt._impl.warn_overflow != 0  # MuJoCo Warp warns by default
    from_playground(Wrapper(inner))
    assert inner._mjx_model.opt._impl.warn_overflow == 0
    assert quiet_models(Wrapper(inner)) == 1  # found through the wrapper (already quiet: same count)


INTERRUPTED_RUN = textwrap.dedent(
    """
    import sys, jax
    from boxjax.envs.toy import PointReach
    from boxjax.rl import ppo
    from test_guard import CONFIG

    def progress(figures):
        print("iteration", int(figures["iteration"]), flush=True)

    result, _ = ppo.train_run(
        PointReach(), CONFIG, jax.random.PRNGKey(0), iterations=100000, checkpoint_dir=sys.argv[1],
        checkpoint_every=1000, progress_fn=progress,
    )
    print("stopped_by", result.stopped_by, "at", int(result.train_state.iteration), flush=True)
    """
)


def _interrupt_after(args: list[str], line_prefix: str, count: int, **kwargs) -> tuple[int, str]:
    """Run `args`, send SIGINT once `count` lines start with `line_prefix`; (exit status, output)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    lines, seen = [], 0
    for line in proc.stdout:
        lines.append(line)
        seen += line.startswith(line_prefix)
        if seen == count:
            proc.send_signal(signal.SIGINT)
            break
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, "".join(lines) + out


def test_sigint_mid_run_checkpoints_and_resumes_exactly(tmp_path):
    directory = str(tmp_path / "ckpt")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(REPO, "tests"), REPO])}
    code, out = _interrupt_after(
        [sys.executable, "-c", INTERRUPTED_RUN, directory], "iteration", 3, env=env, cwd=tmp_path
    )
    assert code == 0, out
    assert "SIGINT: stopped after iteration" in out and "stopped_by SIGINT" in out
    stopped = int(out.split("stopped_by SIGINT at ")[1].split()[0])
    assert checkpoint.latest_step(directory) == stopped >= 3  # the last finished iteration, checkpointed
    total = stopped + 2
    resumed, _ = ppo.train_run(
        PointReach(), CONFIG, jax.random.PRNGKey(0), iterations=total, resume=directory
    )
    straight, _ = ppo.train_run(PointReach(), CONFIG, jax.random.PRNGKey(0), iterations=total)
    for a, b in zip(
        jax.tree.leaves(resumed.train_state.params), jax.tree.leaves(straight.train_state.params), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


class DeadReach(PointReach):
    """`PointReach` whose state its own guard finds non-finite in every world at every step (each world is
    then reset, its observations stay finite): a broken environment the update cannot notice."""

    def reset(self, params: ReachParams, key: jax.Array) -> State:
        state = super().reset(params, key)
        return state.replace(metrics={**state.metrics, NONFINITE_METRIC: jnp.zeros(())})

    def step(self, params: ReachParams, state: State, action: jax.Array) -> State:
        state = super().step(params, state, action)
        return state.replace(metrics={**state.metrics, NONFINITE_METRIC: jnp.ones(())})


def test_an_env_non_finite_in_every_world_at_every_step_stops_the_run(capsys):
    with pytest.raises(
        guard.NonFiniteError, match="non-finite in every world at every step for 3 iterations"
    ):
        ppo.train_run(DeadReach(), CONFIG, jax.random.PRNGKey(0), iterations=50, max_skipped_updates=3)
    assert capsys.readouterr().out.count("NAN iteration") == 3


def _figures(iteration: int, nonfinite_world_steps: float = 0.0, skipped_steps: float = 0.0) -> dict:
    return {
        "iteration": float(iteration),
        guard.NONFINITE_WORLDS: nonfinite_world_steps,
        guard.SKIPPED_STEPS: skipped_steps,
        guard.UPDATE_SKIPPED: 0.0,
    }


def test_guard_stops_when_most_gradient_steps_keep_being_skipped():
    """10 gradient steps an update: 6 skipped in each of 10 iterations (60 % > 50 %) stops the run at the
    10th; 5 skipped each (50 %) never does; a window with one clean iteration among heavy ones goes on."""
    steady = guard.Guard()
    errors = [steady.check(_figures(i, skipped_steps=6.0), 10, 32)[1] for i in range(1, 11)]
    assert errors[:9] == [None] * 9 and "60 % of the gradient steps of the last 10 iterations" in str(
        errors[9]
    )
    half = guard.Guard()
    assert all(half.check(_figures(i, skipped_steps=5.0), 10, 32)[1] is None for i in range(1, 30))
    mixed = guard.Guard()
    shares = [10.0, 0.0, 10.0, 0.0, 10.0, 0.0, 10.0, 0.0, 10.0, 0.0] * 2
    assert all(mixed.check(_figures(i, skipped_steps=s), 10, 32)[1] is None for i, s in enumerate(shares))


def test_guard_counts_only_iterations_whose_every_world_step_was_non_finite():
    monitor = guard.Guard(max_skipped_updates=2)
    assert monitor.check(_figures(1, 32.0), 10, 32)[1] is None
    assert monitor.check(_figures(2, 31.0), 10, 32)[1] is None  # one world-step was finite: streak ends
    assert monitor.check(_figures(3, 32.0), 10, 32)[1] is None
    assert "for 2 iterations in a row (to iteration 4)" in str(monitor.check(_figures(4, 32.0), 10, 32)[1])
