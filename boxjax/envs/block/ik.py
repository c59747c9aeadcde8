"""Guard poses by inverse kinematics on the device: damped least squares over a fixed number of iterations.

A guard command names where the two gloves should be, as offsets in our fighter's heading frame (x forward,
y left, z up) from the head, drawn from the guard region (`draw_offsets`: blends of the named `GUARD_POSES`,
jittered). `solve_arms` turns glove targets into shoulder and elbow angles for one world: a fixed
number of damped-least-squares steps, each on one pass of MJX's own kinematics (`impl="jax"`, so it runs on
any device), joint limits enforced by clipping. The Jacobian is the hinge formula on that pass's joint axes
and anchors (`hinge_jacobian`: column j = axis_j x (glove - anchor_j) for the glove's own arm), which equals
differentiating the kinematics (tested against `jax.jacfwd`) at a fraction of the compile time.

Inside a step, `track_arms` runs the same steps on the arms alone (`ArmChain`, `chain_kinematics`): each
arm's bodies posed from the stepped torso's frame, so a press costs a few dozen 3 x 3 products per world and
needs no kinematics pass of the whole arena (and runs the same on the CPU path's MuJoCo C frames).
Everything is a pure function of arrays, so it vmaps over worlds inside the jitted iteration.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx

from boxjax.mjcf.indexing import FighterIndex

ARM_JOINTS = ("shoulder_y", "shoulder_x", "shoulder_z", "elbow")
"""Joints the IK moves, per side (the wrists and fingers keep their pose)."""

GUARD_POSES: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "high_guard": ((0.16, 0.09, -0.04), (0.14, -0.09, -0.06)),
    "cover_left": ((0.06, 0.13, 0.0), (0.14, -0.06, -0.08)),
    "cover_right": ((0.14, 0.06, -0.08), (0.06, -0.13, 0.0)),
    "body_guard": ((0.18, 0.08, -0.30), (0.18, -0.08, -0.30)),
    "long_guard": ((0.38, 0.05, -0.08), (0.16, -0.09, -0.06)),
}
"""Glove targets (left, right) in metres from the head, in the heading frame; the order is the command id."""


@dataclasses.dataclass(frozen=True)
class ArmIK:
    """What one fighter's arm IK needs, resolved once from the compiled model."""

    model: mjx.Model
    """The arena on MJX's JAX implementation (its kinematics run on any device)."""
    qpos_adr: np.ndarray
    """(J,) qpos addresses of the arm joints (left side first)."""
    joint_ids: np.ndarray
    """(J,) their joint ids."""
    side: np.ndarray
    """(J,) 0 for a left-arm joint, 1 for a right-arm joint."""
    lower: np.ndarray
    """(J,) joint lower limits (rad)."""
    upper: np.ndarray
    """(J,) joint upper limits (rad)."""
    glove_site_ids: np.ndarray
    """(2,) glove keypoint sites (left, right)."""
    head_body: int
    pelvis_body: int
    targets_m: np.ndarray
    """(P, 2, 3) glove offsets of every guard pose, `GUARD_POSES` order."""


def _ancestors(model: mujoco.MjModel, body: int) -> set[int]:
    """`body` and every body above it."""
    out = {body}
    while body:
        body = int(model.body_parentid[body])
        out.add(body)
    return out


