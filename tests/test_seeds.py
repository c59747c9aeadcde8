"""Seeds as a batch dimension (`boxjax.rl.seeds`): one seed is the plain run, each seed of a batched run is
its own plain run, checkpoints hold every seed, and the figures come per seed and across the seeds."""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from boxjax.cli import common
from boxjax.envs.toy import PointReach
from boxjax.models import checkpoint
from boxjax.rl import ppo, seeds
from boxjax.rl.train_step import init_train_state, make_train_iteration

CONFIG = ppo.PPOConfig(
    num_envs=16,
    unroll_length=25,
    minibatch_size=200,
    learning_rate=3e-3,
    policy_hidden=(16, 16),
    value_hidden=(16, 16),
    entropy_coef=0.0,
)
TWO = dataclasses.replace(CONFIG, num_seeds=2)
KEY = jax.random.PRNGKey(11)
ITERATIONS = 3
DEVICE_FIGURES = ("episode/", "env/", "loss/", "guard/", "curriculum/", "solved")
"""Figures the iteration computes (the rest are the host's: timing, set-up, counters)."""
RTOL, ATOL = 1e-4, 1e-6
"""Tolerance of a batched seed against its plain run. XLA's CPU reductions sum in another order under vmap
(a sum over axis 0 of a (400, 6) array differs in the last bit from the same sum over axis 1 of (2, 400,
6)), so the update and the observation statistics differ by rounding and the runs drift apart: measured
over 3 iterations of this config, keys 0-2 and both seeds, at most 6.0e-6 of a state leaf's largest value
and 6.7e-6 relative (|a - b| / (|b| + 1e-3)) on the figures; 1.6e-5 and 1.4e-5 after 10 iterations. The
first rollout and its batch are equal bit for bit (same keys, same parameters)."""


@functools.cache
def plain_run(seed: int):
    """The plain run of the key seed `seed` of the batched run gets (`seeds.seed_keys`)."""
    key = seeds.seed_keys(KEY, TWO.num_seeds)[seed]
    return ppo.train_run(PointReach(), CONFIG, key, iterations=ITERATIONS)


@functools.cache
def batched_run():
    """The two-seed run of `KEY`."""
    return ppo.train_run(PointReach(), TWO, KEY, iterations=ITERATIONS)


def _device_figures(row: dict[str, float], prefix: str = "") -> dict[str, float]:
    names = tuple(prefix + name for name in DEVICE_FIGURES)
    return {k[len(prefix) :]: v for k, v in row.items() if k.startswith(names)}


def _assert_close(a, b, exact: bool = False):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        if exact or not np.issubdtype(y.dtype, np.floating):
            np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL * max(1.0, float(np.max(np.abs(y)))))


def test_one_seed_is_the_plain_iteration_chain_bit_for_bit():
    """`num_seeds` 1 runs the plain program (no seed axis, no vmap): the same parameters and figures as
    `make_train_iteration` driven by hand from the same initial state, and the same stored config."""
    result, history = plain_run(0)
    assert ppo.PPOConfig(num_seeds=1).to_dict() == ppo.PPOConfig().to_dict()
    assert "num_seeds" not in ppo.PPOConfig().to_dict()  # the checkpoints' meta as before
    env = PointReach()
    key = seeds.seed_keys(KEY, 2)[0]
    ts, rs = ppo.own_buffers(ppo._initial_state(env, CONFIG, env.default_params(), key, None, None, None))
    fn = make_train_iteration(env, CONFIG)
    for row in history:
        ts, rs, metrics = fn(ts, rs, env.default_params())
        assert _device_figures(row) == {k: float(v) for k, v in jax.device_get(metrics).items()}
    _assert_close(result.train_state, ts, exact=True)
    _assert_close(result.rollout_state, rs, exact=True)
    assert not any(k.startswith("seed") for row in history for k in row)
    assert not seeds.has_seed_axis(result.train_state)


