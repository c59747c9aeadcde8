"""Data-parallel PPO on 2 host CPU devices: matches one device, parameters stay identical, checkpoints move.

XLA's host device count is fixed when JAX starts, and the rest of the suite runs in this process with one
device, so the checks needing two devices run once in a subprocess (this file run as a script, with
`--xla_force_host_platform_device_count=2`) that prints its findings as JSON; the tests read them.

Tolerance: the sharded iteration draws the same random numbers as the single-device one; with one
minibatch per epoch only summation order differs (all-reduced gradients and statistics), so every state
leaf agrees to `STATE_TOL` after several iterations and the figures to `METRIC_TOL` (both as
|a - b| / (1 + |a|)).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from boxjax.models import checkpoint
from boxjax.rl import ppo, sharding

STATE_TOL = 1e-5
METRIC_TOL = 1e-4

# One minibatch per epoch (batch 16 x 8 = 128), so one and two devices compute the same update.
CONFIG = ppo.PPOConfig(
    num_envs=16,
    unroll_length=8,
    minibatch_size=128,
    num_epochs=2,
    learning_rate=3e-3,
    policy_hidden=(16,),
    value_hidden=(16,),
)


def _max_diff(a, b) -> float:
    """Largest |a - b| / (1 + |a|) over the leaves of two pytrees."""
    import jax
    import numpy as np

    def diff(x, y) -> float:
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        return float(np.max(np.abs(x - y) / (1.0 + np.abs(x)), initial=0.0))

    return max(diff(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def _metric_diff(h1: list[dict], h2: list[dict]) -> float:
    keys = [k for k in h1[0] if k.startswith(("episode/", "loss/", "env/", "curriculum/"))]
    return max(abs(a[k] - b[k]) / (1.0 + abs(a[k])) for a, b in zip(h1, h2, strict=True) for k in keys)


def _iteration_checks(out: dict) -> None:
    """Two-device iteration vs one-device iteration on the same worlds; replicas identical."""
    import jax
    import numpy as np

    from boxjax.envs.toy import PointReach
    from boxjax.rl.rollout import init_rollout
    from boxjax.rl.train_step import init_train_state, make_train_iteration

    env, key = PointReach(), jax.random.PRNGKey(3)
    params = env.default_params()
    ts, rs = init_train_state(env, CONFIG, key), init_rollout(env, params, key, CONFIG.num_envs)
    one = make_train_iteration(env, CONFIG)
    ts1, rs1 = ppo.own_buffers((ts, rs))
    for split_minibatches in (False, True):
        config = dataclasses.replace(CONFIG, num_devices=2)
        if split_minibatches:
            config = dataclasses.replace(config, minibatch_size=32)
        dp = sharding.DataParallel(env, config, params, jax.devices()[:2])
        ts2, rs2 = dp.replicate(ts), dp.init_rollout(key)
        out.setdefault("init_rollout_diff", _max_diff(rs, dp.to_host(ts2, rs2)[1]))
        replicas_equal = True
        for _ in range(4):  # 32 steps: every 25-step episode ends once
            ts2, rs2, m2 = dp.iteration(ts2, rs2, dp.env_params)
            for leaf in jax.tree.leaves(ts2):
                shards = [np.asarray(s.data) for s in leaf.addressable_shards]
                replicas_equal &= len(shards) == 2 and all(np.array_equal(shards[0], s) for s in shards)
            if not split_minibatches:
                ts1, rs1, m1 = one(ts1, rs1, params)
                host_ts, host_rs = dp.to_host(ts2, rs2)
                out["params_diff"] = max(out.get("params_diff", 0.0), _max_diff(ts1.params, host_ts.params))
                out["normalizer_diff"] = max(
                    out.get("normalizer_diff", 0.0), _max_diff(ts1.normalizer, host_ts.normalizer)
                )
                out["rollout_diff"] = max(out.get("rollout_diff", 0.0), _max_diff(rs1, host_rs))
                figures = [{k: float(v) for k, v in m.items()} for m in (m1, m2)]
                out["metric_diff"] = max(
                    out.get("metric_diff", 0.0), _metric_diff([figures[0]], [figures[1]])
                )
        key_name = "replicas_equal_split" if split_minibatches else "replicas_equal"
        out[key_name] = bool(replicas_equal)
        out[key_name + "_cache"] = dp.iteration._cache_size()
        out["episodes_counted"] = float(m2["episode/count"])
    _reset_pool_checks(out, env, params, key)


def _reset_pool_checks(out: dict, env, params, key) -> None:
    """With a reset pool (drawn every 2 iterations) two devices draw and reuse it as one does, and with
    every world restarting from each draw (`restart_on_draw`) and GAE in windows of 4 steps (keys
    `restart_*`), and with the tanh-normal policy (`tanh_*`) too."""
    import jax

    from boxjax.rl.rollout import init_rollout
    from boxjax.rl.train_step import init_train_state, make_train_iteration

    variants = {
        "pool": {},
        "restart": {"restart_on_draw": True, "gae_window": 4},
        "tanh": {
            "action_distribution": "tanh_normal"
        },  # its entropy noise drawn per transition, as on one device
    }
    for prefix, fields in variants.items():
        pooled = dataclasses.replace(CONFIG, reset_every=2, **fields)
        ts = init_train_state(env, pooled, key)
        ts1, rs1 = ppo.own_buffers((ts, init_rollout(env, params, key, pooled.num_envs, reset_every=2)))
        dp = sharding.DataParallel(env, dataclasses.replace(pooled, num_devices=2), params, jax.devices()[:2])
        ts2, rs2 = dp.replicate(ts), dp.init_rollout(key)
        one = make_train_iteration(env, pooled)
        for _ in range(4):
            ts1, rs1, _ = one(ts1, rs1, params)
            ts2, rs2, _ = dp.iteration(ts2, rs2, dp.env_params)
        host_ts, host_rs = dp.to_host(ts2, rs2)
        out[f"{prefix}_rollout_diff"] = _max_diff(rs1, host_rs)
        out[f"{prefix}_params_diff"] = _max_diff(ts1.params, host_ts.params)
        out[f"{prefix}_age"] = int(host_rs.reset_pool_age)


def _checkpoint_checks(out: dict, tmp: str) -> None:
    """Resume 2 -> 1, 1 -> 2 and 2 -> 2 devices against uninterrupted runs."""
    import jax

    from boxjax.envs.toy import PointReach

    def run(devices: int, iterations: int, **kw):
        config = dataclasses.replace(CONFIG, num_devices=devices)
        result, history = ppo.train_run(
            PointReach(), config, jax.random.PRNGKey(7), iterations=iterations, **kw
        )
        return result, history

    straight = {d: run(d, 4) for d in (1, 2)}
    out["straight_diff"] = _max_diff(straight[1][0].train_state.params, straight[2][0].train_state.params)
    for saved, resumed in ((2, 1), (1, 2), (2, 2)):
        ckpt = os.path.join(tmp, f"run{saved}{resumed}")
        run(saved, 2, checkpoint_dir=ckpt)
        result, history = run(resumed, 4, resume=ckpt)
        ref, ref_history = straight[resumed]
        name = f"resume_{saved}_{resumed}"
        out[name + "_iterations"] = [h["iteration"] for h in history]
        out[name + "_params_diff"] = _max_diff(result.train_state.params, ref.train_state.params)
        out[name + "_state_diff"] = _max_diff(
            _host(result.rollout_state, resumed), _host(ref.rollout_state, resumed)
        )
        out[name + "_metric_diff"] = _metric_diff(history, ref_history[2:])
    policy, _ = ppo.train(
        PointReach(), dataclasses.replace(CONFIG, num_devices=2), jax.random.PRNGKey(0), iterations=1
    )
    act = ppo.make_policy(PointReach(), CONFIG)
    out["policy_action_shape"] = list(act(policy, jax.numpy.zeros((3, 6))).shape)


def _host(rollout_state, devices: int):
    """Rollout leaves in the one-device layout (world leaves of the toy env only)."""
    import jax
    import numpy as np

    if devices == 1:
        return rollout_state
    return jax.tree.map(
        lambda x: np.asarray(x).reshape((x.shape[0] * x.shape[1], *x.shape[2:])), rollout_state
    )


def _worker(tmp: str) -> None:
    import jax

    out: dict = {"devices": len(jax.devices())}
    _iteration_checks(out)
    _checkpoint_checks(out, tmp)
    print("RESULT " + json.dumps(out), flush=True)


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["JAX_PLATFORMS"] = "cpu"
    tmp = str(tmp_path_factory.mktemp("multidevice"))
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), tmp],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-6000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["devices"] == 2
    return result


def test_sharded_iteration_matches_one_device(two_devices):
    assert two_devices["init_rollout_diff"] == 0.0
    assert two_devices["params_diff"] < STATE_TOL
    assert two_devices["normalizer_diff"] < STATE_TOL
    assert two_devices["rollout_diff"] < STATE_TOL
    assert two_devices["pool_rollout_diff"] < STATE_TOL and two_devices["pool_params_diff"] < STATE_TOL
    assert two_devices["pool_age"] == 2  # drawn at iterations 1 and 3
    assert two_devices["restart_rollout_diff"] < STATE_TOL and two_devices["restart_params_diff"] < STATE_TOL
    assert two_devices["tanh_rollout_diff"] < STATE_TOL and two_devices["tanh_params_diff"] < STATE_TOL
    assert two_devices["metric_diff"] < METRIC_TOL
    # Episode totals are summed over devices: more episodes than one device's worlds ended.
    assert two_devices["episodes_counted"] > CONFIG.num_envs // 2


def test_params_identical_on_every_device_after_each_update(two_devices):
    assert two_devices["replicas_equal"]
    assert two_devices["replicas_equal_split"]  # two minibatches per epoch, each device its own slice
    assert two_devices["replicas_equal_cache"] == 1  # compiled once
    assert two_devices["replicas_equal_split_cache"] == 1


@pytest.mark.parametrize(("saved", "resumed"), [(2, 1), (1, 2), (2, 2)])
def test_checkpoint_resumes_on_another_device_count(two_devices, saved, resumed):
    name = f"resume_{saved}_{resumed}"
    assert two_devices[name + "_iterations"] == [3.0, 4.0]
    if saved == resumed:  # same layout: exact
        assert two_devices[name + "_params_diff"] == 0.0
        assert two_devices[name + "_state_diff"] == 0.0
    else:
        assert two_devices[name + "_params_diff"] < STATE_TOL
        assert two_devices[name + "_state_diff"] < STATE_TOL
    assert two_devices[name + "_metric_diff"] < METRIC_TOL
    assert two_devices["straight_diff"] < STATE_TOL


def test_trained_policy_acts_on_one_device(two_devices):
    assert two_devices["policy_action_shape"] == [3, 2]


def test_config_and_resume_rules():
    with pytest.raises(ValueError, match="num_envs"):
        ppo.PPOConfig(num_envs=15, unroll_length=8, minibatch_size=40, num_devices=2)
    with pytest.raises(ValueError, match="minibatch_size"):
        ppo.PPOConfig(num_envs=16, unroll_length=3, minibatch_size=3, num_devices=2)
    with pytest.raises(ValueError, match="devices"):
        sharding.resolve_devices(64)
    meta = {"env": "reach", "ppo": CONFIG.to_dict(), "format": checkpoint.FORMAT}
    other = {"env": "reach", "ppo": dataclasses.replace(CONFIG, num_devices=0).to_dict()}
    checkpoint.check_resume(meta, other)  # the device count may change on resume
    with pytest.raises(checkpoint.CheckpointMismatchError, match="learning_rate"):
        checkpoint.check_resume(meta, {"env": "reach", "ppo": {**other["ppo"], "learning_rate": 1.0}})


def test_cli_devices_flag():
    from boxjax.cli import common

    parser = common.base_parser("test", "boxjax train")
    assert common.ppo_overrides(parser.parse_args(["--devices", "all"]))["num_devices"] == 0
    assert common.ppo_overrides(parser.parse_args(["--devices", "2"]))["num_devices"] == 2
    assert "num_devices" not in common.ppo_overrides(parser.parse_args([]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--devices", "0"])


def test_staged_warp_graph_mode_is_refused():
    class Mode:
        name = "WARP_STAGED"

    @dataclasses.dataclass
    class FakeModel:
        opt: object

    staged = FakeModel(opt=type("Opt", (), {"_impl": type("Impl", (), {"graph_mode": Mode()})()})())
    with pytest.raises(ValueError, match="mujoco#3191"):
        sharding.check_graph_mode({"model": staged})
    sharding.check_graph_mode({"model": FakeModel(opt=object())})


if __name__ == "__main__":
    _worker(sys.argv[1])
