"""PPO pieces: GAE, the loss, the normaliser, the fused iteration, end-to-end learning, checkpoints."""

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from boxjax.envs.base import State, from_playground
from boxjax.envs.toy import PointReach
from boxjax.models import checkpoint
from boxjax.models.distributions import gaussian_log_prob
from boxjax.models.networks import OBS_STD_FLOOR, Normalizer
from boxjax.rl import loop, ppo, unrolls
from boxjax.rl.losses import LossBatch, brax_gae, gae, ppo_loss
from boxjax.rl.rollout import Transition, init_rollout, reset_states
from boxjax.rl.train_step import init_train_state, make_train_iteration

TOY_CONFIG = ppo.PPOConfig(
    num_envs=32,
    unroll_length=25,
    minibatch_size=200,
    learning_rate=3e-3,
    policy_hidden=(32, 32),
    value_hidden=(32, 32),
    entropy_coef=0.0,
)


def gae_loop(reward, value, next_value, termination, done, gamma, lam):
    """Reference GAE: a plain Python loop over time (cleanrl-style)."""
    steps = reward.shape[0]
    adv = np.zeros_like(reward)
    last = np.zeros_like(reward[0])
    for t in reversed(range(steps)):
        delta = reward[t] + gamma * (1 - termination[t]) * next_value[t] - value[t]
        last = delta + gamma * lam * (1 - done[t]) * last
        adv[t] = last
    return adv, adv + value


def test_gae_matches_plain_loop():
    rng = np.random.default_rng(0)
    shape = (7, 5)
    reward, value, next_value = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    termination = (rng.random(shape) < 0.15).astype(np.float32)
    truncation = (rng.random(shape) < 0.1).astype(np.float32)
    done = np.maximum(termination, truncation)
    got = gae(reward, value, next_value, termination, done, 0.97, 0.9)
    want = gae_loop(reward, value, next_value, termination, done, 0.97, 0.9)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)


def test_gae_hand_worked():
    # Two steps, gamma 0.5, lambda 1: delta1 = 1 + 0.5*2 - 1 = 1, delta0 = 0 + 0.5*1 - 0 = 0.5,
    # A0 = 0.5 + 0.5*1 = 1.0. With a termination at step 1 the bootstrap vanishes: delta1 = 1 - 1 = 0.
    col = lambda *v: jnp.array(v, jnp.float32)[:, None]  # noqa: E731
    reward, value, next_value = col(0.0, 1.0), col(0.0, 1.0), col(1.0, 2.0)
    adv, target = gae(reward, value, next_value, col(0, 0), col(0, 0), 0.5, 1.0)
    np.testing.assert_allclose(adv[:, 0], [1.0, 1.0])
    np.testing.assert_allclose(target[:, 0], [1.0, 2.0])
    adv, _ = gae(reward, value, next_value, col(0, 1), col(0, 1), 0.5, 1.0)
    np.testing.assert_allclose(adv[:, 0], [0.5, 0.0])


def test_brax_advantages_hand_worked():
    """Two steps, gamma = lambda = 0.5, rewards (1, 2), values (0.5, 1), bootstrap 3: TD errors 1 and 2.5,
    lambda-returns 0.5 + 1 + 0.25 * 2.5 = 2.125 and 3.5; the advantage r + gamma vs(s') - V(s) is 1 + 1.75
    - 0.5 = 2.25 at the first step (GAE's would be 1.625). A fall at the first step: no bootstrap (0.5); a
    truncation there: masked (advantage 0, target its own value)."""
    reward, value = jnp.asarray([[1.0], [2.0]]), jnp.asarray([[0.5], [1.0]])
    zeros, first = jnp.zeros((2, 1)), jnp.asarray([[1.0], [0.0]])
    boot = jnp.asarray([3.0])
    vs, adv = brax_gae(reward, value, boot, zeros, zeros, 0.5, 0.5)
    np.testing.assert_allclose(vs[:, 0], [2.125, 3.5])
    np.testing.assert_allclose(adv[:, 0], [2.25, 2.5])
    vs, adv = brax_gae(reward, value, boot, first, zeros, 0.5, 0.5)
    np.testing.assert_allclose(vs[:, 0], [1.0, 3.5])
    np.testing.assert_allclose(adv[:, 0], [0.5, 2.5])
    vs, adv = brax_gae(reward, value, boot, zeros, first, 0.5, 0.5)
    np.testing.assert_allclose(vs[:, 0], [0.5, 3.5])
    np.testing.assert_allclose(adv[:, 0], [0.0, 2.5])


