"""Preloading MuJoCo Warp's step modules: the names exist, loading compiles, bad names are refused."""

from __future__ import annotations

import importlib

import pytest
import warp as wp

from boxjax.physics import preload


@wp.kernel
def _double(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0 * x[i]


def test_every_step_module_is_a_mujoco_warp_module_with_kernels():
    importlib.import_module("mujoco.mjx.third_party.mujoco_warp")
    for name in preload.STEP_MODULES:
        assert wp.get_module(name).kernels, name


def test_loading_a_module_leaves_it_loaded_on_the_device():
    module = wp.get_module(__name__)
    assert preload.load_modules((__name__,), ["cpu"]) > 0.0
    assert any(key[0] is None for key in module.execs), module.execs  # CPU executables have no context
    x = wp.array([1.0, 2.0], dtype=float, device="cpu")
    wp.launch(_double, dim=2, inputs=[x], device="cpu")
    assert x.numpy().tolist() == [2.0, 4.0]


def test_a_module_without_kernels_is_refused_by_name():
    with pytest.raises(ValueError, match="no.such.module"):
        preload.load_modules(("no.such.module",), ["cpu"])


def test_the_preload_is_off_when_asked_or_without_a_cuda_device(monkeypatch):
    monkeypatch.setenv("BOXJAX_WARP_PRELOAD", "0")
    assert not preload.enabled()
    assert preload.preload_step_modules() == 0.0
    monkeypatch.delenv("BOXJAX_WARP_PRELOAD")
    assert preload.enabled()
    if not wp.get_cuda_devices():
        assert preload.preload_step_modules() == 0.0
    else:  # on the GPU machine: every step module is loaded on every CUDA device afterwards
        preload.preload_step_modules()
        contexts = {device.context for device in wp.get_cuda_devices()}
        for name in preload.STEP_MODULES:
            assert contexts <= {key[0] for key in wp.get_module(name).execs}, name
