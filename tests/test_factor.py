"""Our one-launch sparse LDLᵀ factor+solve (`boxjax.physics.factor`) against MuJoCo and stock MuJoCo Warp.

Tolerance: RTOL = 1e-5 normwise relative error, max|a - b| / max|b| per array and world, of a float32
result against MuJoCo's float64 `mj_factorM`/`mj_solveM`: float32 round-off on an 89-DoF mass matrix
(condition number 5e3-8e3). Where stock MuJoCo Warp's own float32 result misses it (the synthetic tree's
light fingers: stock reaches ~1.2e-5 on x), ours may be off by up to twice stock's error. Two float32 results
(ours vs stock) may differ by the sum of their errors. The float64 numpy schedule agrees with
`mujoco.mj_factorM` to ~1e-14.

GPU tests (`-m gpu`) run `mjx.step` in subprocesses, one per variant, so the stock and the patched step never
share a process, a trace or a Warp graph cache; run this file as a script to get one episode.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import mujoco
import numpy as np
import pytest
import warp as wp

from boxjax.physics import factor, factor_patch, synthetic
from boxjax.physics.mjx import quiet

RTOL = 1e-5
"""Normwise relative error allowed for a float32 factor/solve against the float64 reference."""
OUTPUTS = ("qLD", "qLDiagInv", "x")
EPISODE_TOL = 1e-5
"""Joint-angle difference (rad) at which a world of an episode has parted from stock (`parting_steps`)."""
EPISODE_PARTING_SHARE = 1 / 3
"""Fused must part from stock no sooner than this share of the steps the noise runs take (medians over
the worlds): round-off parts them at about the same step (a ratio of 0.6 to 1.1 measured), a fault of 1e-4
in our kernel's solution within a few steps."""
EPISODE_MIN_PARTING = 10
"""Steps the noise runs must stay with stock (median over the worlds) for an episode to tell round-off
from a fault."""
NOISE_RUNS = ("stock-again", "stock-ulp")
"""Stock runs that differ from "stock" only in what should not matter: the same episode replayed (a GPU's
atomic adds may sum in another order), and the start rounded one float32 ulp up (round-off of the size a
different summation order leaves)."""
STEP_TOL = 1e-5
"""Joint-angle difference (rad) allowed after 1 and 5 physics steps from identical states, fused vs stock
(issue 26's bound: a 1,000-step episode drifts apart chaotically, a few steps must not)."""
BODIES = ("synthetic", "muscular")


def _rel(a, b) -> float:
    """Normwise relative error of `a` against reference `b`."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _model(body: str) -> mujoco.MjModel:
    """The synthetic tree, the two-fighter block world ("sparring": muscular against the simple opponent,
    and the bag), or a boxjax body (skipped while `boxjax.mjcf` cannot build it)."""
    if body == "synthetic":
        return synthetic.tree_model()
    if body == "sparring":
        from boxjax.mjcf import sparring

        return sparring.build("muscular").model
    try:
        from boxjax import mjcf

        return mjcf.build(body)[0]
    except (ImportError, AttributeError, NotImplementedError) as err:
        pytest.skip(f"boxjax.mjcf.build({body!r}) is not available yet: {err}")


def _samples(mj_model: mujoco.MjModel, n: int, seed: int = 0):
    """n random configurations: (M (n, nC), y (n, nv), mj_factorM's qLD, qLDiagInv and mj_solveM's x)."""
    key = np.random.default_rng(seed)
    data = mujoco.MjData(mj_model)
    out = {name: [] for name in ("M", "y", "qLD", "qLDiagInv", "x")}
    for _ in range(n):
        data.qpos[:] = synthetic.random_qpos(mj_model, key)
        mujoco.mj_forward(mj_model, data)
        mujoco.mj_factorM(mj_model, data)
        y = key.normal(size=(1, mj_model.nv))
        x = np.zeros_like(y)
        mujoco.mj_solveM(mj_model, data, x, y)
        for name, value in (("M", data.M), ("y", y[0]), ("qLD", data.qLD), ("qLDiagInv", data.qLDiagInv)):
            out[name].append(np.array(value))
        out["x"].append(x[0])
    return {name: np.stack(v) for name, v in out.items()}


class _Samples(dict):
    """Samples whose "stock" entry (stock MuJoCo Warp's outputs on Warp's CPU device) is computed on first
    use: the GPU tests bring their own, and MuJoCo Warp's cold CPU compile costs minutes there."""

    def __init__(self, model: mujoco.MjModel, samples: dict):
        super().__init__(samples)
        self.model = model

    def __missing__(self, key):
        if key != "stock":
            raise KeyError(key)
        self["stock"] = _stock_mjwarp(self.model, self, "cpu", factor_patch.stock_factor_solve_i())
        return self["stock"]


