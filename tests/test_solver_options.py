"""The named solver options that change the physics, stepped: the CG solver (`--env solver=cg`) and the
Newton solver's iteration cap of 2 (`--env solver_iterations=2`).

The simple stance world on MuJoCo Warp (Warp's CPU device: the engine the GPU path trains on) through the
task's own physics backend, 2 worlds, 40 physics steps (10 control steps) from the stance keyframe with its
controls plus noise, as built (Newton, 4 iterations) and with each option. What an option changes: the
solver or its cap in the model that is stepped, and the trajectory, by more than `NOISE_FACTOR` times
float32 noise (the model as built stepped from the start rounded one float32 ulp up; measured at commit
time: 6.6e-7 rad, against 9.2e-3 rad for CG and 5.0e-3 rad for the cap). What it keeps: the model otherwise
(byte for byte), finite states, and contacts resolved: the feet touch the floor at every step and no contact
penetrates deeper than `PENETRATION_M` (measured: 1.81 mm as built, 1.78 mm with CG, 1.81 mm with the cap).
"""

import copy
import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from boxjax import envs
from boxjax.mjcf import SOLVER_ITERATIONS

WORLDS, PHYSICS_STEPS = 2, 40
OPTIONS = {"built": {}, "cg": {"solver": "cg"}, "cap2": {"solver_iterations": 2}}
"""The model as built and each named option (`envs.make` keywords)."""
NOISE_FACTOR = 100
"""An option must move the trajectory by more than this many times float32 noise."""
PENETRATION_M = 0.005
"""Deepest contact penetration allowed at any step: about three times the deepest measured (1.8 mm)."""


@functools.cache
def _run(name: str, nudge: bool = False) -> dict:
    """The world with `OPTIONS[name]` stepped `PHYSICS_STEPS` times (with `nudge`, from qpos rounded one
    float32 ulp up): {"env", "model" (the stepped MJX model), "qpos" (T, W, nq), "niter" (T, W) solver
    iterations, "contacts" (T, W) contact count, "penetration" (T,) deepest contact in m (-inf: none)}."""
    env = envs.make("stance", body="simple", impl="warp", num_worlds=WORLDS, **OPTIONS[name])
    model = env.mj_model
    mx, d0 = env.backend.put_model(model), env.backend.make_data(model)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stance").id)
    noise = np.random.default_rng(0).normal(0.0, 0.05, (WORLDS, model.nu))
    ctrl = np.clip(data.ctrl + noise, *model.actuator_ctrlrange.T).astype(np.float32)
    qpos = np.repeat(data.qpos[None], WORLDS, 0).astype(np.float32)
    if nudge:
        qpos = np.nextafter(qpos, np.float32(np.inf))
    start = jax.vmap(lambda q, c: d0.replace(qpos=q, ctrl=c))(jnp.asarray(qpos), jnp.asarray(ctrl))

    def one(d, _):
        d = jax.vmap(lambda d: env.backend.step(mx, d, 1))(d)
        impl = d._impl
        live = jnp.arange(impl.contact__dist.shape[0]) < impl.nacon[0]
        contacts = jnp.zeros(WORLDS, jnp.int32).at[impl.contact__worldid].add(live.astype(jnp.int32))
        penetration = -jnp.min(jnp.where(live, impl.contact__dist, jnp.inf))
        return d, (d.qpos, impl.solver_niter, contacts, penetration)

    trace = jax.jit(lambda d: jax.lax.scan(one, d, None, length=PHYSICS_STEPS)[1])(start)
    qpos, niter, contacts, penetration = (np.asarray(x) for x in trace)
    return dict(env=env, model=mx, qpos=qpos, niter=niter, contacts=contacts, penetration=penetration)


def _model_bytes(model: mujoco.MjModel) -> bytes:
    """`model` as MuJoCo saves it (every field)."""
    buffer = np.empty(mujoco.mj_sizeModel(model), np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return buffer.tobytes()


def _apart(name: str, other: str = "built", nudge: bool = False) -> float:
    """Max joint-coordinate difference (rad, m for the root) between two runs over every step."""
    return float(np.abs(_run(name)["qpos"] - _run(other, nudge)["qpos"]).max())


@pytest.mark.parametrize(
    ("name", "solver", "cap"),
    [("cg", mujoco.mjtSolver.mjSOL_CG, SOLVER_ITERATIONS), ("cap2", mujoco.mjtSolver.mjSOL_NEWTON, 2)],
    ids=["cg", "cap2"],
)
def test_a_named_solver_option_is_stepped_and_changes_the_physics_alone(name, solver, cap):
    """The option reaches the stepped model (solver, cap; the solver never ran past the cap and reached it)
    and moves the trajectory beyond float32 noise; the model is the same otherwise, the states finite, the
    feet on the floor and no contact deeper than `PENETRATION_M`."""
    run, built = _run(name), _run("built")
    assert (built["env"].mj_model.opt.solver, built["env"].mj_model.opt.iterations) == (
        mujoco.mjtSolver.mjSOL_NEWTON,
        SOLVER_ITERATIONS,
    )
    assert (run["env"].mj_model.opt.solver, run["env"].mj_model.opt.iterations) == (solver, cap)
    assert (int(run["model"].opt.solver), run["model"].opt.iterations) == (int(solver), cap)
    assert run["niter"].min() >= 1 and run["niter"].max() == cap
    noise = _apart("built", "built", nudge=True)
    moved = _apart(name)
    print(f"{name}: trajectory {moved:.3g} from the model as built, float32 noise {noise:.3g}")
    assert 0 < NOISE_FACTOR * noise < moved, (moved, noise)
    as_built = copy.deepcopy(run["env"].mj_model)
    as_built.opt.solver, as_built.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, SOLVER_ITERATIONS
    assert _model_bytes(as_built) == _model_bytes(built["env"].mj_model)
    assert np.isfinite(run["qpos"]).all()
    assert (run["contacts"] > 0).all()
    deepest = {n: float(_run(n)["penetration"].max()) for n in ("built", name)}
    print(f"{name}: deepest contact {deepest[name] * 1e3:.2f} mm, as built {deepest['built'] * 1e3:.2f} mm")
    assert deepest[name] <= PENETRATION_M, deepest
