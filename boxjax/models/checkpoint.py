"""Orbax checkpoints of a whole run: learner state, environment state and the configs that made them.

A checkpoint directory holds numbered steps; each step has the `state` pytree (TrainState and
RolloutState) and a JSON `meta` (environment description, observation/action sizes, PPO config).
The state is always in the layout of a one-device run (`boxjax.rl.sharding.DataParallel.to_host`), and
the device count is not part of what must match, so a run resumes on another number of devices.
Orbax writes each step to a temporary folder and renames it when complete, so an interrupted save never
replaces a good checkpoint.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

# Fields that must match for a checkpoint to seed a new run (`init`); resuming needs the whole meta equal.
_MODEL_FIELDS = ("body", "observation_size", "action_size")
_NETWORK_FIELDS = ("policy_hidden", "value_hidden", "action_distribution")
# PPO fields that may change on resume: where the run executes, not what it computes.
_PLACEMENT_FIELDS = ("num_devices",)
RENAMED_PPO_FIELDS = {
    "tanh_policy": ("action_distribution", {True: "tanh_normal", False: "clipped_normal"}, "clipped_normal"),
    "brax_advantages": ("batch_layout", {True: "unrolls", False: "transitions"}, "transitions"),
}
"""PPO flags that became typed choices (2026-12-06): old name -> (field, {old value: its value}, the value
`PPOConfig.to_dict` leaves out as the default); a stored config is read with the new names."""


def current_ppo_fields(ppo: dict[str, Any]) -> dict[str, Any]:
    """A stored PPO config with its renamed flags (`RENAMED_PPO_FIELDS`) as their typed choices; a default
    choice is left out, as `PPOConfig.to_dict` leaves it."""
    out = {k: v for k, v in ppo.items() if k not in RENAMED_PPO_FIELDS}
    for old, (field, values, default) in RENAMED_PPO_FIELDS.items():
        if old in ppo and values[bool(ppo[old])] != default:
            out[field] = values[bool(ppo[old])]
    return out


def current_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """A stored meta as this code names its fields (`current_ppo_fields` on its PPO config)."""
    return {**meta, "ppo": current_ppo_fields(meta["ppo"])} if "ppo" in meta else meta


FORMAT = 2
"""The checkpoint format `save` writes (as `meta["format"]`); `FORMATS` says what each one holds."""
FORMATS = {
    1: "made before 2026-12-02 (no 'format' in its meta): fewer per-step figures and, for the stance task, "
    "no solve counts in its episode and curriculum state; a resume is refused, but its model (params, "
    "optimiser, normaliser) still seeds a new run with --init",
    2: "from 2026-12-02: the guard's and the solve rule's figures in every world's state",
}
"""What changed with each format, and what an older checkpoint can still do (the migration note)."""


def format_of(meta: dict[str, Any]) -> int:
    """The format a checkpoint's meta was written in (1 for those from before formats were recorded)."""
    return int(meta.get("format", 1))


class CheckpointMismatchError(ValueError):
    """A checkpoint was made by another body, task or configuration than the run that loads it."""


def _manager(directory: str, max_to_keep: int | None = 3) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
    return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def _size(x: Any) -> int:
    return int(np.prod(x.shape)) if hasattr(x, "shape") else int(np.size(x))


def _fill_empty(tree: Any) -> Any:
    """Orbax refuses zero-size arrays (e.g. `mjx.Data.act` of a body without actuator state): store a
    one-element stand-in instead; `restore` puts the template's empty array back."""
    return jax.tree.map(lambda x: np.zeros((1,), x.dtype) if _size(x) == 0 else x, tree)


def _empty_like(t: Any) -> Any:
    return t if isinstance(t, np.ndarray | jax.Array) else np.zeros(t.shape, t.dtype)


def save(
    directory: str, step: int, state: dict[str, Any], meta: dict[str, Any], keep: int | None = 3
) -> None:
    """Write `state` (a pytree of arrays) and `meta` (JSON, stamped with `FORMAT`) as checkpoint `step`,
    keeping the newest `keep` checkpoints in `directory` (None: every one); waits until written."""
    meta = {**meta, "format": FORMAT}
    with _manager(directory, max_to_keep=keep) as mngr:
        mngr.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(_fill_empty(state)), meta=ocp.args.JsonSave(meta)
            ),
        )
        mngr.wait_until_finished()


