"""Command-line plumbing shared by every `boxjax` command: the argument parser and its common flags,
`FIELD=VALUE` overrides, the CPU path's flags, and `run_main` (one error line, an exit status)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

from boxjax import runs


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


def count_arg(text: str) -> int:
    """A count flag's value (`--envs`, `--unroll`, ...): a positive int, refused at parse time so that the
    error names the flag rather than the PPOConfig field it sets."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {count}")
    return count


def base_parser(description: str, prog: str) -> argparse.ArgumentParser:
    """Arguments every training command takes; `prog` is the command's name in its usage line."""
    p = Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu", help="where JAX and the physics run")
    p.add_argument("--body", type=body_arg, default="simple", help="muscular | muscular-fast | simple")
    p.add_argument("--envs", type=count_arg, default=None, help="worlds stepped in parallel")
    p.add_argument("--unroll", type=count_arg, default=None, help="control steps per world per iteration")
    p.add_argument("--minibatch", type=count_arg, default=None, help="transitions per gradient step")
    p.add_argument("--epochs", type=count_arg, default=None, help="passes over each iteration's batch")
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
    p.add_argument(
        "--seeds",
        type=count_arg,
        default=None,
        metavar="K",
        help="train K independent seeds in one program (the fused path, one device): seed 0 from --seed's "
        "key, seed s from jax.random.fold_in(that key, s); figures per seed as seed<s>/NAME; default 1",
    )
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument(
        "--keep-checkpoints", type=int, default=3, metavar="N",
        help="newest checkpoints kept (default 3); 0 keeps every one (`boxjax eval RUN --checkpoints`)",
    )  # fmt: skip
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


FACTORS = {
    "auto": (None, None),
    "fused": (True, None),
    "fused-large": (True, "large"),
    "stock": (False, None),
}
"""`--factor` values as `boxjax.envs.make`'s (`fused_factor`, `fused_factor_trees`): MuJoCo Warp's mass-matrix
factorisation, ours fused in one launch or its own; auto: ours where a tree exceeds MuJoCo Warp's dense
limit (the 89-DoF bodies), and then for every tree of more than 6 dofs (the block world's opponent too);
fused-large: ours for the 89-DoF trees alone (the opponent by MuJoCo Warp's tile Cholesky)."""


def add_warp_arguments(parser: argparse.ArgumentParser) -> None:
    """The MuJoCo Warp flags of the GPU path: `--factor` (`FACTORS`), `--solver-loop` (one of
    `boxjax.physics.mjx.SOLVER_LOOPS`) and `--block-dim` (`boxjax.physics.mjx.PhysicsConfig.block_dims`),
    checked where the physics is configured."""
    parser.add_argument(
        "--factor",
        choices=tuple(FACTORS),
        default="auto",
        help="MuJoCo Warp mass-matrix factorisation (auto: ours where a tree has more than 64 dofs, then for "
        "every tree of more than 6; fused-large: ours for the trees of more than 64 dofs alone)",
    )
    parser.add_argument(
        "--solver-loop",
        default=None,
        help="how MuJoCo Warp repeats its constraint solver's iterations (default: its own, conditional: a "
        "CUDA graph while-node; unrolled: the iteration cap of passes, converged worlds skipping; the same "
        "result)",
    )
    parser.add_argument(
        "--block-dim",
        action="append",
        default=[],
        metavar="KERNEL=THREADS",
        help="launch block size of one of MuJoCo Warp's tiled kernels (MJX's BlockDim fields, e.g. "
        "update_gradient_cholesky_blocked=64; the same equations); repeatable",
    )


def block_dims(values: list[str]) -> tuple[tuple[str, int], ...]:
    """(kernel, threads) pairs of `--block-dim KERNEL=THREADS` values (the names and sizes are checked by
    `boxjax.physics.mjx.check_block_dims`)."""
    pairs = []
    for value in values:
        name, sep, threads = value.partition("=")
        if not sep or not name.strip() or not threads.strip().isdigit():
            raise ValueError(f"--block-dim wants KERNEL=THREADS (an int), got {value!r}")
        pairs.append((name.strip(), int(threads)))
    return tuple(pairs)


