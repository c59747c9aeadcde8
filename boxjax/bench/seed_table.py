"""The seed's price-and-speed table for the blocking training, on boxjax: `python experiments/seed_table.py`.

The seed measured one PPO iteration of its two-fighter blocking training (about 30,000 steps, then 4 epochs
of minibatch 2,048) on an RTX 5090 and a 96-vCPU EC2 spot machine; `SEED_ROWS` quotes its table. Our rows
come from `results/bench/`:

* ``bench``: `bench_block.py` rows of the seed's world (muscular body, simulated opponent, the shipped walking
  teacher beside the policy, 2,048 worlds x 16 steps, 4 epochs of 2,048), or of it with a named physics
  option (`PHYSICS_OPTIONS`): best and median of the timed iterations from one warm start;
* ``training``: rows of real training runs (`--from-run`): the mean seconds per iteration after warm-up
  (`WARMUP_ITERATIONS` left out), and on the CPU path the profile's split (collect, learn, wait).

The table shows the `current` measurement of each question: the newest of each kind (bench or training),
machine and set of named options (`options_of`), the default first, of code that stands (rows marked
`reverted`, options removed since and benches acting with a trained policy are earlier measurements:
`earlier_table`, which `boxjax bench report` writes to docs/benchmarks.md); `--all` shows every dated one.

The cost of 1,000 iterations is the seconds per iteration at the device's price (`prices.json`, each with its
source and date). A 96-core CPU row is projected from a measured CPU run (`project_cores`) and labelled as a
projection until a machine of that size runs it.

    python experiments/seed_table.py                       # the current table from the kept rows
    python experiments/seed_table.py --all                 # every dated measurement
    python experiments/seed_table.py --from-run runs/NAME --label device="NVIDIA H200" --label commit=abc \
        --out results/bench/seedtable-nvidia-h200-2026-12-05.jsonl     # a training run's rows
    python -m boxjax.bench.seed_table                      # the same, from the package
"""

from __future__ import annotations

import glob
import json
import os
import statistics
from collections.abc import Callable

from boxjax import mjcf, runs
from boxjax.bench import rows as bench_rows
from boxjax.cli.common import field_values, run_main

SEED_ROWS = (
    {
        "machine": "RTX 5090, vast.ai (the seed)",
        "usd_per_hour": 0.67,
        "s_per_iteration": 1.19,
        "steps_per_s": 27_500,
        "usd_per_1k": 0.22,
        "how": "seed's table, optimised GPU (2,048 x 16 = 32,768 steps)",
    },
    {
        "machine": "EC2 c8a spot, 96 vCPU (the seed)",
        "usd_per_hour": 1.48,
        "s_per_iteration": 1.74,
        "steps_per_s": 15_300,
        "usd_per_1k": 0.71,
        "how": "seed's table, optimised 32-bit CPU (60 workers x 7 copies x 64 steps; 3 learners)",
    },
)
"""The seed's blocking table ("Optimised: the comparison"), as printed there."""
WORLD = {"body": "muscular", "opponent": "simulated", "worlds": 2048, "unroll": 16}
"""The seed's world and shape that a bench row must have measured."""
WARMUP_ITERATIONS = 5
"""Iterations of a training run left out of its mean (compiles, CUDA graph captures, the first batches)."""
PROJECT_CORES = 96
"""The seed's CPU machine's vCPUs, for the projected row."""
LEARNER_CORES = 1
"""Cores our CPU path's one learner takes (the rest collect)."""
PROJECT_PRICE = "EC2 c8a.24xlarge spot (96 vCPU)"
"""The `prices.json` entry the projected row is priced at (the seed's CPU machine)."""
SPLIT = {
    "collect_s": "profile/collect_s",
    "learn_s": "profile/learner_update_s",
    "collector_wait_s": "profile/collector_wait_s",
    "learner_wait_s": "profile/learner_wait_s",
}
"""The CPU path's per-iteration split, from its profile figures."""


def usd_per_1k(s_per_iteration: float, usd_per_hour: float) -> float:
    """Dollars for 1,000 iterations at `usd_per_hour`."""
    return s_per_iteration * 1000 / 3600 * usd_per_hour


