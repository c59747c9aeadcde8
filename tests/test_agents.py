"""Several learners in one iteration (`boxjax.rl.agents`) on the two-point chase (`boxjax.envs.toy`): each
agent's update touches its own model only, a frozen agent stays bit for bit, turns alternate, checkpoints
hold every agent and resume exactly, a single-agent model seeds the primary agent, and the layer knows no
task."""

import dataclasses
import functools
import subprocess
import sys

import jax
import numpy as np
import pytest

from boxjax.envs.toy import PointChase
from boxjax.models import checkpoint
from boxjax.rl import agents, ppo

CONFIG = ppo.PPOConfig(
    num_envs=16,
    unroll_length=25,
    minibatch_size=200,
    learning_rate=3e-3,
    policy_hidden=(16, 16),
    value_hidden=(16, 16),
    entropy_coef=0.0,
)
KEY = jax.random.PRNGKey(5)


@functools.cache
def run(iterations: int, **fields):
    """A chase run of `iterations` with PPO fields replaced (cached: several tests read one run)."""
    config = dataclasses.replace(CONFIG, **fields)
    return ppo.train_run(PointChase(), config, KEY, iterations=iterations)


def _equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def _model(state, name: str):
    view = agents.agent_state(state, name)
    return view.params, view.opt_state, view.normalizer


def test_each_update_changes_its_own_model_only():
    """Turns of one iteration (one compiled program): after iteration 0 the runner's model moved and the
    chaser's is bit for bit the fresh one; after iteration 1 the chaser's moved and the runner's is bit for
    bit its model after iteration 0. With both learning, the runner's model after one iteration is the one it
    gets beside a frozen chaser (same rollout, its own transitions) up to the rounding of another compiled
    program: measured at most 6e-8 (parameters, this config, the suite's XLA flags); tolerance 1e-6."""
    fresh = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0)[0].train_state
    first, second = (run(n, agent_turn_iterations=1)[0].train_state for n in (1, 2))
    assert not _equal(_model(first, "runner")[0], _model(fresh, "runner")[0])
    assert _equal(_model(first, "chaser"), _model(fresh, "chaser"))
    assert not _equal(_model(second, "chaser")[0], _model(first, "chaser")[0])
    assert _equal(_model(second, "runner"), _model(first, "runner"))
    both, frozen = run(1)[0].train_state, run(1, frozen_agents=("chaser",))[0].train_state
    for x, y in zip(
        jax.tree.leaves(_model(both, "runner")), jax.tree.leaves(_model(frozen, "runner")), strict=True
    ):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    assert not _equal(_model(both, "chaser")[0], _model(fresh, "chaser")[0])


def test_a_frozen_agent_stays_bit_for_bit_and_turns_alternate():
    """Frozen for 3 iterations, the runner's params, optimiser state and normaliser are the fresh ones; with
    turns of one iteration, the runner learns at iterations 0 and 2, the chaser at 1 (the figures say so)."""
    frozen, history = run(3, frozen_agents=("runner",))
    fresh = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0)[0]
    assert _equal(_model(frozen.train_state, "runner"), _model(fresh.train_state, "runner"))
    assert [row["agent/runner/learns"] for row in history] == [0.0, 0.0, 0.0]
    assert [row["agent/chaser/learns"] for row in history] == [1.0, 1.0, 1.0]
    _, turns = run(3, agent_turn_iterations=1)
    assert [row["agent/runner/learns"] for row in turns] == [1.0, 0.0, 1.0]
    assert [row["agent/chaser/learns"] for row in turns] == [0.0, 1.0, 0.0]
    assert turns[1]["loss/total"] == 0.0 and turns[1]["agent/chaser/loss/total"] != 0.0


def test_the_chaser_learns_to_close_in():
    """40 iterations: the learning chaser's mean reward (minus its distance to the runner, m) over the last
    five iterations beats a frozen chaser's in the same run by more than 0.1 m (measured on this config,
    keys 5-9: 0.20 to 0.63 m; 0.53 m at this key)."""
    rewards = {}
    for frozen in ((), ("chaser",)):
        history = run(40, frozen_agents=frozen)[1]
        rewards[frozen] = np.mean([row["agent/chaser/reward"] for row in history[-5:]])
    assert rewards[()] - rewards[("chaser",)] > 0.1, rewards


def test_checkpoints_hold_every_agent_and_resume_exactly(tmp_path):
    """Two iterations checkpointed, resumed to three: both agents' models equal the straight run's bit for
    bit; the meta names the agents; `policy_of` needs an agent's name."""
    straight, _ = run(3)
    ckpt = str(tmp_path / "chase")
    ppo.train_run(PointChase(), CONFIG, KEY, iterations=2, checkpoint_dir=ckpt)
    assert [a["name"] for a in checkpoint.read_meta(ckpt)["agents"]] == ["runner", "chaser"]
    resumed, history = ppo.train_run(PointChase(), CONFIG, KEY, iterations=3, resume=ckpt)
    assert [row["iteration"] for row in history] == [3.0]
    assert _equal(resumed.train_state, straight.train_state)
    with pytest.raises(ValueError, match="name the agent"):
        ppo.policy_of(resumed.train_state)
    assert _equal(
        ppo.policy_of(resumed.train_state, agent="chaser").params, resumed.train_state.params["chaser"]
    )


