"""Punches as a distribution: every throw a new punch, made on the device from a bank of solved keyframes.

The classic library (`punches`) is a table of 36 trajectories, the same for every run. Here a punch is a
handful of numbers (`Draw`): its kind and target, and normalised parameters in [0, 1] for its speed, where
it aims on the target (azimuth and elevation on the head's or chest's surface), the distance the opponent
stands at, its chamber (how far a hook swings out, when), how long the glove stays on the target, how slowly
it comes back; a feint stops part way and is not judged; a combination chains two or three punches with no
gap between them; a southpaw sequence is thrown from the mirrored stance. `spec_of` turns a draw into a
`PunchSpec` (times and two keyframes, the chamber and the impact), and `joints_at` gives the opponent's
library joints at any time of it: minimum-jerk segments guard -> chamber -> impact -> held -> guard, as
`experiments/make_punches.py` makes the classic ones.

Southpaw: the bank is solved in the orthodox stance (the left hand leading). A southpaw punch is its mirror
image about the fighters' centre line (the vertical plane through both centres of mass), the right hand
leading: his joints mirrored (`boxjax.mjcf.mirror`: left and right swapped, the midline hinges about x and z
negated), his guard with them, the other glove punching, and his root mirrored too (`stances`, which the env
applies). The aim keeps its sign: the azimuth is measured toward the punching hand's side, which mirrors
with the hand.

The keyframes come from a `Bank` (`boxjax/data/punch-bank.npz`, written by `experiments/make_punches.py
--bank`): for each kind and target, inverse-kinematics solutions on a grid of aims and distances; a draw's
keyframes blend the grid's (trilinear, in joint space).

Held out: each normalised parameter's range has windows (`HELDOUT_WINDOWS`) that training never draws from
(`Distribution.sample` maps its uniform draws around them); the shipped held-out set
(`boxjax/data/punches-heldout.npz`, `heldout_table`) draws every parameter inside the windows, with a seed of
its own; so does the southpaw held-out set (`boxjax/data/punches-heldout-southpaw.npz`, every punch from the
mirrored stance, another seed). No training punch shares a speed, aim, distance, chamber, hold or retraction
with a held-out one.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import boxjax
from boxjax.envs.block import punches
from boxjax.mjcf import mirror

BANK_PATH = os.path.join(boxjax.DATA_DIR, "punch-bank.npz")
"""The keyframe bank shipped with the package (`experiments/make_punches.py --bank`)."""
HELDOUT_PATH = os.path.join(boxjax.DATA_DIR, "punches-heldout.npz")
"""The held-out set shipped with the package (`experiments/make_punches.py --heldout`)."""
HELDOUT_SOUTHPAW_PATH = os.path.join(boxjax.DATA_DIR, "punches-heldout-southpaw.npz")
"""The southpaw held-out set shipped with the package (`experiments/make_punches.py --heldout-southpaw`)."""
HELDOUT_SETS = {"heldout": HELDOUT_PATH, "heldout-southpaw": HELDOUT_SOUTHPAW_PATH}
"""The shipped held-out sets by `BlockConfig.punch_source` name."""
BANK_FORMAT = 1
HELDOUT_FORMAT = 1
PARAMS = ("speed", "azimuth", "elevation", "distance", "chamber", "chamber_at", "hold", "retract", "feint")
"""The normalised parameters of a draw, in `Draw.u` order."""
HELDOUT_WINDOWS = ((0.2, 0.3), (0.7, 0.8))
"""Parts of every normalised parameter's [0, 1] that only the held-out set draws from."""
MAX_COMBO = 3
STANCE_STREAM = 1 << 16
"""What `sample_draw` folds into its key for the stance: a stream apart from its split's (whose keys are
`fold_in(key, i)` for small i), so adding the stance left every other draw as it was."""


