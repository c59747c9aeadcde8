"""Measure a block policy's defence:
`boxjax eval [SOURCE | --body BODY] [--punches heldout,classic] [--platform cpu|gpu|jax] [--checkpoints]`.

SOURCE is a run folder (runs/NAME: its checkpoints/), a checkpoint directory or a policy file (`boxjax
export`); without one, `--body muscular|muscular-fast` names a shipped blocker (boxjax/data/blockers/), and
`--baseline guard` puts the zero action (the guard the task's PD base holds) in the policy's place. N worlds
(`--worlds`) play face episodes only for T control steps (`--steps`), every finished world restarting at
once; the policy acts by its mean action (`--stochastic`: a sample of its action distribution).

Every punch that arrives is counted by the task's own judgement (blocked, parried when it touched the guard,
missed, hit, clean hit, the hit's score) and by its kind, target and speed; shares are of arrived punches
with 95 % Wilson intervals (punches treated as independent). `--punches` takes a comma list of punch sets:
`classic` (the shipped library), `heldout` (the shipped held-out set, punches training never draws),
`heldout-southpaw` (its twin, every punch thrown from the mirrored stance) or a punch library file; the
default, heldout,classic, falls back to classic alone, saying so, where the held-out set cannot be built.
`--other-kinds` adds the command, walk, bag and shove episodes' success rates.

Platforms: `cpu`, MuJoCo's C engine stepping the task's own code (`boxjax.envs.cpu.CpuEnv`); `gpu`, the JAX
env on MuJoCo Warp, the whole rollout one compiled program; `jax`, that program on MJX's JAX physics on the
CPU. Tables go to the terminal, one row per punch set to results/eval/defence-DEVICE-DATE.jsonl, and a
chart of the outcomes per punch kind and target beside them (`--png`).

`--checkpoints` evaluates every checkpoint of a run (on the held-out set by default) and draws the hit
share against iterations and training minutes (the run's metrics.jsonl): rows in
results/eval/skill-DEVICE-DATE.jsonl.

`--crossplay` takes a self-play run (`--env opponent_policy=learned`: our blocker and a learning opponent)
and plays every kept checkpoint's blocker against every kept checkpoint's opponent and the scripted
punches (the opponent at zero offsets), both by their mean actions, in the run's own task on the JAX env
(`--platform gpu` or `jax`): a table of the hit share of the punches that arrive, rows in
results/eval/crossplay-DEVICE-DATE.jsonl. Bit-identical versions of one agent (a frozen one) play once.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import os
import re
import shlex
import sys
import time

from boxjax.cli import common, policies

PUNCH_SETS = {
    "classic": {"punch_source": "library", "punch_library": ""},
    "heldout": {"punch_source": "heldout", "punch_library": ""},
    "heldout-southpaw": {"punch_source": "heldout-southpaw", "punch_library": ""},
}
"""The named punch sets as block task options; any other set is a punch library file."""
DEFAULT_PUNCHES = "heldout,classic"
PLATFORMS = {"cpu": ("cpu", "mujoco-c"), "gpu": ("gpu", "warp"), "jax": ("cpu", "jax")}
"""`--platform` -> (JAX platform, physics: `boxjax.envs.make`'s impl, "mujoco-c" for `CpuEnv`)."""
BASELINES = ("guard",)
OTHER_KINDS = ("command", "walk", "bag", "shove")


def parser() -> common.Parser:
    """The command line."""
    p = common.Parser(
        prog="boxjax eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "source", metavar="SOURCE", nargs="?", default=None,
        help="runs/NAME, a checkpoint directory or a policy file (default: the shipped blocker of --body)",
    )  # fmt: skip
    p.add_argument(
        "--body", type=common.body_arg, default=None,
        help="without SOURCE: muscular | muscular-fast (a shipped blocker); any body with --baseline guard",
    )  # fmt: skip
    p.add_argument("--baseline", choices=BASELINES, default=None, help="guard: the zero action, no policy")
    p.add_argument("--platform", choices=tuple(PLATFORMS), default="cpu", help="cpu | gpu | jax (see above)")
    p.add_argument(
        "--punches",
        default=None,
        help="comma list of classic | heldout | heldout-southpaw | "
        f"FILE.npz (default {DEFAULT_PUNCHES}, classic alone where the held-out set is missing)",
    )
    p.add_argument("--worlds", type=int, default=32, help="worlds stepped together (default 32)")
    p.add_argument("--steps", type=int, default=2400, help="control steps of face episodes (default 2400)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episodes (and of --stochastic's noise)")
    p.add_argument("--stochastic", action="store_true", help="sample the policy's actions, not its mean")
    p.add_argument("--other-kinds", action="store_true", help="also the command, walk, bag, shove episodes")
    p.add_argument(
        "--other-steps",
        type=int,
        default=400,
        help="control steps of each other kind (default 400: one 10 s episode per world)",
    )
    p.add_argument("--checkpoints", action="store_true", help="every checkpoint of the run: a skill curve")
    p.add_argument(
        "--crossplay",
        action="store_true",
        help="a self-play run: every blocker version against every opponent version and the scripted punches",
    )
    p.add_argument(
        "--out",
        default=os.path.join("results", "eval"),
        help="folder of the rows and charts (default results/eval)",
    )
    p.add_argument("--png", default=None, help="the chart's path (default: beside the rows)")
    p.add_argument("--cache", default=None, help="cache folder for compiled code (default $BOXJAX_CACHE)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


@dataclasses.dataclass(frozen=True)
class Subject:
    """What is evaluated: a policy (its source and meta) or the guard baseline."""

    label: str
    """How tables, rows and charts name it."""
    source: str | None
    """The policy file or checkpoint directory; None for the guard without a source."""
    meta: dict
    """The source's meta (task config, network); for the guard without a source, the body's defaults."""
    baseline: str | None
    """"guard" for the zero action, None for the policy."""


def check_args(args: argparse.Namespace) -> None:
    """Refuse counts below 1 and flags that do not go together."""
    if min(args.worlds, args.steps, args.other_steps) < 1:
        raise ValueError("--worlds, --steps and --other-steps take counts of 1 or more")
    if args.source and args.body:
        raise ValueError("--body names a shipped blocker or the guard's body; SOURCE names its own body")
    if args.checkpoints and (args.baseline or not args.source or os.path.isfile(args.source)):
        raise ValueError("--checkpoints takes a run folder or checkpoint directory (no --baseline)")
    if args.checkpoints and args.other_kinds:
        raise ValueError("--other-kinds measures one policy, not every checkpoint (--checkpoints)")
    if args.baseline and args.stochastic:
        raise ValueError("--stochastic samples a policy's actions; --baseline guard has none")
    if args.crossplay and (args.checkpoints or args.baseline or args.other_kinds or args.stochastic):
        raise ValueError(
            "--crossplay measures the mean actions of a run's versions (no --checkpoints, --baseline, "
            "--other-kinds or --stochastic)"
        )
    if args.crossplay and (args.platform == "cpu" or not args.source or os.path.isfile(args.source)):
        raise ValueError("--crossplay takes a self-play run folder and --platform gpu or jax (the learned "
                         "opponent acts in the JAX env)")  # fmt: skip


def punch_sets(text: str | None) -> list[str]:
    """The punch sets of `--punches`: names of `PUNCH_SETS` or library files; a clear error otherwise."""
    names = [n.strip() for n in (text or DEFAULT_PUNCHES).split(",")]
    for name in names:
        if name not in PUNCH_SETS and not os.path.isfile(name):
            raise ValueError(
                f"--punches: unknown punch set {name!r}; give {', '.join(PUNCH_SETS)} or a punch library file"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"--punches {text!r}: name each punch set once")
    return names


def punch_options(name: str) -> dict:
    """The block task options of a punch set."""
    return PUNCH_SETS.get(name, {"punch_source": "library", "punch_library": os.path.abspath(name)})


def subject(args: argparse.Namespace) -> Subject:
    """The policy (or baseline) the arguments name."""
    if args.baseline and not args.source:
        if args.body is None:
            raise ValueError("--baseline guard needs --body (or SOURCE for its task config)")
        meta = {"env": "block", "body": args.body, "config": {"body": args.body}}
        return Subject(f"guard (zero action), {args.body}", None, meta, args.baseline)
    source = policies.checkpoint_dir(args.source) if args.source else policies.shipped_blocker(args.body)
    meta = policies.read_meta(source)
    policies.check_task(source, meta)
    if meta["env"] != "block":
        raise ValueError(
            f"{source}: a policy of the {meta['env']!r} task; boxjax eval measures block policies"
        )
    label = args.source or f"shipped {args.body} blocker"
    if args.baseline:
        return Subject(f"guard (zero action), task of {label}", source, meta, args.baseline)
    return Subject(label, source, meta, None)


SCRIPTED = {"opponent_policy": "scripted"}
"""The opponent a blocker is measured against: the punch set's scripted punches, also for a blocker of a
self-play run (`--crossplay` plays its learned opponents)."""


def build_env(args: argparse.Namespace, meta: dict, name: str):
    """The block task of `meta`'s config with punch set `name` and the scripted opponent (`SCRIPTED`): on
    MuJoCo's C engine (`cpu`: the task `CpuEnv` steps), else the JAX env on the platform's physics; an error
    naming the set where it fails."""
    from boxjax import envs
    from boxjax.envs import cpu

    options = {**policies.task_options(meta), **punch_options(name), **SCRIPTED}
    impl = PLATFORMS[args.platform][1]
    try:
        if impl == "mujoco-c":
            return cpu.task_env(envs.task("block").config(**options))
        return envs.make("block", impl=impl, num_worlds=args.worlds, **options)
    except common.INPUT_ERRORS as err:
        raise ValueError(f"punch set {name}: the block task cannot be built with it: {err}") from err


def built_sets(args: argparse.Namespace, meta: dict, default: str) -> list[tuple[str, object]]:
    """(punch set, its env) of every set `--punches` names (else of `default`, where a held-out set that
    cannot be built is left out, saying so, and classic stands in for it)."""
    names = punch_sets(args.punches or default)
    sets = []
    for name in names:
        try:
            sets.append((name, build_env(args, meta, name)))
        except Exception as err:  # noqa: BLE001 - the default's held-out set is optional: say why, go on
            if args.punches is not None or name != "heldout":
                raise
            print(
                f"eval: note: no held-out set here ({type(err).__name__}: {err}); measuring classic",
                flush=True,
            )
    if not sets:
        sets.append(("classic", build_env(args, meta, "classic")))
    return sets


def runner(args: argparse.Namespace, subj: Subject, env, step: int | None, label: str):
    """run(kind, steps) -> Tally: `subj`'s policy (or baseline) in `env` on the platform."""
    from boxjax.bench.defence import rollout

    ppo_config, policy = (
        (None, None) if subj.baseline else policies.restore(subj.source, subj.meta, env, step)
    )
    act = rollout.actor(env, ppo_config, args.stochastic)

    def run(kind: str, steps: int):
        if args.platform != "cpu":
            return rollout.jax_tally(env, act, policy, kind, args.worlds, steps, args.seed)
        start = time.perf_counter()

        def progress(done: int) -> None:
            print(
                f"eval: {label}, {kind}: step {done} of {steps}, {time.perf_counter() - start:.0f} s",
                flush=True,
            )

        return rollout.cpu_tally(env.config, act, policy, kind, args.worlds, steps, args.seed, progress)

    return run


def row_head(args: argparse.Namespace, subj: Subject, argv: list[str], measure: str) -> dict:
    """What every row of this command names: the policy, task, platform, device, sizes, commit, date."""
    from boxjax.bench import rows

    device = rows.device_name()
    commit = rows.commit()
    return {
        "tool": "eval", "measure": measure, "policy": subj.label, "source": subj.source,
        "baseline": subj.baseline or "none", "task": "block", "body": subj.meta["body"],
        "platform": args.platform, "physics": PLATFORMS[args.platform][1], "device": device,
        **({"cores": os.cpu_count()} if args.platform != "gpu" else {}),
        "worlds": args.worlds, "steps": args.steps, "seed": args.seed, "stochastic": args.stochastic,
        "commit": commit[:7] + commit[40:] if len(commit) >= 40 else commit,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "boxjax eval " + shlex.join(argv), "versions": rows.versions(),
    }  # fmt: skip


def slug(text: str) -> str:
    """`text` as a file-name part: lower case, every run of other characters one dash."""
    return re.sub("[^a-z0-9]+", "-", text.lower()).strip("-")


def output_paths(args: argparse.Namespace, head: dict, subj: Subject, sets: list) -> tuple[str, str]:
    """(rows file, chart) of this command's measure: results/eval/MEASURE-DEVICE-DATE.jsonl and a PNG
    beside it named by the policy and the punch sets (or `--png`)."""
    from boxjax.bench import rows

    path = rows.rows_path(args.out, head["measure"], head["device"], head["date"])
    punches = "-".join(os.path.splitext(os.path.basename(name))[0] for name, _ in sets)
    name = "-".join(slug(x) for x in (head["measure"], subj.label, punches, head["device"]))
    return path, args.png or os.path.join(args.out, f"{name}-{head['date'][:10]}.png")


def defence(args: argparse.Namespace, subj: Subject, argv: list[str]) -> int:
    """Measure `subj` on every punch set (and the other kinds), print, write rows and the chart."""
    from boxjax.bench.defence import report, tally

    head = row_head(args, subj, argv, "defence")
    sets, panels, out = built_sets(args, subj.meta, DEFAULT_PUNCHES), [], []
    for name, env in sets:
        start = time.perf_counter()
        run = runner(args, subj, env, None, f"{subj.label}, {name}")
        figures = tally.defence(run("face", args.steps))
        seconds = time.perf_counter() - start
        acting = "sampled" if args.stochastic else "mean"
        print(
            f"\n{subj.label}, {name} punches ({args.platform}, {args.worlds} worlds x {args.steps} steps, "
            f"seed {args.seed}, {acting} actions; {seconds:.0f} s)"
        )
        print(report.defence_table(figures) + "\n\n" + report.tag_table(figures), flush=True)
        panels.append((name, figures))
        out.append({**head, "punches": name, "seconds": round(seconds, 1), **report.defence_row(figures)})
        if args.other_kinds and len(out) == 1:
            kinds = [tally.kind_figures(k, run(k, args.other_steps)) for k in OTHER_KINDS]
            print(f"\nother episode kinds ({args.other_steps} steps each)\n" + report.kinds_table(kinds))
            rows = [dataclasses.asdict(k) for k in kinds]
            out.append(
                {**head, "measure": "kinds", "steps": args.other_steps, "punches": None, "kinds": rows}
            )
    path, png = output_paths(args, head, subj, sets)
    report.append_rows(path, out)
    report.outcome_chart(
        png, panels, f"{subj.label} ({head['body']}, {args.platform}, commit {head['commit']})"
    )
    print(f"\nrows -> {path}\nchart -> {png}")
    return 0


def training_minutes(directory: str) -> dict[int, float]:
    """Iteration -> minutes of training up to its end (the run's metrics.jsonl, beside its checkpoints/:
    the iterations' wall time summed, set-up left out); empty without the file."""
    from boxjax import runs

    run = os.path.dirname(os.path.abspath(directory))
    try:
        history = runs.read_metrics(run)
    except FileNotFoundError:
        print(f"eval: note: no metrics.jsonl in {run}: no training minutes", flush=True)
        return {}
    minutes, total = {}, 0.0
    for row in history:
        total += row.get("s_per_iteration", 0.0) / 60.0
        minutes[int(row["iteration"])] = total
    return minutes


def skill_curve(args: argparse.Namespace, subj: Subject, argv: list[str]) -> int:
    """Measure every checkpoint of a run on the punch sets (held-out by default), write a row each, draw
    the hit share against iterations and training minutes."""
    from boxjax.bench.defence import report, tally

    head = row_head(args, subj, argv, "skill")
    sets, curves, out = built_sets(args, subj.meta, "heldout"), {}, []
    minutes = training_minutes(subj.source)
    for step in policies.checkpoint_steps(subj.source):
        at = dataclasses.replace(subj, meta=policies.read_meta(subj.source, step))
        for name, env in sets:
            figures = tally.defence(runner(args, at, env, step, f"step {step}, {name}")("face", args.steps))
            print(
                f"step {step}, {name}: arrived {figures.arrived}, hit {report.percent(figures.hit)}",
                flush=True,
            )
            row = {**head, "punches": name, "checkpoint_step": step, "iteration": step,
                   "train_minutes": minutes.get(step), **report.defence_row(figures)}  # fmt: skip
            curves.setdefault(name, []).append(row)
            out.append(row)
    path, png = output_paths(args, head, subj, sets)
    report.append_rows(path, out)
    report.skill_chart(
        png, curves, f"{subj.label} ({head['body']}, {args.platform}, commit {head['commit']})"
    )
    print(f"\nrows -> {path}\nchart -> {png}")
    return 0


def distinct_versions(models: dict[int, object]) -> dict[str, object]:
    """{label: model} of one agent's checkpoint versions ({step: model}, in step order), bit-identical models
    played once: "step S" for a model of one step, "steps S1-Sn, n identical" for one that did not change
    (an agent frozen by `--ppo frozen_agents`, or between its turns)."""
    import jax
    import numpy as np

    groups: dict[bytes, list[int]] = {}
    for step, model in models.items():
        leaves = jax.tree.leaves(model)
        key = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).digest()
        groups.setdefault(key, []).append(step)
    out = {}
    for steps in groups.values():
        alike = f"steps {steps[0]}-{steps[-1]}, {len(steps)} identical"
        out[f"step {steps[0]}" if len(steps) == 1 else alike] = models[steps[0]]
    return out


def crossplay(args: argparse.Namespace, subj: Subject, argv: list[str]) -> int:
    """Every kept blocker version of a self-play run against every kept opponent version and the scripted
    punches: the hit share table, a row per pair."""
    from boxjax import envs
    from boxjax.bench import rows
    from boxjax.bench.defence import report, rollout, tally
    from boxjax.envs import base
    from boxjax.rl import ppo

    named = subj.meta.get("agents") or []
    if len(named) != 2:
        raise ValueError(
            f"--crossplay: {subj.source} is no self-play run of two agents (its agents: {named})"
        )
    head = row_head(args, subj, argv, "crossplay")
    env = envs.make("block", impl=PLATFORMS[args.platform][1], num_worlds=args.worlds,
                    **policies.task_options(subj.meta))  # fmt: skip
    ours, theirs = (a.name for a in base.agents_of(env))
    versions = {}
    for step in policies.checkpoint_steps(subj.source):
        meta = policies.read_meta(subj.source, step)
        versions[step] = {a: policies.restore(subj.source, meta, env, step, a)[1] for a in (ours, theirs)}
    act = rollout.agents_actor(env, ppo.PPOConfig.from_dict(subj.meta["ppo"]))
    blockers = distinct_versions({s: v[ours] for s, v in versions.items()})
    opponents = {"scripted": None, **distinct_versions({s: v[theirs] for s, v in versions.items()})}
    cells, out = {}, []
    for b, blocker in blockers.items():
        for o, opponent in opponents.items():
            counts = rollout.jax_tally(env, act, {ours: blocker, theirs: opponent}, "face", args.worlds,
                                       args.steps, args.seed)  # fmt: skip
            cells[b, o] = tally.defence(counts)
            print(
                f"eval: blocker {b} against opponent {o}: {report.percent(cells[b, o].hit)} hit", flush=True
            )
            out.append({**head, "blocker": b, "opponent": o, **report.defence_row(cells[b, o])})
    sizes = f"{args.platform}, {args.worlds} worlds x {args.steps} steps, seed {args.seed}, mean actions"
    print(f"\n{subj.label}: hit share of arrived punches ({sizes})")
    print(report.crossplay_table(cells, list(blockers), list(opponents)))
    path = rows.rows_path(args.out, head["measure"], head["device"], head["date"])
    report.append_rows(path, out)
    print(f"\nrows -> {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Check the arguments, pick the platform, find the policy, measure."""
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    check_args(args)
    punch_sets(args.punches)
    from boxjax import platform

    platform.configure(PLATFORMS[args.platform][0], args.cache)
    subj = subject(args)
    measure = crossplay if args.crossplay else skill_curve if args.checkpoints else defence
    return measure(args, subj, argv)


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