def test_brax_advantages_are_brax_s_compute_gae():
    """`brax_gae` against Brax's own `compute_gae` on random unrolls with falls and truncations (runs where
    the compare extra is installed)."""
    losses = pytest.importorskip("brax.training.agents.ppo.losses", reason="needs the compare extra (brax)")
    rng = np.random.default_rng(4)
    steps, batch = 30, 64
    reward, value = (jnp.asarray(rng.normal(size=(steps, batch)), jnp.float32) for _ in range(2))
    boot = jnp.asarray(rng.normal(size=batch), jnp.float32)
    ended = rng.random((steps, batch)) < 0.1
    truncation = jnp.asarray(ended & (rng.random((steps, batch)) < 0.5), jnp.float32)
    termination = jnp.asarray(ended, jnp.float32) - truncation
    ours = brax_gae(reward, value, boot, termination, truncation, 0.995, 0.95)
    theirs = losses.compute_gae(truncation, termination, reward, value, boot, lambda_=0.95, discount=0.995)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_unrolls_hold_consecutive_steps_of_one_world():
    """`to_units`: (T=4, N=3) in windows of 2 -> 6 unrolls, window-major: unroll k * N + n is steps 2k, 2k + 1
    of world n; `unit_batch` splits done into termination and truncation, scales rewards and keeps the last
    step's next observation."""
    steps = np.arange(4)[:, None] * 10 + np.arange(3)[None, :]  # value 10 t + n
    units = np.asarray(unrolls.to_units(jnp.asarray(steps), 2))
    assert units.shape == (6, 2)
    np.testing.assert_array_equal(units[0], [0, 10])
    np.testing.assert_array_equal(units[2], [2, 12])
    np.testing.assert_array_equal(units[4], [21, 31])
    config = dataclasses.replace(TOY_CONFIG, num_envs=3, unroll_length=4, minibatch_size=4, gae_window=2,
                                 reward_scale=2.0, batch_layout="unrolls")  # fmt: skip
    t = jnp.asarray(steps, jnp.float32)
    fell, ended = (t == 11).astype(jnp.float32), (t >= 11).astype(jnp.float32)
    traj = Transition(obs=t[..., None], action=t[..., None], log_prob=t, reward=t, next_obs=t[..., None] + 1,
                      termination=fell, done=ended)  # fmt: skip
    batch = unrolls.unit_batch(config, traj)
    np.testing.assert_array_equal(batch.reward[4], [42.0, 62.0])
    np.testing.assert_array_equal(batch.termination[1], [0.0, 1.0])  # world 1 fell at step 1
    np.testing.assert_array_equal(batch.truncation[1], [0.0, 0.0])
    np.testing.assert_array_equal(batch.truncation[5], [1.0, 1.0])  # world 2's later steps ended otherwise
    np.testing.assert_array_equal(batch.last_next_obs[:, 0], [11, 12, 13, 31, 32, 33])


def test_brax_s_update_layout_trains_and_names_what_it_cannot_take():
    """The "unrolls" batch layout (with Brax's policy and normaliser, as the comparison runs it): the toy
    compiles once, stays finite and learns; settings it cannot take are named."""
    config = dataclasses.replace(TOY_CONFIG, unroll_length=50, gae_window=25, minibatch_size=400,
                                 batch_layout="unrolls", action_distribution="tanh_normal",
                                 obs_normalizer="brax", network_init="lecun_uniform",
                                 desired_kl=0.0)  # fmt: skip
    env = PointReach()
    policy, history = ppo.train(env, config, jax.random.PRNGKey(2), iterations=16)
    assert all(np.isfinite(r["loss/total"]) and r["guard/skipped_steps"] == 0 for r in history)
    # the last two iterations' mean return rose from the first's by 8.4, 5.0 and 5.2 (seeds 2, 3, 4; measured
    # before this assertion), its iteration-to-iteration noise about 1: 3 leaves room for both
    last = np.mean([r["episode/return"] for r in history[-2:]])
    assert last > history[0]["episode/return"] + 3.0
    for fields, message in [({"gae_window": 0}, "needs a gae_window"),
                            ({"minibatch_size": 320}, "divides minibatch_size \\(320\\)"),
                            ({"num_devices": 2}, "runs on one device")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(config, **fields)


def test_gae_in_windows_restarts_the_recursion_at_each_window_end_and_keeps_the_order():
    """`gae_window` 2 over 6 steps is GAE of each 2-step window on its own, bootstrapped from the value of
    the state the window reached (Brax's GAE per unroll); the batch keeps its (T, N) order; a window of
    the whole unroll is the plain GAE exactly."""
    from boxjax.rl.train_step import from_windows, to_windows

    rng = np.random.default_rng(1)
    shape = (6, 4)
    reward, value, next_value = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    termination = (rng.random(shape) < 0.15).astype(np.float32)
    done = np.maximum(termination, (rng.random(shape) < 0.1).astype(np.float32))
    inputs = (reward, value, next_value, termination, done)
    windowed = gae(*(to_windows(jnp.asarray(x), 2) for x in inputs), 0.97, 0.9)
    got = [np.asarray(from_windows(x, 6)) for x in windowed]
    for start in (0, 2, 4):
        want = gae_loop(*(x[start : start + 2] for x in inputs), 0.97, 0.9)
        np.testing.assert_allclose(got[0][start : start + 2], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1][start : start + 2], want[1], rtol=1e-5, atol=1e-5)
    cut = done.copy()
    cut[1::2] = 1.0  # the same as ending the trace (not the bootstrap) at every window's last step
    np.testing.assert_allclose(got[0], gae_loop(reward, value, next_value, termination, cut, 0.97, 0.9)[0],
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    whole = gae(*(to_windows(jnp.asarray(x), 6) for x in inputs), 0.97, 0.9)
    np.testing.assert_array_equal(from_windows(whole[0], 6), gae(*inputs, 0.97, 0.9)[0])
    x = jnp.arange(6 * 4 * 3).reshape(6, 4, 3)
    np.testing.assert_array_equal(from_windows(to_windows(x, 3), 6), x)
    with pytest.raises(ValueError, match=r"gae_window \(7\) must divide unroll_length \(25\)"):
        dataclasses.replace(TOY_CONFIG, gae_window=7)


def test_training_with_a_gae_window_of_the_whole_unroll_is_training_without():
    windowed = dataclasses.replace(TOY_CONFIG, gae_window=25)
    runs = [
        ppo.train(PointReach(), c, jax.random.PRNGKey(2), iterations=2)[1] for c in (TOY_CONFIG, windowed)
    ]
    assert [r["loss/total"] for r in runs[0]] == [r["loss/total"] for r in runs[1]]


def _loss_batch(log_prob_old, advantage):
    n = advantage.shape[0]
    return LossBatch(
        obs=jnp.zeros((n, 1)),
        action=jnp.zeros((n, 1)),
        log_prob=log_prob_old,
        advantage=advantage,
        target=jnp.zeros((n,)),
    )


def test_ppo_loss_unclipped_and_clipped():
    mean, log_std = jnp.zeros((2, 1)), jnp.zeros((1,))
    new_lp = gaussian_log_prob(mean, log_std, jnp.zeros((2, 1)))
    adv = jnp.array([1.0, -2.0])
    kw = dict(clip_eps=0.2, value_coef=0.5, entropy_coef=0.0, normalize_advantages=False)
    # Same policy: ratio 1, policy loss = -mean(adv) = 0.5; value loss 0.5*mean(v^2) with v = [1, 3].
    terms = ppo_loss(mean, log_std, jnp.array([1.0, 3.0]), _loss_batch(new_lp, adv), **kw)
    np.testing.assert_allclose(terms.policy, 0.5, rtol=1e-6)
    np.testing.assert_allclose(terms.value, 0.5 * (1 + 9) / 2, rtol=1e-6)
    np.testing.assert_allclose(terms.clip_fraction, 0.0)
    # Old log prob lower by log 2: ratio 2. Positive advantage is clipped at 1.2; negative one is not
    # (min picks the unclipped 2 * -2): loss = -mean(1.2*1, 2*-2) = -(1.2 - 4)/2 = 1.4.
    terms = ppo_loss(mean, log_std, jnp.zeros(2), _loss_batch(new_lp - jnp.log(2.0), adv), **kw)
    np.testing.assert_allclose(terms.policy, 1.4, rtol=1e-5)
    np.testing.assert_allclose(terms.clip_fraction, 1.0)


def test_normalizer_matches_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(2.0, 3.0, (50, 4)), rng.normal(-1.0, 0.5, (30, 4))
    norm = Normalizer.create(4).update(jnp.asarray(a, jnp.float32)).update(jnp.asarray(b, jnp.float32))
    both = np.concatenate([a, b])
    np.testing.assert_allclose(norm.mean, both.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norm.std, both.std(0), rtol=1e-4)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="minibatch_size"):
        ppo.PPOConfig(num_envs=10, unroll_length=3, minibatch_size=7)
    with pytest.raises(ValueError, match="gamma"):
        ppo.PPOConfig(gamma=1.5)


