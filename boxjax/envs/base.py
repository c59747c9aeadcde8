"""The environment protocol every boxjax task follows, and the state it returns.

An environment is an object with

* ``observation_size: int`` and ``action_size: int``;
* ``default_params() -> params``: a pytree of everything the step depends on that may change between runs
  or per world (the MJX model, reward weights, curriculum values). It is passed in, never closed over, so
  domain randomisation is a ``vmap`` over it and the CPU path can pass other params;
* ``reset(params, key) -> State`` and ``step(params, state, action) -> State``: pure functions of one world,
  jit- and vmap-able; ``action`` is a float32 vector in [-1, 1] of ``action_size``.

Optionally, a curriculum whose state lives in the training state (never in Python globals):

* ``init_curriculum() -> curriculum`` (a pytree of arrays),
* ``apply_curriculum(params, curriculum) -> params`` (called inside the jitted iteration),
* ``update_curriculum(curriculum, stats: EpisodeSummary) -> curriculum`` (once per iteration, on device).

`boxjax.rl.ppo` needs nothing else: an environment written for MuJoCo Playground (``reset(key)``,
``step(state, action)``) trains unchanged through `from_playground`.

Several learners (`boxjax.rl.agents`): an environment whose worlds hold more than one learning agent names
them in ``agents: tuple[Agent, ...]``. The first is the *primary* agent: ``observation_size``,
``action_size``, ``State.obs`` and ``State.reward`` are its, so every single-agent tool (evaluation, the
watch, a single-agent run) sees the primary agent as it would in a one-agent env. The others' observations
and rewards after each step are ``State.others[name]`` (`AgentStep`); episodes end for all agents at once
(``done``, ``truncation``). ``step`` takes either the primary's (A,) action, the co-agents then taking
their zero action, or a dict of every agent's action by name (`split_action`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import mujoco
from flax import struct

from boxjax import mjcf
from boxjax.ranges import COUNT, POSITIVE, Range, check_fields


@dataclasses.dataclass(frozen=True)
class Task:
    """What `boxjax.envs.make` needs of a task package (its `TASK`): the config and env classes (a task
    without a config is physics-free and built bare). The config sizes the physics slots
    (`TaskConfig.contact_budget`)."""

    config: type | None
    """The task's `TaskConfig` subclass; None for a task without options."""
    env: type
    """The env class: built as `env(config, backend)` (a `boxjax.physics.backend.Backend`), or `env()`
    without physics."""
    cpu_env: type | None = None
    """The env class built on MuJoCo's C engine (`boxjax.envs.on_c_engine`), where it differs from `env`
    (the block task's fits the arms on the C engine); None: `env`."""


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """What every task's config has: the body, the control step and the episode length, with their checks,
    the step counts they imply and a JSON-friendly copy. Tasks subclass it with their own fields and list
    the valid range of each numeric one in `RANGES` (checked on construction)."""

    RANGES: ClassVar[dict[str, Range]] = {}
    """Valid range of each numeric field a subclass adds (`boxjax.ranges`)."""
    BASE_RANGES: ClassVar[dict[str, Range]] = {
        "control_dt_s": POSITIVE,
        "episode_s": POSITIVE,
        "ccd_iterations": COUNT,
        "solver_iterations": COUNT,
    }
    SOLVERS: ClassVar[dict[str, int]] = {
        "newton": mujoco.mjtSolver.mjSOL_NEWTON,
        "cg": mujoco.mjtSolver.mjSOL_CG,
    }
    """The constraint solvers a task may name (`solver`), as MuJoCo's enum."""
    AS_BUILT: ClassVar[dict[str, Any]] = {
        "ccd_iterations": mjcf.CCD_ITERATIONS,
        "solver": "newton",
        "solver_iterations": mjcf.SOLVER_ITERATIONS,
    }
    """Fields whose default is the model as `boxjax.mjcf` builds it: `to_dict` leaves them out at that
    value, so runs from before the field existed describe themselves as before (their checkpoints resume)."""

    body: str = "simple"
    """Boxer body: one of `boxjax.mjcf.BODIES`."""
    control_dt_s: float = 0.025
    """Seconds between policy actions (a multiple of the physics timestep)."""
    episode_s: float = 10.0
    """Episode length in seconds (the time limit)."""
    ccd_iterations: int = mjcf.CCD_ITERATIONS
    """Cap on the model's convex-collision (GJK/EPA) iterations for MuJoCo Warp and MuJoCo C (MJX's JAX
    collision has none); the bodies are built with `boxjax.mjcf.CCD_ITERATIONS`, MuJoCo's default is 35
    (the learning check of the cap runs both)."""
    solver: str = "newton"
    """The constraint solver, one of `SOLVERS`: "newton" as built (the seed's); "cg" (conjugate gradient: no
    dense Hessian, cheaper iterations, a different solution at the same cap) changes the physics, a named
    option for speed, never a default."""
    solver_iterations: int = mjcf.SOLVER_ITERATIONS
    """Cap on the constraint solver's iterations, `mjcf.SOLVER_ITERATIONS` as built (the seed's 4); a lower
    cap changes the physics (a named option for speed: every block world runs to the cap)."""

    def __post_init__(self) -> None:
        """Reject an unknown body or solver (naming the valid ones) and any field outside its range."""
        if self.body not in mjcf.BODIES:
            raise ValueError(f"unknown body {self.body!r}; valid: {', '.join(mjcf.BODIES)}")
        if self.solver not in self.SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; valid: {', '.join(self.SOLVERS)}")
        check_fields(self, {**self.BASE_RANGES, **self.RANGES})

    @property
    def max_steps(self) -> int:
        """Control steps per episode."""
        return self.steps(self.episode_s)

    def steps(self, seconds: float) -> int:
        """Control steps closest to `seconds`."""
        return int(round(seconds / self.control_dt_s))

    def contact_budget(self) -> mjcf.ContactBudget:
        """Contact and constraint slots of one world: one fighter's (`mjcf.CONTACT_BUDGET`); a task with
        more in its world overrides this."""
        return mjcf.CONTACT_BUDGET[self.body]

    def configure_model(self, mj_model: Any) -> None:
        """Sets this config's MuJoCo options on the task's freshly built `mj_model` (before it goes to a
        physics engine)."""
        mj_model.opt.ccd_iterations = self.ccd_iterations
        mj_model.opt.solver = self.SOLVERS[self.solver]
        mj_model.opt.iterations = self.solver_iterations

    def to_dict(self) -> dict:
        """JSON-friendly copy (fields of `AS_BUILT` left out at that value)."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()
            if not (k in self.AS_BUILT and v == self.AS_BUILT[k])
        }


NONFINITE_METRIC = "nan"
"""The per-step figure (1.0 or 0.0) by which a task that guards its own physics reports that the world's
state turned non-finite (it then resets the physics itself); the rollout treats such a world, and any world
whose observation or reward is not finite, as an episode cut short, never as a fall
(`boxjax.envs.wrappers.nonfinite`)."""


COUNT_PREFIX = "count/"
"""Per-step figures under this prefix are event counts (1.0 when the event happened in the world at that
step): summed over worlds and steps, not averaged, into the iteration's figures and
`EpisodeSummary.counts`."""


@dataclasses.dataclass(frozen=True)
class Agent:
    """One learner an environment names: its name and the sizes of its observation and action."""

    name: str
    observation_size: int
    action_size: int


@struct.dataclass
class AgentStep:
    """What a co-agent (an agent after the primary one) got from one step of its world."""

    obs: jax.Array
    """(obs_size,) float32 its observation after this step."""
    reward: jax.Array
    """() float32 its reward of this step."""


@struct.dataclass
class State:
    """One world's environment state. Leaves gain a leading (num_envs,) axis under vmap."""

    data: Any
    """Physics state (an `mjx.Data`, or any pytree for non-physics environments)."""
    obs: jax.Array
    """(obs_size,) float32 observation after this step."""
    reward: jax.Array
    """() float32 reward of this step."""
    done: jax.Array
    """() float32 1.0 when the episode ended at this step (terminated or truncated)."""
    truncation: jax.Array
    """() float32 1.0 when it ended by the time limit only (value is bootstrapped)."""
    metrics: dict[str, jax.Array]
    """Named () float32 per-step figures (reward terms, contact counts...), averaged per iteration."""
    info: Any
    """Typed task information (a task-specific `flax.struct` dataclass)."""
    others: dict[str, AgentStep] | None = None
    """The co-agents' observations and rewards by name (an env with several `agents`); None with one."""


