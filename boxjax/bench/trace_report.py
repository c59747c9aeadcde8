"""Where a profiled stretch of time went: a summary of a `jax.profiler` trace, per thread and per event name.

`jax.profiler.trace(dir, create_perfetto_trace=True)` writes `perfetto_trace.json.gz` (Chrome trace events)
under `dir/plugins/profile/<time>/`. This reads it and prints, for every thread (host threads, and on a GPU
each stream of `/device:GPU:N`): its events, busy time (overlapping events merged), the span from its first
event's start to its last event's end, and the idle share of that span; then the names that took the most
time on the device and on the host. On a GPU an idle share well above zero on the compute stream says the
host (Python callbacks such as MuJoCo Warp's FFI calls, graph captures, launches) kept the GPU waiting; the
gaps section locates that time: the busiest device stream's idle gaps, summed by what the host was doing in
them (the innermost host event at each gap's middle) and by the device event that ended each gap, and the
longest gaps one by one.

    python experiments/trace_report.py runs/trace              # newest trace under a folder
    python experiments/trace_report.py path/to/perfetto_trace.json.gz --top 20
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import gzip
import heapq
import json
import os
from collections import Counter

from boxjax.bench import rows as bench_rows
from boxjax.cli.common import run_main

TRACE_NAME = "perfetto_trace.json.gz"


@dataclasses.dataclass(frozen=True)
class ThreadTime:
    """One thread's share of the trace (times in ms)."""

    process: str
    thread: str
    events: int
    busy_ms: float
    span_ms: float

    @property
    def idle_share(self) -> float:
        """Fraction of the span with no event running (0 when the span is empty)."""
        return 1.0 - self.busy_ms / self.span_ms if self.span_ms > 0 else 0.0


def find_trace(path: str) -> str:
    """`path` if it is a trace file, else the newest `perfetto_trace.json.gz` below the folder `path`."""
    if os.path.isfile(path):
        return path
    found = glob.glob(os.path.join(path, "**", TRACE_NAME), recursive=True)
    if not found:
        raise FileNotFoundError(f"no {TRACE_NAME} under {path!r} (profile with create_perfetto_trace=True)")
    return max(found, key=os.path.getmtime)