@dataclasses.dataclass(frozen=True)
class Ranges:
    """What a normalised parameter of 0 and 1 mean (the physical ranges of the distribution)."""

    extend_s: tuple[float, float] = (0.30, 0.12)
    """Guard to impact of a straight punch (u = 0 slowest, 1 fastest); curved punches take `curved_slower`
    times as long."""
    curved_slower: float = 1.6
    chamber_scale: tuple[float, float] = (0.5, 1.4)
    """How far toward the bank's chamber point a hook or uppercut swings (0: straight at the target)."""
    chamber_at: tuple[float, float] = (0.35, 0.65)
    """Share of the extension spent reaching the chamber point."""
    hold_s: tuple[float, float] = (0.0, 0.06)
    """Time the glove stays on the target."""
    retract: tuple[float, float] = (1.2, 2.0)
    """Retraction's duration over the extension's."""
    feint_depth: tuple[float, float] = (0.3, 0.6)
    """How far toward the target a feint goes (share of the joint path) before it turns back."""
    speed_bands_s: tuple[float, float] = (0.17, 0.24)
    """Straight-punch extension times below the first are tagged "fast", below the second "medium"."""


@dataclasses.dataclass(frozen=True)
class Distribution:
    """How punches are drawn: the physical ranges, the odds of combinations and feints, the held-out
    windows, and whether draws come from the windows (the held-out set) or around them (training)."""

    ranges: Ranges = Ranges()
    combo_odds: tuple[float, ...] = (0.6, 0.3, 0.1)
    """Odds of a sequence of 1, 2 and 3 punches thrown back to back."""
    feint_odds: float = 0.1
    """Odds that a punch is a feint."""
    southpaw_share: float = 0.3
    """Odds that a sequence (a punch and the punches chained to it) is thrown from the mirrored (southpaw)
    stance. Southpaws are a minority in the ring; training meets more of them than that, so that the
    right-hand lead is learned and not only the left, while the orthodox stance, that of the classic
    library, the first held-out set and most opponents, stays the larger share."""
    heldout: bool = False
    """Draw inside `HELDOUT_WINDOWS` (the held-out set) instead of around them (training)."""

    def unit(self, key: jax.Array, shape=()) -> jax.Array:
        """Normalised parameters in [0, 1], uniform over the training part (or the held-out windows)."""
        return from_unit(jax.random.uniform(key, shape, jnp.float32), HELDOUT_WINDOWS, self.heldout)


def from_unit(v: jax.Array, windows: tuple[tuple[float, float], ...], inside: bool) -> jax.Array:
    """Map v uniform in [0, 1) onto the union of `windows` (inside) or of the rest of [0, 1] (not),
    uniformly: the pieces laid end to end."""
    edges = [0.0, *[e for w in windows for e in w], 1.0]
    pieces = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    pieces = pieces[1::2] if inside else pieces[0::2]
    total = sum(b - a for a, b in pieces)
    x, start, out = v * total, 0.0, jnp.zeros_like(v)
    for a, b in pieces:
        out = jnp.where((x >= start) & (x < start + (b - a)), a + (x - start), out)
        start += b - a
    return jnp.where(x >= start, pieces[-1][1], out)


@struct.dataclass
class Bank:
    """Solved keyframes on the device (`load_bank`): K kinds, G targets, a grid of D distances, A azimuths
    and E elevations, J library joints."""

    guard: jax.Array
    """(J,) the guard."""
    impact: jax.Array
    """(K, G, D, A, E, J) the glove on the target."""
    chamber: jax.Array
    """(K, G, D, A, E, J) the glove at the kind's chamber point (the impact for straight punches)."""
    hand: jax.Array
    """(K,) int32 0 left, 1 right."""
    chambered: jax.Array
    """(K,) float32 1 for kinds with a chamber (hooks, uppercuts)."""
    distance_m: jax.Array
    """(D,) the grid's distances between the fighters' centres of mass."""
    mirror_of: jax.Array
    """(J,) int32 the joint each joint takes its mirrored angle from (`boxjax.mjcf.mirror.joint_mirror`)."""
    mirror_sign: jax.Array
    """(J,) float32 and its sign: mirrored joints = mirror_sign * joints[mirror_of]."""


BANK_FIELDS = ("guard", "impact", "chamber", "hand", "chambered", "distance_m")
"""The `Bank` arrays a bank file holds (the mirror is read from the body)."""


@dataclasses.dataclass(frozen=True)
class HostBank:
    """A bank file in host memory: the device arrays' numpy copies and the labels."""

    arrays: dict
    joint_names: tuple[str, ...]
    kinds: tuple[str, ...]
    targets: tuple[str, ...]
    body: str
    bodies: tuple[str, ...]
    distance_m: float
    """The distance the grid is centred on: the scene's (the classic library's)."""


