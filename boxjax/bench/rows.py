"""What every bench tool shares: its command line (`parser`, `add_common_args`), the rows it writes
(`Writer`, `write_rows`, `figure_rows`) and what they name (the device, library versions, commit, date and
command), timing a jitted call, and the machine prices (`prices.json`, beside this module) its dollar figures
are read at."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform as host_platform
import shlex
import sys
import time
from collections.abc import Iterable
from typing import NamedTuple

from boxjax.cli.common import Parser

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
"""The checkout this package lies in (its git commit names the rows; its results/bench/ keeps them)."""
PRICES = os.path.join(HERE, "prices.json")
"""The machine prices shipped with the package."""
OUT = os.path.join("results", "bench")
"""The folder the speed benchmarks write their rows files to (`--out`), relative to the current folder."""
PLATFORMS = ("auto", "cpu", "gpu")
"""`--platform` values; "auto" is the GPU where `has_gpu` finds one, else the CPU."""


def parser(description: str | None, tool: str) -> Parser:
    """A bench tool's argument parser: `description` (the module's docstring) printed as written, the usage
    line naming `boxjax bench TOOL`, and a bad argument one `error: ...` line (status 2) as every other
    `boxjax` command's."""
    return Parser(
        prog=f"boxjax bench {tool}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_common_args(
    p: argparse.ArgumentParser,
    *,
    out: bool = False,
    platform: str | None = None,
    cache: bool = False,
    price: bool = False,
    label: bool = False,
    debug: bool = True,
) -> None:
    """The flags bench tools share, spelt and explained alike: `--out` (`out`: the folder of the rows files,
    default `OUT`), `--platform` (where JAX runs; `platform` is its default, "auto" offering `PLATFORMS`, else
    cpu or gpu), `--cache` (`cache`: the compile caches' folder), `--price` (`price`: this device's entry of
    prices.json), `--label` (`label`: a field of every row written, `labels_of`) and `--debug` (`debug`: the
    traceback of an error, read by `cli.common.run_main`)."""
    if out:
        p.add_argument("--out", default=OUT, help=f"folder of the rows files (default {OUT})")
    if platform:
        choices = PLATFORMS if platform == "auto" else PLATFORMS[1:]
        p.add_argument("--platform", choices=choices, default=platform, help="where JAX runs")
    if price:
        p.add_argument("--price", default=None, help="price key of this device in prices.json")
    if cache:
        p.add_argument(
            "--cache",
            default=None,
            help="cache folder for compiled code, JAX's and Warp's (default $BOXJAX_CACHE)",
        )
    if label:
        p.add_argument(
            "--label", action="append", default=[], metavar="KEY=VALUE", help="a field of every row"
        )
    if debug:
        p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def labels_of(p: argparse.ArgumentParser, items: list[str], integers: Iterable[str] = ()) -> dict:
    """{KEY: VALUE} of `--label KEY=VALUE` items, the keys in `integers` as integers (rows hold them so);
    an item without "=" is the parser's error."""
    bad = [item for item in items if "=" not in item]
    if bad:
        p.error(f"--label takes KEY=VALUE, got {bad}")
    labels = dict(item.split("=", 1) for item in items)
    for key in set(integers) & labels.keys():
        labels[key] = int(labels[key])
    return labels


def int_list(text: str) -> list[int]:
    """ "1024,2048" -> [1024, 2048]: a comma list of counts (`--worlds`), a bad one an argparse error."""
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from None


def add_worlds(
    p: argparse.ArgumentParser, default: str | None, about: str = "comma list of world counts"
) -> None:
    """`--worlds`: a comma list of world counts (`int_list`; `default` is its text, None: the tool's own)."""
    p.add_argument("--worlds", type=int_list, default=default, help=about)


def resolve_platform(name: str) -> str:
    """`--platform`'s value as the platform to configure: "auto" is "gpu" where `has_gpu` finds one, else
    "cpu"."""
    if name != "auto":
        return name
    return "gpu" if has_gpu() else "cpu"