def latest_step(directory: str) -> int:
    """Newest complete step in `directory`; a clear error if there is none."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no checkpoint directory at {directory!r}")
    with _manager(directory, max_to_keep=None) as mngr:
        step = mngr.latest_step()
    if step is None:
        raise FileNotFoundError(f"no complete checkpoint in {directory!r}")
    return step


def read_meta(directory: str, step: int | None = None) -> dict[str, Any]:
    """The JSON meta of a checkpoint (newest step by default), its fields named as this code names them
    (`current_meta`)."""
    step = latest_step(directory) if step is None else step
    with _manager(directory, max_to_keep=None) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    return current_meta(dict(restored["meta"]))


def _path_key(path: tuple) -> tuple[str, ...]:
    """A tree path as plain names, the same for a dataclass field and the dict entry orbax stores."""
    names = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                names.append(str(getattr(entry, attr)))
                break
        else:
            names.append(str(entry))
    return tuple(names)


def _stored_metadata(directory: str, step: int) -> Any:
    """The orbax metadata tree of a checkpoint's `state` (None if orbax cannot say)."""
    handlers = {"state": ocp.StandardCheckpointHandler(), "meta": ocp.JsonCheckpointHandler()}
    try:
        with ocp.CheckpointManager(os.path.abspath(directory), item_handlers=handlers) as mngr:
            return mngr.item_metadata(step)["state"]
    except Exception:  # noqa: BLE001 - metadata is an optional refinement; restore proceeds without it
        return None


def _stored_shapes(metadata: Any) -> dict[tuple[str, ...], tuple[int, ...]]:
    """{leaf path: stored shape} of a metadata tree (empty without one)."""
    if metadata is None:
        return {}
    leaves = jax.tree_util.tree_flatten_with_path(metadata)[0]
    return {_path_key(p): tuple(m.shape) for p, m in leaves if hasattr(m, "shape")}


def _stored_abstract(metadata: Any, part: str) -> Any:
    """Restore targets of one top-level part exactly as stored (its own structure, shapes and dtypes)."""
    return jax.tree.map(lambda m: jax.ShapeDtypeStruct(tuple(m.shape), m.dtype), dict(metadata)[part])


def _abstract(template: Any, stored: dict[tuple[str, ...], tuple[int, ...]]) -> Any:
    """Restore targets: the template's dtypes (and placement) with the stored shapes where known."""

    def one(path: tuple, x: Any) -> jax.ShapeDtypeStruct:
        target = ocp.utils.to_shape_dtype_struct(x)
        shape = stored.get(_path_key(path), target.shape)
        return jax.ShapeDtypeStruct(shape, target.dtype, sharding=getattr(target, "sharding", None))

    return jax.tree_util.tree_map_with_path(one, template)


def restore(
    directory: str, template: dict[str, Any], step: int | None = None, only: bool = False
) -> dict[str, Any]:
    """Restore the `state` pytree with the structure and dtypes of `template` (arrays, or
    `jax.ShapeDtypeStruct`s to avoid building the state first).

    Leaves come back with their stored shapes; a leaf whose shape differs from the template's is for
    the caller to judge (`boxjax.rl.sharding.refresh_scratch`: MuJoCo Warp's contact pool is sized by the
    worlds per device, so it may differ when the device count changes). With `only`, the template names
    just the top-level parts wanted (e.g. {"train": ...}): the checkpoint's other parts, whatever their
    structure (a rollout state of another physics implementation), are read as stored and dropped.
    """
    step = latest_step(directory) if step is None else step
    metadata = _stored_metadata(directory, step)
    abstract = _abstract(_fill_empty(template), _stored_shapes(metadata))
    if metadata is None:
        if only:
            raise ValueError(f"cannot read the structure of the checkpoint at {directory} (step {step})")
        with _manager(directory, max_to_keep=None) as mngr:
            restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
        state = {part: restored["state"][part] for part in template}
    else:
        state = _restore_as_stored(directory, step, metadata, abstract, only)
    return jax.tree.map(lambda t, r: _empty_like(t) if _size(t) == 0 else r, template, state)


def _is_stored_leaf(m: Any) -> bool:
    return not isinstance(m, dict | list | tuple)