INTEGER_LABELS = {"cores", "worlds", "unroll"}
"""Labels given on the command line that rows hold as integers."""


def run_rows(metrics: list[dict], labels: dict) -> list[dict]:
    """A training run's rows (`labels` on each): mean `s_per_iteration` and `steps_per_s` after
    `WARMUP_ITERATIONS`, and the CPU path's split where its metrics have one.

    Raises:
      ValueError: a run with no iteration past the warm-up.
    """
    steady = metrics[WARMUP_ITERATIONS:]
    if not steady:
        raise ValueError(
            f"the run has {len(metrics)} iterations, none past the {WARMUP_ITERATIONS} of warm-up"
        )
    s_per_it = statistics.fmean(r["s_per_iteration"] for r in steady)
    figures = {
        "s_per_iteration": s_per_it,
        "steps_per_s": statistics.fmean(r["steps_per_s"] for r in steady),
        "iterations": float(len(steady)),
    }
    for name, key in SPLIT.items():
        if all(key in r for r in steady):
            figures[name] = statistics.fmean(r[key] for r in steady)
    base = {"bench": "block-train", "task": "block", **labels}
    return [{**base, "metric": k, "value": v} for k, v in figures.items()]


def project_cores(cpu: dict[str, float], cores: int, to_cores: int, learner_cores: int) -> dict[str, float]:
    """Seconds per iteration on `to_cores` cores, projected from a run on `cores`: the same steps per
    iteration collected by `to_cores - learner_cores` collector cores at the measured per-core rate, the
    update as measured; an iteration lasts as long as the slower side (decoupled)."""
    collect = cpu["collect_s"] * (cores - learner_cores) / (to_cores - learner_cores)
    return {"s_per_iteration": max(collect, cpu["learn_s"]), "collect_s": collect, "learn_s": cpu["learn_s"]}


def read_rows(paths: list[str]) -> list[dict]:
    """Every JSON row of the files."""
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


PHYSICS_OPTIONS = ("opponent_freeze_idle", "solver", "solver_iterations")
"""Task options of bench rows the table shows besides the defaults, each a named option that changes the
physics (rule "fast", labelled as not the seed's rule): the opponent's idle hinges frozen, another
constraint solver, another solver iteration cap."""
SEED_WORLD = "seed's world (every hinge of the opponent simulated)"


def changes_of(row: dict) -> tuple[str, ...]:
    """What a row changed from the seed's physics, as short notes (empty: the seed's world), from its
    `task_options` (bench rows and runs) or its `opponent_hinges` label (older training rows)."""
    options = row.get("task_options") or {}
    notes = []
    if options.get("opponent_freeze_idle") or "frozen" in row.get("opponent_hinges", ""):
        notes.append("**lighter world**: the opponent's 25 idle hinges frozen")
    if options.get("solver", "newton") != "newton":
        notes.append(f"**physics changed**: the {options['solver'].upper()} solver")
    if options.get("solver_iterations", mjcf.SOLVER_ITERATIONS) != mjcf.SOLVER_ITERATIONS:
        notes.append(f"**physics changed**: solver cap {options['solver_iterations']} iterations")
    return tuple(notes)


def variant_of(row: dict) -> str:
    """The table's description of a row's world: the seed's, or its `changes_of` (named options, not the
    seed's rule), our kernel on both fighters' trees where a row says it ran (`factor_trees` "all": the
    same physics), the solver's loop where a row unrolled it (`solver_loop`: the same physics), the Hessian's
    zero tiles where a row skipped them (`hessian_tiles` "nonzero", an option measured slower on an H100 and
    dropped; its rows are kept: the same physics), MuJoCo Warp's launch block sizes where a row set them
    (`block_dims`: the same physics) and the policy
    that acted in a bench where not fresh weights (`policy`: a trained one keeps its guard up and falls less,
    which changes the physics' work, not its rule)."""
    changes = changes_of(row)
    text = "; ".join(changes) + " (not the seed's rule)" if changes else SEED_WORLD
    if row.get("factor_trees") == "all":
        text += "; our kernel factors both fighters (same physics)"
    if row.get("solver_loop") == "unrolled":
        text += "; the solver's loop unrolled (same physics)"
    if row.get("hessian_tiles") == "nonzero":
        text += "; the Hessian's zero tiles skipped (same physics)"
    if row.get("block_dims"):
        sizes = ", ".join(f"{name}={threads}" for name, threads in sorted(row["block_dims"].items()))
        text += f"; launch block sizes {sizes} (same physics)"
    if row.get("policy", "fresh") != "fresh":
        text += f"; acting: {os.path.basename(row['policy'])}"
    return text


