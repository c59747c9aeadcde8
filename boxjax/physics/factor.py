"""One-launch sparse LDLᵀ factor-and-solve of the mass matrix for MuJoCo Warp (as used by MJX).

MuJoCo Warp factors a kinematic tree larger than `M_BLOCK_DENSE_MAX` (64 DoF) level by level: one kernel
launch per tree level, then a fused solve, twice per `mjx.step` (`fwd_acceleration` and the Euler damping
pass). Here the whole factorisation *and* the solve run in one launch: one block of 64 threads per world
walks the tree levels deepest first with a block barrier between phases, the world's matrix, right-hand side,
1/D and partial sums held in the block's shared memory from the first read of M to the last write of L and x.

The factorisation is in "pull" form: the unscaled rows M̃ of the reverse LDLᵀ satisfy
``M̃(i,j) = M(i,j) - Σ_{k ∈ desc(i)} M̃(k,i) M̃(k,j) / M̃(k,k)`` for every column j of row i (row k's first
entries are exactly row i's columns). Per level the work is split into tasks (target entry, ≤ 8 descendants);
a target with one chunk is written directly, longer ones leave partial sums that a second phase reduces.
The right-hand side rides along as one more column, so the forward substitution is free; off-diagonals are
scaled by 1/D at the end and a level-by-level backward sweep finishes the solve. No atomics: the result is
deterministic. The tables are built once on the host (`level_schedule`); `factor_numpy` runs the same
schedule in numpy as the reference. `qLD` (CSR, D on the diagonal), `qLDiagInv` and the solution have
exactly MuJoCo Warp's layout, so the rest of MuJoCo Warp reads them unchanged. In a mixed model (small trees
on MuJoCo Warp's dense "block" path too) the schedule covers the sparse-path trees only, and MuJoCo Warp's
own block kernels run after ours for the rest.

`boxjax.physics.factor_patch.install()` swaps it into the MuJoCo Warp copy that MJX runs.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

import mujoco
import numpy as np
import warp as wp

CHUNK = 8
"""Most descendants one thread sums over in one task."""
LANES = 64
"""Threads per world (one block)."""
SHARED_FLOATS_MAX = 12288
"""Floats one block's static shared memory holds (CUDA's 48 KB); a tree whose buffer is larger is refused."""

_TYPES = "mujoco.mjx.third_party.mujoco_warp._src.types"
_IO = "mujoco.mjx.third_party.mujoco_warp._src.io"


def _types():
    """MuJoCo Warp's `types` module (its globals are read at call time: one may change them)."""
    return importlib.import_module(_TYPES)