def test_each_seed_of_a_batched_run_is_its_own_plain_run():
    """Seed s of a two-seed run against the plain run of key `seed_keys(KEY, 2)[s]` (seed 0: `KEY` itself):
    parameters, optimiser, statistics, worlds and every figure, to `RTOL`/`ATOL` (see there); episode
    counts and lengths exactly. The figures across the seeds are the mean, the worst seed's guard figure
    and the least `solved`; `policy_of` takes either seed's policy, `train` returns seed 0's."""
    result, history = batched_run()
    assert [row["iteration"] for row in history] == [1.0, 2.0, 3.0]
    assert np.shape(result.train_state.iteration) == (2,)
    for seed in range(2):
        plain, plain_history = plain_run(seed)
        _assert_close(seeds.take(result.train_state, seed), plain.train_state)
        _assert_close(seeds.take(result.rollout_state, seed), plain.rollout_state)
        _assert_close(ppo.policy_of(result.train_state, seed), ppo.policy_of(plain.train_state))
        for row, plain_row in zip(history, plain_history, strict=True):
            mine, theirs = _device_figures(row, f"seed{seed}/"), _device_figures(plain_row)
            assert mine.keys() == theirs.keys()
            for name in ("episode/count", "episode/length"):
                assert mine[name] == theirs[name]
            np.testing.assert_allclose(list(mine.values()), list(theirs.values()), rtol=RTOL, atol=ATOL)
    for row in history:
        per_seed = [_device_figures(row, f"seed{s}/") for s in range(2)]
        assert row["episode/return"] == pytest.approx(np.mean([f["episode/return"] for f in per_seed]))
        assert row["guard/skipped_steps"] == max(f["guard/skipped_steps"] for f in per_seed)
        assert row["solved"] == min(f["solved"] for f in per_seed)
        assert row["env_steps"] == row["iteration"] * TWO.batch_size


def test_the_figures_across_seeds_leave_out_seeds_without_episodes_and_keep_the_worst():
    metrics = {
        "episode/count": np.float32([4.0, 0.0]),
        "episode/return": np.float32([-3.0, 0.0]),  # seed 1: no episode ended, a placeholder
        "guard/skipped_steps": np.float32([0.0, 2.0]),
        "env/overflow/contacts": np.float32([1.0, 0.0]),
        "solved": np.float32([1.0, 0.0]),
        "loss/total": np.float32([1.0, 2.0]),
    }
    figures = seeds.host_figures(metrics)
    assert figures["episode/return"] == -3.0 and figures["episode/count"] == 2.0
    assert figures["guard/skipped_steps"] == 2.0 and figures["env/overflow/contacts"] == 1.0
    assert figures["solved"] == 0.0 and figures["loss/total"] == 1.5
    assert figures["seed1/guard/skipped_steps"] == 2.0 and figures["seed0/episode/return"] == -3.0
    assert len(figures) == 3 * len(metrics)


def test_checkpoints_hold_every_seed_resume_exactly_and_a_plain_model_starts_every_seed(tmp_path):
    """A two-seed checkpoint holds the seed axis; resumed, the run ends as the straight one bit for bit (one
    program either way); another seed count is refused. A plain run's model (`init`) starts both seeds."""
    straight, _ = batched_run()
    ckpt = str(tmp_path / "two")
    ppo.train_run(PointReach(), TWO, KEY, iterations=2, checkpoint_dir=ckpt)
    stored = checkpoint.restore(ckpt, {"train": straight.train_state, "rollout": straight.rollout_state})
    assert np.shape(stored["train"].iteration) == (2,)
    resumed, history = ppo.train_run(PointReach(), TWO, KEY, iterations=ITERATIONS, resume=ckpt)
    assert [row["iteration"] for row in history] == [3.0]
    _assert_close(resumed.train_state, straight.train_state, exact=True)
    three = dataclasses.replace(TWO, num_seeds=3)
    with pytest.raises(checkpoint.CheckpointMismatchError, match="num_seeds"):
        ppo.train_run(PointReach(), three, KEY, iterations=ITERATIONS, resume=ckpt)
    one, plain = str(tmp_path / "one"), plain_run(0)[0]
    meta = ppo.run_meta(PointReach(), CONFIG)
    assert ppo._save(one, ITERATIONS, plain.train_state, plain.rollout_state, meta, None, None)
    started, _ = ppo.train_run(PointReach(), TWO, KEY, iterations=0, init=one)
    for seed in range(2):
        _assert_close(seeds.take(started.train_state.params, seed), plain.train_state.params, exact=True)
    with pytest.raises(ValueError, match="holds 2 seeds"):
        ppo.train_run(PointReach(), three, KEY, iterations=0, init=ckpt)


def test_seeds_are_a_config_field_and_a_flag_refused_where_they_cannot_run():
    with pytest.raises(ValueError, match="num_seeds"):
        ppo.PPOConfig(num_seeds=0)
    with pytest.raises(ValueError, match="one device"):
        ppo.PPOConfig(num_seeds=2, num_devices=2)
    with pytest.raises(ValueError, match="CPU workers"):  # the CPU path's learner state is made here
        init_train_state(PointReach(), TWO, KEY)
    with pytest.raises(ValueError, match="one seed"):
        ppo.policy_of(plain_run(0)[0].train_state, 1)
    parser = common.base_parser("", "boxjax train")
    assert common.ppo_overrides(parser.parse_args(["--seeds", "3"]))["num_seeds"] == 3
    assert "num_seeds" not in common.ppo_overrides(parser.parse_args([]))
    assert seeds.seed_keys(KEY, 2)[0] is KEY
    np.testing.assert_array_equal(seeds.seed_keys(KEY, 2)[1], jax.random.fold_in(KEY, 1))