@functools.cache
def toy_iteration():
    return make_train_iteration(PointReach(), TOY_CONFIG)


def _toy_states(seed, config=TOY_CONFIG):
    env = PointReach()
    key = jax.random.PRNGKey(seed)
    ts = init_train_state(env, config, key)
    rs = init_rollout(env, env.default_params(), key, config.num_envs)
    return ppo.own_buffers((ts, rs))


def test_iteration_compiles_once_and_has_no_float64():
    env = PointReach()
    fn = toy_iteration()
    ts, rs = _toy_states(3)
    for _ in range(3):
        ts, rs, metrics = fn(ts, rs, env.default_params())
    assert fn._cache_size() == 1
    leaves = jax.tree.leaves((ts, rs, metrics))
    assert all(leaf.dtype != jnp.float64 for leaf in leaves)
    assert int(ts.iteration) == 3


def test_the_reset_pool_is_drawn_every_reset_every_iterations_as_the_every_iteration_rule_draws_it():
    env, params, worlds = PointReach(), PointReach().default_params(), 8
    key = jax.random.PRNGKey(4)
    keys = jax.random.split(key, 5)
    every = jax.jit(lambda s, k: reset_states(env, params, s, k, 1)[0].info.target)
    pooled = jax.jit(lambda s, k: reset_states(env, params, s, k, 3))
    plain, state = (
        init_rollout(env, params, key, worlds),
        init_rollout(env, params, key, worlds, reset_every=3),
    )
    drawn = [np.asarray(every(plain, k)) for k in keys]
    targets = []
    for k in keys:
        first, state = pooled(state, k)
        targets.append(np.asarray(first.info.target))
    for i, source in enumerate((0, 0, 0, 3, 3)):  # drawn at iterations 0 and 3, reused in between
        np.testing.assert_array_equal(targets[i], drawn[source])
    assert not np.array_equal(drawn[0], drawn[1])  # so reuse is seen
    assert int(state.reset_pool_age) == 2
    with pytest.raises(ValueError, match="reset_every=3 needs a rollout state made with it"):
        reset_states(env, params, plain, key, 3)
    with pytest.raises(ValueError, match="reset_every"):
        ppo.PPOConfig(reset_every=0)


def test_with_restart_on_draw_every_world_starts_from_each_draw_and_only_then():
    """Brax's full resets: at each draw of the pool (iterations 0 and 3) every world restarts from it, its
    running episode's return and length cleared; between draws the worlds run on."""
    env, params, worlds, key = PointReach(), PointReach().default_params(), 8, jax.random.PRNGKey(5)
    restart = jax.jit(lambda s, k: reset_states(env, params, s, k, 3, restart_on_draw=True))
    state = init_rollout(env, params, key, worlds, reset_every=3)
    for i, k in enumerate(jax.random.split(key, 5)):
        running = state.replace(  # worlds mid-episode: moved away from where they started, with a return
            env=state.env.replace(obs=state.env.obs + 1.0),
            episode_return=jnp.full((worlds,), 2.0),
            episode_length=jnp.full((worlds,), 7.0),
        )
        first, state = restart(running, k)
        drawn = i in (0, 3)
        np.testing.assert_array_equal(state.env.obs, first.obs if drawn else running.env.obs)
        assert float(state.episode_return.sum()) == (0.0 if drawn else 2.0 * worlds)
        assert float(state.episode_length.sum()) == (0.0 if drawn else 7.0 * worlds)
    every = jax.jit(lambda s, k: reset_states(env, params, s, k, 1, restart_on_draw=True))
    first, restarted = every(init_rollout(env, params, key, worlds), key)
    np.testing.assert_array_equal(restarted.env.obs, first.obs)


