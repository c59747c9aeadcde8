"""Self-play end to end on the CPU (simple body, two worlds, MJX's JAX physics): `boxjax train --task block
--env opponent_policy=learned` trains both fighters one iteration; `boxjax eval RUN --crossplay` plays the
checkpoint's blocker against the scripted punches and its own opponent, a row per pair; an opponent whose
network outputs zero throws exactly the scripted punches (the same counts)."""

import json

import jax
import jax.numpy as jnp
import pytest

from boxjax import envs
from boxjax.bench.defence import rollout, tally
from boxjax.cli import eval as eval_cli
from boxjax.cli import policies
from boxjax.rl import ppo

WORLDS, STEPS = 2, 48
CLI = [
    "--body", "simple", "--platform", "cpu", "--mode", "fused", "--envs", str(WORLDS), "--unroll", "4",
    "--minibatch", "8", "--epochs", "1", "--ppo", "policy_hidden=16", "--ppo", "value_hidden=16",
    "--teacher", "none", "--env", "opponent_policy=learned", "--env", "episode_s=1.2", "--env", "ablate=ik",
]  # fmt: skip
"""A tiny self-play run; without the command's arm fit (face episodes never use it) the programs compile in
half the time."""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A self-play run trained one iteration by `boxjax train --task block` (its folder, with checkpoints/ at
    step 1): both fighters learn, and the run's figures carry each agent's."""
    from boxjax import platform
    from boxjax.cli import block as block_cli

    root = tmp_path_factory.mktemp("selfplay")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setattr(platform, "configure", lambda *args, **kwargs: None)  # JAX already runs here
        assert block_cli.main([*CLI, "--iterations", "1", "--checkpoint-every", "1", "--name", "sp"]) == 0
    run = root / "runs" / "sp"
    figures = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert figures["agent/blocker/learns"] == figures["agent/opponent/learns"] == 1.0
    assert "agent/opponent/reward" in figures and "agent/opponent/loss/total" in figures
    return str(run)


def test_crossplay_plays_each_pair_and_a_silent_opponent_is_the_scripted_one(run_dir, tmp_path, capsys):
    """Two rows (the step-0 blocker against the scripted punches and against the step-0 opponent) and the
    table; the pair with an opponent whose weights are all zero (mean action 0) counts exactly what the
    scripted pair counts."""
    argv = [run_dir, "--crossplay", "--platform", "jax", "--worlds", str(WORLDS), "--steps", str(STEPS)]
    assert eval_cli.main([*argv, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| blocker \\ opponent | scripted | step 1 |" in printed
    rows = [json.loads(line) for path in tmp_path.glob("crossplay-*.jsonl") for line in open(path)]
    assert [(r["blocker"], r["opponent"]) for r in rows] == [("step 1", "scripted"), ("step 1", "step 1")]
    scripted = rows[0]
    assert scripted["arrived"] >= 1 and scripted["hit"]["total"] == scripted["arrived"]

    source = f"{run_dir}/checkpoints"
    meta = policies.read_meta(source)
    env = envs.make("block", impl="jax", num_worlds=WORLDS, **policies.task_options(meta))
    blocker = policies.restore(source, meta, env, 1, "blocker")[1]
    opponent = policies.restore(source, meta, env, 1, "opponent")[1]
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
    learned = envs.make("block", impl="jax", num_worlds=WORLDS, **policies.task_options(meta))
    alone = policies.restore(f"{run_dir}/checkpoints", meta, env)[1]
    beside = policies.restore(f"{run_dir}/checkpoints", meta, learned, None, "blocker")[1]
    assert all(
        bool(jnp.array_equal(a, b))
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(beside), strict=True)
    )


def test_crossplay_plays_a_model_that_did_not_change_once():
    """Versions bit-identical across steps (a frozen agent) make one label and one model; a change in one
    weight by one ulp makes a version of its own."""
    frozen = {"w": jnp.ones((3,)), "b": jnp.zeros((2,))}
    nudged = {"w": frozen["w"].at[1].set(jnp.nextafter(1.0, 2.0)), "b": frozen["b"]}
    versions = eval_cli.distinct_versions({100: frozen, 200: frozen, 300: frozen, 400: nudged})
    assert list(versions) == ["steps 100-300, 3 identical", "step 400"]
    assert versions["step 400"] is nudged
    assert list(eval_cli.distinct_versions({5: frozen})) == ["step 5"]
