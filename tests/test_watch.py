"""Watching a policy and logging for TensorBoard: `boxjax watch` renders a tiny block checkpoint's
episodes to a GIF with MuJoCo's renderer (in a child process: MuJoCo binds its OpenGL backend on import, and
this process imported it without one), the rollout trace keeps every step, the camera, labels and GL
choice behave, and `--tensorboard`'s event file reads back in TensorBoard's own reader."""

import argparse
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from boxjax import platform, runs
from boxjax.cli import common, watch

STEPS = 3
EPISODES = 2
WIDTH, HEIGHT = 96, 64


@pytest.fixture(scope="module")
def gl_backend() -> str:
    """The OpenGL backend MuJoCo renders with here; the rendering tests skip, saying why, without one."""
    try:
        return platform.choose_gl(os.environ.get("MUJOCO_GL"))
    except platform.PlatformError as err:
        pytest.skip(f"no OpenGL backend for MuJoCo's offscreen renderer: {err}")


@pytest.fixture(scope="module")
def block_checkpoint(tmp_path_factory) -> str:
    """An untrained block policy of the simple body (small network) written as a checkpoint. The task's arm
    fit, punch score and vision are left out of its step (`BlockConfig.ablate`), which makes its rollout
    compile in about half the time; the video draws the rays from its own record of the poses."""
    from boxjax import envs
    from boxjax.models import checkpoint
    from boxjax.rl import ppo
    from boxjax.rl.train_step import init_train_state

    env = envs.make(
        "block", body="simple", impl="jax", num_worlds=EPISODES, ablate=("ik", "scoring", "vision")
    )
    config = ppo.PPOConfig(
        num_envs=2, unroll_length=4, minibatch_size=4, policy_hidden=(16,), value_hidden=(16,)
    )
    directory = str(tmp_path_factory.mktemp("block") / "checkpoints")
    state = init_train_state(env, config, jax.random.PRNGKey(0))
    checkpoint.save(directory, 0, {"train": state}, ppo.run_meta(env, config))
    return directory


