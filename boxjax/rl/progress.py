"""Short progress output for notebooks and scripts: one line per training iteration, and an announced
evaluation.

    from boxjax.rl import ppo, progress
    policy, history = ppo.train(env, config, key, ppo.RunOptions(iterations=50, progress_fn=progress.short))
    print(progress.evaluate(env, config, policy, key))

The training commands print their own, wider line (`boxjax.runs.Progress`).
"""

from __future__ import annotations

import time
from typing import Any


def line(figures: dict[str, float]) -> str:
    """One iteration's figures (`ppo.train`'s progress callback argument) as one short line: iteration,
    mean return, episode length and share of falls over the episodes that ended in it, seconds it took;
    the first iteration also says how long the set-up took (compiling, mostly)."""
    parts = [f"it {int(figures['iteration']):4d}"]
    if figures.get("episode/count", 1.0) > 0:
        parts.append(
            f"return {figures['episode/return']:8.2f}  length {figures['episode/length']:5.0f}"
            f"  falls {100 * figures['episode/fall_rate']:3.0f}%"
        )
    else:
        parts.append("no episode ended yet")
    parts.append(f"{figures['s_per_iteration']:6.2f} s/it")
    if "setup_s" in figures:
        parts.append(f"(set-up and compiling {figures['setup_s']:.0f} s)")
    return "  ".join(parts)


def short(figures: dict[str, float]) -> None:
    """Print `line(figures)`: pass as `RunOptions(progress_fn=progress.short)`."""
    print(line(figures), flush=True)


def evaluate(
    env: Any,
    config: Any,
    policy: Any,
    key: Any,
    *,
    episodes: int = 64,
    env_params: Any = None,
    max_steps: int | None = None,
) -> Any:
    """`boxjax.rl.ppo.evaluate`, announced: it compiles the episode loop and then runs every episode to its
    end before returning, silent all the while, so one line says so first and one line its time after.

    Args and returns: as `ppo.evaluate` (an `Evaluation`).
    """
    from boxjax.rl import ppo  # here, so that `ppo` may import this module

    notice = (
        f"evaluating {episodes} episodes with the policy's mean action (compiling first; silent until done)"
    )
    print(notice, flush=True)
    start = time.perf_counter()
    result = ppo.evaluate(
        env, config, policy, key, episodes=episodes, env_params=env_params, max_steps=max_steps
    )
    print(f"evaluated in {time.perf_counter() - start:.0f} s", flush=True)
    return result
