"""Shared command-line plumbing for the experiment scripts: arguments, progress line, JSONL log."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

PROCESS_START_S = time.perf_counter()
SETUP_MARKS_S: dict[str, float] = {}
"""Seconds from `PROCESS_START_S` to named points of a CLI's set-up before training (`mark`)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one `error: ...` line (status 2), like every other CLI error."""

    def error(self, message: str):
        """Print one line and exit with status 2."""
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def body_arg(text: str) -> str:
    """`--body` value: one of `boxjax.mjcf.BODIES`."""
    from boxjax import mjcf

    if text not in mjcf.BODIES:
        raise argparse.ArgumentTypeError(f"unknown body {text!r}; valid: {', '.join(mjcf.BODIES)}")
    return text


def base_parser(description: str) -> argparse.ArgumentParser:
    """Arguments every training script takes."""
    p = Parser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu", help="where JAX and the physics run")
    p.add_argument("--body", type=body_arg, default="simple", help="muscular | muscular-fast | simple")
    p.add_argument("--envs", type=int, default=None, help="worlds stepped in parallel")
    p.add_argument("--unroll", type=int, default=None, help="control steps per world per iteration")
    p.add_argument("--minibatch", type=int, default=None, help="transitions per gradient step")
    p.add_argument("--epochs", type=int, default=None, help="passes over each iteration's batch")
    p.add_argument(
        "--devices",
        type=devices_arg,
        default=None,
        metavar="all|N",
        help="split the worlds over N devices (or all), data-parallel; default 1",
    )
    p.add_argument("--iterations", type=int, default=1000, help="stop after this many iterations")
    p.add_argument("--minutes", type=float, default=None, help="stop after this much wall time")
    p.add_argument("--resume", default=None, help="checkpoint directory to continue exactly")
    p.add_argument(
        "--init",
        default=None,
        help="checkpoint directory or policy file (.msgpack) whose model starts this run",
    )
    p.add_argument("--name", default=None, help="run name (folder under runs/)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--stop-on-overflow", action="store_true", help="stop the run when any world overflows")
    p.add_argument(
        "--stop-on-nan", action="store_true", help="stop the run when any world's state turns non-finite"
    )
    p.add_argument(
        "--max-skipped-updates",
        type=int,
        default=None,
        help="stop after this many consecutive iterations whose update was skipped as non-finite (default 5)",
    )
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log every iteration's figures to runs/NAME/tensorboard (the tensorboard extra)",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.add_argument("--cache", default=None, help="cache folder for compiled code (default $BOXJAX_CACHE)")
    p.add_argument("--ppo", action="append", default=[], metavar="FIELD=VALUE", help="any PPOConfig field")
    p.add_argument("--env", action="append", default=[], metavar="FIELD=VALUE", help="any task config field")
    return p


CPU_PROFILE = (
    ("profile/collector_step_s", "step {:.2f}s", "collector step"),
    ("profile/collector_wait_s", "cwait {:.2f}s", "collector wait"),
    ("profile/learner_update_s", "learn {:.2f}s", "learner update"),
    ("profile/allreduce_s", "ar {:.3f}s", "all-reduce"),
    ("profile/cpu_util", "cpu {:.0%}", "CPU utilisation"),
)
"""Per-iteration profile of the CPU path shown in the progress line (all of it is in the JSONL)."""


def add_cpu_arguments(parser: argparse.ArgumentParser, default_worlds: int, fused: bool = False) -> None:
    """Flags of the CPU path (`--platform cpu`: MuJoCo C workers, `boxjax.rl.cpu.workers`); `default_worlds`
    is the default K, and `fused` adds ``--mode fused`` (the fused JAX iteration, MJX's JAX physics)."""
    g = parser.add_argument_group("CPU path (--platform cpu)")
    modes = ("auto", "serial", "decoupled") + (("fused",) if fused else ())
    help_mode = "auto: serial below 4 cores" + (
        "; fused: the fused JAX iteration with MJX's JAX physics (the GPU program, on the CPU)"
        if fused
        else ""
    )
    g.add_argument("--mode", choices=modes, default="auto", help=help_mode)
    g.add_argument("--collectors", type=int, default=1, help="collector processes N")
    g.add_argument(
        "--worlds",
        type=int,
        default=None,
        help=f"worlds per collector K (--envs = N x K); default {default_worlds}",
    )
    g.add_argument("--collector-threads", type=int, default=0, help="MuJoCo threads per collector (0: auto)")
    g.add_argument("--learners", type=int, default=1, help="learner processes L (gloo all-reduce)")
    g.add_argument("--threads-per-learner", type=int, default=0, help="cores per learner M (0: auto)")
    g.add_argument("--learner-dtype", choices=("fp32", "bf16"), default="fp32", help="update arithmetic")