@pytest.fixture(scope="module", params=BODIES)
def body(request):
    """(name, model, schedule, samples) for each body; samples["stock"] is stock MuJoCo Warp's (on CPU)."""
    model = _model(request.param)
    return request.param, model, factor.level_schedule(model), _Samples(model, _samples(model, 6))


def _tolerances(stock, s) -> list[float]:
    """Per output: RTOL, or twice stock MuJoCo Warp's own error where that is larger."""
    return [
        max(RTOL, 2 * max(_rel(stock[n][w], s[ref][w]) for w in range(len(s["M"]))))
        for n, ref in enumerate(OUTPUTS)
    ]


def _check(got, s, stock=None):
    """Asserts our float32 (qLD, qLDiagInv, x) against the float64 reference, and against stock if given."""
    tols = _tolerances(s["stock"], s)
    for n, ref in enumerate(OUTPUTS):
        for w in range(len(s["M"])):
            assert _rel(got[n][w], s[ref][w]) <= tols[n], (ref, w)
            if stock is not None:
                stock_err = _rel(stock[n][w], s[ref][w])
                assert _rel(got[n][w], stock[n][w]) <= tols[n] + stock_err, (ref, w)


def test_needs_fused_factor():
    assert factor_patch.needs_fused_factor(synthetic.tree_model())
    small = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='.1'/><body><joint/><geom size='.1'/></body>"
        "</body></worldbody></mujoco>"
    )
    assert not factor_patch.needs_fused_factor(small)
    assert factor_patch.register(small) is None


def test_kernel_refuses_a_tree_larger_than_shared_memory(body):
    _, _, schedule, _ = body
    assert factor.shared_floats(schedule.nc, schedule.nv, schedule.nslot) <= factor.SHARED_FLOATS_MAX
    assert factor.shared_floats(factor.SHARED_FLOATS_MAX - 129, 64, 0) == factor.SHARED_FLOATS_MAX
    with pytest.raises(ValueError, match="shared memory"):
        factor.shared_floats(factor.SHARED_FLOATS_MAX - 128, 64, 0)


def test_numpy_schedule_matches_mj_factorM(body):
    name, model, schedule, s = body
    assert model.nv >= 80 and factor_patch.needs_fused_factor(model), name
    for w in range(len(s["M"])):
        qLD, dinv, x = factor.factor_numpy(model, s["M"][w], s["y"][w], schedule)
        assert _rel(qLD, s["qLD"][w]) <= RTOL
        assert _rel(dinv, s["qLDiagInv"][w]) <= RTOL
        assert _rel(x, s["x"][w]) <= RTOL


def test_schedule_structure(body):
    """Chunks of ≤ 8, levels in dependency order, every sum term exactly once, no race within a phase."""
    _, model, s, _ = body
    depth = model.M_rownnz - 1
    rowadr = model.M_rowadr
    assert np.all(s.task[:, 5] >= 1) and np.all(s.task[:, 5] <= factor.CHUNK)
    assert np.all(np.diff(s.depth) < 0), "levels must go deepest first"
    final = {r for r in range(model.nv) if not np.any(s.task[:, 1] == r)}  # rows with no descendants
    terms = {}
    for lev in range(s.nlev):
        tasks = s.task[s.lev_task[lev] : s.lev_task[lev + 1]]
        reads, writes = set(), []
        for tgt, drow, acol, p, c0, nk, slot in tasks:
            row = -1 - tgt if tgt < 0 else int(np.searchsorted(rowadr, tgt, side="right") - 1)
            assert depth[row] == s.depth[lev] and acol == s.depth[lev]
            for k, ak in s.desc[c0 : c0 + nk]:
                assert k in final, f"level {lev} reads row {k} before it is final"
                assert model.M_colind[ak + acol] == row and ak == rowadr[k]
                terms.setdefault((int(tgt), int(k)), 0)
                terms[(int(tgt), int(k))] += 1
                reads |= {("L", ak + acol), ("L", ak + p) if p >= 0 else ("x", k), ("D", k)}
            if slot < 0:
                writes += [("L", tgt) if tgt >= 0 else ("x", -1 - tgt)] + ([("D", drow)] if drow >= 0 else [])
        assert len(writes) == len(set(writes)) and not reads & set(writes), f"race at level {lev}"
        final |= {int(r) for r in tasks[:, 1] if r >= 0}
    chains = [set(model.M_colind[rowadr[k] : rowadr[k] + depth[k]]) for k in range(model.nv)]
    expected = {
        (int(rowadr[i] + p) if p >= 0 else -1 - i, k)
        for k in range(model.nv)
        for i in chains[k]
        for p in [*range(depth[i] + 1), -1]
    }
    assert set(terms) == expected and set(terms.values()) == {1}