@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
    """Host-side task tables of the level schedule (int32 numpy arrays; levels in processing order).

    Task columns: target (CSR address of M̃(i,j), or -1-i for the right-hand side of row i), row whose
    diagonal this is (else -1), position of column i in a descendant row, position of column j (-1 for the
    right-hand side), first descendant in `desc`, descendant count (≤ CHUNK), partial-sum slot (-1: write).
    """

    nv: int
    nc: int
    depth: np.ndarray  # (nlev,) tree depth (ancestor count) of each level's target rows
    diag: np.ndarray  # (nv,) CSR address of each diagonal
    ent_row: np.ndarray  # (nc,) row of an off-diagonal entry, -1 on diagonals
    desc: np.ndarray  # (ndesc, 2) descendant dof k and its M_rowadr
    task: np.ndarray  # (ntask, 7) see above
    lev_task: np.ndarray  # (nlev + 1,)
    red: np.ndarray  # (nred, 4) target, diagonal row or -1, first slot, slot count
    lev_red: np.ndarray  # (nlev + 1,)
    bwd: np.ndarray  # (nbwd, 3) ancestor i, descendant k, CSR address of L(k,i); shallow levels first
    lev_bwd: np.ndarray  # (nlev + 1,)
    nslot: int
    fingerprint: tuple

    @property
    def nlev(self) -> int:
        """Number of tree levels with factorisation work."""
        return len(self.depth)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The tables in kernel argument order (empty tables padded to one row)."""
        pad = [
            a if len(a) else np.zeros((1, *a.shape[1:]), np.int32) for a in (self.desc, self.task, self.red)
        ]
        bwd = self.bwd if len(self.bwd) else np.zeros((1, 3), np.int32)
        return (
            self.diag,
            self.ent_row,
            pad[0],
            pad[1],
            self.lev_task,
            pad[2],
            self.lev_red,
            bwd,
            self.lev_bwd,
        )


def _ancestors(mj_model: mujoco.MjModel) -> list[list[int]]:
    """Each dof's ancestors in M (ascending), checked against MuJoCo's CSR column indices."""
    rowadr, rownnz, parent = mj_model.M_rowadr, mj_model.M_rownnz, mj_model.dof_parentid
    chains = []
    for k in range(mj_model.nv):
        chain = []
        if rownnz[k] > 1:
            i = parent[k]
            while i >= 0:
                chain.append(int(i))
                i = parent[i]
        chain.reverse()
        cols = mj_model.M_colind[rowadr[k] : rowadr[k] + rownnz[k]]
        if list(cols) != [*chain, k]:
            raise ValueError(f"dof {k}: M row columns {list(cols)} are not its ancestor chain {chain}")
        chains.append(chain)
    return chains


def level_schedule(mj_model: mujoco.MjModel) -> Schedule:
    """The task tables for the rows of `mj_model`'s mass matrix that MuJoCo Warp puts on the sparse-LDL path.

    Rows of trees on its block path are left as M, with x = y/M(i,i) there (its block kernels redo them).
    """
    nv, nc = mj_model.nv, mj_model.nC
    rowadr, rownnz = mj_model.M_rowadr.astype(np.int64), mj_model.M_rownnz.astype(np.int64)
    layout = importlib.import_module(_IO).m_block_layout(mj_model)
    sparse = layout["dof_adr"] == _types().Q_LD_BLOCK_SPARSE
    chains = _ancestors(mj_model)
    desc = [[] for _ in range(nv)]
    for k in np.flatnonzero(sparse):  # an ancestor is in its descendant's tree: only sparse rows get work
        for i in chains[k]:
            desc[i].append(int(k))
    depth = rownnz - 1
    levels = sorted({int(depth[i]) for i in range(nv) if desc[i]}, reverse=True)
    desc_rows, tasks, lev_task, reds, lev_red, nslot = [], [], [0], [], [0], 1
    for lev in levels:
        slot = 0
        for i in (i for i in range(nv) if desc[i] and depth[i] == lev):
            c0 = len(desc_rows)
            desc_rows += [(k, rowadr[k]) for k in desc[i]]
            chunks = [(c0 + s, min(CHUNK, len(desc[i]) - s)) for s in range(0, len(desc[i]), CHUNK)]
            for p in [*range(rownnz[i]), -1]:
                tgt = rowadr[i] + p if p >= 0 else -1 - i
                drow = i if p == rownnz[i] - 1 else -1
                if len(chunks) > 1:
                    reds.append((tgt, drow, slot, len(chunks)))
                for n, (start, count) in enumerate(chunks):
                    tasks.append((tgt, drow, lev, p, start, count, slot + n if len(chunks) > 1 else -1))
                slot += len(chunks) if len(chunks) > 1 else 0
        nslot = max(nslot, slot)
        lev_task.append(len(tasks))
        lev_red.append(len(reds))
    bwd, lev_bwd = [], [0]
    for lev in reversed(levels):
        bwd += [(i, k, rowadr[k] + lev) for i in range(nv) if depth[i] == lev for k in desc[i]]
        lev_bwd.append(len(bwd))
    diag = rowadr + rownnz - 1
    ent_row = np.full(nc, -1)
    for r in np.flatnonzero(sparse):
        ent_row[rowadr[r] : diag[r]] = r
    pairs = np.bincount([int(depth[i]) for k in np.flatnonzero(sparse) for i in chains[k]], minlength=1)
    tiles = [
        (size, len(layout[kind][size]))
        for kind in ("scalar_tiles", "gather_tiles")
        for size in sorted(layout[kind])
    ]
    fingerprint = (nv, nc, tuple(int(n) for n in pairs if n), int(layout["total"]), tuple(tiles))

    def table(rows, width):
        return np.asarray(rows, np.int32).reshape(-1, width)

    return Schedule(
        nv=nv,
        nc=nc,
        depth=np.asarray(levels, np.int32),
        diag=diag.astype(np.int32),
        ent_row=ent_row.astype(np.int32),
        desc=table(desc_rows, 2),
        task=table(tasks, 7),
        lev_task=np.asarray(lev_task, np.int32),
        red=table(reds, 4),
        lev_red=np.asarray(lev_red, np.int32),
        bwd=table(bwd, 3),
        lev_bwd=np.asarray(lev_bwd, np.int32),
        nslot=nslot,
        fingerprint=fingerprint,
    )


def factor_numpy(
    mj_model: mujoco.MjModel, M: np.ndarray, y: np.ndarray | None = None, schedule: Schedule | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Runs the level schedule in numpy, phase by phase, exactly as the kernel does.

    Args:
      mj_model: the model (for the schedule).
      M: (nC,) the mass matrix in MuJoCo's CSR layout (`MjData.M`); its dtype is the working precision.
      y: (nv,) optional right-hand side.
      schedule: `level_schedule(mj_model)`, if already built.

    Returns:
      qLD (nC,) with D on the diagonal, qLDiagInv (nv,), and x = M⁻¹y (nv,) or None.
    """
    s = schedule or level_schedule(mj_model)
    L = np.array(M)
    x = np.zeros(s.nv, L.dtype) if y is None else np.array(y, L.dtype)
    dinv = 1 / L[s.diag]
    for lev in range(s.nlev):
        t = s.task[s.lev_task[lev] : s.lev_task[lev + 1]]
        q = np.arange(CHUNK)
        mask = q < t[:, 5:6]
        ks = s.desc[np.where(mask, t[:, 4:5] + q, 0)]  # (ntask, CHUNK, 2)
        k, ak = ks[..., 0], ks[..., 1]
        a = L[ak + t[:, 2:3]]
        b = np.where(t[:, 3:4] >= 0, L[ak + np.maximum(t[:, 3:4], 0)], x[k])
        partial = np.where(mask, a * b * dinv[k], 0).sum(axis=1)
        direct = t[:, 6] < 0
        scratch = np.zeros(s.nslot, L.dtype)
        scratch[t[~direct, 6]] = partial[~direct]
        _finish(L, x, dinv, t[direct, 0], t[direct, 1], partial[direct])
        r = s.red[s.lev_red[lev] : s.lev_red[lev + 1]]
        sums = np.array([scratch[r0 : r0 + n].sum() for r0, n in r[:, 2:4]], L.dtype)
        _finish(L, x, dinv, r[:, 0], r[:, 1], sums)
    off = s.ent_row >= 0
    L[off] *= dinv[s.ent_row[off]]
    x *= dinv
    for lev in range(s.nlev):
        b = s.bwd[s.lev_bwd[lev] : s.lev_bwd[lev + 1]]
        x[b[:, 1]] -= L[b[:, 2]] * x[b[:, 0]]
    return L, dinv, (None if y is None else x)