@pytest.fixture(scope="module")
def video(gl_backend, block_checkpoint, tmp_path_factory) -> tuple[str, str]:
    """(GIF path, stdout) of `watch.py` on the checkpoint: face episodes with rays and labels."""
    pytest.importorskip("imageio", reason="the watch extra (imageio) is not installed")
    out = str(tmp_path_factory.mktemp("video") / "fighter.gif")
    command = [
        sys.executable, "-m", "boxjax", "watch", block_checkpoint, "--kind", "face",
        "--episodes", str(EPISODES), "--steps", str(STEPS), "--size", f"{WIDTH}x{HEIGHT}", "--rays",
        "--labels", "--out", out, "--cache", os.environ["BOXJAX_TEST_CACHE_DIR"],
    ]  # fmt: skip
    env = {**os.environ, "MUJOCO_GL": gl_backend}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def _gif_frames(path: str) -> tuple[list[np.ndarray], list[int]]:
    """(RGB frames, delays in ms) of a GIF, read with Pillow."""
    from PIL import Image, ImageSequence

    with Image.open(path) as gif:
        pairs = [(np.asarray(f.convert("RGB")), f.info["duration"]) for f in ImageSequence.Iterator(gif)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def test_the_video_holds_every_step_of_both_episodes(video):
    path, stdout = video
    assert f"frames={[STEPS + 1] * EPISODES}" in stdout
    frames, delays_ms = _gif_frames(path)
    assert all(f.shape == (HEIGHT, WIDTH, 3) for f in frames)
    # 40 Hz control: every 2nd frame kept at 50 ms (Pillow merges identical frames, adding their delays)
    assert sum(delays_ms) == 50 * (EPISODES * (STEPS + 1) // 2)
    assert all(len(np.unique(f.reshape(-1, 3), axis=0)) > 20 for f in frames), "a frame of one colour"


def test_face_episodes_show_the_vision_rays(video):
    frames, _ = _gif_frames(video[0])
    # the rays' green (VISIBLE_RGBA) is nowhere else in the scene: tan fighters, red gloves, grey floor
    green = [np.sum((f[..., 1] > 150) & (f[..., 0] < 120) & (f[..., 2] < 140)) for f in frames]
    assert min(green) > 0, green


def test_block_options_are_refused_for_other_tasks_and_kinds_are_named():
    args = argparse.Namespace(kind="face", rays=True, targets=False, labels=False, episodes=1, steps=None)
    with pytest.raises(
        ValueError, match="--kind, --rays: only for the block task; this checkpoint is of 'stance'"
    ):
        watch.check_options(args, "stance")
    watch.check_options(args, "block")
    with pytest.raises(ValueError, match="--kind 'punch': valid kinds are face, command, walk, bag, shove"):
        watch.check_options(argparse.Namespace(**{**vars(args), "kind": "punch"}), "block")


def test_a_policy_file_acts_like_its_checkpoint_and_a_bad_one_is_named(block_checkpoint, tmp_path, capsys):
    from boxjax.cli import export
    from boxjax.models import checkpoint

    path = str(tmp_path / "policy.msgpack")
    assert export.main([block_checkpoint, path]) == 0
    assert "export: block body=simple step 0" in capsys.readouterr().out
    meta = checkpoint.read_meta(block_checkpoint)
    _, _, want = watch.load(block_checkpoint, meta, 1)
    _, _, got = watch.load(path, checkpoint.read_policy_meta(path), 1)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_array_equal(a, b)
    # the same file whose meta claims a wider network: the leaves do not fit, and say so
    other = {**meta, "ppo": {**meta["ppo"], "policy_hidden": [32]}}
    wrong = str(tmp_path / "wrong.msgpack")
    checkpoint.save_policy(wrong, {"params": got.params, "normalizer": got.normalizer}, other)
    with pytest.raises(checkpoint.CheckpointMismatchError, match="params leaves of another shape"):
        watch.load(wrong, other, 1)


def test_shipped_blockers_load_for_their_bodies_and_a_missing_one_is_named():
    from boxjax.cli import policies
    from boxjax.models import checkpoint

    assert policies.shipped_bodies() == ["muscular", "muscular-fast"]
    shipped = [(body, watch.shipped_blocker(body)) for body in policies.shipped_bodies()]
    for body, path in [*shipped, ("muscular", policies.DEFENCE_BLOCKER)]:
        meta = checkpoint.read_policy_meta(path)
        assert meta["env"] == "block" and meta["body"] == body
        env, _, policy = watch.load(path, meta, 1)
        assert env.config.body == body and all(np.isfinite(x).all() for x in jax.tree.leaves(policy))
    with pytest.raises(ValueError, match="no trained blocker ships for body 'giant'"):
        watch.shipped_blocker("giant")
    with pytest.raises(ValueError, match="or --body for a shipped blocker"):
        watch.shipped_blocker(None)


def test_a_forced_kind_is_the_only_one_drawn():
    @struct.dataclass
    class Params:
        kind_weights: jax.Array

    params = watch.forced_kind(Params(kind_weights=jnp.ones(5)), "bag")
    np.testing.assert_array_equal(params.kind_weights, [0, 0, 0, 1, 0])


def test_without_gl_the_error_names_what_to_install():
    with pytest.raises(platform.PlatformError, match="apt install libegl1 .* apt install libosmesa6"):
        platform.choose_gl(None, works=lambda backend: False)
    assert platform.choose_gl(None, works=lambda backend: backend == "osmesa") == "osmesa"
    with pytest.raises(platform.PlatformError, match="MUJOCO_GL=glx cannot render here"):
        platform.choose_gl("glx", works=lambda backend: False)


def test_the_camera_frames_the_pair_or_our_fighter_alone():
    from boxjax.viz import render

    ours = np.array([0.0, 0.0, 0.9])
    lookat, azimuth, distance = render.camera_pose(ours, np.array([1.0, 0.0, 0.9]))
    np.testing.assert_allclose(lookat, [0.5, 0.0, 0.9])
    assert azimuth == 90.0 and distance == render.SOLO_DISTANCE_M + render.PAIR_DISTANCE_GAIN
    parked = np.array([0.0, -6.0, 0.9])  # the opponent outside face episodes
    for theirs in (parked, None):
        lookat, azimuth, distance = render.camera_pose(ours, theirs)
        np.testing.assert_allclose(lookat, ours)
        assert (azimuth, distance) == (render.SOLO_AZIMUTH_DEG, render.SOLO_DISTANCE_M)


def test_the_command_targets_turn_with_our_heading():
    import mujoco

    from boxjax import mjcf
    from boxjax.viz import overlays

    model, arena = mjcf.build("simple")
    me = arena.red
    data = mujoco.MjData(model)
    data.qpos[me.qpos_adr + 3 : me.qpos_adr + 7] = (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))  # +90 deg
    mujoco.mj_kinematics(model, data)
    marks = overlays.BlockMarks(vision=None, root_qpos_adr=me.qpos_adr, head_body=me.head_body)
    offset = np.array([[0.3, 0.1, -0.2], [0.3, -0.1, -0.2]])  # forward, left, up from the head
    targets = overlays.command_targets(marks, data, offset) - data.xpos[me.head_body]
    np.testing.assert_allclose(targets, [[-0.1, 0.3, -0.2], [0.1, 0.3, -0.2]], atol=1e-6)


def test_punch_outcomes_are_labelled_for_a_while_naming_the_target_and_the_score():
    from boxjax.viz import render

    flags = {k: np.zeros(8) for k in ("blocked", "parried", "missed", "hit", "clean", "hit_score")}
    flags["qpos"] = np.zeros((8, 3))
    flags["target"] = np.zeros(8, np.int32)  # head
    flags["blocked"][1] = 1.0
    flags["hit"][4], flags["hit_score"][4], flags["target"][4] = 1.0, 0.5, 1
    labels = render.outcome_labels(flags, hold_frames=2)
    partly = "punch on our body: score 0.50 of 1 (partly blocked)"
    assert labels == ["", *["punch on our head: blocked"] * 2, "", partly, partly, "", ""]
    assert (
        render.outcome(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, "head") == "punch on our head: score 1.00 of 1 (clean)"
    )
    assert render.outcome(0.0, 0.0, 1.0, 0.0, 0.0, 0.0) == "punch on us: missed"
    assert render.outcome(1.0, 1.0, 0.0, 0.0, 0.0, 0.0, "body") == "punch on our body: parried"


def test_a_face_frame_names_the_fighters_and_leaves_the_bag_out():
    import mujoco

    from boxjax import mjcf
    from boxjax.viz import render

    model, _ = mjcf.build("simple", opponent=True, bag=True)
    model = render._drawing_model(model, WIDTH, HEIGHT)
    data = mujoco.MjData(model)
    scene = mujoco.MjvScene(model, maxgeom=500)
    tools = (mujoco.MjvCamera(), mujoco.MjvOption())
    bag = set(np.flatnonzero(model.geom_bodyid == model.body(render.BAG).id).tolist())
    step = {
        "qpos": model.qpos0.copy(),
        "mocap_pos": data.mocap_pos.copy(),
        "mocap_quat": data.mocap_quat.copy(),
    }
    view = render.View(WIDTH, HEIGHT, labels=True)
    drawn = {}
    for face in (True, False):
        render.compose(
            scene, model, data, tools, {**step, "face": np.bool_(face)}, view, "punch on us: missed"
        )
        geoms = [scene.geoms[i] for i in range(scene.ngeom)]
        drawn[face] = {g.objid for g in geoms if g.objtype == mujoco.mjtObj.mjOBJ_GEOM}
        labels = [g.label for g in geoms if g.type == mujoco.mjtGeom.mjGEOM_LABEL]
        assert labels == ["ours", "opponent", "punch on us:", "missed"]  # in two lines
    assert bag and not bag & drawn[True] and bag <= drawn[False]
    assert drawn[True] | bag == drawn[False]  # the fighters and floor drawn either way


def test_the_trace_keeps_every_step_and_finished_worlds_stay_as_they_ended():
    from boxjax import envs
    from boxjax.rl import ppo, trace
    from boxjax.rl.train_step import init_train_state

    env = envs.make("reach")
    config = ppo.PPOConfig(
        num_envs=2, unroll_length=2, minibatch_size=2, policy_hidden=(8,), value_hidden=(8,)
    )
    state = init_train_state(env, config, jax.random.PRNGKey(0))
    policy = ppo.Policy(params=state.params, normalizer=state.normalizer)
    params = env.default_params().replace(max_steps=jnp.int32(5))

    def record(state):
        return {"step": state.info.step, "pos": state.data}

    key = jax.random.PRNGKey(1)
    records, frames = trace.trace(env, config, policy, key, record, episodes=2, steps=8, env_params=params)
    np.testing.assert_array_equal(frames, [6, 6])  # the reset and 5 steps
    np.testing.assert_array_equal(records["step"][:, 0], [0, 1, 2, 3, 4, 5, 5, 5, 5])
    assert records["pos"].shape == (9, 2, 2) and np.any(records["pos"][5] != records["pos"][0])
    np.testing.assert_array_equal(records["pos"][5:], np.broadcast_to(records["pos"][5], (4, 2, 2)))
    again, _ = trace.trace(env, config, policy, key, record, episodes=2, steps=8, env_params=params)
    np.testing.assert_array_equal(again["pos"], records["pos"])  # the policy's mean, the same resets


def test_a_gif_is_written_without_ffmpeg(tmp_path):
    pytest.importorskip("imageio", reason="the watch extra (imageio) is not installed")
    from boxjax.viz import video

    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, (6, 3), dtype=np.uint8)
    frames = colours[rng.integers(0, 6, (5, 16, 24))]  # few colours: the GIF's palette holds them exactly
    path = video.write_video(str(tmp_path / "a.gif"), frames, fps=40.0)
    read, delays_ms = _gif_frames(path)
    assert len(read) == 3 and delays_ms == [50, 50, 50]  # frames 0, 2, 4 at 20 per second
    np.testing.assert_array_equal(read[1], frames[2])
    with pytest.raises(ValueError, match="must end in .gif or .mp4"):
        video.write_video(str(tmp_path / "a.avi"), frames, fps=40.0)