def _warp_run(schedule, M, y, device):
    """Our kernel through `factor.launch` on Warp `device`; float32 numpy (qLD, qLDiagInv, x)."""
    M = wp.array(M.astype(np.float32), dtype=float, device=device)
    y = wp.array(y.astype(np.float32), dtype=float, device=device)
    L, dinv, x = wp.zeros_like(M), wp.zeros_like(y), wp.zeros_like(y)
    factor.launch(schedule, factor.device_tables(schedule, device), M, y, L, dinv, x)
    return L.numpy(), dinv.numpy(), x.numpy()


@pytest.mark.parametrize("cpu_blocks", [False, True], ids=["block1", "fibers64"])
def test_warp_kernel_on_cpu(body, cpu_blocks, monkeypatch):
    """Warp's CPU device runs block kernels as cooperative fibers when `enable_cpu_blocks` is set, so the
    barriers are exercised for real with 64 lanes; without it the block is one thread."""
    _, _, schedule, s = body
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", cpu_blocks)
    assert factor.lanes_for("cpu") == (factor.LANES if cpu_blocks else 1)
    _check(_warp_run(schedule, s["M"], s["y"], "cpu"), s)


def _stock_mjwarp(model, s, device, fn):
    """Runs `fn` (a `factor_solve_i`) with MuJoCo Warp's own Model/Data on `device`; float32 outputs."""
    from mujoco.mjx.third_party import mujoco_warp as mjw

    nworld = len(s["M"])
    with wp.ScopedDevice(device):
        m = mjw.put_model(model)
        d = mjw.make_data(model, nworld=nworld)
        M = wp.array(s["M"].astype(np.float32), dtype=float)
        y = wp.array(s["y"].astype(np.float32), dtype=float)
        L, dinv, x = wp.zeros_like(d.qLD), wp.zeros_like(d.qLDiagInv), wp.zeros_like(y)
        fn(m, d, M, L, dinv, x, y)
        return L.numpy(), dinv.numpy(), x.numpy()


def test_patch_matches_stock_mjwarp_on_cpu(body):
    """The installed `smooth.factor_solve_i` dispatches to our kernel and agrees with the stock one."""
    from mujoco.mjx.third_party.mujoco_warp._src import smooth

    _, model, schedule, s = body
    factor_patch.install()
    try:
        assert smooth.factor_solve_i is not factor_patch.stock_factor_solve_i()
        factor_patch.register(model)
        before = factor_patch.factorizations()
        ours = _stock_mjwarp(model, s, "cpu", smooth.factor_solve_i)
        assert factor_patch.factorizations() - before == len(s["M"])  # one per world, counted on the device
    finally:
        factor_patch.install(False)
    assert smooth.factor_solve_i is factor_patch.stock_factor_solve_i() and not factor_patch.installed()
    direct = _warp_run(schedule, s["M"], s["y"], "cpu")
    for a, b in zip(ours, direct, strict=True):
        np.testing.assert_array_equal(a, b)  # the patch ran our kernel, bit for bit
    _check(ours, s, s["stock"])


def test_patch_refuses_a_model_it_has_no_schedule_for(body, monkeypatch):
    """Our kernel asked to factor a model it was never given is an error, not a silent fall back to MuJoCo
    Warp's own factorisation (that needs the kernel turned off)."""
    from mujoco.mjx.third_party.mujoco_warp._src import smooth

    _, model, _, s = body
    factor_patch.install()
    try:
        monkeypatch.setattr(factor_patch, "_SCHEDULES", {})
        monkeypatch.setattr(factor_patch, "register", lambda mj_model: None)  # as if put before install()
        with pytest.raises(factor_patch.FactorKernelError, match="fused_factor=False"):
            _stock_mjwarp(model, s, "cpu", smooth.factor_solve_i)
    finally:
        factor_patch.install(False)


def _mixed_model(name: str) -> mujoco.MjModel:
    """The synthetic tree beside trees on MuJoCo Warp's block path: "bag" adds a bag on a ball joint (3 DoF,
    scalar Cholesky) and a pendulum (1 DoF, compact); "legs" fixes the root (trees of 69, 7 and 7 DoF: the
    legs take tile Cholesky)."""
    if name == "legs":
        return synthetic.tree_model(free=False)
    spec = synthetic.tree_spec()
    bag = spec.worldbody.add_body(name="bag", pos=[2, 0, 1])
    bag.add_joint(type=mujoco.mjtJoint.mjJNT_BALL, damping=2.0, armature=0.1)
    bag.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.15, 0.4, 0], pos=[0, 0, -0.5])
    pendulum = spec.worldbody.add_body(name="pendulum", pos=[-2, 0, 1])
    pendulum.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], armature=0.01)
    pendulum.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.05, 0.3, 0], pos=[0, 0, -0.3])
    return spec.compile()


