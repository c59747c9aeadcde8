"""MuJoCo Warp's Newton Hessian factorisation without the tiles that are zero between kinematic trees.

MuJoCo Warp factors the constraint solver's Hessian H = M + JᵀDJ of every world densely, in 16 × 16 tiles
(`block_cholesky`): for the two-fighter block world (nv 135, padded to 144) that is 9 × 9 tiles, about
1.3 ms of a 4.2 ms physics step on an H100 (the solver's four passes and its initial factorisation;
`docs/history.md`). Where no constraint joins two trees (no contact between the fighters, nor with the bag:
95 % of world-steps with the shipped blocker acting, `boxjax bench solver_iterations`), H is block diagonal
by tree and so is its factor: the tiles between our fighter's dofs and his are exactly zero. This patch's
factorisation and solve skip the products with tiles known to be zero and store zeros for the factor's
tiles that must be zero, so the result is the same bit for bit for a finite Hessian (a product with a zero
tile adds exact zeros; with infinities elsewhere stock's 0 · inf = NaN would not appear), and nothing is
skipped in a world where those tiles are not zero.

`zero_if_apart` finds, from the model's dof-to-tree map, the tile pairs that hold only pairs of dofs of
different trees (the last tile row and column hold MuJoCo Warp's augmented right-hand side: never skipped).
`install()` replaces MuJoCo Warp's `solver._cholesky_factorize_solve`; a model `register`ed with such
tiles (by its sizes, as the patch runs inside a CUDA-graph capture and cannot read the model back) takes
ours, any other MuJoCo Warp's own. Call both before the step's first capture.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import mujoco
import numpy as np
import warp as wp

from boxjax.physics.factor_patch import MJWARP_PACKAGE
from boxjax.physics.passive_patch import fingerprint

_SOLVER = f"{MJWARP_PACKAGE}._src.solver"
_BLOCK_CHOLESKY = f"{MJWARP_PACKAGE}._src.block_cholesky"
_TYPES = f"{MJWARP_PACKAGE}._src.types"

_MASKS: dict[tuple, tuple[tuple[int, ...], ...]] = {}
"""Per fingerprint of a registered model: its `zero_if_apart` mask (only masks with a tile to skip)."""
_ORIGINAL: dict[str, object] = {}


def zero_if_apart(dof_treeid: np.ndarray, nv_pad: int, tile: int) -> tuple[tuple[int, ...], ...]:
    """(tiles, tiles) 0/1: 1 at (j, k), j < k, where every dof of tile j and every dof of tile k belong to
    different trees (padding dofs belong to none), so H's tile (j, k) is zero unless a constraint joins
    two trees. The last tile (MuJoCo Warp's augmented right-hand side) and tiles with no dof are 0."""
    tiles = nv_pad // tile
    trees = [set(int(t) for t in dof_treeid[j * tile : (j + 1) * tile]) for j in range(tiles)]
    mask = [[0] * tiles for _ in range(tiles)]
    for j in range(tiles - 1):
        for k in range(j + 1, tiles - 1):
            mask[j][k] = int(bool(trees[j]) and bool(trees[k]) and not trees[j] & trees[k])
    return tuple(tuple(row) for row in mask)


def tile_size() -> int:
    """MuJoCo Warp's dense Hessian tile (`TILE_SIZE_JTDAJ_DENSE`)."""
    return importlib.import_module(_TYPES).TILE_SIZE_JTDAJ_DENSE


def block_dim() -> int:
    """The threads per world MuJoCo Warp gives its blocked Hessian factorisation (`BlockDim` default)."""
    return importlib.import_module(_TYPES).BlockDim().update_gradient_cholesky_blocked


def padded_size(nv: int, tile: int) -> int:
    """The Hessian's padded size in MuJoCo Warp's blocked path: nv plus the augmented right-hand side's
    column, rounded up to whole tiles (its `io._get_padded_sizes`)."""
    return -(-(nv + 1) // tile) * tile


def register(mj_model: mujoco.MjModel) -> bool:
    """Notes `mj_model`'s zero-if-apart tiles for the installed patch; returns whether it has any (else
    MuJoCo Warp's own factorisation runs for it).

    Raises:
      ValueError: another registered model of the same sizes has other such tiles.
    """
    tile = tile_size()
    mask = zero_if_apart(mj_model.dof_treeid, padded_size(mj_model.nv, tile), tile)
    if not any(any(row) for row in mask):
        return False
    key = fingerprint(mj_model)
    if _MASKS.setdefault(key, mask) != mask:
        raise ValueError(
            f"two models with sizes {key} differ in their trees; the Hessian patch cannot tell them apart"
        )
    return True


@functools.cache
def _mask_constant(mask: tuple[tuple[int, ...], ...]):
    """(matrix type, Warp constant) of `mask`."""
    tiles = len(mask)
    mat = wp.types.matrix(shape=(tiles, tiles), dtype=wp.int32)
    return mat, wp.constant(mat(*[v for row in mask for v in row]))


@wp.func
def _nonzero(x: float):
    """1 for an entry that is not zero (NaN included), else 0."""
    return wp.where(x != 0.0, 1.0, 0.0)


@functools.cache
def _tile_loader(tile: int):
    """A function loading the (tile, tile) block of a matrix at (row, col) into shared memory."""

    @wp.func
    def load_tile(a: wp.array2d[float], row: int, col: int):
        return wp.tile_load(
            a, shape=(tile, tile), offset=(row, col), storage="shared", bounds_check=False, aligned=True
        )

    return load_tile


@functools.cache
def _back_substitution_func(tile: int):
    """Solves U x = y in place of y (`rhs_tile`, a tile), skipping the factor's tiles `zero` (a matrix of
    `_mask_constant`'s type) marks; generic in both (Warp resolves string annotations in module scope)."""
    load_tile = _tile_loader(tile)

    @wp.func
    def func(U: wp.array2d[float], rhs_tile: Any, matrix_size: int, zero: Any):
        for i in range(matrix_size - tile, -1, -tile):
            tmp = wp.tile_view(rhs_tile, shape=(tile, 1), offset=(i, 0))
            for j in range(i + tile, matrix_size, tile):
                if zero[i // tile, j // tile] == 0:
                    U_ij = load_tile(U, i, j)
                    wp.tile_matmul(
                        U_ij, wp.tile_view(rhs_tile, shape=(tile, 1), offset=(j, 0)), tmp, alpha=-1.0
                    )
            U_ii = load_tile(U, i, i)
            wp.tile_upper_solve_inplace(U_ii, tmp)

    return func


@functools.cache
def _factor_solve_newton_func(tile: int, matrix_size_static: int, vector_size_static: int, mask: tuple):
    """MuJoCo Warp's augmented blocked factorisation and Newton solve (`block_cholesky`), skipping zero
    tiles: returns (search·grad, Newton decrement) as it does."""
    mat, zero_if_apart_tiles = _mask_constant(mask)
    border = tile - 1
    back_substitute = _back_substitution_func(tile)
    load_tile = _tile_loader(tile)
    decrement = importlib.import_module(_BLOCK_CHOLESKY)._create_newton_decrement_func(
        matrix_size_static, vector_size_static
    )

    @wp.func
    def func(
        A: wp.array2d[float],
        b: wp.array2d[float],
        matrix_size: int,
        U_out: wp.array2d[float],
        result_out: wp.array2d[float],
    ):
        rhs_tile = wp.tile_zeros(shape=(matrix_size_static, 1), dtype=float, storage="shared")
        zero = mat()  # zero[j, i]: the factor's tile (j, i) is all zeros
        for k in range(0, matrix_size, tile):
            kb = k // tile
            end = k + tile
            input_rhs = wp.tile_load(b, shape=(tile, 1), offset=(k, 0), storage="shared", bounds_check=False)
            A_kk = load_tile(A, k, k)
            input_diagonal_rhs = wp.tile_view(input_rhs, shape=(border, 1), offset=(0, 0))
            if end == matrix_size:
                wp.tile_assign(A_kk, input_diagonal_rhs, offset=(0, border))
                A_kk[border, border] = 1.0e30
            for j in range(0, k, tile):
                if zero[j // tile, kb] == 0:
                    U_jk = load_tile(U_out, j, k)
                    wp.tile_matmul(wp.tile_transpose(U_jk), U_jk, A_kk, alpha=-1.0)
            wp.tile_cholesky_inplace(A_kk, fill_mode="upper")
            diagonal_border = wp.tile_view(A_kk, shape=(border, 1), offset=(0, border))
            if end == matrix_size:
                wp.tile_assign(rhs_tile, diagonal_border, offset=(k, 0))
            wp.tile_store(U_out, A_kk, offset=(k, k), bounds_check=False, aligned=True)

            for i in range(end, matrix_size, tile):
                ib = i // tile
                skip = int(0)  # noqa: UP018 (Warp: a variable changed in a loop starts as a typed value)
                if zero_if_apart_tiles[kb, ib] != 0:
                    A_ki = load_tile(A, k, i)
                    if wp.tile_reduce(wp.add, wp.tile_map(_nonzero, A_ki))[0] == 0.0:
                        products = int(0)  # noqa: UP018
                        for j in range(0, k, tile):
                            if zero[j // tile, kb] == 0 and zero[j // tile, ib] == 0:
                                products += 1
                        if products == 0:
                            skip = int(1)  # noqa: UP018
                if skip != 0:
                    zero[kb, ib] = 1
                    wp.tile_store(
                        U_out,
                        wp.tile_zeros(shape=(tile, tile), dtype=float),
                        offset=(k, i),
                        bounds_check=False,
                    )
                else:
                    A_ki = load_tile(A, k, i)
                    if i + tile == matrix_size:
                        wp.tile_assign(A_ki, input_rhs, offset=(0, border))
                    for j in range(0, k, tile):
                        if zero[j // tile, kb] == 0 and zero[j // tile, ib] == 0:
                            U_jk = load_tile(U_out, j, k)
                            U_ji = load_tile(U_out, j, i)
                            wp.tile_matmul(wp.tile_transpose(U_jk), U_ji, A_ki, alpha=-1.0)
                    wp.tile_lower_solve_inplace(wp.tile_transpose(A_kk), A_ki)
                    panel_border = wp.tile_view(A_ki, shape=(tile, 1), offset=(0, border))
                    if i + tile == matrix_size:
                        wp.tile_assign(rhs_tile, panel_border, offset=(k, 0))
                    wp.tile_store(U_out, A_ki, offset=(k, i), bounds_check=False, aligned=True)

        back_substitute(U_out, rhs_tile, matrix_size, zero)
        return decrement(rhs_tile, b, result_out)

    return func


@functools.cache
def _solve_newton_func(tile: int, matrix_size_static: int, vector_size_static: int, mask: tuple):
    """MuJoCo Warp's blocked Newton solve with a stored factor (`block_cholesky`), skipping the factor's
    zero-if-apart tiles that are zero."""
    mat, zero_if_apart_tiles = _mask_constant(mask)
    back_substitute = _back_substitution_func(tile)
    load_tile = _tile_loader(tile)
    decrement = importlib.import_module(_BLOCK_CHOLESKY)._create_newton_decrement_func(
        matrix_size_static, vector_size_static
    )

    @wp.func
    def func(U: wp.array2d[float], b: wp.array2d[float], matrix_size: int, result_out: wp.array2d[float]):
        rhs_tile = wp.tile_load(
            b, shape=(matrix_size_static, 1), offset=(0, 0), storage="shared", bounds_check=False
        )
        zero = mat()
        for j in range(0, matrix_size, tile):
            for i in range(j + tile, matrix_size, tile):
                if zero_if_apart_tiles[j // tile, i // tile] != 0:
                    U_ji = load_tile(U, j, i)
                    if wp.tile_reduce(wp.add, wp.tile_map(_nonzero, U_ji))[0] == 0.0:
                        zero[j // tile, i // tile] = 1
        for i in range(0, matrix_size, tile):
            rhs_view = wp.tile_view(rhs_tile, shape=(tile, 1), offset=(i, 0))
            for j in range(0, i, tile):
                if zero[j // tile, i // tile] == 0:
                    U_ji = load_tile(U, j, i)
                    y = wp.tile_view(rhs_tile, shape=(tile, 1), offset=(j, 0))
                    wp.tile_matmul(wp.tile_transpose(U_ji), y, rhs_view, alpha=-1.0)
            U_ii = load_tile(U, i, i)
            wp.tile_lower_solve_inplace(wp.tile_transpose(U_ii), rhs_view)
        back_substitute(U, rhs_tile, matrix_size, zero)
        return decrement(rhs_tile, b, result_out)

    return func


@functools.cache
def _factor_kernel(tile: int, matrix_size: int, vector_size: int, mask: tuple, skip_noflip: bool | None):
    """MuJoCo Warp's `_update_gradient_cholesky_blocked` (`skip_noflip` None) or its `..._skip_unchanged`
    variant (True/False), with our functions."""
    factor_solve = _factor_solve_newton_func(tile, matrix_size, vector_size, mask)
    solve = _solve_newton_func(tile, matrix_size, vector_size, mask)
    reuse = skip_noflip is not None
    noflip = bool(skip_noflip)

    @wp.kernel(
        module="unique",
        enable_backward=False,
        grid_stride=False,
        module_options={"enable_mathdx_gemm": False},
    )
    def kernel(
        ctx_done_in: wp.array[bool],
        ctx_grad_in: wp.array3d[float],
        ctx_h_in: wp.array3d[float],
        quad_changed_count_in: wp.array[int],
        state_changed_count_in: wp.array[int],
        ctx_hfactor: wp.array3d[float],
        ctx_search_out: wp.array3d[float],
        ctx_search_dot_out: wp.array[float],
        ctx_newton_decrement_out: wp.array[float],
    ):
        worldid = wp.tid()
        if ctx_done_in[worldid]:
            return
        if wp.static(noflip):
            if state_changed_count_in[worldid] == 0:
                return
        refactor = True
        if wp.static(reuse):
            if quad_changed_count_in[worldid] == 0:
                refactor = False
        if not refactor:
            sums = solve(ctx_hfactor[worldid], ctx_grad_in[worldid], matrix_size, ctx_search_out[worldid])
        else:
            sums = factor_solve(
                ctx_h_in[worldid],
                ctx_grad_in[worldid],
                matrix_size,
                ctx_hfactor[worldid],
                ctx_search_out[worldid],
            )
        ctx_search_dot_out[worldid] = sums[0]
        ctx_newton_decrement_out[worldid] = sums[1]

    return kernel


def _cholesky_factorize_solve(m, d, ctx, skip_unchanged: bool = False, skip_noflip: bool = False):
    """MuJoCo Warp's `solver._cholesky_factorize_solve`, ours for a registered model on its blocked path."""
    solver = importlib.import_module(_SOLVER)
    mask = _MASKS.get(fingerprint(m))
    if mask is None or m.nv <= solver._BLOCK_CHOLESKY_DIM:
        return _ORIGINAL["factorize_solve"](m, d, ctx, skip_unchanged, skip_noflip)
    tile = tile_size()
    if len(mask) * tile != m.nv_pad:
        raise ValueError(
            f"the Hessian patch's mask covers {len(mask) * tile} dofs but MuJoCo Warp pads nv {m.nv} to "
            f"{m.nv_pad}: their padding rules differ (turn the patch off: hessian_tiles 'all')"
        )
    kernel = _factor_kernel(tile, m.nv_pad, m.nv, mask, skip_noflip if skip_unchanged else None)
    changed = ctx.quad_changed_count if skip_unchanged else d.nefc  # read only by the skip_unchanged variant
    wp.launch_tiled(
        kernel,
        dim=d.nworld,
        inputs=[
            ctx.done,
            ctx.grad.reshape(shape=(d.nworld, ctx.grad.shape[1], 1)),
            ctx.h,
            changed,
            ctx.state_changed_count if skip_noflip else changed,
            ctx.hfactor,
        ],
        outputs=[ctx.search.reshape(shape=(d.nworld, m.nv, 1)), ctx.search_dot, ctx.newton_decrement],
        block_dim=m.block_dim.update_gradient_cholesky_blocked,
    )


def install(enabled: bool = True) -> None:
    """Puts `_cholesky_factorize_solve` in MuJoCo Warp's solver (`install(False)` restores its own). Call it
    before the step's first CUDA-graph capture: a captured graph keeps the code it captured."""
    solver = importlib.import_module(_SOLVER)
    if enabled and "factorize_solve" not in _ORIGINAL:
        _ORIGINAL["factorize_solve"] = solver._cholesky_factorize_solve
        solver._cholesky_factorize_solve = _cholesky_factorize_solve
    elif not enabled and _ORIGINAL:
        solver._cholesky_factorize_solve = _ORIGINAL.pop("factorize_solve")


def installed() -> bool:
    """Whether `install()` is in effect."""
    return bool(_ORIGINAL)