def _finish(L, x, dinv, tgt, drow, sums) -> None:
    """Numpy twin of the kernel's `finish_one`: subtract the sums from their targets (entries or rhs)."""
    entry = tgt >= 0
    L[tgt[entry]] -= sums[entry]
    x[-1 - tgt[~entry]] -= sums[~entry]
    d = drow >= 0
    dinv[drow[d]] = 1 / L[tgt[d]]


@wp.func_native(snippet="WP_TILE_SYNC();")
def _sync(): ...


@functools.cache
def _shared_memory(size: int):
    """A native accessor of one block-shared float buffer of `size` entries: `access(i, v, store)` writes v to
    entry i when `store` is 1, and returns entry i. A plain `__shared__` array on CUDA (static, one per block)
    and a static array on the CPU, where a launch runs its blocks one after another (a block's fibers share
    it, as a block's threads share shared memory). That CPU buffer is one per process: two CPU launches of the
    kernel must not run at once from different threads (Warp's CPU JIT has no thread-local storage; the CPU
    kernel serves the tests). Unlike a Warp tile's element writes, an access carries no barrier, so the
    lanes may touch different entries in divergent loops; `_sync` orders them."""
    snippet = f"""
#if defined(__CUDA_ARCH__)
    __shared__ float buf[{size}];
#else
    static float buf[{size}];
#endif
    if (store) {{ buf[i] = v; }}
    return buf[i];
"""

    @wp.func_native(snippet)
    def access(i: int, v: float, store: int) -> float: ...

    return access