class SoloRunner(PointChase):
    """The chase as a single-agent env: the runner alone learns, the chaser stands (zero action)."""

    agents = ()


def test_a_single_agent_model_seeds_the_primary_agent(tmp_path):
    """`--init` from a single-agent run's checkpoint: the runner starts from its model, the chaser fresh."""
    ckpt = str(tmp_path / "solo")
    solo, _ = ppo.train_run(SoloRunner(), CONFIG, KEY, iterations=1, checkpoint_dir=ckpt)
    seeded = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0, init=ckpt)[0]
    fresh = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0)[0]
    assert _equal(seeded.train_state.params["runner"], solo.train_state.params)
    assert _equal(seeded.train_state.normalizer["runner"], solo.train_state.normalizer)
    assert _equal(seeded.train_state.params["chaser"], fresh.train_state.params["chaser"])


def test_bad_agent_configs_are_refused():
    """An unknown frozen agent, every agent frozen, or several seeds: a clear error naming the field."""
    with pytest.raises(ValueError, match=r"frozen_agents names \['boxer'\]"):
        run(1, frozen_agents=("boxer",))
    with pytest.raises(ValueError, match="freezes every agent"):
        run(1, frozen_agents=("runner", "chaser"))
    with pytest.raises(ValueError, match="num_seeds 2"):
        run(1, num_seeds=2)


def test_the_layer_knows_no_task():
    """Importing the PPO layer (several learners included) loads no task package."""
    code = (
        "import sys, boxjax.rl.ppo, boxjax.rl.agents;"
        "tasks = [m for m in sys.modules if m.startswith(('boxjax.envs.block', 'boxjax.envs.stance',"
        " 'boxjax.envs.walk'))];"
        "assert not tasks, tasks"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pool_of_snapshots_plays_some_worlds_and_their_steps_are_not_learned():
    """Pool of 2, a snapshot every 2 iterations, every reset drawing a snapshot (share 1): the pool fills at
    iterations 0 and 2; once filled, every world whose episode restarted is played on one side by a snapshot,
    each side in some worlds; the snapshot in slot 0 is the fresh model bit for bit."""
    state, history = run(4, pool_size=2, pool_every=2, pool_share=1.0)
    assert [row["pool/filled"] for row in history] == [1.0, 1.0, 2.0, 2.0]
    shares = [(row["agent/runner/snapshot_share"], row["agent/chaser/snapshot_share"]) for row in history]
    assert shares[0] == (0.0, 0.0)  # no world has restarted yet (25-step episodes, 25-step unrolls)
    # every world restarts at step 25 and, share 1, has exactly one side played by a snapshot
    assert all(runner + chaser == 1.0 and runner > 0 and chaser > 0 for runner, chaser in shares[1:]), shares
    fresh = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0)[0].train_state
    slot0 = jax.tree.map(lambda x: x[0], state.train_state.pool.params)
    assert _equal(slot0, fresh.params)