def test_training_with_a_reset_pool_starts_as_without_and_then_reuses_it():
    """The first iteration draws the pool as every iteration would; the toy's 25-step episodes all end at
    the last step of each 25-step unroll and restart from that iteration's draw, so the first two
    iterations' figures are the same with and without the pool, and the third's episodes (begun from the
    reused draw, not a new one) differ."""
    pooled = dataclasses.replace(TOY_CONFIG, reset_every=4)
    runs = [ppo.train(PointReach(), c, jax.random.PRNGKey(2), iterations=3)[1] for c in (TOY_CONFIG, pooled)]
    for i in (0, 1):
        assert runs[0][i]["episode/return"] == runs[1][i]["episode/return"]
        # the two programs are compiled apart: their updates may round a float differently (1 float32 ulp
        # of the loss, 9e-8 relative, seen with the suite's XLA flags), so 1e-6
        assert runs[0][i]["loss/total"] == pytest.approx(runs[1][i]["loss/total"], rel=1e-6)
    third = [run[2]["episode/return"] for run in runs]
    assert abs(third[0] - third[1]) > 1e-3 * abs(third[0])  # 1 % apart: episodes begun from another draw


def test_update_measures_the_parameter_change_alone():
    """The update normalises with the statistics the rollout acted with: with a negligible step the ratios
    stay 1 (KL ~0) although the iteration moves the statistics (here from their initial, empty state)."""
    env = PointReach()
    config = dataclasses.replace(
        TOY_CONFIG, learning_rate=1e-9, learning_rate_bounds=(1e-9, 1e-2), desired_kl=0.0
    )
    ts, rs = _toy_states(5, config)
    ts, rs, metrics = make_train_iteration(env, config)(ts, rs, env.default_params())
    assert float(ts.normalizer.count) == config.batch_size
    assert float(jnp.abs(ts.normalizer.mean).max()) > 0.1
    assert float(metrics["loss/approx_kl"]) < 1e-6
    assert float(metrics["loss/clip_fraction"]) == 0.0
    assert float(metrics["loss/kl_from_obs_stats"]) > 1e-3  # what the next rollout's policy moved by


def test_toy_task_is_learned():
    policy, history = ppo.train(PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), iterations=40)
    first, last = history[0]["episode/return"], history[-1]["episode/return"]
    # A random policy scores about -19; a good one reaches each target in ~10 steps (about -4).
    assert first < -15.0
    assert last > -6.0
    act = ppo.make_policy(PointReach(), TOY_CONFIG)
    assert act(policy, jnp.zeros((3, 6))).shape == (3, 2)
    # the deterministic evaluation: the same key gives the same figures; the trained mean beats the untrained
    env, key = PointReach(), jax.random.PRNGKey(5)
    trained = ppo.evaluate(env, TOY_CONFIG, policy, key, episodes=32, max_steps=25)
    assert trained == ppo.evaluate(env, TOY_CONFIG, policy, key, episodes=32, max_steps=25)
    fresh = init_train_state(env, TOY_CONFIG, jax.random.PRNGKey(1))
    untrained = ppo.Policy(params=fresh.params, normalizer=fresh.normalizer)
    before = ppo.evaluate(env, TOY_CONFIG, untrained, key, episodes=32, max_steps=25)
    assert trained.episodes == 32 and trained.nonfinite == 0 and trained.length_mean == 25.0
    assert trained.return_mean > before.return_mean + 5.0  # the trained one measured -3.2
    with pytest.raises(ValueError, match="pass max_steps"):
        ppo.evaluate(env, TOY_CONFIG, policy, key)


def test_setup_time_is_split_where_the_work_happens(monkeypatch):
    """A process 1 s old at `train`, an initial state that takes 0.2 s: the phases say so and add up."""
    slow = ppo._initial_state

    def initial_state(*args):
        time.sleep(0.2)
        return slow(*args)

    monkeypatch.setattr(ppo, "_initial_state", initial_state)
    start = time.perf_counter() - 1.0
    _, history = ppo.train(PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), iterations=2, start_time_s=start)
    first = history[0]
    # >= 1.0 fails if `start_time_s` is ignored; < 1.2 if the initial state's 0.2 s leaks into this phase
    assert 1.0 <= first["setup/before_train_s"] < 1.2
    assert first["setup/initial_state_s"] >= 0.2
    assert first["setup/first_iteration_s"] >= first["s_per_iteration"]
    phases = sum(v for k, v in first.items() if k.startswith("setup/"))
    assert phases == pytest.approx(first["setup_s"]) and not any(k.startswith("setup") for k in history[1])


class CapturingBackend:
    """A physics backend's host-side counts as MuJoCo Warp's would read if it captured 4 graphs each time."""

    def host_snapshot(self):
        return "before"

    def host_figures(self, before):
        assert before == "before"
        return {loop.GRAPH_CAPTURES: 4.0}


class CapturingReach(PointReach):
    backend = CapturingBackend()


def test_each_iteration_counts_its_graph_captures_and_reports_them_once_warm(capsys):
    """Each iteration's figures hold what the environment's engine counted during it (the graphs captured);
    past the warm iterations a capture is printed. An env without a physics backend adds no such figure."""
    _, quiet = ppo.train(PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), iterations=1)
    assert loop.GRAPH_CAPTURES not in quiet[0]
    _, history = ppo.train(
        CapturingReach(), TOY_CONFIG, jax.random.PRNGKey(0), iterations=loop.WARM_ITERATIONS + 1
    )
    assert [h[loop.GRAPH_CAPTURES] for h in history] == [4.0] * (loop.WARM_ITERATIONS + 1)
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("GRAPH CAPTURES")]
    assert printed == [loop.capture_report(history[-1])]