@pytest.fixture(scope="module", params=("bag", "legs"))
def mixed(request):
    """(model, samples, sparse-path dof mask, packed dense length) of a mixed model; samples as `body`'s."""
    from mujoco.mjx.third_party.mujoco_warp._src import io, types

    model = _mixed_model(request.param)
    layout = io.m_block_layout(model)
    assert layout["total"] > 0 and layout["has_sparse"]
    assert layout["scalar_tiles" if request.param == "bag" else "gather_tiles"]  # the block path it covers
    sparse = layout["dof_adr"] == types.Q_LD_BLOCK_SPARSE
    return model, _Samples(model, _samples(model, 3)), sparse, layout["total"]


def test_mixed_model_schedule(mixed):
    """The schedule covers the sparse-path rows only (the numpy run leaves the others as M), under MuJoCo
    Warp's fingerprint of the model."""
    from mujoco.mjx.third_party import mujoco_warp as mjw

    model, s, sparse, _ = mixed
    schedule = factor_patch.register(model)
    assert schedule is not None
    rows = np.flatnonzero(sparse)
    assert np.isin(schedule.desc[:, 0], rows).all() and np.isin(schedule.bwd[:, :2], rows).all()
    assert np.isin(schedule.ent_row[schedule.ent_row >= 0], rows).all()
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(model)
    assert schedule.fingerprint == factor_patch._capture_fingerprint(m, wp.empty((1, model.nC), dtype=float))
    entry = sparse[np.repeat(np.arange(model.nv), model.M_rownnz)]  # CSR entries of sparse-path rows
    for w in range(len(s["M"])):
        qLD, dinv, x = factor.factor_numpy(model, s["M"][w], s["y"][w], schedule)
        assert _rel(qLD[entry], s["qLD"][w][entry]) <= RTOL
        assert _rel(dinv[sparse], s["qLDiagInv"][w][sparse]) <= RTOL
        np.testing.assert_array_equal(qLD[~entry], s["M"][w][~entry])
        np.testing.assert_array_equal(x[~sparse], s["y"][w][~sparse] * dinv[~sparse])


def test_block_world_takes_the_fused_factor():
    """The block task's world (the muscular fighter, the bag on a ball joint, the puppet) is mixed: the
    patch must find its schedule under MuJoCo Warp's fingerprint, or it silently falls back to stock."""
    from mujoco.mjx.third_party import mujoco_warp as mjw

    from boxjax.mjcf import puppet

    model = puppet.build("muscular").model
    assert (
        model.tree_dofnum.max() > factor_patch._dense_max()
        and model.tree_dofnum.min() <= factor_patch._dense_max()
    )
    schedule = factor_patch.register(model)
    assert schedule is not None
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(model)
    assert m.M_tiles and m.qLD_block_total > 0
    assert schedule.fingerprint == factor_patch._capture_fingerprint(m, wp.empty((1, model.nC), dtype=float))


@pytest.mark.parametrize("cpu_blocks", [False, True], ids=["block1", "fibers64"])
def test_patch_matches_stock_mjwarp_on_mixed_model(mixed, cpu_blocks, monkeypatch):
    """Our kernel on the LDL region, then MuJoCo Warp's block kernels: block-path dofs exactly as stock."""
    from mujoco.mjx.third_party.mujoco_warp._src import smooth

    model, s, sparse, total = mixed
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", cpu_blocks)
    factor_patch.install()
    try:
        schedule = factor_patch.register(model)
        ours = _stock_mjwarp(model, s, "cpu", smooth.factor_solve_i)
    finally:
        factor_patch.install(False)
    stock = s["stock"]
    direct = _warp_run(schedule, s["M"], s["y"], "cpu")
    np.testing.assert_array_equal(ours[0][:, total:], direct[0])  # the patch ran our kernel
    np.testing.assert_array_equal(ours[1], direct[1])
    np.testing.assert_array_equal(ours[2][:, sparse], direct[2][:, sparse])
    entry = sparse[np.repeat(np.arange(model.nv), model.M_rownnz)]  # CSR entries of sparse-path rows
    np.testing.assert_array_equal(ours[0][:, :total], stock[0][:, :total])  # the packed dense factors
    np.testing.assert_array_equal(ours[2][:, ~sparse], stock[2][:, ~sparse])
    np.testing.assert_array_equal(ours[0][:, total:][:, ~entry], stock[0][:, total:][:, ~entry])  # M there
    np.testing.assert_array_equal(ours[1][:, ~sparse], stock[1][:, ~sparse])  # 1/M(i,i) there

    def restrict(qLD, D, x):
        """The sparse-path rows of (LDL region, D) and x."""
        return qLD[:, entry], D[:, sparse], x

    ref = dict(zip(OUTPUTS, restrict(s["qLD"], s["qLDiagInv"], s["x"]), strict=True))
    stock_sparse = restrict(stock[0][:, total:], *stock[1:])
    _check(restrict(ours[0][:, total:], *ours[1:]), {**ref, "M": s["M"], "stock": stock_sparse}, stock_sparse)


