"""MJX physics backend, chosen in one place: `impl="warp"` (MuJoCo Warp) on a GPU, `impl="jax"` elsewhere.

The environment code is the same for both. With MuJoCo Warp, contacts live in one pool shared by all
worlds (`naconmax` = worlds x per-world budget) and constraint rows in per-world slots (`njmax`); worlds are
reset with `Data.where`, and the per-world overflow bits are read every step so an overflow is counted and
reported, never silent.
"""

from __future__ import annotations

import collections
import dataclasses

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

from boxjax.physics import backend, graphs

IMPLS = ("jax", "warp")

# MuJoCo Warp's OverflowType bits (mujoco_warp types.py); the two solver-cap bits are warnings, not overflow.
OVERFLOW_BITS = {
    "nefc": 1,
    "njmax_nnz": 2,
    "broadphase": 4,
    "narrowphase": 8,
    "ccd": 16,
    "contact_match": 64,
    "nvmax": 128,
    "epa_horizon": 256,
}
SOLVER_CAP_BITS = {"iterations": 512, "linesearch_iterations": 1024}
"""MuJoCo Warp's solver-cap bits: a world whose solver (or its line search) stopped at the iteration cap; a
warning, not an overflow (the step is still usable)."""
_SOLVER_CAP_BITS = sum(SOLVER_CAP_BITS.values())

# MuJoCo Warp graph modes usable from MJX (`warp.JaxCallableGraphMode`); JAX's own capture cannot hold
# MuJoCo Warp's conditional graph nodes, so "jax" is not offered.
GRAPH_MODES = ("warp", "warp_staged", "warp_staged_ex")

SOLVER_LOOPS = ("conditional", "unrolled")
"""How MuJoCo Warp repeats its constraint solver's iterations (`PhysicsConfig.solver_loop`): "conditional",
a CUDA graph while-node that stops once every world has converged (MuJoCo Warp's default); "unrolled", the
solver's iteration cap of passes in sequence, each skipping the worlds already converged. The same result
either way (`tests/test_physics.py`); in the block world the slowest world needs the cap in nearly every
step, so both run four passes (on an H100 within 3 ms an iteration of each other; `docs/history.md`). It
sets MuJoCo Warp's `Option.graph_conditional`, which also picks plain loops over graph conditionals in
paths boxjax's models do not take (sleeping bodies' broadphase, flex collisions, implicit derivatives'
PCG)."""

WARP_LANES = 32
"""Threads in a CUDA warp: a launch block size (`PhysicsConfig.block_dims`) is a multiple of it."""
MAX_BLOCK_THREADS = 1024
"""The most threads one CUDA block holds."""

FACTOR_TREES = ("all", "large")
"""Which kinematic trees our factorisation takes when it runs (`PhysicsConfig.fused_factor_trees`): "all",
every tree of more than 6 dofs (`factor_patch.all_trees_on_sparse_path`: the block world's 43-DoF opponent
rides in our launch; the default); "large", only those over MuJoCo Warp's dense-block limit (64 dofs: the
89-DoF bodies), the others by its tile Cholesky. The same LDLᵀ either way (`tests/test_factor.py`)."""