def load_events(path: str) -> tuple[dict[int, str], dict[tuple[int, int], str], list[dict]]:
    """(process names by pid, thread names by (pid, tid), complete ('X') events, ts and dur in µs); a file
    read once while it is unchanged (the report's sections share it; callers must not modify it)."""
    stat = os.stat(path)
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1)
def _parsed(path: str, mtime_ns: int, size: int) -> tuple[dict, dict, list[dict]]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    return processes, threads, complete


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def thread_times(path: str) -> list[ThreadTime]:
    """Every thread with events, busiest first."""
    processes, threads, events = load_events(path)
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in events:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    rows = [
        ThreadTime(
            process=processes.get(pid, str(pid)),
            thread=threads.get((pid, tid), str(tid)),
            events=len(spans),
            busy_ms=busy_us(spans) / 1e3,
            span_ms=(max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e3,
        )
        for (pid, tid), spans in by_thread.items()
    ]
    return sorted(rows, key=lambda r: -r.busy_ms)


def top_names(path: str, process_prefix: str, top: int) -> list[tuple[str, float, int]]:
    """(name, total ms, count) of the `top` costliest event names in the processes whose names start with
    `process_prefix` (inclusive times: nested events count in their parents too)."""
    processes, _, events = load_events(path)
    wanted = {pid for pid, name in processes.items() if name.startswith(process_prefix)}
    total_us: Counter = Counter()
    count: Counter = Counter()
    for e in events:
        if e["pid"] in wanted:
            total_us[e["name"]] += e["dur"]
            count[e["name"]] += 1
    return [(name, us / 1e3, count[name]) for name, us in total_us.most_common(top)]


@dataclasses.dataclass(frozen=True)
class Gap:
    """One stretch of the busiest device stream with nothing running (times in µs)."""

    start_us: float
    end_us: float
    before: str
    """The device event that ended last before the gap."""
    after: str
    """The device event that started the busy stretch after it (what the device waited to run)."""
    host: str
    """The innermost host event at the gap's middle ("(no host event)" where none ran)."""

    @property
    def ms(self) -> float:
        """The gap's length in ms."""
        return (self.end_us - self.start_us) / 1e3


NO_HOST_EVENT = "(no host event)"


def idle_gaps(path: str, min_us: float = 0.0) -> list[Gap]:
    """The idle gaps longer than `min_us` of the busiest `/device:` thread, in time order."""
    processes, _, events = load_events(path)
    device = {pid for pid, name in processes.items() if name.startswith("/device:")}
    host = [e for e in events if processes.get(e["pid"], "").startswith("/host:")]
    streams: dict[tuple[int, int], list[dict]] = {}
    for e in events:
        if e["pid"] in device:
            streams.setdefault((e["pid"], e["tid"]), []).append(e)
    if not streams:
        return []
    stream = max(streams.values(), key=lambda es: busy_us([(e["ts"], e["ts"] + e["dur"]) for e in es]))
    spans, end, before = [], None, ""
    for e in sorted(stream, key=lambda e: e["ts"]):
        stop = e["ts"] + e["dur"]
        if end is not None and e["ts"] - end > min_us:
            spans.append((end, e["ts"], before, e["name"]))
        if end is None or stop >= end:
            end, before = stop, e["name"]
    hosts = _innermost(host, [(start + stop) / 2 for start, stop, _, _ in spans])
    return [Gap(*span, doing) for span, doing in zip(spans, hosts, strict=True)]


def _innermost(events: list[dict], times_us: list[float]) -> list[str]:
    """For each of the ascending `times_us`, the name of the shortest event running then (of equally short
    ones the first in `events`), or `NO_HOST_EVENT` (one sweep: events enter by start, leave by end)."""
    order = sorted(range(len(events)), key=lambda i: events[i]["ts"])
    running: list[tuple[float, int]] = []  # (end, index in events), a heap by end
    names, entered = [], 0
    for t in times_us:
        while entered < len(order) and events[order[entered]]["ts"] <= t:
            e = events[order[entered]]
            heapq.heappush(running, (e["ts"] + e["dur"], order[entered]))
            entered += 1
        while running and running[0][0] <= t:
            heapq.heappop(running)
        shortest = min((i for _, i in running), key=lambda i: (events[i]["dur"], i), default=None)
        names.append(NO_HOST_EVENT if shortest is None else events[shortest]["name"])
    return names


def gap_summary(gaps: list[Gap], top: int) -> list[str]:
    """Lines of the gaps section: idle ms by host event and by the device event that ended the gap, then the
    `top` longest gaps."""
    if not gaps:
        return []
    lines = ["", f"device idle gaps: {len(gaps)}, {sum(g.ms for g in gaps):.1f} ms in all"]
    for title, key in (("host doing", lambda g: g.host), ("device waiting to run", lambda g: g.after)):
        total: Counter = Counter()
        count: Counter = Counter()
        for g in gaps:
            total[key(g)] += g.ms
            count[key(g)] += 1
        lines += [f"idle ms by {title} (ms, gaps):"]
        lines += [f"  {ms:10.2f}  {count[name]:6d}  {name[:110]}" for name, ms in total.most_common(top)]
    lines += [f"longest {top} gaps (ms: device event before -> after, host doing):"]
    for g in sorted(gaps, key=lambda g: -g.ms)[:top]:
        lines.append(f"  {g.ms:8.3f}  {g.before[:40]} -> {g.after[:40]}  ({g.host[:60]})")
    return lines


def report(path: str, top: int = 12) -> str:
    """The printed summary of the trace at `path`."""
    lines = [
        f"trace {path}",
        "",
        "| process | thread | events | busy ms | span ms | idle |",
        "|" + "---|" * 6,
    ]
    for r in thread_times(path):
        cells = (r.process, r.thread, r.events, f"{r.busy_ms:.1f}", f"{r.span_ms:.1f}", f"{r.idle_share:.0%}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    for title, prefix in (("device", "/device:"), ("host", "/host:")):
        names = top_names(path, prefix, top)
        if names:
            lines += ["", f"top {title} events (inclusive ms, count):"]
            lines += [f"  {ms:10.2f}  {n:6d}  {name[:110]}" for name, ms, n in names]
    return "\n".join(lines + gap_summary(idle_gaps(path), top))


def main(argv: list[str] | None = None) -> int:
    """Print the summary of one trace."""
    p = bench_rows.parser(__doc__, "trace_report")
    p.add_argument("path", help=f"a {TRACE_NAME} or a folder holding one (the newest is read)")
    p.add_argument("--top", type=int, default=12, help="event names listed per side")
    bench_rows.add_common_args(p)
    args = p.parse_args(argv)
    print(report(find_trace(args.path), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
