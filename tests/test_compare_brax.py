"""The Brax comparison's own parts (`boxjax.bench.brax`): the matched config, overrides, the evaluation
spacing, steady throughput, rows and the plot; Brax itself only where the `compare` extra is installed (the
whole comparison is a GPU benchmark, not a test)."""

import inspect
import json
import math
import os
import sys

import pytest

from boxjax.bench import brax as compare_brax
from boxjax.rl import presets

DM_CONTROL = {
    "num_timesteps": 60_000_000, "num_evals": 10, "reward_scaling": 10.0, "episode_length": 1000,
    "normalize_observations": True, "action_repeat": 1, "unroll_length": 30, "num_minibatches": 32,
    "num_updates_per_batch": 16, "discounting": 0.995, "learning_rate": 1e-3, "entropy_cost": 1e-2,
    "num_envs": 2048, "batch_size": 1024, "num_resets_per_eval": 10,
}  # fmt: skip
"""The Playground's published DM Control Suite configuration (playground 0.2.0)."""


def test_from_brax_matches_the_brax_configuration_and_takes_overrides_on_top():
    config = presets.from_brax(DM_CONTROL, {})
    # one iteration is one Brax training step: 16 unrolls of 30 steps, GAE in windows of 30
    assert presets.brax_unrolls_per_update(DM_CONTROL) == 16
    assert (config.num_envs, config.unroll_length, config.gae_window) == (2048, 480, 30)
    assert config.minibatch_size == 30_720
    assert (config.num_epochs, config.learning_rate, config.desired_kl) == (16, 1e-3, 0.0)
    assert (config.gamma, config.entropy_coef, config.reward_scale, config.clip_eps) == (
        0.995,
        0.01,
        10.0,
        0.3,
    )
    assert config.max_grad_norm == presets.NO_CLIP and config.normalize_observations
    assert (config.policy_hidden, config.value_hidden) == ((32,) * 4, (256,) * 5)
    assert config.action_distribution == "tanh_normal"
    assert (config.network_init, config.obs_normalizer, config.batch_layout) == (
        "lecun_uniform",
        "brax",
        "unrolls",
    )
    assert config.stats_before_update  # Brax's order with the configuration's fixed step size
    assert presets.from_brax({**DM_CONTROL, "vf_loss_coefficient": 0.25}, {}).value_coef == 0.25
    with pytest.raises(ValueError, match="bootstrap_on_timeout"):
        presets.from_brax({**DM_CONTROL, "bootstrap_on_timeout": True}, {})
    normal = {**DM_CONTROL, "network_factory": {"distribution_type": "normal"}}
    assert presets.from_brax(normal, {}).action_distribution == "clipped_normal"
    assert presets.from_brax(normal, {}).init_log_std == 0.0  # Brax's init_noise_std 1.0
    with pytest.raises(ValueError, match="unknown Brax distribution_type 'beta'"):
        presets.from_brax({**DM_CONTROL, "network_factory": {"distribution_type": "beta"}}, {})
    assert (config.gae_lambda, config.normalize_advantages, config.learning_rate_bounds) == (
        0.95,
        True,
        (1e-5, 1e-2),
    )
    # Brax resets all its environments after each epoch of one training step (10 per evaluation period):
    # every iteration, every world restarting from the draw
    assert config.reset_every == 1 == presets.brax_reset_every(DM_CONTROL, 983_040) and config.restart_on_draw
    once = {**DM_CONTROL, "num_resets_per_eval": 0}
    assert not presets.from_brax(once, {}).restart_on_draw
    assert (
        presets.brax_reset_every(once, 983_040) == presets.brax_schedule(once)[1] // 983_040 + 1
    )  # one draw
    # per sample, the same gradient steps: Brax 16 passes x 32 minibatches over 32,768 trajectories
    assert config.num_epochs * config.num_minibatches / config.batch_size == pytest.approx(
        16 * 32 / (1024 * 32 * 30)
    )
    # an override that changes the iteration's size keeps Brax's cadence: 16 iterations of 30 steps
    small = presets.from_brax(DM_CONTROL, {"unroll_length": 30, "minibatch_size": 1920})
    assert (small.reset_every, small.gae_window, small.restart_on_draw) == (16, 30, True)
    with pytest.raises(ValueError, match=r"batch_size x num_minibatches \(1000 x 32\) must be a positive"):
        presets.from_brax({**DM_CONTROL, "batch_size": 1000}, {})
    named = {**DM_CONTROL, "network_factory": {"policy_hidden_layer_sizes": (128, 128)}, "max_grad_norm": 1.0,
             "learning_rate_schedule": "ADAPTIVE_KL", "desired_kl": 0.02, "gae_lambda": 0.9,
             "normalize_advantage": False}  # fmt: skip
    config = presets.from_brax(named, {"init_log_std": -1.0})
    assert (config.policy_hidden, config.value_hidden) == ((128, 128), (256,) * 5)
    assert (config.max_grad_norm, config.desired_kl, config.init_log_std) == (1.0, 0.02, -1.0)
    assert (config.gae_lambda, config.normalize_advantages) == (0.9, False)