def save_bank(path: str, bank: HostBank) -> None:
    """Write a bank file (compressed npz, no pickled objects)."""
    np.savez_compressed(
        path,
        format_version=np.int32(BANK_FORMAT),
        joint_names=np.array(bank.joint_names),
        kinds=np.array(bank.kinds),
        targets=np.array(bank.targets),
        body=np.array(bank.body),
        bodies=np.array(bank.bodies),
        centre_distance_m=np.float32(bank.distance_m),
        **{k: np.asarray(v) for k, v in bank.arrays.items()},
    )


def load_bank(path: str | None = None) -> HostBank:
    """Read a bank file (default `BANK_PATH`); a clear error for another format or missing keys."""
    path = path or BANK_PATH
    with np.load(path, allow_pickle=False) as f:
        version = int(f["format_version"]) if "format_version" in f else -1
        if version != BANK_FORMAT:
            raise ValueError(f"{path}: punch bank format {version}, expected {BANK_FORMAT}")
        missing = sorted(set(BANK_FIELDS) - set(f.files))
        if missing:
            raise ValueError(f"{path}: punch bank lacks {missing}")
        bank = HostBank(
            arrays={k: np.asarray(f[k]) for k in BANK_FIELDS},
            joint_names=tuple(str(s) for s in f["joint_names"]),
            kinds=tuple(str(s) for s in f["kinds"]),
            targets=tuple(str(s) for s in f["targets"]),
            body=str(f["body"]),
            bodies=tuple(str(s) for s in f["bodies"]),
            distance_m=float(f["centre_distance_m"]),
        )
    if bank.kinds != punches.KINDS or bank.targets != punches.TARGETS:
        raise ValueError(f"{path}: punch bank kinds/targets {bank.kinds}/{bank.targets} are not the task's")
    return bank


def device_bank(bank: HostBank) -> Bank:
    """The bank's arrays on the device (float32; hand int32), with its joints' mirror."""
    a = bank.arrays
    mirror_of, mirror_sign = mirror.joint_mirror(bank.body, bank.joint_names)
    return Bank(
        guard=jnp.asarray(a["guard"], jnp.float32),
        impact=jnp.asarray(a["impact"], jnp.float32),
        chamber=jnp.asarray(a["chamber"], jnp.float32),
        hand=jnp.asarray(a["hand"], jnp.int32),
        chambered=jnp.asarray(a["chambered"], jnp.float32),
        distance_m=jnp.asarray(a["distance_m"], jnp.float32),
        mirror_of=jnp.asarray(mirror_of, jnp.int32),
        mirror_sign=jnp.asarray(mirror_sign, jnp.float32),
    )


@struct.dataclass
class Draw:
    """One punch as drawn: discrete choices and normalised parameters (`PARAMS`)."""

    kind: jax.Array
    """() int32 index into `punches.KINDS`."""
    target: jax.Array
    """() int32 index into `punches.TARGETS`."""
    u: jax.Array
    """(len(PARAMS),) float32 normalised parameters in [0, 1]."""
    feint: jax.Array
    """() float32 1 for a feint."""
    combo_left: jax.Array
    """() int32 punches still to follow this one back to back."""
    southpaw: jax.Array
    """() int32 1 for a punch from the mirrored stance."""


@struct.dataclass
class PunchSpec:
    """One punch made from a draw: what the opponent's joints follow and how it is judged and tagged."""

    keys: jax.Array
    """(5, J) keyframes: guard, chamber, impact, impact (held), guard (mirrored for a southpaw punch)."""
    times_s: jax.Array
    """(5,) their times from the punch's start (the chamber's is 0 for a straight punch)."""
    length: jax.Array
    """() int32 control steps of the punch."""
    impact: jax.Array
    """() int32 control step at which the glove is on the target."""
    hand: jax.Array
    """() int32 0 left glove, 1 right (the glove that punches, the right one for a southpaw jab)."""
    target: jax.Array
    """() int32 index into `punches.TARGETS`."""
    kind: jax.Array
    """() int32 index into `punches.KINDS`."""
    speed: jax.Array
    """() int32 index into `punches.SPEEDS` (band of its extension time)."""
    feint: jax.Array
    """() float32 1 for a feint (thrown, never judged)."""
    combo_left: jax.Array
    """() int32 punches still to follow back to back."""
    distance_offset_m: jax.Array
    """() how much farther than the scene's distance the opponent stands for it."""
    southpaw: jax.Array
    """() int32 1 for a punch from the mirrored stance (the env mirrors his root and the rest of his guard:
    `stances`)."""