def test_checkpoint_restores_only_the_named_parts_whatever_the_others_hold(tmp_path):
    """A stance checkpoint of the GPU path holds MuJoCo Warp's rollout state; a model-only restore (block's
    `--init`) names just {"train": ...} and must not need the other part's structure."""
    train = {"w": jnp.arange(3.0), "n": {"count": jnp.ones((2, 2), jnp.int32)}}
    other = {"warp_only_field": jnp.ones((4, 5)), "empty": np.zeros((0,), np.float32)}
    checkpoint.save(str(tmp_path), 7, {"train": train, "rollout": other}, {"env": "stance"})
    with pytest.raises(ValueError):
        checkpoint.restore(str(tmp_path), {"train": train})
    template = jax.tree.map(lambda x: jnp.zeros_like(x), train)
    restored = checkpoint.restore(str(tmp_path), {"train": template}, only=True)
    assert list(restored) == ["train"]
    same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), restored["train"], train)
    assert all(jax.tree.leaves(same))


def test_checkpoint_resume_is_exact(tmp_path):
    key = jax.random.PRNGKey(7)
    straight, _ = ppo.train(PointReach(), TOY_CONFIG, key, iterations=4)
    ckpt = str(tmp_path / "run")
    ppo.train(PointReach(), TOY_CONFIG, key, iterations=2, checkpoint_dir=ckpt)
    assert checkpoint.latest_step(ckpt) == 2
    resumed, history = ppo.train(PointReach(), TOY_CONFIG, key, iterations=4, resume=ckpt)
    assert [h["iteration"] for h in history] == [3.0, 4.0]
    for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = ppo.PPOConfig(**{**TOY_CONFIG.to_dict(), "policy_hidden": (16,), "learning_rate": 1e-3})
    with pytest.raises(checkpoint.CheckpointMismatchError, match="learning_rate"):
        ppo.train(PointReach(), other, key, iterations=3, resume=ckpt)
    with pytest.raises(checkpoint.CheckpointMismatchError, match="policy_hidden"):
        ppo.train(PointReach(), other, key, iterations=3, init=ckpt)
    with pytest.raises(FileNotFoundError):
        ppo.train(PointReach(), TOY_CONFIG, key, iterations=3, resume=str(tmp_path / "missing"))


def test_resume_mismatch_names_just_the_differing_config_fields():
    saved = {
        "env": "block",
        "config": {"reach_m": 0.1, "w_hit": 5.0},
        "ppo": {"learning_rate": 3e-4},
        "format": checkpoint.FORMAT,
    }
    expected = {
        "env": "block",
        "config": {"reach_m": 0.1, "w_hit": 4.0, "follow_mps": 1.0},
        "ppo": {"learning_rate": 3e-4},
    }
    with pytest.raises(checkpoint.CheckpointMismatchError) as err:
        checkpoint.check_resume(saved, expected)
    lines = str(err.value).splitlines()[1:]
    assert [line.strip() for line in lines] == [
        "config.follow_mps: checkpoint has no such field, this run has 1.0",
        "config.w_hit: checkpoint has 5.0, this run has 4.0",
    ]


def test_checkpoint_format_is_stamped_and_an_older_one_seeds_but_does_not_resume(tmp_path):
    meta = {
        "env": "reach",
        "body": None,
        "observation_size": 6,
        "action_size": 2,
        "ppo": {"policy_hidden": [8]},
    }
    checkpoint.save(str(tmp_path / "c"), 1, {"x": np.zeros(2, np.float32)}, meta)
    stored = checkpoint.read_meta(str(tmp_path / "c"))
    assert checkpoint.format_of(stored) == checkpoint.FORMAT == max(checkpoint.FORMATS)
    checkpoint.check_resume(stored, meta)
    older = {k: v for k, v in stored.items() if k != "format"}
    checkpoint.check_init(older, meta)  # an older model still seeds a run
    with pytest.raises(
        checkpoint.CheckpointMismatchError, match="format 1 .made before 2026-12-02.*writes 2"
    ):
        checkpoint.check_resume(older, meta)
    squashed = {**meta, "ppo": {**meta["ppo"], "action_distribution": "tanh_normal"}}  # another policy
    for check in (checkpoint.check_resume, checkpoint.check_init):
        with pytest.raises(
            checkpoint.CheckpointMismatchError, match="ppo.action_distribution: checkpoint has no such"
        ):
            check(stored, squashed)
    newer = {**stored, "format": checkpoint.FORMAT + 1}
    for check in (checkpoint.check_resume, checkpoint.check_init):
        with pytest.raises(checkpoint.CheckpointMismatchError, match="newer than this boxjax"):
            check(newer, meta)


def test_playground_style_env_trains_unchanged():
    """A Playground-style env through `from_playground`: stepped as the raw env steps it, its state kept once
    in the adapted state, and trained for three toy iterations."""
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class PgState:
        data: jax.Array
        obs: jax.Array
        reward: jax.Array
        done: jax.Array
        metrics: dict
        info: dict

    inner = PointReach()
    params = inner.default_params()

    class PlaygroundReach:
        observation_size, action_size = 6, 2

        def reset(self, key):
            s = inner.reset(params, key)
            return PgState(
                s.data, s.obs, s.reward, s.done, s.metrics, {"target": s.info, "truncation": s.truncation}
            )

        def step(self, state, action):
            s = State(
                state.data,
                state.obs,
                state.reward,
                state.done,
                state.info["truncation"],
                state.metrics,
                state.info["target"],
            )
            s = inner.step(params, s, action)
            return PgState(
                s.data, s.obs, s.reward, s.done, s.metrics, {"target": s.info, "truncation": s.truncation}
            )

    raw, env = PlaygroundReach(), from_playground(PlaygroundReach())
    key, action = jax.random.PRNGKey(3), jnp.asarray([0.5, -0.25], jnp.float32)
    adapted, pg = env.step(None, env.reset(None, key), action), raw.step(raw.reset(key), action)
    # the Playground state is carried once (its data not also beside it), and steps as the raw env does
    assert len(jax.tree.leaves(adapted.data)) == len(jax.tree.leaves(pg))
    np.testing.assert_array_equal(adapted.obs, pg.obs)
    np.testing.assert_array_equal(adapted.data.data, pg.data)
    assert float(adapted.reward) == float(pg.reward)
    _, history = ppo.train(env, TOY_CONFIG, jax.random.PRNGKey(0), iterations=3)
    assert np.isfinite(history[-1]["episode/return"])
    assert history[-1]["episode/count"] > 0