@struct.dataclass
class EpisodeSummary:
    """Totals over the episodes that ended during one iteration (device scalars)."""

    episodes: jax.Array
    """Episodes that ended."""
    terminated: jax.Array
    """Of those, episodes that ended by termination (a fall), not by the time limit."""
    return_sum: jax.Array
    """Sum of their undiscounted returns."""
    length_sum: jax.Array
    """Sum of their lengths in control steps."""
    world_steps: jax.Array
    """Control steps each world took during the iteration (the unroll length)."""
    worlds: jax.Array = struct.field(default_factory=lambda: jnp.zeros((), jnp.float32))
    """Worlds stepped (all devices'); set once the iteration's steps are summed."""
    counts: dict[str, jax.Array] = struct.field(default_factory=dict)
    """The iteration's totals of the env's `COUNT_PREFIX` figures (e.g. episodes of some kind that ended),
    for a curriculum to judge by."""

    @classmethod
    def zeros(cls) -> EpisodeSummary:
        """No episodes yet."""
        z = jnp.zeros((), jnp.float32)
        return cls(episodes=z, terminated=z, return_sum=z, length_sum=z, world_steps=z)


@runtime_checkable
class Env(Protocol):
    """Structural type of a boxjax environment (see the module docstring)."""

    observation_size: int
    action_size: int

    def default_params(self) -> Any: ...

    def reset(self, params: Any, key: jax.Array) -> State: ...

    def step(self, params: Any, state: State, action: jax.Array) -> State: ...