def test_tensorboard_scalars_read_back_and_a_resume_replaces_the_rerun_iterations(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra (tensorboardX) is not installed")
    pytest.importorskip(
        "tensorboard", reason="the tensorboard extra (tensorboard, the reader) is not installed"
    )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = common.base_parser("a training CLI", "boxjax train").parse_args(
        ["--tensorboard", "--iterations", "3"]
    )
    first = runs.open_progress(args, str(tmp_path))
    board = str(tmp_path / "tensorboard")
    for it in (1, 2, 3):
        first(_figures(it, 10.0 * it))
    first.close()
    time.sleep(1.1)  # tensorboardX names its event file by the second
    resumed = runs.Progress(4, str(tmp_path / "metrics.jsonl"), keep_through=2, tensorboard=board)
    for it in (3, 4):
        resumed(_figures(it, -1.0 * it))
    resumed.close()
    log = EventAccumulator(board)
    log.Reload()
    assert {"episode/return", "s_per_iteration"} <= set(log.Tags()["scalars"])
    got = [(e.step, e.value) for e in log.Scalars("episode/return")]
    assert got == [(1, 10.0), (2, 20.0), (3, -3.0), (4, -4.0)]


def _figures(iteration: int, episode_return: float) -> dict:
    """The figures `Progress` shows of one iteration."""
    return {
        "iteration": float(iteration), "s_per_iteration": 0.5, "steps_per_s": 100.0,
        "episode/return": episode_return, "episode/fall_rate": 0.0, "episode/length": 10.0,
    }  # fmt: skip