def shared_floats(nc: int, nv: int, nslot: int) -> int:
    """Floats of one world's shared buffer (L, x, 1/D, partial sums); an error naming the sizes when it
    exceeds `SHARED_FLOATS_MAX`."""
    size = nc + 2 * nv + max(nslot, 1)
    if size > SHARED_FLOATS_MAX:
        raise ValueError(
            f"factor kernel: a world's buffer (nC {nc} + 2 nv {2 * nv} + slots {nslot} = {size} floats) "
            f"exceeds one block's shared memory ({SHARED_FLOATS_MAX} floats); use MuJoCo Warp's factorisation"
        )
    return size


@functools.cache
def _kernel(nlev: int, nc: int, nv: int, nslot: int):
    """The fused factor+solve kernel for one schedule's sizes; launch with dim=(nworld, LANES),
    block_dim=LANES. A world's L, x, 1/D and partial sums live in its block's shared memory throughout."""
    access = _shared_memory(shared_floats(nc, nv, nslot))
    x0, d0, s0 = nc, nc + nv, nc + 2 * nv  # offsets of x, 1/D and the partial sums in the buffer

    @wp.func
    def ld(i: int) -> float:
        return access(i, 0.0, 0)

    @wp.func
    def st(i: int, v: float):
        access(i, v, 1)

    @wp.func
    def finish_one(tgt: int, drow: int, s: float):
        """Subtracts a finished sum from its target: an entry of row i (and 1/D on the diagonal) or x[i]."""
        if tgt >= 0:
            v = ld(tgt) - s
            st(tgt, v)
            if drow >= 0:
                st(wp.static(d0) + drow, 1.0 / v)
        else:
            st(wp.static(x0) - 1 - tgt, ld(wp.static(x0) - 1 - tgt) - s)

    @wp.kernel(module="unique", enable_backward=False)
    def fused_factor_solve(
        # Tables (Schedule.arrays order):
        diag: wp.array[int],
        ent_row: wp.array[int],
        desc: wp.array2d[int],
        task: wp.array2d[int],
        lev_task: wp.array[int],
        red: wp.array2d[int],
        lev_red: wp.array[int],
        bwd: wp.array2d[int],
        lev_bwd: wp.array[int],
        # In:
        M: wp.array2d[float],
        y: wp.array2d[float],
        # Out:
        L: wp.array2d[float],
        Dinv: wp.array2d[float],
        x: wp.array2d[float],
    ):
        w, t = wp.tid()
        bd = wp.block_dim()
        # Lanes past the block (a CPU launch that resolved block_dim to 1) only meet the barriers.
        lane = wp.where(t < bd, t, 1 << 29)
        _sync()  # a block running several worlds in turn (a capped grid) has finished with the last one
        for e in range(lane, wp.static(nc), bd):
            st(e, M[w, e])
        for v in range(lane, wp.static(nv), bd):
            st(wp.static(x0) + v, y[w, v])
            st(wp.static(d0) + v, 1.0 / M[w, diag[v]])
        _sync()
        for lev in range(wp.static(nlev)):
            for u in range(lev_task[lev] + lane, lev_task[lev + 1], bd):
                acol = task[u, 2]
                p = task[u, 3]
                c0 = task[u, 4]
                s = float(0.0)  # noqa: UP018 (Warp: a literal would be a constant)
                for q in range(task[u, 5]):
                    k = desc[c0 + q, 0]
                    ak = desc[c0 + q, 1]
                    b = float(0.0)  # noqa: UP018
                    if p >= 0:
                        b = ld(ak + p)
                    else:
                        b = ld(wp.static(x0) + k)
                    s += ld(ak + acol) * b * ld(wp.static(d0) + k)
                slot = task[u, 6]
                if slot >= 0:
                    st(wp.static(s0) + slot, s)
                else:
                    finish_one(task[u, 0], task[u, 1], s)
            _sync()
            for r in range(lev_red[lev] + lane, lev_red[lev + 1], bd):
                s = float(0.0)  # noqa: UP018 (Warp: a literal would be a constant)
                for q in range(red[r, 3]):
                    s += ld(wp.static(s0) + red[r, 2] + q)
                finish_one(red[r, 0], red[r, 1], s)
            _sync()
        for e in range(lane, wp.static(nc), bd):
            row = ent_row[e]
            if row >= 0:
                st(e, ld(e) * ld(wp.static(d0) + row))
        for v in range(lane, wp.static(nv), bd):
            st(wp.static(x0) + v, ld(wp.static(x0) + v) * ld(wp.static(d0) + v))
        _sync()
        for lev in range(wp.static(nlev)):
            for u in range(lev_bwd[lev] + lane, lev_bwd[lev + 1], bd):
                k = wp.static(x0) + bwd[u, 1]
                st(k, ld(k) - ld(bwd[u, 2]) * ld(wp.static(x0) + bwd[u, 0]))
            _sync()
        for e in range(lane, wp.static(nc), bd):
            L[w, e] = ld(e)
        for v in range(lane, wp.static(nv), bd):
            Dinv[w, v] = ld(wp.static(d0) + v)
            x[w, v] = ld(wp.static(x0) + v)
        _sync()  # every lane has read the buffer before the block's next world (a capped grid) writes it

    return fused_factor_solve


