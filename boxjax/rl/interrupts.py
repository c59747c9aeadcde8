"""Ctrl-C and SIGTERM as a stop request that a host loop honours between iterations.

A training loop cannot stop in the middle of an iteration without losing it (the fused iteration donates
its input buffers; a CPU collection fills shared memory), so inside `deferred()` the first SIGINT or SIGTERM
only records the request: the loop finishes the iteration in flight, checkpoints it and returns. A second
SIGINT raises `KeyboardInterrupt` at once (the user insists).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Set by the first SIGINT or SIGTERM received inside `deferred()`."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def handle(self, signum: int, frame: Any) -> None:
        """Signal handler: record the first request; a repeated SIGINT interrupts at once."""
        if self.signal_name is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}")
        self.signal_name = self.signal_name or signal.Signals(signum).name


@contextlib.contextmanager
def deferred() -> Iterator[StopRequest]:
    """Turn SIGINT and SIGTERM into a `StopRequest` for the duration (only the main thread can take
    signals; elsewhere the request simply never comes)."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {s: signal.signal(s, request.handle) for s in SIGNALS}
    try:
        yield request
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def stopped_line(request: StopRequest, iteration: int, checkpoint_dir: str | None) -> str:
    """What a host loop prints when `request` stopped it after `iteration` (checkpointed in
    `checkpoint_dir`, when it has one)."""
    where = f"; checkpoint in {checkpoint_dir}" if checkpoint_dir else ""
    return f"{request.signal_name}: stopped after iteration {iteration}{where}"