def make_arm_ik(mj_model: mujoco.MjModel, fighter: FighterIndex) -> ArmIK:
    """Resolve the arm joints, glove sites and guard targets of `fighter` in `mj_model`.

    Raises:
      ValueError: an arm joint that is not a hinge above its glove (the Jacobian's formula needs both).
    """
    names = [f"{fighter.prefix}{j}_{s}" for s in "lr" for j in ARM_JOINTS]
    joints = [mj_model.joint(n) for n in names]
    sites = [mj_model.site(f"{fighter.prefix}kp_glove_{s}").id for s in "lr"]
    side = np.repeat(np.arange(2, dtype=np.int32), len(ARM_JOINTS))
    for joint, s in zip(joints, side, strict=True):
        above = _ancestors(mj_model, int(mj_model.site_bodyid[sites[s]]))
        if joint.type[0] != mujoco.mjtJoint.mjJNT_HINGE or int(joint.bodyid[0]) not in above:
            raise ValueError(f"IK arm joint {joint.name!r} must be a hinge above its glove")
    return ArmIK(
        model=mjx.put_model(mj_model, impl="jax"),
        qpos_adr=np.array([j.qposadr[0] for j in joints], np.int32),
        joint_ids=np.array([j.id for j in joints], np.int32),
        side=side,
        lower=np.array([j.range[0] for j in joints], np.float32),
        upper=np.array([j.range[1] for j in joints], np.float32),
        glove_site_ids=np.array(sites, np.int32),
        head_body=fighter.head_body,
        pelvis_body=fighter.pelvis_body,
        targets_m=np.array(list(GUARD_POSES.values()), np.float32),
    )


def _kinematics(ik: ArmIK, qpos: jax.Array) -> mjx.Data:
    data = mjx.make_data(ik.model).replace(qpos=qpos)
    return mjx.kinematics(ik.model, data)


def glove_positions(ik: ArmIK, qpos: jax.Array) -> jax.Array:
    """(2, 3) world positions of the left and right glove for full configuration `qpos`."""
    return _kinematics(ik, qpos).site_xpos[ik.glove_site_ids]


def hinge_jacobian(axes: jax.Array, anchors: jax.Array, gloves: jax.Array, side: np.ndarray) -> jax.Array:
    """(6, J) d(left glove, right glove) / d(arm angles) from the hinges' world axes and anchors (J, 3) and
    the gloves (2, 3): each axis crossed with the lever from its anchor to its own side's glove (`side`
    (J,)); the other side's glove does not move."""
    side = jnp.asarray(side)
    columns = jnp.cross(axes, gloves[side] - anchors)  # (J, 3)
    own = (side[None, :] == jnp.arange(2)[:, None]).astype(columns.dtype)  # (2, J)
    return (own[:, None, :] * columns.T[None, :, :]).reshape(6, -1)


def glove_jacobian(ik: ArmIK, data: mjx.Data) -> jax.Array:
    """`hinge_jacobian` at the kinematics `data`."""
    joints = jnp.asarray(ik.joint_ids)
    gloves = data.site_xpos[jnp.asarray(ik.glove_site_ids)]
    return hinge_jacobian(data.xaxis[joints], data.xanchor[joints], gloves, ik.side)


def targets_from_head(head_pos: jax.Array, pelvis_mat: jax.Array, offsets_m: jax.Array) -> jax.Array:
    """(2, 3) world glove targets `offsets_m` (2, 3) from the head at `head_pos` (3,), in the heading frame
    of the pelvis orientation `pelvis_mat` (3, 3)."""
    forward = pelvis_mat[:, 0]
    yaw = jnp.arctan2(forward[1], forward[0])
    c, s = jnp.cos(yaw), jnp.sin(yaw)
    heading = jnp.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], jnp.float32)
    return head_pos + offsets_m @ heading.T


def guard_targets(ik: ArmIK, qpos: jax.Array, offsets_m: jax.Array) -> jax.Array:
    """(2, 3) world glove targets of the guard offsets `offsets_m` (2, 3) for a fighter in `qpos`."""
    data = _kinematics(ik, qpos)
    return targets_from_head(data.xpos[ik.head_body], data.xmat[ik.pelvis_body], offsets_m)