def lanes_for(device) -> int:
    """Threads per world on `device`: LANES on CUDA or with Warp CPU blocks enabled, else 1."""
    device = wp.get_device(device)
    return LANES if device.is_cuda or wp.config.enable_cpu_blocks else 1


_TABLES: dict[tuple, tuple[Schedule, tuple[wp.array, ...]]] = {}


def uploaded_tables(schedule: Schedule, device) -> tuple[wp.array, ...] | None:
    """The schedule's tables on `device` if `device_tables` uploaded them, else None (safe in a capture)."""
    entry = _TABLES.get((id(schedule), wp.get_device(device).alias))
    return None if entry is None else entry[1]


def device_tables(schedule: Schedule, device) -> tuple[wp.array, ...]:
    """The schedule's tables as Warp arrays on `device` (uploaded once; not during a graph capture)."""
    tables = uploaded_tables(schedule, device)
    if tables is None:  # the schedule is kept alongside so its id stays unique
        device = wp.get_device(device)
        tables = tuple(wp.array(a, dtype=int, device=device) for a in schedule.arrays())
        _TABLES[(id(schedule), device.alias)] = (schedule, tables)
    return tables


def launch(
    schedule: Schedule, tables, M: wp.array2d, y: wp.array2d, L: wp.array2d, Dinv: wp.array2d, x: wp.array2d
) -> None:
    """Factors M into L/Dinv and solves x = M⁻¹y, all worlds in one launch.

    Args:
      schedule: `level_schedule` of the model.
      tables: `device_tables(schedule, M.device)`.
      M: (nworld, nC) mass matrices; y: (nworld, nv) right-hand sides.
      L: (nworld, nC) out, qLD; Dinv: (nworld, nv) out, qLDiagInv; x: (nworld, nv) out, the solution.
    """
    lanes = lanes_for(M.device)
    wp.launch(
        _kernel_for(schedule),
        dim=(M.shape[0], lanes),
        inputs=[*tables, M, y],
        outputs=[L, Dinv, x],
        block_dim=lanes,
        device=M.device,
    )


def _kernel_for(schedule: Schedule):
    """The kernel specialised to `schedule`'s sizes."""
    return _kernel(schedule.nlev, schedule.nc, schedule.nv, schedule.nslot)


def factor_solve_jax(mj_model: mujoco.MjModel, lanes: int | None = None):
    """A JAX function (M (nworld, nC), y (nworld, nv)) -> (qLD, qLDiagInv, x) running our kernel.

    `lanes` defaults to LANES on a GPU (or with `wp.config.enable_cpu_blocks`), else 1.
    """
    import jax

    schedule = level_schedule(mj_model)
    if lanes is None:
        lanes = lanes_for("cuda" if jax.default_backend() == "gpu" else "cpu")
    call = wp.jax_kernel(_kernel_for(schedule), num_outputs=3, block_dim=lanes)
    tables = tuple(jax.numpy.asarray(a) for a in schedule.arrays())

    def factor_solve(M: jax.Array, y: jax.Array):
        nworld = M.shape[0]
        dims = {"L": (nworld, schedule.nc), "Dinv": (nworld, schedule.nv), "x": (nworld, schedule.nv)}
        return tuple(call(*tables, M, y, launch_dims=(nworld, lanes), output_dims=dims))

    return factor_solve