REMOVED = {"hessian_tiles": "4ec4205"}
"""Row fields of options measured and removed since, each with the commit that removed it: their rows stay
in the earlier measurements, never current."""
DIAGNOSTIC = ("--init",)
"""Flags of a bench that checks the bench itself (a trained policy acting), not a configuration to run: its
rows stay in the earlier measurements."""


def _flag(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def options_of(row: dict) -> tuple[str, ...]:
    """The named options a row measured, as the flags that set them (empty: the default): task options
    (`--env`; the frozen opponent of rows from before it was an option), the solver's loop, launch block
    sizes, the Hessian's zero tiles (removed since) and a trained policy acting in a bench (`--init`)."""
    given = row.get("task_options") or {}
    flags = [f"--env {k}={_flag(v)}" for k, v in sorted(given.items())]
    if "frozen" in row.get("opponent_hinges", "") and "opponent_freeze_idle" not in given:
        flags.append("--env opponent_freeze_idle=true")
    if row.get("solver_loop", "default") != "default":
        flags.append(f"--solver-loop {row['solver_loop']}")
    flags += [f"--block-dim {k}={v}" for k, v in sorted((row.get("block_dims") or {}).items())]
    if row.get("hessian_tiles") == "nonzero":
        flags.append("--hessian-tiles nonzero")
    if row.get("policy", "fresh") != "fresh":
        flags.append(f"--init {os.path.basename(row['policy'])}")
    return tuple(flags)


def _entry(row: dict, kind: str) -> dict:
    """What every measurement of the table names, from its first row."""
    removed = [f"option removed in {commit}" for field, commit in REMOVED.items() if field in row]
    return {
        "kind": kind,
        "device": row["device"],
        "commit": row["commit"][:7],
        "stamp": row["date"],
        "date": row["date"][:10],
        "variant": variant_of(row),
        "changes": changes_of(row),
        "options": options_of(row),
        "status": row.get("reverted") or (removed[0] if removed else None),
    }


def bench_cells(rows: list[dict]) -> list[dict]:
    """The seed-world bench measurements (the defaults, or `PHYSICS_OPTIONS` set), oldest first: one per
    device, commit and `variant_of`, with its metrics ("s_per_iteration": best, "_median"), "repeats"
    and the `_entry` fields."""
    keep = [
        r
        for r in rows
        if r.get("bench") == "block"
        and r.get("teacher") == "shipped"
        and r.get("epochs") == 4
        and r.get("minibatch") == 2048
        and not r.get("mj_options")
        and set(r.get("task_options") or {}) <= set(PHYSICS_OPTIONS)
        and all(r.get(k) == v for k, v in WORLD.items())
    ]
    out: dict[tuple[str, str, str], dict] = {}
    for r in sorted(keep, key=lambda r: r["date"]):
        cell = out.setdefault((r["device"], r["commit"], variant_of(r)), _entry(r, "bench"))
        if "--repeats" in r.get("command", ""):
            cell["repeats"] = r["command"].split("--repeats")[1].split()[0]
        cell[r["metric"]] = r["value"]
    return list(out.values())


def train_cells(rows: list[dict]) -> list[dict]:
    """The training-run measurements, oldest first: one per device, platform and run, with its metrics,
    "run", "cores" and "price_key" where given, and the `_entry` fields."""
    out: dict[tuple[str, str, str], dict] = {}
    for r in sorted((r for r in rows if r.get("bench") == "block-train"), key=lambda r: r["date"]):
        labels = {k: r[k] for k in ("run", "cores", "price_key") if k in r}
        cell = out.setdefault((r["device"], r["platform"], r["run"]), {**_entry(r, "training"), **labels})
        cell[r["metric"]] = r["value"]
    return list(out.values())


def run_options(run_dir: str) -> dict:
    """The labels a training run's summary.json gives its rows: `task_options` (its `--env` overrides, typed),
    `factor_trees` (which trees our factorisation took, where recorded), `solver_loop` (where not MuJoCo
    Warp's default) and `block_dims` (where set); empty without a summary.

    Raises:
      ValueError: the run changed a task field other than `PHYSICS_OPTIONS` (not the seed's world).
    """
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        summary = json.load(f)
    from boxjax.envs.block.config import BlockConfig

    given = field_values((summary.get("overrides") or {}).get("env") or [], BlockConfig())
    other = sorted(set(given) - set(PHYSICS_OPTIONS))
    if other:
        raise ValueError(f"{run_dir} changed the task ({', '.join(other)}): not the seed's world")
    labels = {"task_options": given}
    if summary.get("factor_trees"):
        labels["factor_trees"] = summary["factor_trees"]
    if summary.get("solver_loop", "default") != "default":
        labels["solver_loop"] = summary["solver_loop"]
    if summary.get("block_dims"):
        labels["block_dims"] = summary["block_dims"]
    return labels


def _priced(prices: dict, device: str, key: str | None = None) -> tuple[str, float | None]:
    """(price cell, USD per hour or None) of a device, as `bench_rows.price_entry` finds it."""
    entry = bench_rows.price_entry(device, prices, key)
    if entry is None:
        return "no price", None
    return f"{entry[1].usd_per_hour:.2f} ({entry[0]}, {entry[1].date})", entry[1].usd_per_hour


def _line(
    config: str, machine: str, price: tuple[str, float | None], s: float, steps: float, how: str
) -> str:
    cost = f"{usd_per_1k(s, price[1]):.3f}" if price[1] else "n/a"
    return f"| {config} | {machine} | {price[0]} | {s:.3f} | {steps:,.0f} | {cost} | {how} |"


def measurements(rows: list[dict]) -> list[dict]:
    """Every measurement of the table, benches then training runs, each oldest first."""
    return bench_cells(rows) + train_cells(rows)


def _question(entry: dict) -> tuple:
    return entry["kind"], entry["device"], entry.get("cores"), entry["options"]


def current(entries: list[dict]) -> list[dict]:
    """The newest measurement of each question (kind, device, cores and named options) whose code stands
    (no `status`, no `DIAGNOSTIC` flag): the defaults first (benches, then training, the CPU last), then
    the named options."""
    standing = [
        e for e in entries if not e["status"] and not any(f.startswith(DIAGNOSTIC) for f in e["options"])
    ]
    last = {_question(e): e for e in sorted(standing, key=lambda e: e["stamp"])}
    order = lambda e: (bool(e["options"]), e["options"], e["device"].startswith("cpu"), e["kind"] != "bench")  # noqa: E731
    return sorted(last.values(), key=order)


def earlier(entries: list[dict]) -> list[dict]:
    """The measurements `current` leaves out, oldest first."""
    shown = {id(e) for e in current(entries)}
    return sorted((e for e in entries if id(e) not in shown), key=lambda e: e["stamp"])


def configuration(entry: dict) -> str:
    """A current measurement's configuration: the default, or its named options and what they change."""
    if not entry["options"]:
        return "**the default**"
    flags = " ".join(f"`{flag}`" for flag in entry["options"])
    return f"named option {flags} ({'; '.join(entry['changes']) or 'same physics'})"


def _how(entry: dict) -> str:
    if entry["kind"] == "bench":
        kind = "median" if "s_per_iteration_median" in entry else "best"
        how = f"bench, {kind} of {entry.get('repeats', 'the')} iterations"
        if kind == "median":
            how += f" (best {entry['s_per_iteration']:.3f} s)"
    else:
        how = f"training run {entry['run']}, mean of {entry['iterations']:,.0f} iterations"
        if "collect_s" in entry:
            how += f" (collect {entry['collect_s']:.2f} s / learn {entry['learn_s']:.2f} s"
            how += f" / collectors wait {entry['collector_wait_s']:.2f} s)"
    return f"{how}, {entry['commit']}, {entry['date']}"


def lines(entries: list[dict], prices: dict, label: Callable[[dict], str]) -> list[str]:
    """One table line per measurement (its configuration by `label`), each CPU run of the default followed by
    its projection to `PROJECT_CORES`."""
    out = []
    for e in entries:
        s = e.get("s_per_iteration_median", e["s_per_iteration"])
        steps = 32768 / s if e["kind"] == "bench" else e["steps_per_s"]
        machine = e["device"] + (f" ({e['cores']} cores)" if "cores" in e else "")
        out.append(
            _line(label(e), machine, _priced(prices, e["device"], e.get("price_key")), s, steps, _how(e))
        )
        if "collect_s" in e and "cores" in e and not e["options"]:
            p = project_cores(e, int(e["cores"]), PROJECT_CORES, LEARNER_CORES)
            how = (
                f"not measured: collect {p['collect_s']:.2f} s on {PROJECT_CORES - LEARNER_CORES} collector "
                "cores at the measured rate, learn as measured"
            )
            machine = f"**projection**: {PROJECT_CORES} cores, from the row above"
            price = _priced(prices, "", PROJECT_PRICE)
            out.append(
                _line(label(e), machine, price, p["s_per_iteration"], steps * s / p["s_per_iteration"], how)
            )
    return out


HEADER = (
    "| configuration | machine | price ($/h: entry, date) | s/iteration | steps/s | $ / 1,000 iterations "
    "| how |",
    "|---|---|---|---|---|---|---|",
)


def seed_lines() -> list[str]:
    """The seed's own rows (`SEED_ROWS`) as table lines."""
    return [
        f"| the seed's table | {seed['machine']} | {seed['usd_per_hour']:.2f} | "
        f"{seed['s_per_iteration']:.2f} | {seed['steps_per_s']:,} | {seed['usd_per_1k']:.2f} | "
        f"{seed['how']} |"
        for seed in SEED_ROWS
    ]


def _earlier_label(entry: dict) -> str:
    return f"**{entry['status']}**: {entry['variant']}" if entry["status"] else entry["variant"]


def table(rows: list[dict], prices: dict, every: bool = False) -> str:
    """The seed's table form: configuration, machine, price, s/iteration, steps/s, $ per 1,000 iterations, how
    measured; the seed's rows, then the `current` measurement of each question, or `every` one (oldest
    first, described by `variant_of`)."""
    entries = measurements(rows)
    if every:
        body = lines(sorted(entries, key=lambda e: e["stamp"]), prices, _earlier_label)
    else:
        body = lines(current(entries), prices, configuration)
    return "\n".join([*HEADER, *seed_lines(), *body])


def earlier_table(rows: list[dict], prices: dict) -> str:
    """The measurements the current table leaves out (superseded, reverted, removed or diagnostic), oldest
    first."""
    return "\n".join([*HEADER, *lines(earlier(measurements(rows)), prices, _earlier_label)])


def main(argv: list[str] | None = None) -> int:
    """Print the table, or write a training run's rows (`--from-run`)."""
    p = bench_rows.parser(__doc__.split("\n")[0], "seed_table")
    p.add_argument("--rows", nargs="*", default=None, help="row files (default: results/bench/*.jsonl)")
    p.add_argument("--from-run", default=None, help="a training run folder: write its rows to --out")
    p.add_argument("--out", default=None, help="rows file --from-run appends to")
    p.add_argument("--all", action="store_true", help="every dated measurement, superseded ones included")
    bench_rows.add_common_args(p, label=True)
    args = p.parse_args(argv)
    if args.from_run:
        if not args.out:
            p.error("--from-run needs --out")
        labels = bench_rows.labels_of(p, args.label)
        missing = [k for k in ("device", "platform", "commit", "date", "command") if k not in labels]
        if missing:
            p.error(f"--from-run needs --label for {missing}")
        labels = {
            **WORLD,
            **run_options(args.from_run),
            **labels,
            "run": os.path.basename(os.path.normpath(args.from_run)),
        }
        for key in INTEGER_LABELS & labels.keys():
            labels[key] = int(labels[key])
        bench_rows.write_rows(args.out, run_rows(runs.read_metrics(args.from_run), labels))
        return 0
    root = os.path.join(bench_rows.REPO, "results", "bench")
    paths = args.rows if args.rows is not None else sorted(glob.glob(os.path.join(root, "*.jsonl")))
    print(table(read_rows(paths), bench_rows.load_prices(), every=args.all))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