def lerp(lo_hi: tuple[float, float], u: jax.Array) -> jax.Array:
    """lo + u (hi - lo)."""
    return lo_hi[0] + u * (lo_hi[1] - lo_hi[0])


def blend(grid: jax.Array, coords: jax.Array) -> jax.Array:
    """(J,) trilinear blend of `grid` (D, A, E, J) at continuous grid coordinates (3,) in [0, size - 1]."""
    out = grid
    for axis in range(3):
        size = out.shape[0]
        c = jnp.clip(coords[axis], 0.0, size - 1.0)
        lo = jnp.minimum(jnp.floor(c).astype(jnp.int32), size - 2)
        w = c - lo
        out = (1.0 - w) * out[lo] + w * out[lo + 1]
    return out


def spec_of(bank: Bank, ranges: Ranges, draw: Draw, dt_s: float) -> PunchSpec:
    """The punch `draw` describes, its times rounded to control steps of `dt_s`."""
    u = dict(zip(PARAMS, draw.u, strict=True))
    shape = bank.impact.shape
    coords = jnp.stack([u["distance"], u["azimuth"], u["elevation"]]) * (jnp.asarray(shape[2:5]) - 1.0)
    impact = blend(bank.impact[draw.kind, draw.target], coords)
    chamber = blend(bank.chamber[draw.kind, draw.target], coords)
    chambered = bank.chambered[draw.kind]
    straight_s = lerp(ranges.extend_s, u["speed"])
    extend = straight_s * jnp.where(chambered > 0, ranges.curved_slower, 1.0)
    scale = lerp(ranges.chamber_scale, u["chamber"])
    mid = bank.guard + lerp(ranges.chamber_at, u["chamber_at"]) * (impact - bank.guard)
    chamber = jnp.where(chambered > 0, mid + scale * (chamber - mid), bank.guard)
    depth = lerp(ranges.feint_depth, u["feint"])
    impact = jnp.where(draw.feint > 0, bank.guard + depth * (impact - bank.guard), impact)
    t_chamber = chambered * lerp(ranges.chamber_at, u["chamber_at"]) * extend
    hold = jnp.where(draw.feint > 0, 0.0, lerp(ranges.hold_s, u["hold"]))
    t_end = extend + hold + lerp(ranges.retract, u["retract"]) * extend
    times = jnp.stack([0.0, t_chamber, extend, extend + hold, t_end])
    length = jnp.ceil(t_end / dt_s - 1e-4).astype(jnp.int32) + 1
    speed = (straight_s >= ranges.speed_bands_s[0]).astype(jnp.int32) + (
        straight_s >= ranges.speed_bands_s[1]
    )
    centre = 0.5 * (bank.distance_m[0] + bank.distance_m[-1])
    keys = jnp.stack([bank.guard, chamber, impact, impact, bank.guard])
    southpaw = draw.southpaw > 0
    return PunchSpec(
        keys=jnp.where(southpaw, bank.mirror_sign * keys[:, bank.mirror_of], keys),
        times_s=times.astype(jnp.float32),
        length=length,
        impact=jnp.clip(jnp.round(extend / dt_s).astype(jnp.int32), 1, length - 1),
        hand=jnp.where(southpaw, 1 - bank.hand[draw.kind], bank.hand[draw.kind]),
        target=draw.target,
        kind=draw.kind,
        speed=speed.astype(jnp.int32),
        feint=draw.feint,
        combo_left=draw.combo_left,
        distance_offset_m=lerp((bank.distance_m[0], bank.distance_m[-1]), u["distance"]) - centre,
        southpaw=draw.southpaw,
    )


def joints_at(spec: PunchSpec, t_s: jax.Array) -> jax.Array:
    """(J,) the library joints `t_s` seconds into the punch: minimum-jerk between its keyframes (at rest
    at each), the guard before 0 and after the end."""
    times = spec.times_s
    seg = jnp.clip(jnp.sum(t_s >= times[1:4]), 0, 3)
    t0, t1 = times[seg], times[seg + 1]
    s = jnp.clip((t_s - t0) / jnp.maximum(t1 - t0, 1e-6), 0.0, 1.0)
    s = jnp.where(t_s < 0.0, 0.0, s)
    smooth = s * s * s * (10.0 + s * (-15.0 + 6.0 * s))
    return spec.keys[seg] + smooth * (spec.keys[seg + 1] - spec.keys[seg])