def _restore_as_stored(
    directory: str, step: int, metadata: Any, abstract: dict[str, Any], only: bool
) -> dict[str, Any]:
    """The checkpoint read in its stored structure (each leaf with `abstract`'s dtype and placement where
    the paths meet), then put into `abstract`'s structure leaf by leaf. So a field that holds no arrays
    (None) on one side only, such as one added to a state dataclass after the checkpoint was written, is
    no mismatch; an array leaf `abstract` wants that the checkpoint lacks, or one of the parts it wants that
    it does not, is a `CheckpointMismatchError` naming it; without `only`, so is a part it does not want."""
    wanted = {_path_key(p): leaf for p, leaf in jax.tree_util.tree_flatten_with_path(abstract)[0]}
    stored_parts = dict(metadata)
    extra = sorted(set(stored_parts) - set(abstract))
    if extra and not only:
        raise CheckpointMismatchError(f"the checkpoint at {directory} holds parts {extra} this run does not")

    def target(path: tuple, m: Any) -> Any:
        if not hasattr(m, "shape"):  # a field stored without arrays (None)
            return None
        return wanted.get(_path_key(path), jax.ShapeDtypeStruct(tuple(m.shape), m.dtype))

    stored = jax.tree_util.tree_map_with_path(target, stored_parts, is_leaf=_is_stored_leaf)
    with _manager(directory, max_to_keep=None) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(stored)))
    found = {_path_key(p): leaf for p, leaf in jax.tree_util.tree_flatten_with_path(restored["state"])[0]}
    missing = sorted("/".join(k) for k in wanted if k not in found)
    if missing:
        raise CheckpointMismatchError(f"the checkpoint at {directory} has no leaf {', '.join(missing[:3])}")
    extra = sorted("/".join(k) for k in found if k not in wanted and k[0] in abstract)
    if extra:
        raise CheckpointMismatchError(
            f"the checkpoint at {directory} holds arrays this run does not: {extra[:3]}"
        )
    return {
        part: jax.tree_util.tree_map_with_path(
            lambda p, _, part=part: found[(part, *_path_key(p))], abstract[part]
        )
        for part in abstract
    }


MODEL_PARTS = ("params", "opt_state", "normalizer")
"""The fields of a train state that make its model: what `--init` takes from a checkpoint."""


def restore_model(directory: str, train_template: Any, step: int | None = None) -> dict[str, Any]:
    """{field: value} of the checkpoint's `MODEL_PARTS`, with the structure of `train_template`'s, whatever
    else the checkpoint holds: another task's or another version's curriculum and rollout state are read as
    stored and dropped. A model leaf the checkpoint lacks is a `CheckpointMismatchError` naming it."""
    step = latest_step(directory) if step is None else step
    metadata = _stored_metadata(directory, step)
    if metadata is None or "train" not in dict(metadata):
        raise CheckpointMismatchError(
            f"cannot read a train state in the checkpoint at {directory} (step {step})"
        )
    abstract = {part: _stored_abstract(metadata, part) for part in dict(metadata)}
    with _manager(directory, max_to_keep=None) as mngr:
        restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
    leaves = jax.tree_util.tree_flatten_with_path(restored["state"]["train"])[0]
    stored = {_path_key(path): leaf for path, leaf in leaves}

    def pick(field: str, path: tuple, template_leaf: Any) -> Any:
        key = (field, *_path_key(path))
        if key not in stored:
            raise CheckpointMismatchError(f"the checkpoint at {directory} has no model leaf {'/'.join(key)}")
        if np.shape(stored[key]) != np.shape(template_leaf):
            raise CheckpointMismatchError(
                f"the checkpoint at {directory} holds {'/'.join(key)} of shape {np.shape(stored[key])}, this "
                f"model's is {np.shape(template_leaf)}"
            )
        return stored[key]

    return {
        field: jax.tree_util.tree_map_with_path(
            lambda path, leaf, field=field: pick(field, path, leaf), getattr(train_template, field)
        )
        for field in MODEL_PARTS
    }


POLICY_PARTS = ("params", "normalizer")
"""What a policy file keeps of a train state: enough to act (`save_policy`), nothing to resume."""