@dataclasses.dataclass(frozen=True)
class PhysicsConfig:
    """How the physics runs."""

    impl: str = "jax"
    """"jax" (MJX in JAX, any device) or "warp" (MuJoCo Warp, CUDA only)."""
    num_worlds: int = 1
    """Worlds stepped together (sizes MuJoCo Warp's shared contact pool)."""
    contacts_per_world: int = 64
    """Contact slots per world; the pool holds num_worlds times this."""
    njmax: int = 256
    """Constraint-row slots per world."""
    substeps: int = 4
    """Physics steps per control step."""
    fused_factor: bool | None = None
    """MuJoCo Warp only: our one-launch mass-matrix factorisation (`boxjax.physics.factor`); None = on
    exactly when a kinematic tree exceeds MuJoCo Warp's dense limit (the 89-DoF bodies)."""
    fused_factor_trees: str | None = None
    """MuJoCo Warp with our factorisation on only: which trees it takes, one of `FACTOR_TREES`; None = "all"
    where it runs."""
    graph_mode: str | None = None
    """MuJoCo Warp on a GPU only: how Warp captures CUDA graphs, one of `GRAPH_MODES`; None = MJX's default
    ("warp": one graph per set of buffer addresses; the staged modes copy through fixed buffers instead)."""
    solver_loop: str | None = None
    """MuJoCo Warp only: how the constraint solver repeats its iterations, one of `SOLVER_LOOPS`; None =
    MuJoCo Warp's default ("conditional")."""
    block_dims: tuple[tuple[str, int], ...] = ()
    """MuJoCo Warp only: launch block sizes of its tiled kernels, (name, threads) pairs overriding the named
    fields of MJX's `BlockDim` (e.g. (("update_gradient_cholesky_blocked", 64),): the Newton Hessian's
    blocked Cholesky with two warps per world); empty = MuJoCo Warp's own. The same equations; a tile
    reduction may sum in another order (float32 round-off)."""
    substeps_in_one_call: bool = False
    """MuJoCo Warp only: all `substeps` of a control step in one FFI call (`boxjax.physics.one_call`, same
    result) rather than MJX's one call each; impl "jax" has no such calls and loops in XLA either way. Off
    by default: in MJX's default graph mode it did not pay (docs/history.md)."""

    def __post_init__(self) -> None:
        """Reject unknown implementations and graph modes and non-positive sizes."""
        if self.impl not in IMPLS:
            raise ValueError(f"unknown physics impl {self.impl!r}; valid: {', '.join(IMPLS)}")
        if self.graph_mode is not None and self.graph_mode not in GRAPH_MODES:
            raise ValueError(f"unknown graph mode {self.graph_mode!r}; valid: {', '.join(GRAPH_MODES)}")
        if self.graph_mode is not None and self.impl != "warp":
            raise ValueError(f"graph mode {self.graph_mode!r} applies to impl 'warp' only, not {self.impl!r}")
        if self.solver_loop is not None and self.solver_loop not in SOLVER_LOOPS:
            raise ValueError(f"unknown solver loop {self.solver_loop!r}; valid: {', '.join(SOLVER_LOOPS)}")
        if self.solver_loop is not None and self.impl != "warp":
            raise ValueError(
                f"solver loop {self.solver_loop!r} applies to impl 'warp' only, not {self.impl!r}"
            )
        check_block_dims(self.block_dims, self.impl)
        trees = self.fused_factor_trees
        if trees is not None and trees not in FACTOR_TREES:
            raise ValueError(f"unknown fused_factor_trees {trees!r}; valid: {', '.join(FACTOR_TREES)}")
        if trees is not None and (self.impl != "warp" or self.fused_factor is False):
            raise ValueError(
                f"fused_factor_trees {trees!r} needs impl 'warp' with our factorisation on "
                f"(impl {self.impl!r}, fused_factor {self.fused_factor})"
            )
        for name in ("num_worlds", "contacts_per_world", "njmax", "substeps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"PhysicsConfig.{name} must be positive, got {getattr(self, name)}")


def default_impl() -> str:
    """ "warp" when JAX's default backend is a GPU, else "jax"."""
    return "warp" if jax.default_backend() == "gpu" else "jax"


def resolve_impl(impl: str | None) -> str:
    """`impl`, or the default for this machine ("warp" on a GPU, else "jax").

    "warp" on a CPU runs MuJoCo Warp's kernels on Warp's CPU device: slow, but useful for tests.
    """
    impl = default_impl() if impl in (None, "auto") else impl
    if impl not in IMPLS:
        raise ValueError(f"unknown physics impl {impl!r}; valid: auto, {', '.join(IMPLS)}")
    return impl


def block_dim_names() -> tuple[str, ...]:
    """The launch block sizes MJX lets a MuJoCo Warp model set (its `BlockDim` fields)."""
    from mujoco.mjx.warp.types import BlockDim

    return tuple(field.name for field in dataclasses.fields(BlockDim))


def check_block_dims(block_dims: tuple[tuple[str, int], ...], impl: str) -> None:
    """Refuse `PhysicsConfig.block_dims` away from MuJoCo Warp, naming an unknown kernel or a size that is
    no positive multiple of `WARP_LANES` up to `MAX_BLOCK_THREADS`."""
    if not block_dims:
        return
    if impl != "warp":
        raise ValueError(f"block_dims apply to impl 'warp' only, not {impl!r}")
    names = block_dim_names()
    for name, threads in block_dims:
        if name not in names:
            raise ValueError(f"unknown MuJoCo Warp block dim {name!r}; valid: {', '.join(names)}")
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise ValueError(f"block dim {name} must be an int number of threads, got {threads!r}")
        if threads <= 0 or threads % WARP_LANES or threads > MAX_BLOCK_THREADS:
            raise ValueError(
                f"block dim {name}={threads}: threads must be a positive multiple of {WARP_LANES} "
                f"up to {MAX_BLOCK_THREADS}"
            )
    repeated = sorted(n for n, count in collections.Counter(n for n, _ in block_dims).items() if count > 1)
    if repeated:
        raise ValueError(f"block dim given twice: {', '.join(repeated)}")


def with_block_dims(model: mjx.Model, block_dims: tuple[tuple[str, int], ...]) -> mjx.Model:
    """A MuJoCo Warp `model` whose tiled kernels launch with `block_dims` (`PhysicsConfig.block_dims`);
    the same model where none are given."""
    if not block_dims:
        return model
    sizes = dataclasses.replace(model._impl.block_dim, **dict(block_dims))
    return model.tree_replace({"_impl.block_dim": sizes})


def put_model(mj_model: mujoco.MjModel, config: PhysicsConfig) -> mjx.Model:
    """The model on the device; with Warp, MuJoCo Warp's step modules compiled side by side
    (`boxjax.physics.preload`), its gravity-compensation launch left out where no body has any
    (`boxjax.physics.passive_patch`), solver-cap warnings masked so they cannot flood stdout, and
    `config`'s solver loop and launch block sizes set."""
    if config.impl == "warp":
        import warp

        from boxjax.physics import factor_patch, passive_patch, preload

        warp.config.quiet = True  # one line per loaded kernel module otherwise
        factor_patch.install(fused_factor(mj_model, config))
        passive_patch.install()  # its put_model hook registers the model
        with factor_patch.all_trees_on_sparse_path(all_trees_fused(mj_model, config)):
            model = mjx.put_model(mj_model, impl="warp", graph_mode=_graph_mode(config))
    else:
        model = mjx.put_model(mj_model, impl=config.impl)
    if config.impl == "warp":
        preload_s = preload.preload_step_modules()
        if preload_s:
            print(f"Warp step modules preloaded in {preload_s:.1f} s", flush=True)
        model = with_block_dims(with_solver_loop(quiet(model), config.solver_loop), config.block_dims)
    return model


def fused_factor(mj_model: mujoco.MjModel, config: PhysicsConfig) -> bool:
    """Whether our factorisation runs for `mj_model` (MuJoCo Warp): `config.fused_factor`, or where None,
    exactly when a tree exceeds MuJoCo Warp's dense limit (`factor_patch.needs_fused_factor`)."""
    from boxjax.physics import factor_patch

    if config.fused_factor is None:
        return factor_patch.needs_fused_factor(mj_model)
    return config.fused_factor


def factor_trees(mj_model: mujoco.MjModel, config: PhysicsConfig) -> str:
    """Which trees our factorisation takes for `mj_model`: "all" (every tree of more than 6 dofs), "large"
    (`FACTOR_TREES`), or "none" (MuJoCo Warp's own, or impl "jax")."""
    return trees_taken(config.impl == "warp" and fused_factor(mj_model, config), config.fused_factor_trees)


def trees_taken(kernel_runs: bool, fused_factor_trees: str | None) -> str:
    """`factor_trees` from whether our factorisation runs and `PhysicsConfig.fused_factor_trees`."""
    if not kernel_runs:
        return "none"
    return "large" if fused_factor_trees == "large" else "all"


def all_trees_fused(mj_model: mujoco.MjModel, config: PhysicsConfig) -> bool:
    """Whether every tree of more than 6 dofs goes to our factorisation (`factor_trees` "all")."""
    return factor_trees(mj_model, config) == "all"


def _graph_mode(config: PhysicsConfig) -> object | None:
    """MJX's enum value for `config.graph_mode` (None leaves MJX's default; only Warp on a GPU has modes)."""
    if config.graph_mode is None:
        return None
    if jax.default_backend() != "gpu":
        raise ValueError(
            f"graph_mode {config.graph_mode!r} needs MuJoCo Warp on a CUDA GPU; here JAX runs on "
            f"{jax.default_backend()!r} (leave graph_mode unset)"
        )
    from mujoco.mjx.warp.types import GraphMode

    return GraphMode[config.graph_mode.upper()]


def make_data(mj_model: mujoco.MjModel, config: PhysicsConfig) -> mjx.Data:
    """A one-world data template with the contact and constraint slots of `config`."""
    if config.impl == "warp":
        from boxjax.physics import factor_patch

        with factor_patch.all_trees_on_sparse_path(all_trees_fused(mj_model, config)):  # as put_model's
            return mjx.make_data(
                mj_model,
                impl="warp",
                naconmax=config.num_worlds * config.contacts_per_world,
                njmax=config.njmax,
            )
    return mjx.make_data(mj_model, impl="jax")


def step(model: mjx.Model, data: mjx.Data, substeps: int, one_call: bool = False) -> mjx.Data:
    """`substeps` physics steps of one world (vmap it for many); with MuJoCo Warp and `one_call`, all of
    them in one FFI call (`PhysicsConfig.substeps_in_one_call`).

    Traced at full float32 matmul precision: on Hopper GPUs JAX's default lets XLA use TF32, which
    moved the ``impl="jax"`` physics past the MuJoCo C parity tolerance.
    """
    with jax.default_matmul_precision("highest"):
        if one_call and model.impl == mjx.Impl.WARP:
            from boxjax.physics import one_call as warp_one_call

            return warp_one_call.step(model, data, substeps)
        return jax.lax.fori_loop(0, substeps, lambda _, d: mjx.step(model, d), data)


def forward(model: mjx.Model, data: mjx.Data) -> mjx.Data:
    """Kinematics and everything derived from qpos/qvel, without advancing time."""
    with jax.default_matmul_precision("highest"):
        return mjx.forward(model, data)


def overflow_flags(data: mjx.Data) -> dict[str, jax.Array]:
    """() float32 per overflow kind: 1.0 if this world overflowed (always 0 with impl "jax")."""
    bits = getattr(getattr(data, "_impl", None), "overflow", None)
    if bits is None:
        return {name: jnp.zeros((), jnp.float32) for name in OVERFLOW_BITS}
    word = jnp.asarray(bits).reshape(-1)[0].astype(jnp.int32) & ~_SOLVER_CAP_BITS
    return {name: ((word & bit) != 0).astype(jnp.float32) for name, bit in OVERFLOW_BITS.items()}


def solver_caps(data: mjx.Data) -> dict[str, jax.Array]:
    """() float32 per solver cap (`SOLVER_CAP_BITS`): 1.0 if this world's solver hit it since the world was
    reset (MuJoCo Warp's bits are sticky until then; always 0 with impl "jax")."""
    bits = getattr(getattr(data, "_impl", None), "overflow", None)
    if bits is None:
        return {name: jnp.zeros((), jnp.float32) for name in SOLVER_CAP_BITS}
    word = jnp.asarray(bits).reshape(-1)[0].astype(jnp.int32)
    return {name: ((word & bit) != 0).astype(jnp.float32) for name, bit in SOLVER_CAP_BITS.items()}


FIGURE_NAMES = (*(f"overflow/{k}" for k in OVERFLOW_BITS), *(f"caps/{k}" for k in SOLVER_CAP_BITS))
"""The names of `figures`' entries."""


def figures(data: mjx.Data) -> dict[str, jax.Array]:
    """A world's physics figures for its step's metrics: `overflow/<kind>` (`overflow_flags`) and
    `caps/<cap>` (`solver_caps`), each () float32."""
    out = {f"overflow/{k}": v for k, v in overflow_flags(data).items()}
    out.update({f"caps/{k}": v for k, v in solver_caps(data).items()})
    return out


def quiet(model: mjx.Model) -> mjx.Model:
    """A MuJoCo Warp model that prints no per-world warning (overflow or solver cap: each would be a
    device printf per world per step); the same model for impl "jax". Overflows are read from the
    per-world bits instead (`overflow_flags`, `solver_caps`)."""
    if getattr(model, "impl", None) != mjx.Impl.WARP:
        return model
    return model.tree_replace({"opt._impl.warn_overflow": 0})


def with_solver_loop(model: mjx.Model, loop: str | None) -> mjx.Model:
    """A MuJoCo Warp `model` whose constraint solver repeats its iterations by `loop` (`SOLVER_LOOPS`;
    None leaves MuJoCo Warp's default)."""
    if loop is None:
        return model
    return model.tree_replace({"opt._impl.graph_conditional": loop == "conditional"})


is_finite = backend.is_finite


@dataclasses.dataclass(frozen=True)
class MjxBackend:
    """MJX as a task's physics backend (`boxjax.physics.backend.Backend`): the functions above, `config`
    applied."""

    config: PhysicsConfig

    @property
    def impl(self) -> str:
        """ "jax" or "warp"."""
        return self.config.impl

    @property
    def substeps_in_one_call(self) -> bool:
        """`PhysicsConfig.substeps_in_one_call`."""
        return self.config.substeps_in_one_call

    @property
    def figure_names(self) -> tuple[str, ...]:
        """`FIGURE_NAMES`."""
        return FIGURE_NAMES

    def put_model(self, mj_model: mujoco.MjModel) -> mjx.Model:
        """`put_model` with this config."""
        return put_model(mj_model, self.config)

    def make_data(self, mj_model: mujoco.MjModel) -> mjx.Data:
        """`make_data` with this config's slots."""
        return make_data(mj_model, self.config)

    def step(self, model: mjx.Model, data: mjx.Data, substeps: int) -> mjx.Data:
        """`step`, in one call when the config asks for it."""
        return step(model, data, substeps, self.config.substeps_in_one_call)

    def figures(self, data: mjx.Data) -> dict[str, jax.Array]:
        """`figures`."""
        return figures(data)

    def is_finite(self, data: mjx.Data) -> jax.Array:
        """`is_finite`."""
        return is_finite(data)

    def host_snapshot(self) -> tuple[frozenset, int]:
        """`graphs.snapshot`: MuJoCo Warp's graph keys and our kernel's factorisations so far."""
        return graphs.snapshot()

    def host_figures(self, before: tuple[frozenset, int]) -> dict[str, float]:
        """`graphs.since`: graphs captured and factorisations run since `before` (0 with impl "jax")."""
        return graphs.since(before)
