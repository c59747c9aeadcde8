"""`boxjax eval RUN --crossplay` on the CPU (simple body, two face worlds, MJX's JAX physics): a self-play
checkpoint's blocker against the scripted punches and its own opponent, a row per pair; an opponent whose
network outputs zero throws exactly the scripted punches (the same counts). The checkpoint holds fresh
models (no training: only the model is read)."""

import json

import jax
import jax.numpy as jnp
import pytest

from boxjax import envs
from boxjax.bench.defence import rollout, tally
from boxjax.cli import eval as eval_cli
from boxjax.cli import policies
from boxjax.models import checkpoint
from boxjax.rl import ppo
from boxjax.rl.train_step import init_train_state

WORLDS, STEPS = 2, 48
OPTIONS = {"opponent_policy": "learned", "episode_s": 1.2, "ablate": ("ik",)}
"""Face episodes never use the command's arm fit: without it the rollouts compile in half the time."""
CONFIG = ppo.PPOConfig(
    num_envs=WORLDS, unroll_length=4, minibatch_size=8, policy_hidden=(16,), value_hidden=(16,)
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """runs/NAME/checkpoints of a self-play run: fresh models of both agents at step 0."""
    env = envs.make("block", body="simple", impl="jax", num_worlds=WORLDS, **OPTIONS)
    directory = tmp_path_factory.mktemp("selfplay") / "checkpoints"
    state = init_train_state(env, CONFIG, jax.random.PRNGKey(3))
    checkpoint.save(str(directory), 0, {"train": jax.device_get(state)}, ppo.run_meta(env, CONFIG))
    return str(directory.parent)


def test_crossplay_plays_each_pair_and_a_silent_opponent_is_the_scripted_one(run_dir, tmp_path, capsys):
    """Two rows (the step-0 blocker against the scripted punches and against the step-0 opponent) and the
    table; the pair with an opponent whose weights are all zero (mean action 0) counts exactly what the
    scripted pair counts."""
    argv = [run_dir, "--crossplay", "--platform", "jax", "--worlds", str(WORLDS), "--steps", str(STEPS)]
    assert eval_cli.main([*argv, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| blocker \\ opponent | scripted | step 0 |" in printed
    rows = [json.loads(line) for path in tmp_path.glob("crossplay-*.jsonl") for line in open(path)]
    assert [(r["blocker"], r["opponent"]) for r in rows] == [("step 0", "scripted"), ("step 0", "step 0")]
    scripted = rows[0]
    assert scripted["arrived"] >= 1 and scripted["hit"]["total"] == scripted["arrived"]

    source = f"{run_dir}/checkpoints"
    meta = policies.read_meta(source)
    env = envs.make("block", impl="jax", num_worlds=WORLDS, **policies.task_options(meta))
    blocker = policies.restore(source, meta, env, 0, "blocker")[1]
    opponent = policies.restore(source, meta, env, 0, "opponent")[1]
    silent = opponent.replace(params=jax.tree.map(jnp.zeros_like, opponent.params))
    act = rollout.agents_actor(env, ppo.PPOConfig.from_dict(meta["ppo"]))
    counts = rollout.jax_tally(env, act, {"blocker": blocker, "opponent": silent}, "face", WORLDS, STEPS, 0)
    figures = tally.defence(counts)
    assert (figures.arrived, figures.hit.count, figures.blocked.count) == (
        scripted["arrived"],
        scripted["hit"]["count"],
        scripted["blocked"]["count"],
    )


def test_crossplay_takes_a_self_play_run_on_the_jax_env(run_dir):
    """--crossplay on the CPU path, or with --checkpoints, is refused naming why."""
    with pytest.raises(ValueError, match="--platform gpu or jax"):
        eval_cli.main([run_dir, "--crossplay", "--platform", "cpu"])
    with pytest.raises(ValueError, match="no --checkpoints"):
        eval_cli.main([run_dir, "--crossplay", "--checkpoints", "--platform", "jax"])


def test_a_self_play_blocker_is_measured_against_the_scripted_punches(run_dir):
    """`boxjax eval` of a self-play run's blocker (defence and skill curves) builds the task with the
    scripted opponent, on the CPU path too (which has no learned one)."""
    meta = policies.read_meta(f"{run_dir}/checkpoints")
    assert meta["config"]["opponent_policy"] == "learned"
    args = eval_cli.parser().parse_args([run_dir, "--platform", "cpu"])
    env = eval_cli.build_env(args, meta, "classic")
    assert env.config.opponent_policy == "scripted"
