"""What every benchmark row shares: timing a jitted call, the device, library versions and commit it names,
and the machine prices (`prices.json`, beside this module) its dollar figures are read at."""

from __future__ import annotations

import json
import os
import platform as host_platform
import time
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
"""The checkout this package lies in (its git commit names the rows; its results/bench/ keeps them)."""
PRICES = os.path.join(HERE, "prices.json")
"""The machine prices shipped with the package."""


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