def test_patch_in_place_goes_to_stock(mixed):
    """x is y (a solve in place): our kernel would overwrite y before the block kernels read it, so the
    patch hands the call to MuJoCo Warp's own, bit for bit."""
    from mujoco.mjx.third_party import mujoco_warp as mjw
    from mujoco.mjx.third_party.mujoco_warp._src import smooth

    model, s, _, _ = mixed

    def in_place(fn):
        with wp.ScopedDevice("cpu"):
            m, d = mjw.put_model(model), mjw.make_data(model, nworld=len(s["M"]))
            M, xy = (
                wp.array(s["M"].astype(np.float32), dtype=float),
                wp.array(s["y"].astype(np.float32), dtype=float),
            )
            fn(m, d, M, wp.zeros_like(d.qLD), wp.zeros_like(d.qLDiagInv), xy, xy)
            return xy.numpy()

    factor_patch.install()
    try:
        factor_patch.register(model)
        ours = in_place(smooth.factor_solve_i)
    finally:
        factor_patch.install(False)
    np.testing.assert_array_equal(ours, in_place(factor_patch.stock_factor_solve_i()))
    tol = max(RTOL, 2 * max(_rel(s["stock"][2][w], s["x"][w]) for w in range(len(s["x"]))))
    assert max(_rel(ours[w], s["x"][w]) for w in range(len(s["x"]))) <= tol  # and it is a solve


def test_factor_solve_jax(body):
    import jax.numpy as jnp

    _, model, _, s = body
    fn = factor.factor_solve_jax(model)
    got = fn(jnp.asarray(s["M"], jnp.float32), jnp.asarray(s["y"], jnp.float32))
    _check([np.asarray(a) for a in got], s)


def test_all_trees_put_the_opponent_in_our_launch():
    """`fused_factor_trees` "all" (the default): in the two-fighter world the opponent's 43-DoF tree
    leaves MuJoCo Warp's tile Cholesky for the sparse path our kernel takes (only the bag's 3 dofs stay on
    the block path); the schedule covers both fighters under MuJoCo Warp's fingerprint, our kernel matches
    MuJoCo's float64 factor and solve there (RTOL), and the dense limit is restored afterwards, even on an
    error."""
    from mujoco.mjx.third_party import mujoco_warp as mjw
    from mujoco.mjx.third_party.mujoco_warp._src import io, types

    model = _model("sparring")
    limit = types.M_BLOCK_DENSE_MAX
    assert io.m_block_layout(model)["gather_tiles"] == {43: [89]}  # as MuJoCo Warp lays it out alone
    with factor_patch.all_trees_on_sparse_path():
        layout = io.m_block_layout(model)
        schedule = factor_patch.register(model)
        with wp.ScopedDevice("cpu"):
            m = mjw.put_model(model)
    assert types.M_BLOCK_DENSE_MAX == limit
    assert not layout["gather_tiles"] and layout["total"] == 9  # the bag's 3 x 3 alone
    sparse = layout["dof_adr"] == types.Q_LD_BLOCK_SPARSE
    assert sparse.sum() == 89 + 43
    assert schedule.fingerprint == factor_patch._capture_fingerprint(m, wp.empty((1, model.nC), dtype=float))
    s = _samples(model, 3)
    entry = sparse[np.repeat(np.arange(model.nv), model.M_rownnz)]
    L, dinv, x = _warp_run(schedule, s["M"], s["y"], "cpu")
    for w in range(len(s["M"])):
        assert _rel(L[w][entry], s["qLD"][w][entry]) <= RTOL
        assert _rel(dinv[w][sparse], s["qLDiagInv"][w][sparse]) <= RTOL
        assert _rel(x[w][sparse], s["x"][w][sparse]) <= RTOL  # both fighters solved by our kernel
    with pytest.raises(RuntimeError), factor_patch.all_trees_on_sparse_path():
        raise RuntimeError
    assert types.M_BLOCK_DENSE_MAX == limit