def test_transitions_a_snapshot_acted_for_do_not_move_the_loss():
    """The loss of a batch with some transitions weighted 0 is the loss of the batch without them."""
    from boxjax.rl.losses import LossBatch, ppo_loss

    rng = np.random.default_rng(0)
    batch = LossBatch(
        obs=np.zeros((8, 1), np.float32),
        action=rng.normal(size=(8, 2)).astype(np.float32),
        log_prob=rng.normal(size=8).astype(np.float32),
        advantage=rng.normal(size=8).astype(np.float32),
        target=rng.normal(size=8).astype(np.float32),
    )
    mean, log_std, value = rng.normal(size=(8, 2)), np.zeros(2), rng.normal(size=8)
    weight = np.array([1, 0, 1, 1, 0, 1, 0, 1], np.float32)
    kept = weight > 0
    args = dict(clip_eps=0.2, value_coef=0.5, entropy_coef=0.01, normalize_advantages=True)
    weighted = ppo_loss(mean, log_std, value, batch.replace(weight=weight), **args)
    alone = ppo_loss(mean[kept], log_std, value[kept], jax.tree.map(lambda x: x[kept], batch), **args)
    for a, b in zip(jax.tree.leaves(weighted), jax.tree.leaves(alone), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_trace_acts_with_every_agents_policy():
    """`trace` with a dict of policies: each agent acts by its own (the chaser moves); a missing agent takes
    its zero action, as one whose network outputs zero does (the same trace bit for bit)."""
    from boxjax.rl import trace

    state = run(3)[0].train_state
    runner, chaser = (ppo.policy_of(state, agent=name) for name in ("runner", "chaser"))
    silent = chaser.replace(params=jax.tree.map(np.zeros_like, chaser.params))

    def chased(policies):
        records, _ = trace.trace(PointChase(), CONFIG, policies, KEY, lambda s: s.data, episodes=4, steps=10)
        return records.chaser

    moving, alone, zero = (
        chased({"runner": runner, "chaser": chaser}),
        chased({"runner": runner}),
        chased({"runner": runner, "chaser": silent}),
    )
    assert np.abs(moving[-1] - moving[0]).max() > 0.05
    assert np.array_equal(alone[-1], alone[0]) and np.array_equal(zero, alone)


def test_a_run_with_a_pool_resumes_exactly(tmp_path):
    """Two iterations with a pool checkpointed, resumed to four: the pool, the worlds' faces and both
    models equal the straight run's bit for bit."""
    fields = dict(pool_size=2, pool_every=2, pool_share=1.0)
    straight = run(4, **fields)[0]
    ckpt = str(tmp_path / "pool")
    config = dataclasses.replace(CONFIG, **fields)
    ppo.train_run(PointChase(), config, KEY, iterations=2, checkpoint_dir=ckpt)
    resumed = ppo.train_run(PointChase(), config, KEY, iterations=4, resume=ckpt)[0]
    assert _equal(resumed.train_state, straight.train_state)
    assert _equal(resumed.rollout_state.faces, straight.rollout_state.faces)


def test_the_guard_reads_every_agents_figures():
    """The unprefixed guard figures the host's stop rules read are the largest over the agents: a co-agent's
    skipped update shows there although the primary agent's was clean."""
    names = ("guard/update_skipped", "guard/nonfinite/loss")
    clean = {k: np.float32(0.0) for k in names}
    learned = {
        "runner": agents.Learned(params=None, opt_state=None, normalizer=None, terms=None, figures=clean),
        "chaser": agents.Learned(
            params=None,
            opt_state=None,
            normalizer=None,
            terms=None,
            figures={**clean, names[0]: np.float32(1.0)},
        ),
    }
    assert {k: float(v) for k, v in agents.guard_figures(learned).items()} == {names[0]: 1.0, names[1]: 0.0}


def test_a_policy_file_of_one_agent_loads_as_that_agent(tmp_path):
    """The chaser's policy file (`boxjax export --agent chaser`'s meta) restores as the chaser's policy,
    refuses to pass for the runner's, and seeds the chaser of a new run (the runner starting fresh)."""
    from boxjax.cli import export, policies

    state = run(3)[0].train_state
    chaser = ppo.policy_of(state, agent="chaser")
    meta = export.one_agent({**ppo.run_meta(PointChase(), CONFIG)}, "chaser")
    assert (meta["agent"], meta["observation_size"], "agents" in meta) == ("chaser", 4, False)
    path = str(tmp_path / "chaser.msgpack")
    checkpoint.save_policy(path, {"params": chaser.params, "normalizer": chaser.normalizer}, meta)
    _, loaded = policies.restore(path, meta, PointChase())
    assert _equal(loaded.params, chaser.params)
    with pytest.raises(ValueError, match="holds agent 'chaser'"):
        policies.restore(path, meta, PointChase(), agent="runner")
    seeded = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0, init=path)[0].train_state
    fresh = ppo.train_run(PointChase(), CONFIG, KEY, iterations=0)[0].train_state
    assert _equal(seeded.params["chaser"], chaser.params)
    assert _equal(seeded.params["runner"], fresh.params["runner"])


def test_options_of_several_agents_are_refused_where_they_cannot_apply():
    """A pool beside a frozen agent, and any option of several agents for a single-agent env."""
    from boxjax.envs.toy import PointReach

    with pytest.raises(ValueError, match="snapshots of a frozen agent"):
        run(1, pool_size=2, frozen_agents=("runner",))
    config = dataclasses.replace(CONFIG, frozen_agents=("policy",))
    with pytest.raises(ValueError, match="options of several agents"):
        ppo.train_run(PointReach(), config, KEY, iterations=1)


def test_an_agents_reward_figure_counts_the_steps_it_played_itself():
    """With a pool, `agent/NAME/reward` is the mean over the agent's own steps: a snapshot's steps (weight 0)
    carrying a reward of 100 leave it at the mean of the others."""
    from boxjax.rl.rollout import Transition

    reward = np.array([[1.0, 100.0], [3.0, 100.0]], np.float32)  # (T, N): world 1 played by a snapshot
    zeros, own = np.zeros_like(reward), np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
    traj = Transition(obs=zeros, action=zeros, log_prob=zeros, reward=reward, next_obs=zeros,
                      termination=zeros, done=zeros, weight=own)  # fmt: skip
    figures = agents._agent_figures("runner", None, traj, True, primary=True)
    assert float(figures["agent/runner/reward"]) == 2.0
    alone = agents._agent_figures("runner", None, traj.replace(weight=None), True, primary=True)
    assert float(alone["agent/runner/reward"]) == 51.0