def sample_draw(dist: Distribution, key: jax.Array) -> Draw:
    """A first punch from the distribution: kind, target, parameters, feint, the sequence's length and its
    stance (its key folded from `key`, so the rest is drawn as without a stance)."""
    k_kind, k_target, k_u, k_feint, k_combo = jax.random.split(key, 5)
    k_stance = jax.random.fold_in(key, STANCE_STREAM)
    southpaw = jax.random.uniform(k_stance) < dist.southpaw_share
    combo = jax.random.choice(k_combo, len(dist.combo_odds), p=jnp.asarray(dist.combo_odds))
    return Draw(
        kind=jax.random.randint(k_kind, (), 0, len(punches.KINDS)),
        target=jax.random.randint(k_target, (), 0, len(punches.TARGETS)),
        u=dist.unit(k_u, (len(PARAMS),)),
        feint=(jax.random.uniform(k_feint) < dist.feint_odds).astype(jnp.float32),
        combo_left=combo.astype(jnp.int32),
        southpaw=southpaw.astype(jnp.int32),
    )


def follow_up(dist: Distribution, first: Draw, key: jax.Array) -> Draw:
    """The next punch of a sequence: drawn anew, at the same distance and in the same stance (no step
    between them), one fewer to follow."""
    draw = sample_draw(dist, key)
    u = draw.u.at[PARAMS.index("distance")].set(first.u[PARAMS.index("distance")])
    return draw.replace(u=u, combo_left=jnp.maximum(first.combo_left - 1, 0), southpaw=first.southpaw)


@struct.dataclass
class DrawTable:
    """A fixed set of draws (the held-out set) on the device: P rows, sequences as chains of rows."""

    kind: jax.Array
    """(P,) int32."""
    target: jax.Array
    """(P,) int32."""
    u: jax.Array
    """(P, len(PARAMS)) float32."""
    feint: jax.Array
    """(P,) float32."""
    combo_left: jax.Array
    """(P,) int32 rows still to follow; row p + 1 follows row p when it is positive."""
    southpaw: jax.Array
    """(P,) int32 1 for a punch from the mirrored stance (0 for every row of a file without them)."""
    starts: jax.Array
    """(S,) int32 rows that begin a sequence (what a new throw draws from, uniformly)."""

    def row(self, p: jax.Array) -> Draw:
        """Row `p` as a draw."""
        return Draw(
            kind=self.kind[p], target=self.target[p], u=self.u[p], feint=self.feint[p],
            combo_left=self.combo_left[p], southpaw=self.southpaw[p],
        )  # fmt: skip


def heldout_table(dist: Distribution, seed: int, sequences: int) -> dict[str, np.ndarray]:
    """`sequences` sequences drawn inside the held-out windows with `seed`, laid out as rows (numpy); their
    stance as `dist.southpaw_share` draws it (0 for the orthodox held-out set, 1 for the southpaw one)."""
    held = dataclasses.replace(dist, heldout=True)
    rows = []
    for s in range(sequences):
        key = jax.random.fold_in(jax.random.PRNGKey(seed), s)
        k_first, k_next = jax.random.split(key)
        draw = sample_draw(held, k_first)
        rows.append(draw)
        for i in range(int(draw.combo_left)):
            draw = follow_up(held, draw, jax.random.fold_in(k_next, i))
            rows.append(draw)
    fields = ("kind", "target", "u", "feint", "southpaw")
    stack = {f: np.stack([np.asarray(getattr(r, f)) for r in rows]) for f in fields}
    stack["combo_left"] = np.array([int(r.combo_left) for r in rows], np.int32)
    follows = np.concatenate([[False], stack["combo_left"][:-1] > 0])
    stack["starts"] = np.flatnonzero(~follows).astype(np.int32)
    return stack


def save_table(path: str, table: dict[str, np.ndarray], seed: int) -> None:
    """Write a held-out set (compressed npz)."""
    np.savez_compressed(path, format_version=np.int32(HELDOUT_FORMAT), seed=np.int32(seed), **table)