def cpu_worlds(args: argparse.Namespace, default_worlds: int) -> int:
    """Total worlds N x K from --collectors, --worlds and --envs (which must agree when both are given);
    `default_worlds` K per collector when neither is given."""
    if args.worlds is not None and args.envs is not None and args.worlds * args.collectors != args.envs:
        raise ValueError(f"--envs {args.envs} != --collectors {args.collectors} x --worlds {args.worlds}")
    if args.worlds is not None:
        return args.worlds * args.collectors
    return args.envs if args.envs is not None else default_worlds * args.collectors


def workers_config(args: argparse.Namespace) -> Any:
    """The `boxjax.rl.cpu.workers.WorkersConfig` of the CPU flags."""
    from boxjax.rl.cpu import workers

    return workers.WorkersConfig(
        mode=args.mode,
        collectors=args.collectors,
        collector_threads=args.collector_threads,
        learners=args.learners,
        threads_per_learner=args.threads_per_learner,
        learner_dtype=args.learner_dtype,
    )


def devices_arg(text: str) -> int:
    """`--devices` value: "all" -> 0 (PPOConfig.num_devices' "all devices"), else a positive count."""
    if text == "all":
        return 0
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError("--devices takes 'all' or a positive count")
    return count


def field_values(pairs: list[str], defaults: Any) -> dict[str, Any]:
    """`FIELD=VALUE` strings -> {field: value}, each value parsed to the type of its default in `defaults`."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not hasattr(defaults, name):
            raise ValueError(
                f"bad override {pair!r}: expected FIELD=VALUE with a field of {type(defaults).__name__}"
            )
        out[name] = parse_value(name, text, getattr(defaults, name))
    return out


_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def parse_value(name: str, text: str, default: Any) -> Any:
    """`text` parsed to the type of `default` (bool, tuple of its first element's type, int, float, str);
    a clear error naming the field when it does not parse."""
    try:
        if isinstance(default, bool):
            return _BOOLEANS[text.lower()]
        if isinstance(default, tuple):
            kind = type(default[0]) if default else str
            return tuple(kind(v) for v in text.split(","))
        if default is None:
            return text
        return type(default)(text)
    except (KeyError, ValueError):
        kind = "true or false" if isinstance(default, bool) else f"a {type(default).__name__}"
        if isinstance(default, tuple):
            kind = "comma-separated values like " + ",".join(str(v) for v in default)
        raise ValueError(f"bad value {text!r} for {name}: expected {kind}") from None


def ppo_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """PPOConfig fields given on the command line (the short flags and any `--ppo FIELD=VALUE`)."""
    from boxjax.rl.config import PPOConfig

    names = {
        "envs": "num_envs",
        "unroll": "unroll_length",
        "minibatch": "minibatch_size",
        "epochs": "num_epochs",
        "devices": "num_devices",
    }
    short = {field: getattr(args, arg) for arg, field in names.items() if getattr(args, arg) is not None}
    return {**short, **field_values(args.ppo, PPOConfig())}


def read_metrics(run: str) -> list[dict[str, Any]]:
    """The per-iteration rows of a run folder: metrics.jsonl, or metrics.jsonl.gz (as kept in results/)."""
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path) and not os.path.exists(path + ".gz"):
        raise FileNotFoundError(f"no {path} or {path}.gz")
    with open(path) if os.path.exists(path) else gzip.open(path + ".gz", "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


INPUT_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError)
"""Errors that mean the command line asked for something invalid (status 2)."""


def run_main(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """Run a CLI's `main`: an error ends in one `error: ...` line on stderr, status 2 for bad input (a bad
    value, an unknown body, a checkpoint of another run, no GPU) and 1 for a run that failed (non-finite
    training, overflow); the traceback only with `--debug`. Ctrl-C that escaped the run's own handling
    (a second one) ends with status 130."""
    from boxjax.platform import PlatformError

    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        return main(argv)
    except SystemExit as stop:  # the argument parser's own (its one line is printed)
        return stop.code if isinstance(stop.code, int) else 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except (*INPUT_ERRORS, PlatformError) as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - the one place a CLI turns a failure into one line
        if debug:
            raise
        print(f"error: {type(err).__name__}: {err} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def run_dir(name: str) -> str:
    """runs/<name>/, created."""
    path = os.path.join("runs", name)
    os.makedirs(path, exist_ok=True)
    return path


def run_options(args: argparse.Namespace, out: str, **fields: Any) -> Any:
    """The `boxjax.rl.loop.RunOptions` of every training CLI's common flags, with checkpoints under `out`
    and `fields` (the progress callback, init, the task's stop rule) on top."""
    from boxjax.rl.loop import RunOptions

    if args.max_skipped_updates is not None:
        fields["max_skipped_updates"] = args.max_skipped_updates
    return RunOptions(
        iterations=args.iterations,
        minutes=args.minutes,
        checkpoint_dir=os.path.join(out, "checkpoints"),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        stop_on_nan=args.stop_on_nan,
        stop_on_overflow=args.stop_on_overflow,
        start_time_s=PROCESS_START_S,
        **fields,
    )


def write_curves(out: str) -> None:
    """Draw the run's learning curves to out/curves.png (`plot_runs`) and print where; a failure to draw
    is printed in one line and does not fail the finished run."""
    import plot_runs

    try:
        print(f"curves: {plot_runs.write_curves(out)}", flush=True)
    except (OSError, ValueError, ImportError) as err:
        print(f"curves not drawn: {err}", flush=True)


def exit_status(result: Any) -> int:
    """A training CLI's exit status: 0, or 128 + the signal's number when a signal stopped the run after
    its last iteration (130 for Ctrl-C), as a shell reports a program the signal ended."""
    name = getattr(result, "stopped_by", None)
    return 0 if name is None else 128 + int(signal.Signals[name])


def open_progress(
    args: argparse.Namespace, out: str, extra: tuple[tuple[str, str, str], ...] = ()
) -> Progress:
    """The run's `Progress` on out/metrics.jsonl (and out/tensorboard with `--tensorboard`); resuming, the
    rows past the checkpoint resumed from are dropped first (they will be run again), so no iteration is
    logged twice."""
    keep = None
    if args.resume:
        from boxjax.models import checkpoint

        keep = checkpoint.latest_step(args.resume)
    # a hand-made Namespace (tests) may lack the flag
    board = os.path.join(out, "tensorboard") if getattr(args, "tensorboard", False) else None
    return Progress(
        args.iterations, os.path.join(out, "metrics.jsonl"), extra=extra, keep_through=keep, tensorboard=board
    )


def mark(name: str) -> None:
    """Record how long after `PROCESS_START_S` the set-up reached `name` (summary.json's `setup_marks_s`)."""
    SETUP_MARKS_S[name] = time.perf_counter() - PROCESS_START_S


def summary_head(args: argparse.Namespace, history: list[dict[str, Any]]) -> dict[str, Any]:
    """What every training CLI's summary.json starts with: set-up time, iterations, overrides, returns."""
    return {
        "setup_s": history[0].get("setup_s"),
        "setup_phases_s": {k: v for k, v in history[0].items() if k.startswith("setup/")},
        "setup_marks_s": dict(SETUP_MARKS_S),
        "iterations": int(history[-1]["iteration"]),
        "overrides": {"ppo": args.ppo, "env": args.env},
        "first_return": history[0]["episode/return"],
        "last_return": history[-1]["episode/return"],
    }


def truncate_rows(jsonl_path: str, last_iteration: int) -> None:
    """Drop the rows of a metrics file past `last_iteration` (rewritten whole, then renamed into place)."""
    if not os.path.exists(jsonl_path):
        return
    with open(jsonl_path) as f:
        rows = [line for line in f if line.strip()]
    kept = [line for line in rows if json.loads(line).get("iteration", 0) <= last_iteration]
    if len(kept) == len(rows):
        return
    with open(jsonl_path + ".tmp", "w") as f:
        f.writelines(kept)
    os.replace(jsonl_path + ".tmp", jsonl_path)


TENSORBOARD_EXTRA = "pip install -e '.[tensorboard]' (make installs it)"
"""How to get the package `--tensorboard` writes with."""
TENSORBOARD_FLUSH_S = 10
"""Seconds between the TensorBoard writer's flushes to disk (a live board lags by at most this)."""


class TensorBoardLog:
    """Every iteration's figures as TensorBoard scalars, at the iteration as step, through tensorboardX's
    `SummaryWriter` (the `tensorboard` extra; a clear `ImportError` naming it when missing)."""

    def __init__(self, logdir: str, purge_step: int | None = None):
        """Write to `logdir`; with `purge_step` (a resume), the events from that step on are dropped."""
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:
            raise ImportError(
                f"--tensorboard needs tensorboardX, the tensorboard extra: {TENSORBOARD_EXTRA}"
            ) from err
        self.writer = SummaryWriter(logdir, purge_step=purge_step, flush_secs=TENSORBOARD_FLUSH_S)

    def __call__(self, figures: dict[str, Any]) -> None:
        """Log one iteration's numeric figures under their own names."""
        step = int(figures["iteration"])
        for name, value in figures.items():
            if name != "iteration" and isinstance(value, int | float):
                self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()


class Progress:
    """Prints one progress line per iteration and appends every iteration's figures to a JSONL file (and
    to TensorBoard's event file with `tensorboard`, a folder)."""

    def __init__(
        self,
        total: int,
        jsonl_path: str,
        extra: tuple[tuple[str, str, str], ...] = (),
        keep_through: int | None = None,
        tensorboard: str | None = None,
    ):
        self.total = total
        if keep_through is not None:
            truncate_rows(jsonl_path, keep_through)
        purge = None if keep_through is None else keep_through + 1
        self.board = TensorBoardLog(tensorboard, purge) if tensorboard else None
        self.jsonl = open(jsonl_path, "a")  # noqa: SIM115 - closed in close()
        self.extra = extra
        self.tty = sys.stdout.isatty()

    def __call__(self, figures: dict[str, Any]) -> None:
        """Show and log one iteration."""
        self.jsonl.write(json.dumps(figures) + "\n")
        self.jsonl.flush()
        if self.board:
            self.board(figures)
        it = int(figures["iteration"])
        done = min(1.0, it / max(self.total, 1))
        bar = "#" * int(20 * done) + "." * (20 - int(20 * done))
        eta = (self.total - it) * figures["s_per_iteration"]
        parts = [
            f"[{it:5d}/{self.total}] {bar}",
            f"{figures['s_per_iteration']:.3f} s/it",
            f"{figures['steps_per_s']:,.0f} steps/s",
            f"ret {figures['episode/return']:.1f}",
            f"fall {100 * figures['episode/fall_rate']:.1f}%",
            f"ep {figures['episode/length']:.0f}",
        ]
        nonfinite = figures.get("env/nonfinite_worlds", 0.0)
        if nonfinite or figures.get("guard/skipped_steps", 0.0):
            parts.append(f"nan {nonfinite:.0f} skip {figures.get('guard/skipped_steps', 0.0):.0f}")
        caps = [v for k, v in figures.items() if k.startswith("env/caps/")]
        if any(caps):
            parts.append(f"caps {max(caps):.0f}")
        parts += [fmt.format(figures[key]) if key in figures else "" for key, fmt, _ in self.extra]
        parts.append(f"ETA {eta:.0f}s")
        line = "  ".join(p for p in parts if p)
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)

    def close(self) -> None:
        """Finish the line and close the log."""
        if self.tty:
            print()
        self.jsonl.close()
        if self.board:
            self.board.close()