def test_the_tanh_log_jacobian_and_the_squashed_entropy_hand_checked():
    """log(1 - tanh(x)^2) in its stable form (finite where the naive one is -inf), and the entropy
    estimate: the Gaussian's plus the log-Jacobian at the sample, summed over actions, averaged over B."""
    from boxjax.models.distributions import squashed_entropy, tanh_log_det

    x = jnp.asarray([-2.0, -0.3, 0.0, 0.7, 3.0], jnp.float32)
    np.testing.assert_allclose(
        tanh_log_det(x), np.log(1.0 - np.tanh(np.asarray(x)) ** 2), rtol=1e-5, atol=1e-6
    )
    assert np.isfinite(float(tanh_log_det(jnp.float32(40.0))))
    log_std = jnp.log(jnp.asarray([[0.5, 2.0], [1.0, 1.0]], jnp.float32))
    raw = jnp.asarray([[0.0, 1.0], [-0.5, 2.0]], jnp.float32)
    gauss = np.log([[0.5, 2.0], [1.0, 1.0]]) + 0.5 * (1.0 + np.log(2.0 * np.pi))
    want = np.mean(np.sum(gauss + np.log(1.0 - np.tanh(np.asarray(raw)) ** 2), axis=-1))
    assert float(squashed_entropy(log_std, raw)) == pytest.approx(want, rel=1e-5)


def test_the_squashed_entropy_is_brax_s_estimate():
    """Against Brax's own `NormalTanhDistribution.entropy` for the same parameters and key (skipped without
    the compare extra)."""
    distribution = pytest.importorskip("brax.training.distribution", reason="needs the compare extra (brax)")
    from boxjax.models.distributions import MIN_STD, TANH_NORMAL

    params = jax.random.normal(jax.random.PRNGKey(0), (6, 8), jnp.float32)
    key = jax.random.PRNGKey(1)
    brax = distribution.NormalTanhDistribution(event_size=4).entropy(params, key)
    mean, pre = jnp.split(params, 2, axis=-1)
    log_std = jnp.log(jax.nn.softplus(pre) + MIN_STD)
    noise = jax.random.normal(key, mean.shape)  # Brax's own draw: normal(seed, loc.shape) * scale + loc
    ours = TANH_NORMAL.entropy(log_std, TANH_NORMAL.entropy_sample(mean, log_std, noise))
    assert float(ours) == pytest.approx(float(jnp.mean(brax)), rel=1e-5)


def test_a_tanh_policy_starts_near_brax_s_scale_acts_in_bounds_and_trains():
    """The tanh_normal action distribution: a state-dependent scale starting at softplus(~0) + 0.001 (Brax's
    ~0.69), actions the tanh of the samples (and of the mean, deterministically), three toy iterations
    finite and learning; refused with distillation and on the CPU path."""
    from boxjax.rl.train_step import make_network

    config = dataclasses.replace(TOY_CONFIG, action_distribution="tanh_normal")
    env = PointReach()
    ts = init_train_state(env, config, jax.random.PRNGKey(0))
    net = make_network(env, config)
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, env.observation_size))
    mean, log_std = net.apply(ts.params, obs, method=net.policy_only)
    assert mean.shape == log_std.shape == (5, env.action_size)
    np.testing.assert_allclose(np.exp(log_std), np.log(2.0) + 0.001, atol=0.02)
    assert "log_std" not in ts.params["params"]
    policy, history = ppo.train(env, config, jax.random.PRNGKey(2), iterations=6)
    action = ppo.make_policy(env, config)(policy, obs * 100.0)
    assert float(jnp.max(jnp.abs(action))) < 1.0  # tanh, never the clip's exact bound
    assert all(np.isfinite(r["loss/entropy"]) and np.isfinite(r["loss/total"]) for r in history)
    # learning: the last two iterations' mean return above the first by more than its iteration-to-iteration
    # noise (about 2 on this toy, seeds 2-4 measured before this assertion)
    last = np.mean([r["episode/return"] for r in history[-2:]])
    assert last > history[0]["episode/return"] + 2.0
    with pytest.raises(ValueError, match="the tanh_normal action distribution does not take distillation"):
        dataclasses.replace(config, distill_coef=1.0)


def test_normalizer_floors_the_std_of_constant_features():
    """A feature constant so far (a curriculum amplitude at level 0) must not explode when it first moves."""
    norm = Normalizer.create(2).update(jnp.zeros((1000, 2), jnp.float32))
    moved = norm(jnp.asarray([0.125, 0.0], jnp.float32))
    assert float(moved[0]) == pytest.approx(0.125 / OBS_STD_FLOOR, rel=1e-5)