def draw_offsets(key: jax.Array, poses_m: np.ndarray, widen_m: float) -> jax.Array:
    """(2, 3) glove offsets drawn from the guard region: a random convex blend (flat Dirichlet weights) of
    the named poses' offsets `poses_m` (P, 2, 3), plus a uniform jitter of up to `widen_m` per axis."""
    k_blend, k_jitter = jax.random.split(key)
    weights = jax.random.dirichlet(k_blend, jnp.ones(poses_m.shape[0], jnp.float32))
    jitter = jax.random.uniform(k_jitter, (2, 3), jnp.float32, -widen_m, widen_m)
    return jnp.einsum("p,pij->ij", weights, jnp.asarray(poses_m)) + jitter


def nearest_pose(ik: ArmIK, offsets_m: jax.Array) -> jax.Array:
    """() int32 the named guard pose whose glove offsets are closest to `offsets_m` (2, 3)."""
    gaps = jnp.linalg.norm(jnp.asarray(ik.targets_m) - offsets_m, axis=-1).sum(-1)
    return jnp.argmin(gaps).astype(jnp.int32)


def solve_spd(a: jax.Array, b: jax.Array) -> jax.Array:
    """x (n,) with `a` x = `b` for a small symmetric positive-definite `a` (n, n): Cholesky and the two
    substitutions written out entry by entry. Plain arithmetic that XLA fuses with the code around it; a
    library solve (`jnp.linalg.solve`) is separate device calls that split XLA's CUDA graph, and on the GPU
    each split left the device idle for about a millisecond (`docs/history.md`)."""
    n = a.shape[-1]
    low: list[list[jax.Array]] = [[] for _ in range(n)]
    for i in range(n):
        for j in range(i):
            dot = sum((low[i][k] * low[j][k] for k in range(j)), jnp.zeros((), a.dtype))
            low[i].append((a[i, j] - dot) / low[j][j])
        low[i].append(jnp.sqrt(a[i, i] - sum((v * v for v in low[i]), jnp.zeros((), a.dtype))))
    y: list[jax.Array] = []
    for i in range(n):
        y.append((b[i] - sum((low[i][k] * y[k] for k in range(i)), jnp.zeros((), a.dtype))) / low[i][i])
    x: dict[int, jax.Array] = {}
    for i in reversed(range(n)):
        rest = sum((low[k][i] * x[k] for k in range(i + 1, n)), jnp.zeros((), a.dtype))
        x[i] = (y[i] - rest) / low[i][i]
    return jnp.stack([x[i] for i in range(n)])


def damped_step(jac: jax.Array, error: jax.Array, damping: float) -> jax.Array:
    """(J,) the damped-least-squares step jacᵀ (jac jacᵀ + damping² I)⁻¹ `error` for a glove Jacobian `jac`
    (6, J) and glove error `error` (6,)."""
    damped = jac @ jac.T + damping**2 * jnp.eye(jac.shape[0], dtype=jac.dtype)
    return jac.T @ solve_spd(damped, error)


def solve_arms(
    ik: ArmIK, qpos: jax.Array, targets: jax.Array, iterations: int = 12, damping: float = 0.05
) -> tuple[jax.Array, jax.Array]:
    """Arm angles that bring the gloves to `targets` (2, 3), starting from `qpos`.

    Returns:
      (angles (J,) in `ik.qpos_adr` order, residual distance in metres of the worse glove).
    """
    adr = jnp.asarray(ik.qpos_adr)
    lower, upper = jnp.asarray(ik.lower), jnp.asarray(ik.upper)
    goal = targets.reshape(-1)

    def gloves(angles: jax.Array) -> jax.Array:
        return glove_positions(ik, qpos.at[adr].set(angles)).reshape(-1)

    def step(angles: jax.Array, _) -> tuple[jax.Array, None]:
        data = _kinematics(ik, qpos.at[adr].set(angles))
        error = goal - data.site_xpos[jnp.asarray(ik.glove_site_ids)].reshape(-1)
        angles = jnp.clip(angles + damped_step(glove_jacobian(ik, data), error, damping), lower, upper)
        return angles, None

    with jax.default_matmul_precision("highest"):
        angles, _ = jax.lax.scan(step, qpos[adr], None, length=iterations)
        residual = jnp.max(jnp.linalg.norm((goal - gloves(angles)).reshape(2, 3), axis=-1))
    return angles, residual