def test_which_trees_our_factorisation_takes():
    """Every tree of more than 6 dofs where our kernel runs (auto: where a tree exceeds 64 dofs), the 89-DoF
    trees alone with "large"; a choice of trees without our kernel on MuJoCo Warp is an error."""
    from boxjax.physics import mjx as physics

    PhysicsConfig = physics.PhysicsConfig
    two_fighters, simple = _model("sparring"), _model("simple")
    warp = PhysicsConfig(impl="warp")
    assert physics.all_trees_fused(two_fighters, warp)
    assert not physics.all_trees_fused(simple, warp)  # no tree over 64 dofs: MuJoCo Warp's own
    assert not physics.all_trees_fused(two_fighters, PhysicsConfig(impl="warp", fused_factor=False))
    assert not physics.all_trees_fused(two_fighters, PhysicsConfig(impl="warp", fused_factor_trees="large"))
    assert physics.all_trees_fused(simple, PhysicsConfig(impl="warp", fused_factor=True))
    assert (
        physics.factor_trees(two_fighters, PhysicsConfig(impl="warp", fused_factor_trees="large")) == "large"
    )
    assert physics.factor_trees(two_fighters, PhysicsConfig(impl="jax")) == "none"
    with pytest.raises(ValueError, match="unknown fused_factor_trees 'some'; valid: all, large"):
        PhysicsConfig(impl="warp", fused_factor_trees="some")
    for impl, fused in (("jax", None), ("warp", False)):
        with pytest.raises(ValueError, match="needs impl 'warp' with our factorisation on"):
            PhysicsConfig(impl=impl, fused_factor=fused, fused_factor_trees="all")