PRIMARY_AGENT = "policy"
"""The name of a single-agent env's one agent (`agents_of`)."""


def agents_of(env: Env) -> tuple[Agent, ...]:
    """The learners `env` names (`agents`, the primary first), or its one agent (`PRIMARY_AGENT`)."""
    named = getattr(env, "agents", None)
    if named:
        return tuple(named)
    return (Agent(PRIMARY_AGENT, int(env.observation_size), int(env.action_size)),)


def co_agents(env: Env) -> tuple[Agent, ...]:
    """The agents of `env` after the primary one (empty for a single-agent env)."""
    return agents_of(env)[1:]


def split_action(agents: tuple[Agent, ...], action: Any) -> dict[str, jax.Array]:
    """Every agent's action of one world by name: a dict must name exactly `agents`; an array is the primary
    agent's, the co-agents taking their zero action. For an env's `step`."""
    if not isinstance(action, dict):
        action = {agents[0].name: action}
        action.update({a.name: jnp.zeros((a.action_size,), jnp.float32) for a in agents[1:]})
    names = [a.name for a in agents]
    if sorted(action) != sorted(names):
        raise ValueError(f"actions for agents {sorted(action)}; the env's agents are {names}")
    return action


@struct.dataclass
class NoCurriculum:
    """Curriculum state of an environment that has none."""

    level: jax.Array = struct.field(default_factory=lambda: jnp.zeros((), jnp.int32))


def reset_nonfinite(backend: Any, data: Any, qpos: jax.Array) -> tuple[Any, jax.Array]:
    """A task's guard after the physics: (`data` with its qpos back at `qpos` and zero qvel where the world's
    state is not finite (`backend.is_finite`), () bool finite)."""
    finite = backend.is_finite(data)
    data = data.replace(qpos=jnp.where(finite, data.qpos, qpos), qvel=jnp.where(finite, data.qvel, 0.0))
    return data, finite


def guarded_state(
    data: Any,
    obs: jax.Array,
    reward: jax.Array,
    fell,
    timeout,
    finite: jax.Array,
    metrics: dict,
    info: Any,
    others: dict[str, AgentStep] | None = None,
) -> State:
    """A step's `State`: observations and rewards (the co-agents' `others` too) zero where the state was not
    finite, and such a world ended (done and truncated: an episode cut short, never a fall) beside a fall or
    the time limit."""
    nonfinite = 1.0 - finite.astype(jnp.float32)
    if others is not None:
        others = {
            k: AgentStep(obs=jnp.where(finite, v.obs, 0.0), reward=jnp.where(finite, v.reward, 0.0))
            for k, v in others.items()
        }
    return State(
        data=data,
        obs=jnp.where(finite, obs, 0.0),
        reward=jnp.where(finite, reward, 0.0),
        done=jnp.maximum(jnp.maximum(fell, timeout), nonfinite),
        truncation=jnp.maximum(timeout, nonfinite),
        metrics=metrics,
        info=info,
        others=others,
    )


def host_snapshot(env: Env) -> Any:
    """What the env's physics engine has counted on the host so far (its backend's `host_snapshot`; None for
    an env without a backend), for `host_figures`."""
    backend = getattr(env, "backend", None)
    return backend.host_snapshot() if backend is not None else None