def test_overrides_parse_literals_and_name_an_unknown_key():
    config = {"num_envs": 2048, "impl": "warp"}
    compare_brax.override(config, ["num_envs=16", "impl=jax"], "--brax")
    assert config == {"num_envs": 16, "impl": "jax"}
    with pytest.raises(ValueError, match=r"bad --env-config override 'nope=1'.*\['impl', 'num_envs'\]"):
        compare_brax.override(config, ["nope=1"], "--env-config")
    compare_brax.override(
        config, ["max_grad_norm=1.0"], "--brax", also=("max_grad_norm",)
    )  # a train() argument
    assert config["max_grad_norm"] == 1.0


def test_both_train_brax_s_schedule_and_evaluate_at_its_points():
    # Brax: 9 periods of whole updates of 1,024 x 30 x 32 steps, 10 resets per period: 60 M rounds up
    per_update = 1024 * 30 * 32
    spacing, total = presets.brax_schedule(DM_CONTROL)
    assert spacing == math.ceil(60e6 / (9 * per_update * 10)) * per_update * 10 and total == 9 * spacing
    assert total == 88_473_600  # not the 60 M asked: Brax fills whole periods
    config = presets.from_brax(DM_CONTROL, {})
    assert compare_brax.boxjax_schedule(DM_CONTROL, config) == (per_update, total // per_update, 10)
    repeat = {**DM_CONTROL, "action_repeat": 4}  # environment steps count the repeat, as Brax's do
    assert compare_brax.boxjax_schedule(repeat, config)[0] == 4 * per_update
    with pytest.raises(ValueError, match="not a multiple of boxjax's 14,336 per iteration"):
        compare_brax.boxjax_schedule(DM_CONTROL, presets.from_brax(DM_CONTROL, {"unroll_length": 7,
                                     "gae_window": 7, "minibatch_size": 2048 * 7}))  # fmt: skip
    with pytest.raises(ValueError, match="--evals must be >= 3"):
        presets.brax_schedule({**DM_CONTROL, "num_evals": 2})


def test_steady_throughput_leaves_the_first_epoch_out():
    curve = compare_brax.Curve(
        "brax", points=[(0, 0.0, 1.0), (100, 50.0, 2.0), (300, 52.0, 3.0), (500, 54.0, 4.0)]
    )
    assert curve.steady_steps_per_s() == pytest.approx(400 / 4.0)  # the compile-heavy first epoch left out
    with pytest.raises(ValueError, match="boxjax: steady steps/s needs 2 evaluation points"):
        compare_brax.Curve("boxjax", points=[(0, 0.0, 1.0), (100, 5.0, 2.0)]).steady_steps_per_s()


def test_rows_name_each_framework_and_the_plot_is_written(tmp_path):
    curves = [
        compare_brax.Curve(
            "brax", [(0, 0.0, 1.0), (10, 5.0, 2.0), (20, 6.0, 3.0)], first_s=9.0, first_steps=10
        ),
        compare_brax.Curve(
            "boxjax", [(10, 4.0, 2.5), (20, 4.5, 3.5)], first_s=7.0, first_steps=2, nonfinite=2
        ),
    ]
    rows = compare_brax.rows(curves, {"env": "E", "device": "d", "commit": "c"})
    got = {(r["framework"], r["metric"]): r["value"] for r in rows}
    assert got[("brax", "steps_per_s")] == 10.0 and got[("boxjax", "steps_per_s")] == 20.0
    assert got[("boxjax", "eval_return")] == 3.5 and got[("boxjax", "nonfinite_worlds")] == 2.0
    # set-up: the first epoch's (iteration's) time less its steps at the steady rate
    assert got[("brax", "setup_s")] == 9.0 - 10 / 10.0 and got[("boxjax", "setup_s")] == 7.0 - 2 / 20.0
    assert all(r["env"] == "E" and r["commit"] == "c" for r in rows)
    json.dumps(rows)
    compare_brax.plot(curves, "E", str(tmp_path / "curves.png"))
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_with_brax_installed_its_network_defaults_and_the_jax_shims_hold():
    networks = pytest.importorskip(
        "brax.training.agents.ppo.networks", reason="the compare extra is not installed"
    )
    defaults = inspect.signature(networks.make_ppo_networks).parameters
    for name, want in presets.BRAX_NETWORK_DEFAULTS.items():
        got = defaults[name].default
        assert (tuple(got) if isinstance(want, tuple) else got) == want
    import jax
    import numpy as np

    compare_brax.brax_compat()
    stacked = jax.device_put_replicated({"w": np.arange(3.0)}, jax.devices()[:1])
    assert stacked["w"].shape == (1, 3) and not math.isnan(float(stacked["w"].sum()))


SHARDED_CHECK = """
import jax, numpy as np
from boxjax.bench import brax as compare_brax
compare_brax.brax_compat()
devices = jax.devices()
assert len(devices) == 2
placed = [jax.device_put(np.full(3, float(i)), d) for i, d in enumerate(devices)]
sharded = jax.device_put_sharded(placed, devices)
replicated = jax.device_put_replicated({"w": np.arange(3.0)}, devices)
assert sharded.shape == (2, 3) and np.asarray(sharded).tolist() == [[0.0] * 3, [1.0] * 3]
assert replicated["w"].shape == (2, 3) and len(replicated["w"].sharding.device_set) == 2
print("ok")
"""


def test_the_jax_shims_place_one_slice_per_device_on_two_devices():
    import subprocess

    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", SHARDED_CHECK], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_with_brax_installed_the_profile_times_every_part_on_a_toy_size(tmp_path):
    """`boxjax.bench.profile_ppo` end to end on the CPU at toy sizes (3 min here, mostly compiling; skipped
    without the `compare` extra, as in CI): one row per part, each a positive figure, the rows naming the
    reset pool's cycle the iteration was timed over (Brax resets all worlds after each training step, of
    16 x 4 / 32 = 2 unrolls of 5 steps: every boxjax iteration of 32 worlds x 10 steps)."""
    pytest.importorskip("mujoco_playground", reason="needs the compare extra (brax, playground)")
    from boxjax.bench import profile_ppo

    sizes = [
        "num_envs=32",
        "batch_size=16",
        "num_minibatches=4",
        "unroll_length=5",
        "num_updates_per_batch=2",
        "num_timesteps=320",
        "num_resets_per_eval=1",
    ]
    argv = ["CartpoleBalance", "--platform", "cpu", "--repeats", "2", "--env-config", "impl=jax"]
    argv += [a for size in sizes for a in ("--brax", size)] + ["--out", str(tmp_path)]
    assert profile_ppo.main(argv) == 0
    (path,) = tmp_path.iterdir()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    metrics = {row["metric"]: row["value"] for row in rows}
    assert set(metrics) == {"physics_steps_per_s", "brax_env_step_ms", "reset_ms", "env_step_ms",
                            "rollout_ms", "gae_ms", "update_ms", "s_per_iteration",
                            "steps_per_s"}  # fmt: skip
    assert all(v > 0 for v in metrics.values())
    assert metrics["steps_per_s"] == pytest.approx(32 * 10 / metrics["s_per_iteration"])
    assert {row["worlds"] for row in rows} == {32} and all(row["commit"] for row in rows)
    assert {row["reset_every"] for row in rows} == {1}  # Brax resets after each training step: one iteration
