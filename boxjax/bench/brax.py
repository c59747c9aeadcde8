"""Brax PPO against boxjax PPO on one MuJoCo Playground environment, one after the other in one process:

    python experiments/compare_brax.py ENV --steps N [--platform gpu] [--evals 10] [--seed 0]
        [--brax KEY=VALUE ...] [--ppo FIELD=VALUE ...] [--env-config KEY=VALUE ...] [--order brax,boxjax]
    python -m boxjax.bench.brax ENV --steps N ...      # the same

ENV is a Playground environment (`mujoco_playground.registry.ALL_ENVS`, e.g. CheetahRun, HumanoidWalk). Brax
trains it with the Playground's published PPO configuration for it (`brax_ppo_config` of its suite,
`num_timesteps` set to N and `num_evals` to --evals; `--brax` changes any of its keys), wrapped as the
Playground wraps it for Brax (`wrap_for_brax_training`). boxjax trains the same environment, in Brax's episode
wrapper (the same episode length and action repeat), through `boxjax.envs.from_playground`, with the
`PPOConfig` that `boxjax.rl.presets.from_brax` maps from that configuration: the same worlds; one boxjax
iteration is one Brax training step (`brax_unrolls_per_update` unrolls, 16 in the DM Control configuration,
collected as one unroll of 16 x 30 steps with GAE in windows of Brax's unroll, `gae_window`); the same
minibatch and passes over the batch; as Brax resets all its environments after each epoch of training steps
when `num_resets_per_eval` > 0, every world restarts from a new draw of reset states that often
(`brax_reset_every`, `restart_on_draw`: every iteration in the DM Control configuration); the same learning
rate, entropy weight, discount, GAE lambda, clip, reward scale, observation and advantage normalisation and
network widths (SiLU, Brax's swish, in both) and their lecun-uniform start (`network_init`); Brax's
tanh-normal policy with a state-dependent scale and its sampled entropy estimate (`action_distribution`
"tanh_normal"); Brax's observation statistics (unit before any data, std floored at 1e-6, not clipped, taken
in before the gradient steps with a fixed step size: `obs_normalizer`); Brax's update layout: minibatches of
whole unrolls whose advantages the loss computes at every gradient step with the current value network, Brax's
way (`batch_layout` "unrolls"); one device each (Brax with `max_devices_per_host=1`). Not matched: Brax's
`max_grad_norm` None means no clip, boxjax's `max_grad_norm` 1e9 (no clip in effect); with Brax's adaptive-KL
schedule Brax adapts the step size to the analytic KL of its distributions, boxjax to the sampled estimate
(`desired_kl`); Brax's arguments in `UNMAPPED_BRAX_DEFAULTS` are refused at any value but their default.
`--ppo` changes boxjax's config on top (the rows name every override). Both step the quiet model
(`boxjax.envs.base.quiet_models`: MuJoCo Warp prints no warning per world and step).

Both train the steps Brax's schedule makes of N (`num_evals - 1` periods of whole updates, N rounded up) and
are evaluated at its points, the same way: 128 episodes (or the configuration's `num_eval_envs`) of the full
length with the policy's mean action (Brax's evaluator with `deterministic_eval=True`, `boxjax.rl.ppo.
evaluate`). Training time is each framework's own time in training (Brax's `training/walltime`, boxjax's
summed `s_per_iteration`; evaluations left out of both; the first epoch or iteration includes compiling).
Steady steps/s is from the first evaluation point after the start to the last; set-up is the time from the
run's start to the end of its first training epoch (Brax) or iteration (boxjax), evaluations left out, less
what its steps take at the steady rate (so a Brax epoch of many updates and one boxjax iteration compare).
Rows: `results/bench/compare-DEVICE-DATE.jsonl` (`framework` brax|boxjax); the curves: `--plot` (default
results/bench/compare-ENV-DEVICE-DATE.png) and the same path with `.json`. The second framework finds the
compile caches the first left (Warp's kernels of the environment, say): say which ran first (`--order`),
and compare set-up as such.

Needs the `compare` extra (`pip install -e .[compare]`: brax and playground, pinned). Brax 0.14.2 (the
newest) still calls `jax.device_put_replicated` / `jax.device_put_sharded`, which JAX 0.10 removed:
`brax_compat` puts them back, as JAX's pmap migration guide replaces them (one `device_put` onto a mesh
of the devices, sharded along a new leading axis), only where JAX lacks them.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import math
import os
import time
from typing import Any

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import Parser, field_values, run_main

EVAL_EPISODES = 128
"""Episodes per evaluation point, both frameworks (Brax's default `num_eval_envs`)."""
FRAMEWORKS = ("brax", "boxjax")


@dataclasses.dataclass
class Curve:
    """One framework's run: its evaluation points and timings."""

    framework: str
    points: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    """(environment steps, training seconds, mean evaluation return) per evaluation point."""
    first_s: float = math.nan
    """Run start to the end of the first training epoch (iteration), evaluations left out."""
    first_steps: float = math.nan
    """Environment steps by then."""
    wall_s: float = math.nan
    """Run start to end, evaluations left out."""
    nonfinite: int = 0
    """Worlds reset as non-finite during training (boxjax counts them; Brax does not)."""

    def steady_steps_per_s(self) -> float:
        """Environment steps per training second from the first evaluation point after the start to the
        last (the first training epoch, with its compiling, left out)."""
        trained = [p for p in self.points if p[0] > 0]
        if len(trained) < 2:
            raise ValueError(f"{self.framework}: steady steps/s needs 2 evaluation points after the start")
        (s0, t0, _), (s1, t1, _) = trained[0], trained[-1]
        return (s1 - s0) / (t1 - t0)

    def setup_s(self) -> float:
        """`first_s` less the time its steps take at the steady rate: start-up and compiling."""
        return self.first_s - self.first_steps / self.steady_steps_per_s()


def override(config: Any, pairs: list[str], what: str, also: tuple[str, ...] = ()) -> None:
    """Set `KEY=VALUE` pairs (Python literals, else strings) on a ConfigDict, its keys or those in `also`;
    an unknown key is named."""
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or (key not in config and key not in also):
            valid = sorted({*config, *also})
            raise ValueError(f"bad {what} override {pair!r}: expected KEY=VALUE with a key of {valid}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        config[key] = value


def brax_compat() -> list[str]:
    """Put back the `jax.device_put_replicated` and `jax.device_put_sharded` that Brax calls, where this JAX
    has removed them; returns the names put back."""
    import jax
    import numpy as np

    def sharded(values: list[Any], devices: list[Any]) -> Any:
        mesh = jax.sharding.Mesh(np.asarray(devices), ("devices",))
        along = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("devices"))
        stacked = jax.tree.map(lambda *leaves: np.stack([np.asarray(x) for x in leaves]), *values)
        return jax.device_put(stacked, along)

    def replicated(value: Any, devices: list[Any]) -> Any:
        return sharded([value] * len(devices), devices)

    put_back = []
    for name, fn in (("device_put_replicated", replicated), ("device_put_sharded", sharded)):
        try:
            getattr(jax, name)
        except AttributeError:
            setattr(jax, name, fn)
            put_back.append(name)
    return put_back


def brax_train_arguments() -> tuple[str, ...]:
    """The keyword arguments of Brax's `ppo.train`: what `--brax` may set besides the configuration's."""
    import inspect

    from brax.training.agents.ppo import train as ppo_train

    return tuple(inspect.signature(ppo_train.train).parameters)


def published_config(env_name: str) -> Any:
    """The Playground's published Brax PPO configuration for `env_name` (a copy to change)."""
    from mujoco_playground import registry
    from mujoco_playground.config import dm_control_suite_params, locomotion_params, manipulation_params

    suites = (
        (registry.dm_control_suite.ALL_ENVS, dm_control_suite_params),
        (registry.locomotion.ALL_ENVS, locomotion_params),
        (registry.manipulation.ALL_ENVS, manipulation_params),
    )
    for names, params in suites:
        if env_name in names:
            return params.brax_ppo_config(env_name)
    raise ValueError(f"unknown Playground environment {env_name!r}; valid: {', '.join(registry.ALL_ENVS)}")


def boxjax_schedule(brax: dict[str, Any], config: Any) -> tuple[int, int, int]:
    """(environment steps per boxjax iteration, iterations in all, iterations between evaluations): the
    same steps and evaluation points as Brax's (`brax_schedule`), or an error naming the mismatch."""
    per_iteration = config.batch_size * brax["action_repeat"]  # environment steps, as Brax counts them
    from boxjax.rl import presets

    spacing, total = presets.brax_schedule(brax)
    if spacing % per_iteration:
        raise ValueError(
            f"Brax evaluates every {spacing:,} environment steps, not a multiple of boxjax's "
            f"{per_iteration:,} per iteration (num_envs x unroll_length x action_repeat): change --steps "
            "or the sizes"
        )
    return per_iteration, total // per_iteration, spacing // per_iteration


def observations_are_flat(env: Any) -> None:
    """Refuse an environment whose observations are a dict (boxjax's PPO takes one vector)."""
    if not isinstance(env.observation_size, int):
        raise ValueError(
            f"the environment's observations are a dict ({env.observation_size}); boxjax PPO takes one vector"
        )


def eval_episodes(brax: dict[str, Any]) -> int:
    """Episodes per evaluation point, both frameworks: the configuration's `num_eval_envs`, else
    `EVAL_EPISODES`."""
    return int(brax.get("num_eval_envs", EVAL_EPISODES))


def run_brax(env_name: str, env_config: Any, brax: dict[str, Any], seed: int) -> Curve:
    """Brax PPO with `brax` (a Playground configuration) on the environment; its evaluation curve."""
    import functools

    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo_train
    from mujoco_playground import registry, wrapper

    from boxjax.envs.base import quiet_models

    start = time.perf_counter()
    env = registry.load(env_name, config=env_config)
    quiet_models(env)  # the model boxjax steps (`from_playground` quiets it): no device printf per world
    settings = dict(brax)
    settings.pop("num_eval_envs", None)  # both frameworks evaluate `eval_episodes(brax)` episodes
    factory = settings.pop("network_factory", None)
    networks = functools.partial(ppo_networks.make_ppo_networks, **dict(factory or {}))
    curve, last_eval_s = Curve("brax"), [0.0]

    def progress(steps: int, metrics: dict) -> None:
        eval_s = float(metrics.get("eval/walltime", 0.0))
        curve.points.append(
            (
                float(steps),
                float(metrics.get("training/walltime", 0.0)),
                float(metrics["eval/episode_reward"]),
            )
        )
        if steps > 0 and math.isnan(curve.first_s):
            curve.first_s, curve.first_steps = time.perf_counter() - start - eval_s, float(steps)
        last_eval_s[0] = eval_s

    ppo_train.train(
        environment=env, wrap_env_fn=wrapper.wrap_for_brax_training, network_factory=networks,
        progress_fn=progress, deterministic_eval=True, num_eval_envs=eval_episodes(brax), seed=seed,
        max_devices_per_host=1, **settings,
    )  # fmt: skip
    curve.wall_s = time.perf_counter() - start - last_eval_s[0]
    return curve


def run_boxjax(env_name: str, env_config: Any, brax: dict[str, Any], config: Any, seed: int) -> Curve:
    """boxjax PPO with `config` on the environment in Brax's episode wrapper; its evaluation curve."""
    import jax
    from brax.envs.wrappers import training as brax_wrappers
    from mujoco_playground import registry

    from boxjax.envs import from_playground
    from boxjax.rl import ppo

    start = time.perf_counter()
    episode_steps = brax["episode_length"] // brax["action_repeat"]
    raw = registry.load(env_name, config=env_config)
    env = from_playground(brax_wrappers.EpisodeWrapper(raw, brax["episode_length"], brax["action_repeat"]))
    steps_per_iteration, iterations, every = boxjax_schedule(brax, config)
    curve, trained_s, eval_s = Curve("boxjax"), [0.0], [0.0]

    def progress(figures: dict[str, float]) -> None:
        trained_s[0] += figures["s_per_iteration"]
        curve.nonfinite += int(figures.get("env/nonfinite_worlds", 0.0))
        if figures["iteration"] == 1:
            curve.first_s, curve.first_steps = figures["time_s"], float(steps_per_iteration)

    def evaluate(done: int, policy: Any) -> None:
        tick = time.perf_counter()
        key = jax.random.PRNGKey(seed + 1)
        result = ppo.evaluate(env, config, policy, key, episodes=eval_episodes(brax), max_steps=episode_steps)
        curve.points.append((float(done * steps_per_iteration), trained_s[0], result.return_mean))
        eval_s[0] += time.perf_counter() - tick

    options = dict(iterations=iterations, progress_fn=progress, policy_fn=evaluate, policy_every=every)
    ppo.train(env, config, jax.random.PRNGKey(seed), start_time_s=start, **options)
    curve.wall_s = time.perf_counter() - start - eval_s[0]
    return curve


def rows(curves: list[Curve], labels: dict[str, Any]) -> list[dict[str, Any]]:
    """Benchmark rows of each framework: steady steps/s, set-up, training seconds, final evaluation
    return, non-finite worlds."""
    out = []
    for curve in curves:
        steps, trained_s, final = curve.points[-1]
        figures = {
            "steps_per_s": (curve.steady_steps_per_s(), "steps/s"),
            "setup_s": (curve.setup_s(), "s"),
            "train_s": (trained_s, "s"),
            "wall_s": (curve.wall_s, "s"),
            "eval_return": (final, "return"),
            "env_steps": (steps, "steps"),
            "nonfinite_worlds": (float(curve.nonfinite), "worlds"),
        }
        out += [
            {"bench": "compare", **labels, "framework": curve.framework, "metric": k, "value": v, "unit": u}
            for k, (v, u) in figures.items()
        ]
    return out


def plot(curves: list[Curve], env_name: str, path: str) -> None:
    """Evaluation return against environment steps and against training seconds, both frameworks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for curve in curves:
        steps, seconds, returns = zip(*curve.points, strict=True)
        axes[0].plot(steps, returns, marker="o", label=curve.framework)
        axes[1].plot(seconds, returns, marker="o", label=curve.framework)
    axes[0].ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    for ax, xlabel in zip(axes, ("environment steps", "training seconds"), strict=True):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{env_name}: Brax PPO and boxjax PPO")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parser() -> Parser:
    """The command line."""
    p = bench_rows.parser(__doc__, "brax")
    p.add_argument("env", metavar="ENV", help="a MuJoCo Playground environment, e.g. CheetahRun")
    p.add_argument("--steps", type=int, required=True, help="environment steps each framework trains")
    p.add_argument("--evals", type=int, default=10, help="evaluation points, the start included")
    p.add_argument("--seed", type=int, default=0)
    add_override_arguments(p)
    p.add_argument("--order", default="brax,boxjax", help="which framework runs first")
    p.add_argument("--caches", default="as found", help="row label: cold | warm | as found")
    p.add_argument("--plot", default=None, help="the curves' PNG (default under --out)")
    bench_rows.add_common_args(p, out=True, platform="gpu", cache=True)
    return p


def add_override_arguments(p: Parser) -> None:
    """`--brax`, `--ppo` and `--env-config`: changes to Brax's configuration, boxjax's PPO on top of the
    matched one, and the environment's configuration."""
    p.add_argument(
        "--brax", action="append", default=[], metavar="KEY=VALUE", help="a Brax configuration key"
    )
    p.add_argument(
        "--ppo", action="append", default=[], metavar="FIELD=VALUE", help="boxjax PPOConfig on top"
    )
    p.add_argument(
        "--env-config", action="append", default=[], metavar="KEY=VALUE", help="environment config"
    )


def matched(args: argparse.Namespace) -> tuple[dict[str, Any], Any, Any]:
    """(Brax's configuration as a dict, the environment's configuration, boxjax's `PPOConfig`) of the command
    line: the published configuration with `--steps`, `--evals` and `--brax`, `presets.from_brax` of it with
    `--ppo`; an error where their schedules differ or the observations are not one vector."""
    from mujoco_playground import registry

    from boxjax.rl import presets
    from boxjax.rl.config import PPOConfig

    brax = published_config(args.env)
    brax.num_timesteps, brax.num_evals = args.steps, args.evals
    override(brax, args.brax, "--brax", brax_train_arguments())
    env_config = registry.get_default_config(args.env)
    override(env_config, args.env_config, "--env-config")
    settings = brax.to_dict()
    config = presets.from_brax(settings, field_values(args.ppo, PPOConfig()))
    boxjax_schedule(settings, config)
    observations_are_flat(registry.load(args.env, config=env_config))
    return settings, env_config, config


def labels(
    args: argparse.Namespace, config: Any, steps: int, shims: list[str], argv: list[str] | None
) -> dict:
    """What every row of this comparison names besides its framework and figure."""
    labels = {
        "device": bench_rows.device_name(), "env": args.env, "task": args.env, "body": None,
        "worlds": config.num_envs, "unroll": config.unroll_length, "steps": steps, "steps_asked": args.steps,
        "order": args.order, "caches": args.caches,
        "brax_overrides": args.brax, "ppo_overrides": args.ppo, "env_overrides": args.env_config,
        "brax_shims": shims, "commit": bench_rows.commit(), "date": bench_rows.now(),
        "versions": {**bench_rows.versions(), **compare_versions()},
        "command": bench_rows.command("python experiments/compare_brax.py", argv),
    }  # fmt: skip
    if args.platform == "cpu":
        labels["cores"] = os.cpu_count()
    return labels


def main(argv: list[str] | None = None) -> int:
    """Train ENV with both frameworks, print the comparison, write its rows and plot."""
    args = parser().parse_args(argv)
    order = args.order.split(",")
    if sorted(order) != sorted(FRAMEWORKS):
        raise ValueError(f"--order must name brax and boxjax once each, got {args.order!r}")
    from boxjax import platform

    platform.configure(args.platform, args.cache)
    shims = brax_compat()
    from boxjax.rl import presets

    settings, env_config, config = matched(args)
    total_steps = presets.brax_schedule(settings)[1]
    curves = []
    for framework in order:
        print(f"== {framework}: {args.env}, {total_steps:,} steps ({args.steps:,} asked)", flush=True)
        if framework == "brax":
            curves.append(run_brax(args.env, env_config, settings, args.seed))
        else:
            curves.append(run_boxjax(args.env, env_config, settings, config, args.seed))
        for steps, seconds, ret in curves[-1].points:
            print(f"  {steps:>12,.0f} steps  {seconds:8.1f} s  return {ret:9.2f}", flush=True)
    common = labels(args, config, total_steps, shims, argv)
    device, date = common["device"], common["date"]
    path = bench_rows.rows_path(args.out, "compare", device, date)
    new = bench_rows.write_rows(path, rows(curves, common))
    slug = bench_rows.device_slug(device)
    picture = args.plot or os.path.join(args.out, f"compare-{args.env}-{slug}-{date[:10]}.png")
    plot(curves, args.env, picture)
    with open(os.path.splitext(picture)[0] + ".json", "w") as f:
        json.dump({c.framework: c.points for c in curves}, f)
    for row in new:
        print(f"{row['framework']:>7} {row['metric']:<17} {row['value']:14,.2f} {row['unit']}")
    print(f"rows -> {path}; curves -> {picture}")
    return 0


def compare_versions() -> dict[str, str]:
    """Versions of the `compare` extra's packages."""
    from importlib import metadata

    return {name: metadata.version(name) for name in ("brax", "playground")}


if __name__ == "__main__":
    raise SystemExit(run_main(main))