# -- the arms alone, posed from the torso -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArmChain:
    """Each arm's bodies from its shoulder to its glove, as constants: enough to pose them from the frame of
    the body that carries the arm (`chain_kinematics`), as MuJoCo's kinematics would. Per side (left first)
    the same number of bodies and hinges."""

    parent_body: np.ndarray
    """(2,) the body each arm hangs from (a chest or clavicle)."""
    body_pos: np.ndarray
    """(2, B, 3) each chain body's position in its parent's frame."""
    body_mat: np.ndarray
    """(2, B, 3, 3) its orientation in its parent's frame."""
    hinge_body: tuple[int, ...]
    """(H,) the chain body (0..B-1) of each hinge, in MuJoCo's joint order (the same on both sides)."""
    hinge_axis: np.ndarray
    """(2, H, 3) each hinge's axis in its body's frame."""
    hinge_pos: np.ndarray
    """(2, H, 3) its anchor in its body's frame."""
    hinge_qpos_adr: np.ndarray
    """(2, H) its qpos address."""
    hinge_qpos0: np.ndarray
    """(2, H) its angle in the model's reference pose."""
    ik_slot: np.ndarray
    """(2, H) its index in the IK's angles (`ArmIK.qpos_adr` order), -1 for a hinge the IK keeps (wrist,
    forearm twist): those take the world's own angles."""
    glove_pos: np.ndarray
    """(2, 3) the glove keypoint site in the last chain body's frame."""


def _chain_of(mj_model: mujoco.MjModel, ik: ArmIK, side: int) -> tuple[list[int], list[tuple[int, int]]]:
    """One arm's chain bodies (from the first IK joint's body to the glove's) and its joints as (chain
    body index, joint id) pairs, in MuJoCo's order."""
    bodies = [int(mj_model.site_bodyid[ik.glove_site_ids[side]])]
    first = int(mj_model.jnt_bodyid[ik.joint_ids[ik.side == side][0]])
    while bodies[-1] != first:
        bodies.append(int(mj_model.body_parentid[bodies[-1]]))
    bodies.reverse()
    adr, num = mj_model.body_jntadr, mj_model.body_jntnum
    return bodies, [(i, j) for i, b in enumerate(bodies) for j in range(adr[b], adr[b] + num[b])]


def make_arm_chain(mj_model: mujoco.MjModel, ik: ArmIK) -> ArmChain:
    """The `ArmChain` of the fighter of `ik` in `mj_model`.

    Raises:
      ValueError: a chain joint that is not a hinge, or arms of different structure.
    """
    chains = [_chain_of(mj_model, ik, s) for s in range(2)]
    if [i for i, _ in chains[0][1]] != [i for i, _ in chains[1][1]]:
        raise ValueError("the two arms' chains differ in structure")
    joints = np.array([[j for _, j in hinges] for _, hinges in chains])  # (2, H)
    for j in joints.reshape(-1):
        if mj_model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            raise ValueError(f"arm chain joint {mj_model.joint(j).name!r} must be a hinge")
    bodies = np.array([b for b, _ in chains])  # (2, B)
    mats = np.zeros((bodies.size, 9))
    for out, quat in zip(mats, mj_model.body_quat[bodies.reshape(-1)], strict=True):
        mujoco.mju_quat2Mat(out, quat)
    slot = {int(j): n for n, j in enumerate(ik.joint_ids)}
    adr = mj_model.jnt_qposadr[joints]
    return ArmChain(
        parent_body=mj_model.body_parentid[bodies[:, 0]].astype(np.int32),
        body_pos=mj_model.body_pos[bodies].astype(np.float32),
        body_mat=mats.reshape(*bodies.shape, 3, 3).astype(np.float32),
        hinge_body=tuple(i for i, _ in chains[0][1]),
        hinge_axis=mj_model.jnt_axis[joints].astype(np.float32),
        hinge_pos=mj_model.jnt_pos[joints].astype(np.float32),
        hinge_qpos_adr=adr.astype(np.int32),
        hinge_qpos0=mj_model.qpos0[adr].astype(np.float32),
        ik_slot=np.vectorize(lambda j: slot.get(int(j), -1))(joints).astype(np.int32),
        glove_pos=mj_model.site_pos[ik.glove_site_ids].astype(np.float32),
    )