def load_table(path: str | None = None) -> DrawTable:
    """Read a held-out set (default `HELDOUT_PATH`) onto the device; a clear error for a bad file. A file
    without stances (the first held-out set) is orthodox throughout."""
    path = path or HELDOUT_PATH
    with np.load(path, allow_pickle=False) as f:
        version = int(f["format_version"]) if "format_version" in f else -1
        if version != HELDOUT_FORMAT:
            raise ValueError(f"{path}: held-out punch set format {version}, expected {HELDOUT_FORMAT}")
        fields = [f.name for f in dataclasses.fields(DrawTable)]
        missing = sorted(set(fields) - set(f.files) - {"southpaw"})
        if missing:
            raise ValueError(f"{path}: held-out punch set lacks {missing}")
        arrays = {k: np.asarray(f[k]) for k in fields if k in f.files}
    arrays.setdefault("southpaw", np.zeros_like(arrays["kind"]))
    if arrays["u"].ndim != 2 or arrays["u"].shape[1] != len(PARAMS):
        raise ValueError(f"{path}: held-out draws need {len(PARAMS)} parameters ({', '.join(PARAMS)})")
    dtypes = {"u": jnp.float32, "feint": jnp.float32}
    return DrawTable(**{k: jnp.asarray(v, dtypes.get(k, jnp.int32)) for k, v in arrays.items()})


def _first_draw(dist: Distribution, table: DrawTable | None, key: jax.Array) -> tuple[Draw, jax.Array]:
    """(a sequence's first punch, its held-out row (0 without a table))."""
    if table is None:
        return sample_draw(dist, key), jnp.zeros((), jnp.int32)
    row = table.starts[jax.random.randint(key, (), 0, table.starts.shape[0])]
    return table.row(row), row


def next_draw(dist: Distribution, table: DrawTable | None, draw: Draw, row, key) -> tuple[Draw, jax.Array]:
    """The punch after `draw` (held-out `row`): the sequence's next one while it has one to follow, else
    the first of a new sequence; with its row."""
    k_first, k_next = jax.random.split(key)
    first, first_row = _first_draw(dist, table, k_first)
    chained = draw.combo_left > 0
    if table is None:
        nxt, nxt_row = follow_up(dist, draw, k_next), row
    else:
        nxt_row = jnp.minimum(row + 1, table.kind.shape[0] - 1)
        nxt = table.row(nxt_row)
    pick = functools.partial(jnp.where, chained)
    return jax.tree.map(pick, nxt, first), pick(nxt_row, first_row)


@dataclasses.dataclass(frozen=True)
class Clock:
    """The opponent's punch clock for procedural and held-out punches (static settings)."""

    distribution: Distribution
    gap_steps: tuple[int, int]
    """(fewest, most) control steps he waits in the guard between sequences."""
    dt_s: float
    """Seconds per control step."""

    def start(self, bank: Bank, table: DrawTable | None, key: jax.Array):
        """(spec, draw, row, frame) of a world's first punch, thrown after a gap."""
        k_draw, k_gap = jax.random.split(key)
        draw, row = _first_draw(self.distribution, table, k_draw)
        gap = jax.random.randint(k_gap, (), self.gap_steps[0], self.gap_steps[1] + 1)
        return spec_of(bank, self.distribution.ranges, draw, self.dt_s), draw, row, -gap

    def advance(self, bank: Bank, table: DrawTable | None, spec: PunchSpec, draw: Draw, row, frame, key):
        """(spec, draw, row, frame) one control step on: past a punch's end the next one, at once within a
        sequence, after a gap drawn uniformly from `gap_steps` otherwise (`frame` counts up from minus it)."""
        k_draw, k_gap = jax.random.split(key)
        frame = frame + 1
        over = frame >= spec.length
        new_draw, new_row = next_draw(self.distribution, table, draw, row, k_draw)
        new_spec = spec_of(bank, self.distribution.ranges, new_draw, self.dt_s)
        gap = jax.random.randint(k_gap, (), self.gap_steps[0], self.gap_steps[1] + 1)
        gap = jnp.where(draw.combo_left > 0, 0, gap)
        pick = functools.partial(jnp.where, over)
        spec, draw = jax.tree.map(pick, new_spec, spec), jax.tree.map(pick, new_draw, draw)
        return spec, draw, pick(new_row, row), pick(-gap, frame)
