"""The coordinator's two ways to run the CPU path's workers, behind the same calls.

`start_collect`/`finish_collect` and `start_learn`/`finish_learn` split each half of an iteration so that
a collection can run while the learners update. `SerialTeam` runs everything in this process, one call
after the other; `ProcessTeam` starts every collector and learner as a process
(`python -m boxjax.rl.cpu.processes`), talks to it over a pipe, and notices any worker's error, death or
silence within half a second of waiting.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import socket
import subprocess
import time
from multiprocessing import connection
from typing import Any

import numpy as np

import boxjax
from boxjax.rl.cpu import processes
from boxjax.rl.cpu.collector import Collected, CollectorSpec, CollectorWorker
from boxjax.rl.cpu.learner import LearnerSpec, LearnerWorker, LearnTimes

STOP_GRACE_S = 30.0
"""How long stopping workers may take to finish what they are doing before they are terminated."""


class WorkerError(RuntimeError):
    """A worker process failed, died or stopped answering; the run was checkpointed and stopped."""


class SerialTeam:
    """Serial mode: collectors and the learner run in this process, one after the other."""

    def __init__(self, collectors: list[CollectorSpec], learner: LearnerSpec):
        self.collectors = [CollectorWorker(s) for s in collectors]
        self.learner = LearnerWorker(learner)
        self.idle_since = time.perf_counter()
        self.collected: list[Collected] = []
        self.learned: tuple[dict, LearnTimes] | None = None

    def start_collect(self, iteration: int, updates: int, curriculum: Any) -> None:
        """Collect iteration `iteration` with the policy after `updates` updates and `curriculum`."""
        wait_s = time.perf_counter() - self.idle_since
        self.collected = [
            dataclasses.replace(w.handle(iteration, updates, curriculum), wait_s=wait_s)
            for w in self.collectors
        ]
        self.idle_since = time.perf_counter()

    def finish_collect(self) -> list[Collected]:
        """Every collector's report on the collection started last."""
        return self.collected

    def start_learn(self, iteration: int, key: np.ndarray) -> None:
        """Update on iteration `iteration`'s rollout with the PRNG key `key`."""
        self.learned = self.learner.handle(iteration, key)

    def finish_learn(self) -> tuple[dict, LearnTimes]:
        """Loss terms and times of the update started last (learner 0's)."""
        return self.learned

    def pids(self) -> list[int]:
        """This process and every worker process (for CPU accounting)."""
        return [os.getpid()]

    def close(self) -> None:
        """Detach every worker from the shared buffers."""
        for w in (*self.collectors, self.learner):
            w.close()


@dataclasses.dataclass(frozen=True)
class _Member:
    name: str
    process: subprocess.Popen
    conn: connection.Connection


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(boxjax.__file__))
_POLL_S = 0.5
"""How often a waiting coordinator checks that every worker is still alive."""


def _died(member: _Member) -> WorkerError:
    try:
        code = member.process.wait(5.0)
    except subprocess.TimeoutExpired:
        code = "unknown (still running, pipe broken)"
    return WorkerError(f"{member.name} (pid {member.process.pid}) died with exit code {code}")


class ProcessTeam:
    """Decoupled mode: every collector and learner is a process; messages by pipe, data by shared memory."""

    def __init__(
        self,
        collectors: list[CollectorSpec],
        collector_cores: tuple[tuple[int, ...], ...],
        learners: list[LearnerSpec],
        learner_cores: tuple[tuple[int, ...], ...],
        timeout_s: float,
    ):
        self.timeout_s = timeout_s
        self.members: list[_Member] = []
        address = f"127.0.0.1:{_free_port()}"
        try:
            for spec, cores in zip(collectors, collector_cores, strict=True):
                self._start(f"collector-{spec.index}", spec, "collector", cores)
            for spec, cores in zip(learners, learner_cores, strict=True):
                self._start(f"learner-{spec.rank}", spec, "learner", cores, address, spec.rank, spec.learners)
            self.collectors = [m for m in self.members if m.name.startswith("collector")]
            self.learners = [m for m in self.members if m.name.startswith("learner")]
            self._expect(self.members, "ready")
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, spec: Any, role: str, cores: tuple[int, ...], *distributed: Any) -> None:
        mine, theirs = mp.Pipe()
        fd = theirs.fileno()
        path = os.pathsep.join(p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            processes.command(role, fd, cores, *distributed),
            pass_fds=(fd,),
            env={**os.environ, "PYTHONPATH": path},
        )
        theirs.close()
        self.members.append(_Member(name, process, mine))
        mine.send(spec)

    def _expect(self, members: list[_Member], kind: str) -> list[tuple]:
        """One `kind` message from each of `members`; any worker's death, error or silence raises."""
        waiting = {m.conn: m for m in members}
        got: dict[str, tuple] = {}
        deadline = time.monotonic() + self.timeout_s
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                names = ", ".join(m.name for m in waiting.values())
                raise WorkerError(f"no {kind!r} from {names} within {self.timeout_s:.0f} s")
            for conn in connection.wait(list(waiting), timeout=min(left, _POLL_S)):
                member = waiting.pop(conn)
                got[member.name] = self._receive(member, kind)
            self._check_alive()
        return [got[m.name] for m in members]

    @staticmethod
    def _receive(member: _Member, kind: str) -> tuple:
        try:
            message = member.conn.recv()
        except (EOFError, OSError) as err:
            raise _died(member) from err
        if message[0] == "error":
            raise WorkerError(f"{member.name} failed:\n{message[1]}")
        if message[0] != kind:
            raise WorkerError(f"{member.name} answered {message[0]!r}, expected {kind!r}")
        return message

    def _check_alive(self) -> None:
        for m in self.members:
            if m.process.poll() is not None:
                raise _died(m)

    @staticmethod
    def _send(members: list[_Member], message: tuple) -> None:
        for m in members:
            try:
                m.conn.send(message)
            except OSError as err:
                raise _died(m) from err

    def start_collect(self, iteration: int, updates: int, curriculum: Any) -> None:
        """Collect iteration `iteration` with the policy after `updates` updates and `curriculum`."""
        self._send(self.collectors, ("collect", iteration, updates, curriculum))

    def finish_collect(self) -> list[Collected]:
        """Every collector's report on the collection started last."""
        return [msg[2] for msg in self._expect(self.collectors, "collected")]

    def start_learn(self, iteration: int, key: np.ndarray) -> None:
        """Update on iteration `iteration`'s rollout with the PRNG key `key`."""
        self._send(self.learners, ("learn", iteration, key))

    def finish_learn(self) -> tuple[dict, LearnTimes]:
        """Loss terms and times of the update started last (learner 0's)."""
        first = self._expect(self.learners, "learned")[0]
        return first[2], first[3]

    def pids(self) -> list[int]:
        """This process and every worker process (for CPU accounting)."""
        return [os.getpid(), *(m.process.pid for m in self.members)]

    def close(self) -> None:
        """Ask every worker to stop; terminate, then kill, those that do not within the grace time."""
        for m in self.members:
            try:
                m.conn.send(("stop",))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        for m in self.members:
            try:
                m.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                m.process.terminate()
                try:
                    m.process.wait(2.0)
                except subprocess.TimeoutExpired:
                    m.process.kill()
                    m.process.wait()
            m.conn.close()