def test_brax_s_normalizer_is_unit_before_data_floored_at_1e_6_and_unclipped():
    """`Normalizer.create(..., "brax")` normalises as Brax's running statistics; boxjax's floors at
    `OBS_STD_FLOOR` and clips at ±10 (before any data too)."""
    obs = jnp.asarray([50.0, 0.125], jnp.float32)
    brax, ours = Normalizer.create(2, "brax"), Normalizer.create(2)
    np.testing.assert_allclose(brax(obs), obs)  # unit std before any data, no clip
    np.testing.assert_allclose(ours(obs), [10.0, 1.25])  # std = floor before any data, clipped
    constant = jnp.zeros((1000, 2), jnp.float32)
    np.testing.assert_allclose(brax.update(constant)(obs), obs / 1e-6, rtol=1e-5)
    rng = np.random.default_rng(3)
    data = rng.normal(2.0, 3.0, (200, 2))
    both = [n.update(jnp.asarray(data, jnp.float32)) for n in (brax, ours)]
    np.testing.assert_allclose(both[0].std, both[1].std)  # the same statistics where the floor is not hit
    with pytest.raises(ValueError, match="unknown observation normalizer 'acme'"):
        Normalizer.create(2, "acme")


@pytest.mark.parametrize("desired_kl", [0.0, 0.01])
def test_brax_s_normalizer_enters_the_statistics_before_the_update_at_a_fixed_step_size(desired_kl):
    """With `obs_normalizer="brax"` and a fixed step size the update sees statistics that have taken in the
    rollout (Brax's order): with a negligible step its ratios move (the rollout acted with unit statistics),
    where boxjax's order keeps them at 1 (`test_update_measures_the_parameter_change_alone`); with an
    adaptive step size (Brax's order then too) the statistics enter after the update."""
    env = PointReach()
    config = dataclasses.replace(
        TOY_CONFIG,
        learning_rate=1e-9,
        learning_rate_bounds=(1e-9, 1e-2),
        desired_kl=desired_kl,
        obs_normalizer="brax",
        network_init="lecun_uniform",  # Brax's too; its unscaled policy head feels the statistics' move
    )
    assert config.stats_before_update == (desired_kl == 0.0)
    ts, rs = _toy_states(5, config)
    assert ts.normalizer.unit_before_data and ts.normalizer.clip is None
    ts, rs, metrics = make_train_iteration(env, config)(ts, rs, env.default_params())
    assert float(ts.normalizer.count) == config.batch_size
    if config.stats_before_update:  # 0.21 and 0.51 measured (seeds 5, 6); 1e-9 with the other order
        assert float(metrics["loss/approx_kl"]) > 1e-2
    else:
        assert float(metrics["loss/approx_kl"]) < 1e-6


def test_lecun_uniform_init_is_brax_s_on_every_layer():
    """`network_init="lecun_uniform"`: every kernel uniform within sqrt(3 / fan_in) with about that
    variance (the heads unscaled, as Brax's), biases zero; the default keeps the policy head 100x small."""
    from boxjax.rl.train_step import make_network

    env = PointReach()
    wide = dataclasses.replace(TOY_CONFIG, policy_hidden=(256, 256), network_init="lecun_uniform")
    params = init_train_state(env, wide, jax.random.PRNGKey(0)).params["params"]
    for module in ("policy", "value"):
        for layer in params[module].values():
            kernel = np.asarray(layer["kernel"])
            bound = np.sqrt(3.0 / kernel.shape[0])
            assert np.abs(kernel).max() <= bound
            if kernel.size >= 512:  # enough weights for the variance to be measured (1/fan_in, within 20 %)
                assert kernel.var() == pytest.approx(1.0 / kernel.shape[0], rel=0.2)
            assert not np.any(layer["bias"])
    head = np.asarray(params["policy"]["Dense_2"]["kernel"])
    assert np.abs(head).max() > 0.5 * np.sqrt(3.0 / 256)
    ours = init_train_state(env, dataclasses.replace(wide, network_init="orthogonal"), jax.random.PRNGKey(0))
    assert np.abs(np.asarray(ours.params["params"]["policy"]["Dense_2"]["kernel"])).max() < 0.02
    with pytest.raises(ValueError, match="network_init 'xavier' is not one of"):
        dataclasses.replace(TOY_CONFIG, network_init="xavier")
    with pytest.raises(ValueError, match="obs_normalizer 'acme' is not one of"):
        dataclasses.replace(TOY_CONFIG, obs_normalizer="acme")
    assert make_network(env, wide).weight_init == "lecun_uniform"


def test_learning_rate_adapts_to_the_kl_within_bounds():
    from boxjax.rl.train_step import adapt_learning_rate, learning_rate, make_optimizer

    config = ppo.PPOConfig(
        num_envs=4, unroll_length=4, minibatch_size=16, learning_rate=1e-3, desired_kl=0.01
    )
    state = make_optimizer(config).init({"w": jnp.zeros(3)})

    def lr_after(kl, cfg=config, st=state):
        return float(learning_rate(adapt_learning_rate(cfg, st, jnp.float32(kl))))

    assert lr_after(0.05) == pytest.approx(1e-3 / 1.5)
    assert lr_after(0.001) == pytest.approx(1.5e-3)
    assert lr_after(0.01) == pytest.approx(1e-3)
    low = dataclasses.replace(config, learning_rate=1e-5)
    assert lr_after(1.0, low, make_optimizer(low).init({"w": jnp.zeros(3)})) == pytest.approx(1e-5)
    fixed = dataclasses.replace(config, desired_kl=0.0)
    assert lr_after(1.0, fixed) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="learning_rate_bounds"):
        dataclasses.replace(config, learning_rate=0.1)