def save_policy(path: str, model: dict[str, Any], meta: dict[str, Any]) -> None:
    """Write `model`'s `POLICY_PARTS` and the checkpoint `meta` to one small file (msgpack), atomically."""
    from flax import serialization

    stored = {
        "meta": json.dumps(meta),
        "policy": {part: serialization.to_state_dict(jax.device_get(model[part])) for part in POLICY_PARTS},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(serialization.msgpack_serialize(stored))
    os.replace(path + ".tmp", path)


def read_policy_file(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta, {part: state dict}) of a policy file (`save_policy`); anything else is a
    `CheckpointMismatchError`."""
    from flax import serialization

    with open(path, "rb") as f:
        raw = f.read()
    try:
        stored = serialization.msgpack_restore(raw)
    except Exception:  # msgpack raises its own types (ExtraData, ValueError, ...) on foreign bytes
        stored = None
    if not isinstance(stored, dict) or set(stored) != {"meta", "policy"}:
        raise CheckpointMismatchError(
            f"{path} is neither a checkpoint directory nor a policy file (`boxjax export` writes one)"
        )
    return current_meta(json.loads(stored["meta"])), stored["policy"]


def read_policy_meta(path: str) -> dict[str, Any]:
    """The checkpoint meta a policy file (`save_policy`) was written with."""
    return read_policy_file(path)[0]


def load_policy(path: str, train_template: Any) -> dict[str, Any]:
    """{part: value} of a policy file's `POLICY_PARTS` with the structure of `train_template`'s; a leaf of
    another shape or a missing one is a `CheckpointMismatchError` naming it."""
    from flax import serialization

    stored = read_policy_file(path)[1]
    out = {}
    for part in POLICY_PARTS:
        template = getattr(train_template, part)
        try:
            value = serialization.from_state_dict(template, stored[part])
        except (KeyError, ValueError) as err:
            raise CheckpointMismatchError(f"{path}: its {part} do not fit this network ({err})") from err
        bad = [
            "/".join(map(str, _path_key(k)))
            for (k, t), v in zip(
                jax.tree_util.tree_flatten_with_path(template)[0], jax.tree.leaves(value), strict=True
            )
            if np.shape(t) != np.shape(v)
        ]
        if bad:
            raise CheckpointMismatchError(f"{path}: {part} leaves of another shape: {', '.join(bad[:3])}")
        out[part] = value
    return out


def read_source_meta(source: str) -> dict[str, Any]:
    """The checkpoint meta of `source`: a checkpoint directory, or a policy file (`save_policy`)."""
    return read_policy_meta(source) if os.path.isfile(source) else read_meta(source)


def read_model(source: str, train_template: Any) -> dict[str, Any]:
    """{field: value} of the model in `source`, shaped as `train_template`'s: a checkpoint directory's
    `MODEL_PARTS` (`restore_model`), or a policy file's `POLICY_PARTS` (`load_policy`: no optimiser state,
    so a run seeded from it starts its optimiser afresh)."""
    if os.path.isfile(source):
        return load_policy(source, train_template)
    return restore_model(source, train_template)


def init_model(source: str, train_template: Any, expected_meta: dict[str, Any]) -> dict[str, Any]:
    """The model a run seeded from `source` (`--init`: a checkpoint directory or a policy file) takes, once
    `check_init` accepts its meta against the run's `expected_meta`."""
    check_init(read_source_meta(source), expected_meta)
    return read_model(source, train_template)


_ABSENT = object()


def _diff(saved: dict, expected: dict, keys: tuple[str, ...], prefix: str = "") -> list[str]:
    """One line per differing key; nested dicts (a config) name just their differing fields."""
    problems = []
    for k in keys:
        a, b = saved.get(k, _ABSENT), expected.get(k, _ABSENT)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            problems += _diff(a, b, tuple(sorted(set(a) | set(b))), f"{prefix}{k}.")
        else:
            show = [("no such field" if v is _ABSENT else repr(v)) for v in (a, b)]
            problems.append(f"{prefix}{k}: checkpoint has {show[0]}, this run has {show[1]}")
    return problems


def _without_placement(meta: dict[str, Any]) -> dict[str, Any]:
    ppo = {k: v for k, v in meta.get("ppo", {}).items() if k not in _PLACEMENT_FIELDS}
    return {**meta, "ppo": ppo} if "ppo" in meta else meta


def check_resume(saved: dict[str, Any], expected: dict[str, Any]) -> None:
    """Resuming needs the same task, body and configs (the device count may differ), else
    `CheckpointMismatchError` names what differs."""
    _check_format(saved, resume=True)
    saved, expected = _without_placement(saved), _without_placement(expected)
    keys = tuple(sorted((set(saved) | set(expected)) - {"boxjax_version", "format"}))
    problems = _diff(saved, expected, keys)
    if problems:
        raise CheckpointMismatchError("cannot resume from this checkpoint:\n  " + "\n  ".join(problems))


def check_init(saved: dict[str, Any], expected: dict[str, Any]) -> None:
    """Starting from a checkpoint's model needs the same body, observation/action sizes and network, and a
    format this version reads."""
    _check_format(saved, resume=False)
    problems = _diff(saved, expected, _MODEL_FIELDS)
    saved_ppo, expected_ppo = saved.get("ppo", {}), expected.get("ppo", {})
    problems += [f"ppo.{p}" for p in _diff(saved_ppo, expected_ppo, _NETWORK_FIELDS)]
    if problems:
        raise CheckpointMismatchError(
            "cannot start from this checkpoint's model:\n  " + "\n  ".join(problems)
        )


def _check_format(saved: dict[str, Any], resume: bool) -> None:
    """A resume needs the current `FORMAT`; a model (`init`) any format up to it. Else the error quotes the
    checkpoint format's note from `FORMATS`."""
    found = format_of(saved)
    if found == FORMAT or (found < FORMAT and not resume):
        return
    note = FORMATS.get(found, "newer than this boxjax: update boxjax to read it")
    use = "resume from" if resume else "start from the model of"
    raise CheckpointMismatchError(
        f"cannot {use} this checkpoint: format {found} ({note}); this boxjax writes {FORMAT}"
    )