def now() -> str:
    """The UTC date and time a row names, to the second (e.g. "2026-12-06T12:00:00+00:00")."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def command(script: str, argv: list[str] | None) -> str:
    """The command line a row names: `script` and the tool's arguments (`argv`, else the process's own)."""
    return f"{script} " + shlex.join(argv if argv is not None else sys.argv[1:])


def figure_rows(figures: Iterable[tuple[str, float, str]], **labels) -> list[dict]:
    """One row per (metric, value, unit) of `figures`: `labels`, then "metric", "value" and "unit"."""
    return [{**labels, "metric": metric, "value": value, "unit": unit} for metric, value, unit in figures]


class Writer:
    """Rows appended to one JSON Lines file as they are measured, each flushed at once (a bench cut short
    keeps what it measured). Every row is `common` and then its own fields; `rows` holds those written. Used
    as a context manager: the file (and its folder) is opened on entry and closed on exit."""

    def __init__(self, path: str, common: dict | None = None):
        self.path = path
        self.common = dict(common or {})
        self.rows: list[dict] = []
        self._file = None

    def __enter__(self) -> Writer:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._file = open(self.path, "a")
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def write(self, row: dict) -> dict:
        """Append `common` updated with `row`; returns the row written."""
        full = {**self.common, **row}
        self._file.write(json.dumps(full) + "\n")
        self._file.flush()
        self.rows.append(full)
        return full

    def figures(self, figures: Iterable[tuple[str, float, str]], **labels) -> list[dict]:
        """Append one row per (metric, value, unit) of `figures`, each with `labels` (`figure_rows`)."""
        return [self.write(row) for row in figure_rows(figures, **labels)]


def write_rows(path: str, rows: Iterable[dict], common: dict | None = None) -> list[dict]:
    """Append `rows` to the JSON Lines file `path` (its folder made), each after the fields `common`; returns
    the rows written."""
    with Writer(path, common) as out:
        for row in rows:
            out.write(row)
    return out.rows


def has_gpu() -> bool:
    """Whether `nvidia-smi -L` finds a GPU."""
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def timed(fn, *args, repeats: int) -> tuple[float, float, object]:
    """(first-call seconds incl. compile, best steady-state seconds, last output); blocks on results."""
    import jax

    tick = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - tick
    best = float("inf")
    for _ in range(repeats):
        tick = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - tick)
    return first, best, out


def device_name() -> str:
    """The accelerator's name, or the CPU model."""
    import jax

    dev = jax.devices()[0]
    if dev.platform == "cpu":
        return f"cpu:{host_platform.processor() or host_platform.machine()} x{os.cpu_count()}"
    return dev.device_kind


def versions() -> dict[str, str]:
    """Versions of the libraries that set the speed."""
    import jax
    import mujoco

    out = {"jax": jax.__version__, "mujoco": mujoco.__version__}
    try:
        import warp

        out["warp"] = warp.config.version
    except ImportError:
        pass
    return out


def commit() -> str:
    """The git commit of this checkout ("unknown" outside a git checkout), with "+dirty" when the tree
    differs from it: every benchmark row names the code it measured. $BOXJAX_COMMIT, when set, names it
    instead: a copy of the tree without its git metadata, or whose metadata lags behind its files, states its
    commit that way."""
    import subprocess

    if os.environ.get("BOXJAX_COMMIT"):
        return os.environ["BOXJAX_COMMIT"]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def device_slug(device: str) -> str:
    """A device name as a file-name part: lower case, every run of other characters a dash."""
    return "".join(c if c.isalnum() else "-" for c in device.lower()).strip("-")


def rows_path(out: str, bench: str, device: str, date: str) -> str:
    """The rows file of one bench on one device and day, `out/<bench>-<device slug>-<YYYY-MM-DD>.jsonl`
    (`out` created)."""
    os.makedirs(out, exist_ok=True)
    return os.path.join(out, f"{bench}-{device_slug(device)}-{date[:10]}.jsonl")


def overflow_worlds(metrics: dict) -> float:
    """The most worlds that overflowed MuJoCo Warp's contact or constraint slots, from a training
    iteration's metrics (`env/overflow/...`; 0.0 without any)."""
    return max((float(v) for k, v in metrics.items() if k.startswith("env/overflow/")), default=0.0)


def factor_ran(rows: list[tuple[str, float, str]]) -> str:
    """ "fused" when a measurement's rows show our factorisation kernel ran, else "stock" (what ran, not
    what was asked)."""
    counts = [value for metric, value, _ in rows if metric.endswith("fused_factorizations")]
    return "fused" if any(c > 0 for c in counts) else "stock"


class Price(NamedTuple):
    """One machine's hourly price and where it was read (an entry of `prices.json`)."""

    usd_per_hour: float
    source: str
    date: str


def load_prices(path: str | None = None) -> dict[str, Price]:
    """The entries of `prices.json` (or `path`) by machine name; an entry without its price, source or
    date is a ValueError naming it."""
    with open(path or PRICES) as f:
        entries = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    try:
        return {name: Price(**entry) for name, entry in entries.items()}
    except TypeError as error:
        raise ValueError(f"prices.json: every entry needs usd_per_hour, source and date ({error})") from None


def price_entry(device: str, prices: dict[str, Price], key: str | None) -> tuple[str, Price] | None:
    """This device's (name, price) in `prices`, by `key` or by the first word of a name found in the
    device's name (None when none matches)."""
    if key:
        return key, prices[key]
    for name, price in prices.items():
        if name.split(" ")[0].lower() in device.lower():
            return name, price
    return None


def price_of(device: str, prices: dict[str, Price], key: str | None) -> tuple[str, float] | None:
    """This device's (name, USD per hour), as `price_entry` finds it."""
    entry = price_entry(device, prices, key)
    return None if entry is None else (entry[0], entry[1].usd_per_hour)
