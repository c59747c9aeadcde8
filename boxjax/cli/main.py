"""boxjax: train a physically simulated humanoid boxer with PPO.

    boxjax train --task stance|block|walk [--platform cpu|gpu] [--body simple|muscular|muscular-fast] ...
    boxjax watch [RUN_OR_CHECKPOINT | --body BODY] [--kind face] [--out fighter.mp4]
    boxjax export RUN_OR_CHECKPOINT OUT.msgpack
    boxjax eval [SOURCE | --body BODY] [--punches heldout,classic] [--checkpoints]
    boxjax bench [TOOL ...]
    boxjax demo

`boxjax COMMAND --help` (and `boxjax train --task TASK --help`) tells each command's flags. Runs write to
runs/NAME/ under the current folder; benchmark rows to results/bench/, evaluation rows to results/eval/.
"""

from __future__ import annotations

import importlib
import sys

from boxjax.cli import common

TASKS = ("stance", "block", "walk")
"""The tasks `boxjax train --task` trains, each a module of `boxjax.cli`."""
COMMANDS = {
    "watch": ("boxjax.cli.watch", "render a trained fighter to a video"),
    "export": ("boxjax.cli.export", "write a checkpoint's policy as one small file"),
    "bench": ("boxjax.cli.bench", "run the benchmarks, or one measurement tool"),
    "demo": ("boxjax.cli.demo", "the main job, small: blocking training on the CPU, curves, a video"),
    "eval": ("boxjax.cli.eval", "measure a block policy's defence: blocked, missed, hit, with intervals"),
}
"""Commands besides `train`: (module with `main(argv)`, what it does)."""


def usage() -> str:
    """The top-level help: this module's docstring and the commands."""
    lines = [f"  {'train':<8} train a task ({' | '.join(TASKS)}) with PPO"]
    lines += [f"  {name:<8} {about}" for name, (_, about) in COMMANDS.items()]
    return __doc__ + "\ncommands:\n" + "\n".join(lines) + "\n"


def task_of(argv: list[str]) -> tuple[str, list[str]]:
    """(`--task` value, the other arguments) of `boxjax train`'s arguments; a clear error when it is
    missing or unknown."""
    rest, task = [], None
    args = iter(argv)
    for arg in args:
        if arg == "--task":
            task = next(args, None)
        elif arg.startswith("--task="):
            task = arg.partition("=")[2]
        else:
            rest.append(arg)
    if task is None:
        raise ValueError(f"boxjax train needs --task, one of {', '.join(TASKS)}")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
    return task, rest


def dispatch(argv: list[str]) -> int:
    """Run the command `argv` names (`boxjax` without its program name)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        if rest in ([], ["-h"], ["--help"]):
            print(f"usage: boxjax train --task {{{','.join(TASKS)}}} [flags]\n")
            print("`boxjax train --task TASK --help` lists the task's flags.")
            return 0 if rest else 2
        task, rest = task_of(rest)
        return importlib.import_module(f"boxjax.cli.{task}").main(rest)
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}; valid: train, {', '.join(COMMANDS)}")
    return importlib.import_module(COMMANDS[command][0]).main(rest)


def main(argv: list[str] | None = None) -> int:
    """The `boxjax` entry point: one error line and a status for bad input, as every command."""
    return common.run_main(dispatch, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(main())