def _axis_rotation(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """(3, 3) rotation by `angle` (rad) about the unit `axis` (3,) (Rodrigues)."""
    k = jnp.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return jnp.eye(3) + jnp.sin(angle) * k + (1.0 - jnp.cos(angle)) * (k @ k)


def chain_kinematics(
    chain: ArmChain, parent_pos: jax.Array, parent_mat: jax.Array, qpos: jax.Array, angles: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Both arms posed from their parent bodies' world frames (2, 3) and (2, 3, 3), with the IK's hinges at
    `angles` (J,) and the others at `qpos`'s: (gloves (2, 3), IK hinge axes (J, 3), IK hinge anchors (J, 3)),
    world frame."""
    axes = jnp.zeros((angles.shape[0], 3), jnp.float32)
    anchors = jnp.zeros((angles.shape[0], 3), jnp.float32)
    gloves = []
    for s in range(2):
        pos, rot, body = parent_pos[s], parent_mat[s], -1
        for h, b in enumerate(chain.hinge_body + (len(chain.body_pos[s]) - 1,)):
            while body < b:  # enter the next chain body
                body += 1
                pos, rot = pos + rot @ chain.body_pos[s, body], rot @ chain.body_mat[s, body]
            if h == len(chain.hinge_body):
                break
            slot = int(chain.ik_slot[s, h])
            angle = angles[slot] if slot >= 0 else qpos[chain.hinge_qpos_adr[s, h]]
            anchor = pos + rot @ chain.hinge_pos[s, h]
            if slot >= 0:
                axes = axes.at[slot].set(rot @ chain.hinge_axis[s, h])
                anchors = anchors.at[slot].set(anchor)
            rot = rot @ _axis_rotation(jnp.asarray(chain.hinge_axis[s, h]), angle - chain.hinge_qpos0[s, h])
            pos = anchor - rot @ chain.hinge_pos[s, h]
        gloves.append(pos + rot @ chain.glove_pos[s])
    return jnp.stack(gloves), axes, anchors


def track_arms(
    ik: ArmIK,
    chain: ArmChain,
    frames: tuple[jax.Array, jax.Array],
    qpos: jax.Array,
    angles: jax.Array,
    targets: jax.Array,
    iterations: int,
    damping: float,
) -> tuple[jax.Array, jax.Array]:
    """`iterations` damped-least-squares steps of the arm angles `angles` (J,) toward world glove `targets`
    (2, 3), the arms posed from the world frames `frames` ((2, 3) positions, (2, 3, 3) orientations) of the
    bodies they hang from: (angles (J,), residual in metres of the worse glove after the steps)."""
    lower, upper = jnp.asarray(ik.lower), jnp.asarray(ik.upper)
    goal = targets.reshape(-1)
    with jax.default_matmul_precision("highest"):
        for _ in range(iterations):
            gloves, axes, anchors = chain_kinematics(chain, *frames, qpos, angles)
            jac = hinge_jacobian(axes, anchors, gloves, ik.side)
            angles = jnp.clip(angles + damped_step(jac, goal - gloves.reshape(-1), damping), lower, upper)
        gloves, _, _ = chain_kinematics(chain, *frames, qpos, angles)
    return angles, jnp.max(jnp.linalg.norm(targets - gloves, axis=-1))