def host_figures(env: Env, before: Any) -> dict[str, float]:
    """The engine's host-side counts since `host_snapshot` gave `before` (e.g. MuJoCo Warp's graph captures,
    our factorisation kernel's work), as iteration figures; empty for an env without a backend."""
    backend = getattr(env, "backend", None)
    return backend.host_figures(before) if backend is not None else {}


def init_curriculum(env: Env) -> Any:
    """The environment's initial curriculum state, or an empty one."""
    hook = getattr(env, "init_curriculum", None)
    return hook() if hook else NoCurriculum()


def apply_curriculum(env: Env, params: Any, curriculum: Any) -> Any:
    """Params with the curriculum's current values written in."""
    hook = getattr(env, "apply_curriculum", None)
    return hook(params, curriculum) if hook else params


def update_curriculum(env: Env, curriculum: Any, stats: EpisodeSummary) -> Any:
    """The curriculum after one iteration's episode figures."""
    hook = getattr(env, "update_curriculum", None)
    return hook(curriculum, stats) if hook else curriculum


def curriculum_solved(env: Env, curriculum: Any, stats: EpisodeSummary) -> jax.Array:
    """() bool: whether the task counts as solved after this iteration (False without a hook)."""
    hook = getattr(env, "solved", None)
    return hook(curriculum, stats) if hook else jnp.zeros((), bool)


class PlaygroundAdapter:
    """Wraps a MuJoCo Playground environment (``reset(key)``, ``step(state, action)``) into this protocol.

    Playground states carry ``data, obs, reward, done, metrics, info``; the boxjax state's `data` is the
    whole Playground state (its MJX data once, not also beside it: every copy is carried and reset by mask
    at every step). The truncation flag, when a time-limit wrapper set one, is read from
    ``info['truncation']``. As for boxjax's own tasks, MuJoCo Warp
    prints no per-world warning (`quiet_models`), and a world whose MJX state is not finite is reported
    (`NONFINITE_METRIC`) with its overflow and solver-cap figures.
    """

    def __init__(self, env: Any):
        self._env = env
        self.observation_size = int(env.observation_size)
        self.action_size = int(env.action_size)
        quiet_models(env)

    def default_params(self) -> None:
        """Playground environments hold their model themselves: no params."""
        return None

    def _convert(self, s: Any) -> State:
        from mujoco import mjx

        from boxjax.physics import mjx as physics

        info = dict(s.info)
        truncation = jnp.asarray(info.pop("truncation", jnp.zeros(())), jnp.float32)
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in s.metrics.items()}
        if isinstance(s.data, mjx.Data):
            metrics.update(physics.figures(s.data))
            metrics[NONFINITE_METRIC] = 1.0 - physics.is_finite(s.data).astype(jnp.float32)
        return State(
            data=s,
            obs=jnp.asarray(s.obs, jnp.float32),
            reward=jnp.asarray(s.reward, jnp.float32),
            done=jnp.asarray(s.done, jnp.float32),
            truncation=truncation,
            metrics=metrics,
            info=None,
        )

    def reset(self, params: None, key: jax.Array) -> State:
        """Playground reset."""
        return self._convert(self._env.reset(key))

    def step(self, params: None, state: State, action: jax.Array) -> State:
        """Playground step on the wrapped original state."""
        return self._convert(self._env.step(state.data, action))


WRAPPED_ENV_ATTRIBUTES = ("env", "_env")
"""Where a wrapper (Brax's, Playground's) keeps the environment it wraps."""


def quiet_models(env: Any) -> int:
    """Swap every MJX model that `env`, or an environment it wraps, holds as an attribute for its quiet
    copy (`boxjax.physics.mjx.quiet`: MuJoCo Warp prints no per-world warning); returns how many it
    swapped. Models of impl "jax" print nothing and are left as they are."""
    from mujoco import mjx

    from boxjax.physics import mjx as physics

    swapped, seen, todo = 0, set(), [env]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or not hasattr(obj, "__dict__"):
            continue
        seen.add(id(obj))
        for name, value in list(vars(obj).items()):
            if isinstance(value, mjx.Model) and value.impl == mjx.Impl.WARP:
                setattr(obj, name, physics.quiet(value))
                swapped += 1
            elif name in WRAPPED_ENV_ATTRIBUTES:
                todo.append(value)
    return swapped


def from_playground(env: Any) -> PlaygroundAdapter:
    """Adapt a MuJoCo Playground-style environment so `boxjax.rl.ppo` can train it."""
    return PlaygroundAdapter(env)