def check_warp_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse MuJoCo Warp's `--solver-loop` and `--block-dim` away from `--platform gpu` (they would change
    nothing there)."""
    flags = (
        ("--solver-loop", args.solver_loop, "MuJoCo Warp's constraint solver"),
        ("--block-dim", args.block_dim, "MuJoCo Warp's kernels"),
    )
    for flag, given, what in flags:
        if given and args.platform != "gpu":
            parser.error(f"{flag} applies to --platform gpu only ({what})")


def warp_options(args: argparse.Namespace) -> dict[str, Any]:
    """`boxjax.envs.make`'s MuJoCo Warp arguments for `--factor`, `--solver-loop` and `--block-dim`
    (`fused_factor`, `fused_factor_trees`, `solver_loop`, `block_dims`)."""
    fused, trees = FACTORS[args.factor]
    return {
        "fused_factor": fused,
        "fused_factor_trees": trees,
        "solver_loop": args.solver_loop,
        "block_dims": block_dims(args.block_dim),
    }


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
    """Total worlds N x K from --collectors, --worlds and --envs or `--ppo num_envs=` (which must agree when
    more than one is given); `default_worlds` K per collector when none is."""
    envs, given = requested_envs(args)
    if args.worlds is not None and envs is not None and args.worlds * args.collectors != envs:
        raise ValueError(f"{given} != --collectors {args.collectors} x --worlds {args.worlds}")
    if args.worlds is not None:
        return args.worlds * args.collectors
    return envs if envs is not None else default_worlds * args.collectors


def requested_envs(args: argparse.Namespace) -> tuple[int | None, str]:
    """(worlds, the flag as given, e.g. '--envs 64'): --envs, or `--ppo num_envs=`, which sets the same
    field and on the CPU path also sizes the collectors; (None, "") when neither is given. Refuses the two
    giving different counts."""
    from boxjax.rl.config import PPOConfig

    from_ppo = field_values(args.ppo, PPOConfig()).get("num_envs")
    if from_ppo is not None and args.envs is not None and from_ppo != args.envs:
        raise ValueError(
            f"--envs {args.envs} and --ppo num_envs={from_ppo} ask for different worlds: give one of them"
        )
    if args.envs is not None:
        return args.envs, f"--envs {args.envs}"
    return (from_ppo, f"--ppo num_envs={from_ppo}") if from_ppo is not None else (None, "")


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
            valid = ", ".join(f.name for f in dataclasses.fields(defaults))
            raise ValueError(
                f"bad override {pair!r}: expected FIELD=VALUE with a field of {type(defaults).__name__}; "
                f"valid: {valid}"
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


PPO_FLAGS = {
    "envs": "num_envs",
    "unroll": "unroll_length",
    "minibatch": "minibatch_size",
    "epochs": "num_epochs",
    "devices": "num_devices",
    "seeds": "num_seeds",
}
"""The short flags that set a PPOConfig field: {flag without dashes: field}."""


def ppo_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """PPOConfig fields given on the command line (the short flags and any `--ppo FIELD=VALUE`); a field a
    short flag and `--ppo` both set to different values is refused, naming both."""
    from boxjax.rl.config import PPOConfig

    short = {field: getattr(args, arg) for arg, field in PPO_FLAGS.items() if getattr(args, arg) is not None}
    long = field_values(args.ppo, PPOConfig())
    for arg, field in PPO_FLAGS.items():
        if field in short and field in long and short[field] != long[field]:
            what = "worlds" if field == "num_envs" else "values"
            raise ValueError(
                f"--{arg} {short[field]} and --ppo {field}={long[field]} ask for different {what}: give one"
            )
    return {**short, **long}


def ppo_config(fields: dict[str, Any]) -> Any:
    """`PPOConfig(**fields)`; a refusal that names fields the short flags set names those flags too, since
    the command line spoke of --envs, not of num_envs."""
    from boxjax.rl.config import PPOConfig

    try:
        return PPOConfig(**fields)
    except ValueError as error:
        flags = [f"--{arg}" for arg, field in PPO_FLAGS.items() if re.search(rf"\b{field}\b", str(error))]
        if not flags:
            raise
        raise ValueError(f"{error} (set by {', '.join(flags)})") from None


def check_init(args: argparse.Namespace) -> None:
    """Read `--init`'s meta before the run folder is made, so that a foreign file or a missing path fails
    with nothing left behind; `--resume` wins over `--init`, which is then not read."""
    if not args.init or args.resume:
        return
    from boxjax.models import checkpoint

    try:
        checkpoint.read_source_meta(args.init)
    except (checkpoint.CheckpointMismatchError, FileNotFoundError) as error:
        raise type(error)(f"--init {args.init}: {error}") from None


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
        keep_checkpoints=args.keep_checkpoints,
        resume=args.resume,
        stop_on_nan=args.stop_on_nan,
        stop_on_overflow=args.stop_on_overflow,
        start_time_s=runs.PROCESS_START_S,
        **fields,
    )


def exit_status(result: Any) -> int:
    """A training CLI's exit status: 0, or 128 + the signal's number when a signal stopped the run after
    its last iteration (130 for Ctrl-C), as a shell reports a program the signal ended."""
    name = getattr(result, "stopped_by", None)
    return 0 if name is None else 128 + int(signal.Signals[name])
