"""Counting MuJoCo Warp's graph captures (`boxjax.physics.graphs`) and reporting them (`ppo`)."""

from __future__ import annotations

import sys
import types

from boxjax.physics import graphs
from boxjax.rl import loop


class FakeCallable:
    """What `graphs` reads of a Warp FFI callable: its graph cache, keyed by buffer addresses."""

    def __init__(self, keys=()):
        self.captures = dict.fromkeys(keys)


def test_new_captures_counts_keys_added_since_the_snapshot_per_callable():
    step, ray = FakeCallable([1, 2]), FakeCallable([1])
    before = graphs.capture_keys([step, ray])
    assert graphs.new_captures(before, [step, ray]) == 0
    step.captures[3] = None  # new buffer addresses: a capture
    ray.captures[2] = None
    assert graphs.new_captures(before, [step, ray]) == 2
    del step.captures[1]  # evicted from the LRU: not a capture
    assert graphs.new_captures(before, [step, ray]) == 2


def test_callables_are_read_from_mjx_registry(monkeypatch):
    fake = FakeCallable([7])
    module = types.SimpleNamespace(_JAX_CALLABLE_VARIADIC_TUPLE_REGISTRY={("step",): fake})
    monkeypatch.setitem(sys.modules, "mujoco.mjx.warp.ffi", module)
    assert graphs.warp_callables() == [fake]
    assert graphs.capture_keys() == frozenset({(id(fake), 7)})
    monkeypatch.delitem(sys.modules, "mujoco.mjx.warp.ffi")
    assert graphs.warp_callables() == [] and graphs.capture_keys() == frozenset()


def test_captures_are_reported_only_after_the_warm_iterations():
    warm = {"iteration": float(loop.WARM_ITERATIONS), loop.GRAPH_CAPTURES: 40.0}
    assert loop.capture_report(warm) is None
    assert loop.capture_report({"iteration": 9.0, loop.GRAPH_CAPTURES: 0.0}) is None
    assert loop.capture_report({"iteration": 9.0}) is None
    line = loop.capture_report({"iteration": 9.0, loop.GRAPH_CAPTURES: 3.0})
    assert line.startswith("GRAPH CAPTURES iteration 9: 3 new CUDA graphs")
