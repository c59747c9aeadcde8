"""The README's notebook snippet runs as written in a fresh interpreter on the CPU, and the XLA flag it
needs comes from ``import boxjax`` alone (`boxjax.platform.apply_cpu_flags`)."""

import os
import re
import subprocess
import sys
import tempfile
import warnings

import pytest

from boxjax import platform
from boxjax.rl import progress

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEDULER_FLAG = platform.CPU_XLA_FLAGS[0]
SMALLER = (
    ("num_worlds=256", "num_worlds=64"),
    ("num_envs=256", "num_envs=64"),
    ("iterations=50", "iterations=2"),
    ("episodes=64", "episodes=4"),
)
"""The snippet's sizes made small, but not its worlds below 64: there, without the flag, the first iteration
never finished (every thread idle; jaxlib 0.10.2, 2 cores), so this test fails on its timeout."""


def readme_snippet() -> str:
    """The Python block of the README's "From a notebook" section."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    section = text.split("## From a notebook", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def user_flags() -> str:
    """This test run's own XLA flags (the suite's faster compiling) without the flag boxjax must add."""
    words = os.environ.get("XLA_FLAGS", "").split()
    return " ".join(w for w in words if platform.flag_name(w) != platform.flag_name(SCHEDULER_FLAG))


def fresh_python(code: str, timeout_s: float) -> tuple[int, str]:
    """Run `code` in a new interpreter whose $XLA_FLAGS holds `user_flags()` only; its exit status and
    output (stdout and stderr). A hang fails the test, with the output so far."""
    env = {**os.environ, "XLA_FLAGS": user_flags()}
    with tempfile.TemporaryFile("w+") as out:
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                cwd=REPO,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            out.seek(0)
            pytest.fail(f"no result in {timeout_s:.0f} s (hung?); output so far:\n{out.read()}")
        out.seek(0)
        return done.returncode, out.read()


def test_merge_xla_flags_keeps_the_users_and_adds_once():
    user = "--xla_dump_to=/tmp/x  --xla_force_host_platform_device_count=2"
    merged = platform.merge_xla_flags(user, platform.CPU_XLA_FLAGS)
    assert merged == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2 " + SCHEDULER_FLAG
    assert platform.merge_xla_flags(merged, platform.CPU_XLA_FLAGS) == merged
    assert platform.merge_xla_flags("", (SCHEDULER_FLAG, SCHEDULER_FLAG)) == SCHEDULER_FLAG
    # the user's own value of the flag wins
    mine = "--xla_cpu_enable_concurrency_optimized_scheduler=true"
    assert platform.merge_xla_flags(mine, platform.CPU_XLA_FLAGS) == mine
    # a prefix of another flag's name is another flag
    longer = SCHEDULER_FLAG.split("=")[0] + "_extra=1"
    assert platform.merge_xla_flags(longer, platform.CPU_XLA_FLAGS) == f"{longer} {SCHEDULER_FLAG}"
    # a value not starting with "-" names a file of flags for XLA: left alone
    assert platform.merge_xla_flags("/etc/xla_flags", platform.CPU_XLA_FLAGS) == "/etc/xla_flags"


def test_apply_cpu_flags_adds_before_jax_starts_and_warns_after(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setattr(platform, "jax_started", lambda: False)
    platform.apply_cpu_flags()
    assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {SCHEDULER_FLAG}"

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setattr(platform, "jax_started", lambda: True)
    with pytest.warns(platform.LateFlagsWarning, match="Restart the interpreter"):
        platform.apply_cpu_flags()
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"  # too late to matter: not pretended

    monkeypatch.setenv("XLA_FLAGS", SCHEDULER_FLAG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        platform.apply_cpu_flags()


def test_import_after_jax_started_warns_in_a_fresh_interpreter():
    status, output = fresh_python("import jax; jax.devices(); import boxjax", timeout_s=120)
    assert status == 0, output
    assert "LateFlagsWarning" in output and SCHEDULER_FLAG in output, output


def test_progress_line():
    first = {"iteration": 1.0, "episode/count": 0.0, "episode/return": 0.0, "episode/length": 0.0}
    first.update({"episode/fall_rate": 0.0, "s_per_iteration": 22.7, "setup_s": 25.6})
    assert progress.line(first) == "it    1  no episode ended yet   22.70 s/it  (set-up and compiling 26 s)"
    later = {**first, "iteration": 2.0, "episode/count": 5.0, "episode/return": 62.17}
    later.update({"episode/length": 212.0, "episode/fall_rate": 0.8, "s_per_iteration": 4.31})
    del later["setup_s"]
    assert progress.line(later) == "it    2  return    62.17  length   212  falls  80%    4.31 s/it"


@pytest.mark.slow
def test_readme_snippet_runs_in_a_fresh_interpreter():
    code = readme_snippet()
    for old, new in SMALLER:
        assert code.count(old) == 1, f"the README snippet no longer says {old}"
        code = code.replace(old, new)
    code += "import os; print('XLA_FLAGS=' + os.environ['XLA_FLAGS'])\n"
    status, output = fresh_python(code, timeout_s=240)
    assert status == 0, output
    lines = output.splitlines()
    assert [int(x.split()[1]) for x in lines if re.match(r"it +\d+ ", x)] == [1, 2], output
    assert any(x.startswith("evaluated in ") for x in lines), output
    assert any(x.startswith("Evaluation(episodes=4,") for x in lines), output
    flags = next(x for x in lines if x.startswith("XLA_FLAGS=")).removeprefix("XLA_FLAGS=").split()
    assert flags.count(SCHEDULER_FLAG) == 1 and flags[: len(user_flags().split())] == user_flags().split()