def _joint_angles(model: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """(..., nhinge) hinge and slide coordinates of a qpos array (..., nq)."""
    hinge = [model.jnt_qposadr[j] for j in range(model.njnt) if model.jnt_type[j] in (2, 3)]
    return qpos[..., hinge]


VARIANTS = ("stock", "fused", "fused-large")
"""MuJoCo Warp's own factorisation, ours on every tree of more than 6 dofs (the default), ours on the 89-DoF
trees alone."""


def _put(model: mujoco.MjModel, variant: str, nworld: int):
    """(MJX model, one-world data) of `model` with MuJoCo Warp for `variant` (`VARIANTS`; a "-ulp" suffix,
    which only moves the start, ignored)."""
    from mujoco import mjx

    variant = variant.removesuffix("-ulp")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if variant != "stock":
        factor_patch.install()
    with factor_patch.all_trees_on_sparse_path(variant == "fused"):
        mx = quiet(mjx.put_model(model, impl="warp"))
        return mx, mjx.make_data(model, impl="warp", naconmax=nworld * 256, njmax=1024)


def episode(body: str, variant: str, steps: int, nworld: int, seed: int = 0) -> np.ndarray:
    """(steps, nworld, nq) qpos of an episode of vmapped `mjx.step` (impl="warp") with fixed random-walk
    position targets; `variant` one of `VARIANTS`, with "-ulp" the start qpos rounded one float32 ulp up."""
    return _trace(body, variant, steps, nworld, seed)[0]


def _trace(body: str, variant: str, steps: int, nworld: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(qpos, qvel, ctrl) at every step of `episode`'s run, each (steps, nworld, ...)."""
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    model = _model(body)
    mx, d0 = _put(model, variant, nworld)
    key = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    if model.nkey and body != "synthetic":
        mujoco.mj_resetDataKeyframe(model, data, model.nkey - 1)
    qpos0 = np.repeat(data.qpos[None], nworld, 0).astype(np.float32)
    if variant.endswith("-ulp"):
        qpos0 = np.nextafter(qpos0, np.float32(np.inf))
    lo, hi = model.actuator_ctrlrange.T
    walk = np.cumsum(key.normal(0.0, 0.02, (steps, nworld, model.nu)), axis=0)
    ctrl = np.clip(walk, lo, hi).astype(np.float32)
    dd = jax.vmap(lambda q: d0.replace(qpos=q))(jnp.asarray(qpos0))

    def one(d, c):
        d = jax.vmap(lambda d, c: mjx.step(mx, d.replace(ctrl=c)))(d, c)
        return d, (d.qpos, d.qvel, d.ctrl)

    _, trace = jax.jit(lambda d, c: jax.lax.scan(one, d, c))(dd, jnp.asarray(ctrl))
    return tuple(np.asarray(x) for x in trace)


def steps_from(body: str, variant: str, states: dict, steps: int) -> np.ndarray:
    """(steps, nworld, nq) qpos of `steps` vmapped `mjx.step`s (impl="warp") from the (nworld, nq) `qpos`,
    (nworld, nv) `qvel` and (nworld, nu) `ctrl` in `states`, ctrl held; `variant` one of `VARIANTS`."""
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    model = _model(body)
    mx, d0 = _put(model, variant, len(states["qpos"]))
    dd = jax.vmap(lambda q, v, c: d0.replace(qpos=q, qvel=v, ctrl=c))(
        *(jnp.asarray(states[k], jnp.float32) for k in ("qpos", "qvel", "ctrl"))
    )

    def one(d, _):
        d = jax.vmap(lambda d: mjx.step(mx, d))(d)
        return d, d.qpos

    _, qpos = jax.jit(lambda d: jax.lax.scan(one, d, None, length=steps))(dd)
    return np.asarray(qpos)


def _gpu() -> bool:
    import jax

    return jax.default_backend() == "gpu" and wp.get_cuda_device_count() > 0


needs_gpu = pytest.mark.skipif("not _gpu()", reason="needs a CUDA GPU for JAX and Warp")


def parting_steps(angles: dict[str, np.ndarray], run: str) -> np.ndarray:
    """(nworld,) the first step (1-based) at which each world of `run` stands more than `EPISODE_TOL` from
    "stock" in some joint angle; steps + 1 where it never does. `angles`: {run: (steps, nworld, nhinge)}."""
    apart = np.abs(angles[run] - angles["stock"]).max(axis=2) > EPISODE_TOL
    return np.where(apart.any(axis=0), apart.argmax(axis=0) + 1, len(apart) + 1)


def assert_episode_within_noise(angles: dict[str, np.ndarray], name: str) -> None:
    """Fused parts from stock (`parting_steps`, median over the worlds) no sooner than
    `EPISODE_PARTING_SHARE` of the steps the noise runs take (`NOISE_RUNS` present; per world the first of
    them to part), which must be at least `EPISODE_MIN_PARTING`; finite everywhere.

    Chaos (contacts, falls) makes any two float32 runs part sooner or later, and one round-off can part a
    world at once where a contact is about to be made, so a bound on the angles at a given step is either
    loose or wrong; the step at which the runs part is what a fault moves. Measured on Warp's CPU device
    (muscular, 8 worlds, 300 steps): the start one ulp up or down parted at medians of 35.5 and 33 steps,
    fused at 32.5; our kernel's solution off by 1e-4 parted every world at step 3 (off by 1e-5: 31.5, as
    round-off does)."""
    noise = np.min([parting_steps(angles, run) for run in NOISE_RUNS if run in angles], axis=0)
    fused = parting_steps(angles, "fused")
    print(f"{name}: parting steps fused {fused.tolist()}, noise {noise.tolist()} (of {len(angles['stock'])})")
    assert np.all(np.isfinite(angles["fused"]))
    assert np.median(noise) >= EPISODE_MIN_PARTING, f"the noise runs parted at steps {noise.tolist()}"
    assert np.median(fused) >= EPISODE_PARTING_SHARE * np.median(noise), (fused.tolist(), noise.tolist())


def test_episode_rule_compares_when_the_runs_part():
    """`parting_steps` and `assert_episode_within_noise` on made-up runs of 50 steps and 4 worlds: the
    noise's parting step per world is the first noise run's; fused may part up to three times as soon
    (medians)."""
    steps = np.arange(1, 51, dtype=float)[:, None, None]
    stock = np.zeros((50, 4, 1))
    grow = 1e-7 * 2.0 ** (steps / 2)  # passes 1e-5 at step 14
    again = np.where(steps >= np.array([30, 60, 60, 60])[None, :, None], 1.0, 0.0)  # world 0 at step 30
    ulp = grow * np.array([1.0, 1.0, 0.5, 0.01])[None, :, None]  # steps 14, 14, 16, 27
    angles = {"stock": stock, "stock-again": again, "stock-ulp": ulp, "fused": 2.0 * grow}
    assert parting_steps(angles, "stock-again").tolist() == [30, 51, 51, 51]
    assert parting_steps(angles, "fused").tolist() == [12] * 4
    assert_episode_within_noise(angles, "made up")  # median 12 against a third of 15
    with pytest.raises(AssertionError, match=r"\[4, 4, 4, 4\]"):
        assert_episode_within_noise({**angles, "fused": 32.0 * grow}, "made up")  # parted at step 4
    with pytest.raises(AssertionError, match="the noise runs parted at steps"):
        assert_episode_within_noise({**angles, "stock-ulp": ulp + 1.0}, "made up")


CPU_EPISODES = {"synthetic": (100, 2), "muscular": (100, 4)}
"""(steps, worlds) of each body's episode on Warp's CPU device."""


@pytest.mark.skipif("_gpu()", reason="the CPU episode runs where JAX's default backend is the CPU")
@pytest.mark.parametrize("name", BODIES)
def test_episode_on_cpu(name):
    """mjx.step (impl="warp", JAX on CPU: no graph capture, the shim runs every call) stock vs fused,
    judged as the GPU episode is (`assert_episode_within_noise`); Warp's CPU device sums in a fixed order,
    so the noise run is the start one float32 ulp up alone. Measured at commit time: the synthetic tree
    never parts (over 100 steps the noise run stays within 1.3e-7 rad of stock, fused within 1.0e-6 rad);
    the muscular body falls and parts, fused at steps 22, 36, 23, 43 of its 4 worlds, noise at 52, 51, 27,
    43."""
    steps, worlds = CPU_EPISODES[name]
    try:
        runs = {v: episode(name, v, steps, worlds) for v in ("stock", "stock-ulp", "fused")}
    finally:
        factor_patch.install(False)
    model = _model(name)
    assert_episode_within_noise({v: _joint_angles(model, q) for v, q in runs.items()}, f"cpu {name}")


@pytest.mark.gpu
@needs_gpu
def test_gpu_factor_matches_stock(body):
    _, model, schedule, s = body
    stock = _stock_mjwarp(model, s, "cuda:0", factor_patch.stock_factor_solve_i())
    ours = _warp_run(schedule, s["M"], s["y"], "cuda:0")
    _check(ours, {**s, "stock": stock}, stock)


def _episode_subprocess(
    body: str, variant: str, steps: int, nworld: int, out: str, *extra: str
) -> np.ndarray:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", JAX_PLATFORMS="cuda")
    cmd = [sys.executable, __file__, body, variant, str(steps), str(nworld), out, *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return np.load(out)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name", BODIES)
def test_gpu_episode_matches_stock(name):
    """1,000 steps, 8 worlds, same actions: fused must part from stock (joint angles more than `EPISODE_TOL`
    apart; median over the worlds) no sooner than a third of the steps two stock runs take that differ
    only in what should not matter (`NOISE_RUNS`: the episode replayed, the start one float32 ulp up),
    which must take at least `EPISODE_MIN_PARTING` (`assert_episode_within_noise`). The last step alone
    bounds nothing: there stock and its replay stood 0.618 rad apart (muscular, H200, 2026-12-01), and
    the former bound, 10 times that, could not fail."""
    model = _model(name)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            v: _episode_subprocess(name, v.removesuffix("-again"), 1000, 8, os.path.join(tmp, f"{v}.npy"))
            for v in ("stock", "fused", *NOISE_RUNS)
        }
    assert_episode_within_noise({v: _joint_angles(model, q) for v, q in runs.items()}, name)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize(
    ("name", "fused"), [("muscular", "fused"), ("sparring", "fused"), ("sparring", "fused-large")]
)
def test_gpu_steps_from_identical_states_match_stock(name, fused):
    """32 states from a stock episode (8 worlds at steps 50, 100, 150, 200 of random-walk targets), then 1
    and 5 physics steps from each with our factorisation (the muscular body; both fighters of the block
    world, or our fighter alone with "fused-large") and with stock's, in separate processes; a second stock
    run gives the noise floor."""
    model = _model(name)
    with tempfile.TemporaryDirectory() as tmp:
        trace = _episode_subprocess(name, "states", 200, 8, os.path.join(tmp, "states.npz"))
        states = {k: trace[k] for k in ("qpos", "qvel", "ctrl")}
        np.savez(os.path.join(tmp, "from.npz"), **states)
        runs = {
            v: dict(
                _episode_subprocess(name, v.removesuffix("-again"), 5, 0, f"{tmp}/{v}.npz", f"{tmp}/from.npz")
            )
            for v in ("stock", fused, "stock-again")
        }
    runs["fused"] = runs.pop(fused)
    # our kernel ran for every world at every step of the fused run, and never in the stock ones
    assert int(runs["fused"]["factorizations"]) >= 5 * 32 and int(runs["stock"]["factorizations"]) == 0
    angles = {v: _joint_angles(model, r["qpos"]) for v, r in runs.items()}
    for n in (1, 5):
        err = float(np.abs(angles["fused"][n - 1] - angles["stock"][n - 1]).max())
        floor = float(np.abs(angles["stock-again"][n - 1] - angles["stock"][n - 1]).max())
        print(f"{name}, {n} step(s) from 32 states: fused vs stock {err:.3g} rad, stock vs stock {floor:.3g}")
        assert np.all(np.isfinite(runs["fused"]["qpos"])) and err <= STEP_TOL


def _states(body: str, steps: int, nworld: int) -> dict:
    """Stock episode states (qpos, qvel, ctrl) of `nworld` worlds at every 50th of `steps` steps, stacked."""
    picks = np.arange(49, steps, 50)
    trace = _trace(body, "stock", steps, nworld)
    return {
        k: v[picks].reshape(-1, v.shape[-1]) for k, v in zip(("qpos", "qvel", "ctrl"), trace, strict=True)
    }


if __name__ == "__main__":
    _body, _variant, _steps, _nworld, _out = sys.argv[1:6]
    if _variant == "states":
        np.savez(_out, **_states(_body, int(_steps), int(_nworld)))
    elif len(sys.argv) > 6:
        _qpos = steps_from(_body, _variant, dict(np.load(sys.argv[6])), int(_steps))
        np.savez(_out, qpos=_qpos, factorizations=factor_patch.factorizations())
    else:
        np.save(_out, episode(_body, _variant, int(_steps), int(_nworld)))