def test_init_takes_the_model_of_a_checkpoint_whatever_else_it_holds(tmp_path):
    """`--init` reads params, optimiser and normaliser as stored, beside a curriculum and rollout state of
    another structure (another task, or an older version of this one)."""
    env = PointReach()
    saved = init_train_state(env, TOY_CONFIG, jax.random.PRNGKey(3))
    saved = saved.replace(normalizer=saved.normalizer.update(jnp.ones((4, env.observation_size))))
    other = saved.replace(curriculum={"older": jnp.zeros(3), "fields": jnp.ones(())})
    state = {"train": other, "rollout": {"whatever": np.zeros(2, np.float32)}}
    checkpoint.save(str(tmp_path), 7, state, ppo.run_meta(env, TOY_CONFIG))
    got = checkpoint.restore_model(str(tmp_path), init_train_state(env, TOY_CONFIG, jax.random.PRNGKey(4)))
    want = (saved.params, saved.opt_state, saved.normalizer)
    have = (got["params"], got["opt_state"], got["normalizer"])
    assert jax.tree.structure(have) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(have), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_init_takes_the_model_of_a_policy_file_and_refuses_another_network(tmp_path):
    """`--init` also takes a policy file (`export_policy.py`, the shipped teachers and blockers): its params
    and normaliser, a fresh optimiser; a file of another network is refused by name, and training starts."""
    env = PointReach()
    trained, _ = ppo.train(env, TOY_CONFIG, jax.random.PRNGKey(3), iterations=2)
    path = str(tmp_path / "policy.msgpack")
    meta = ppo.run_meta(env, TOY_CONFIG)
    checkpoint.save_policy(path, {"params": trained.params, "normalizer": trained.normalizer}, meta)
    template = init_train_state(env, TOY_CONFIG, jax.random.PRNGKey(4))
    got = checkpoint.init_model(path, template, meta)
    assert set(got) == {"params", "normalizer"}  # the optimiser state stays the fresh one
    for a, b in zip(jax.tree.leaves((got["params"], got["normalizer"])),
                    jax.tree.leaves((trained.params, trained.normalizer)), strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    wider = dataclasses.replace(TOY_CONFIG, policy_hidden=(64, 64))
    with pytest.raises(checkpoint.CheckpointMismatchError, match="ppo.policy_hidden"):
        checkpoint.init_model(
            path, init_train_state(env, wider, jax.random.PRNGKey(4)), ppo.run_meta(env, wider)
        )
    _, history = ppo.train(env, TOY_CONFIG, jax.random.PRNGKey(5), iterations=1, init=path)
    assert np.isfinite(history[0]["loss/total"])
    for name, content in (("README.md", b"# boxjax\n"), ("other.msgpack", b"\x81\xa1a\x01")):
        foreign = tmp_path / name
        foreign.write_bytes(content)
        with pytest.raises(checkpoint.CheckpointMismatchError, match="neither a checkpoint directory nor"):
            checkpoint.init_model(str(foreign), template, meta)


def test_run_options_come_as_one_dataclass_or_single_fields_and_bad_ones_are_named():
    options = loop.RunOptions(iterations=2, checkpoint_every=1)
    _, history = ppo.train(PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), options, iterations=3)
    assert [h["iteration"] for h in history] == [1.0, 2.0, 3.0]  # the field replaced the dataclass's
    with pytest.raises(TypeError, match=r"unknown run options \['iteration'\]"):
        ppo.train(PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), iteration=3)
    with pytest.raises(ValueError, match="RunOptions.checkpoint_every must be positive, got 0"):
        loop.RunOptions(checkpoint_every=0)


def test_the_policy_is_handed_over_during_training_and_its_last_one_is_the_result():
    handed = []
    policy, history = ppo.train(
        PointReach(), TOY_CONFIG, jax.random.PRNGKey(0), iterations=5, policy_every=2,
        policy_fn=lambda done, policy: handed.append((done, policy)),
    )  # fmt: skip
    assert [done for done, _ in handed] == [2, 4, 5]  # every 2nd iteration, and after the last
    for got, want in zip(jax.tree.leaves(handed[-1][1]), jax.tree.leaves(policy), strict=True):
        np.testing.assert_array_equal(got, want)
    first, last = (np.concatenate([np.ravel(x) for x in jax.tree.leaves(p)]) for _, p in handed[::2])
    assert not np.array_equal(first, last)  # the policy of iteration 2 is not the final one
    with pytest.raises(ValueError, match="RunOptions.policy_every must be positive, got 0"):
        loop.RunOptions(policy_every=0)
    with pytest.raises(ValueError, match="policy_fn: this training path cannot hand its policy over"):
        loop.drive(lambda: (1, {}), lambda done: True, loop.RunOptions(policy_fn=print), 0, (1, 1), None)


def test_the_renamed_flags_read_as_their_typed_choices():
    """`tanh_policy` and `brax_advantages` (before 2026-12-06) are read from stored configs as
    `action_distribution` and `batch_layout`; a default choice is left out as `to_dict` leaves it, so an
    older run's stored config still equals a new run's; a bad choice is named."""
    old = {**TOY_CONFIG.to_dict(), "tanh_policy": True, "brax_advantages": False}
    assert checkpoint.current_ppo_fields(old) == {
        **TOY_CONFIG.to_dict(),
        "action_distribution": "tanh_normal",
    }
    config = ppo.PPOConfig.from_dict(old)
    assert (config.action_distribution, config.batch_layout) == ("tanh_normal", "transitions")
    plain = {**TOY_CONFIG.to_dict(), "tanh_policy": False}
    assert checkpoint.current_meta({"env": "reach", "ppo": plain}) == {
        "env": "reach",
        "ppo": TOY_CONFIG.to_dict(),
    }
    with pytest.raises(
        ValueError, match="PPOConfig.batch_layout 'steps' is not one of: transitions, unrolls"
    ):
        dataclasses.replace(TOY_CONFIG, batch_layout="steps")
    with pytest.raises(
        ValueError, match="action_distribution 'beta' is not one of: clipped_normal, tanh_normal"
    ):
        dataclasses.replace(TOY_CONFIG, action_distribution="beta")
