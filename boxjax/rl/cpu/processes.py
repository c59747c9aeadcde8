"""Entry point of the CPU path's worker processes: ``python -m boxjax.rl.cpu.processes ROLE ...``.

Workers are fresh interpreters (not `multiprocessing` children), so nothing of the parent's main module
is imported into them. Each one prepares its process before anything starts JAX: it dies with its parent
(Linux ``PR_SET_PDEATHSIG``), leaves Ctrl-C to the coordinator, pins itself to its cores (so that XLA's
and MuJoCo's thread pools size themselves to them), selects JAX's CPU platform with boxjax's XLA flags
and, for several learners, joins a `jax.distributed` job with gloo collectives. Only then does it read
its pickled spec from the pipe the coordinator passed (file descriptor ``--fd``), which imports the
heavy modules. This module imports nothing but the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
from multiprocessing.connection import Connection

ROLES = ("collector", "learner")
_PR_SET_PDEATHSIG = 1


def command(role: str, fd: int, cores: tuple[int, ...], address: str = "", rank: int = 0, learners: int = 1):
    """The command line that starts one worker whose end of the pipe is file descriptor `fd`."""
    return [
        sys.executable,
        "-m",
        "boxjax.rl.cpu.processes",
        role,
        f"--fd={fd}",
        f"--parent={os.getpid()}",
        f"--cores={','.join(map(str, cores))}",
        f"--address={address}",
        f"--rank={rank}",
        f"--learners={learners}",
    ]


def _prepare(parent_pid: int, cores: tuple[int, ...]) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    from boxjax import platform

    platform.configure("cpu")


def main(argv: list[str] | None = None) -> None:
    """Prepare the process, then serve as a collector or a learner until told to stop."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("role", choices=ROLES)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--cores", default="")
    p.add_argument("--address", default="")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--learners", type=int, default=1)
    args = p.parse_args(argv)
    _prepare(args.parent, tuple(int(c) for c in args.cores.split(",") if c))
    distributed = args.role == "learner" and args.learners > 1
    if distributed:
        import jax

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(args.address, num_processes=args.learners, process_id=args.rank)
    conn = Connection(args.fd)
    try:
        spec = conn.recv()
    except EOFError:
        return
    if args.role == "collector":
        from boxjax.rl.cpu import collector

        collector.serve(conn, spec)
    else:
        from boxjax.rl.cpu import learner

        learner.serve(conn, spec)
    if distributed:
        import jax

        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
