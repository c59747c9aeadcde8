"""Block env speed and where its step time goes: physics vs vision vs scoring vs the rest.

For each body and world count it times `--unroll` control steps of all worlds (one jitted `lax.scan`,
zero actions, auto-reset on), after a warm-up and blocking on the result, in four variants:

* ``full``: the block env step as trained;
* ``physics``: only the physics substeps of every world (`boxjax.physics.mjx.step`);
* ``no_vision``: the env step with the vision frame replaced by zeros (XLA drops the ray work);
* ``no_scoring``: the env step with the punch score replaced by zero.

vision = full - no_vision, scoring = full - no_scoring, rest = full - physics - vision - scoring
(observations, rewards, the punch clock, opponent drive, resets). On a GPU the defaults are MuJoCo Warp,
the muscular body, 2,048 and 4,096 worlds; on a CPU-only machine a tiny version (MJX-JAX, simple body).
Rows go to results/bench/block-<device>-<date>.jsonl.

    python experiments/bench_block.py                          # this machine's defaults
    python experiments/bench_block.py --bodies simple,muscular --worlds 1024,2048,4096
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys

import bench

VARIANTS = ("full", "physics", "no_vision", "no_scoring")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--platform", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--bodies", default=None, help="comma list (default: muscular on GPU, simple on CPU)")
    p.add_argument("--worlds", default=None, help="comma list (default: 2048,4096 on GPU, 4,8 on CPU)")
    p.add_argument("--unroll", type=int, default=None, help="control steps per timed call (GPU 16, CPU 4)")
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions after warm-up")
    p.add_argument("--out", default=os.path.join("results", "bench"))
    p.add_argument("--cache", default=None)
    return p.parse_args(argv)


def variant_env(name: str, body: str, worlds: int):
    """The block env for one variant (`physics` uses the full env's physics)."""
    import jax.numpy as jnp

    from boxjax import envs
    from boxjax.envs import vision
    from boxjax.envs.block import BlockEnv

    env = envs.make("block", body=body, num_worlds=worlds)
    if name == "no_vision":

        class NoVision(BlockEnv):
            def _see(self, data):
                return jnp.zeros((vision.FRAME_SIZE,), jnp.float32)

        return NoVision(env.config, env.physics)
    if name == "no_scoring":

        class NoScoring(BlockEnv):
            def _score(self, data, hand, target):
                return jnp.zeros((), jnp.float32)

        return NoScoring(env.config, env.physics)
    return env


def time_variant(name: str, body: str, worlds: int, unroll: int, repeats: int) -> tuple[float, float, float]:
    """(first-call s incl. compile, best s per `unroll` steps of all worlds, peak overflowing worlds)."""
    import jax
    import jax.numpy as jnp

    from boxjax.envs.wrappers import autoreset_step, batch_reset
    from boxjax.physics import mjx as physics

    env = variant_env(name, body, worlds)
    params = env.default_params()
    first = batch_reset(env, params, jax.random.split(jax.random.PRNGKey(0), worlds))
    if name == "physics":

        @jax.jit
        def run(data, model):
            def body_fn(d, _):
                return jax.vmap(lambda x: physics.step(model, x, env.substeps))(d), None

            return jax.lax.scan(body_fn, data, None, length=unroll)[0], jnp.zeros(())

        first_s, best, (_, overflow) = bench.timed(run, first.data, params.model, repeats=repeats)
        return first_s, best, float(overflow)
    zero_action = jnp.zeros((worlds, env.action_size), jnp.float32)

    @jax.jit
    def run(state, p):
        def body_fn(s, _):
            s = autoreset_step(env, p, s, first, zero_action)[0]
            overflow = sum(v for k, v in s.metrics.items() if k.startswith("overflow/"))
            return s, jnp.max(overflow)

        state, overflow = jax.lax.scan(body_fn, state, None, length=unroll)
        return state, jnp.max(overflow)

    first_s, best, (_, overflow) = bench.timed(run, first, params, repeats=repeats)
    return first_s, best, float(overflow)


def measure(body: str, worlds: int, unroll: int, repeats: int) -> list[tuple[str, float, str]]:
    """Every figure of one body at one world count: [(metric, value, unit)]."""
    seconds, rows = {}, []
    for name in VARIANTS:
        first_s, best, overflow = time_variant(name, body, worlds, unroll, repeats)
        seconds[name] = best / unroll
        if name == "full":
            rows += [("compile_s", first_s - best, "s"), ("overflow_worlds", overflow, "worlds")]
    ms = {
        "physics": 1e3 * seconds["physics"],
        "vision": 1e3 * (seconds["full"] - seconds["no_vision"]),
        "scoring": 1e3 * (seconds["full"] - seconds["no_scoring"]),
    }
    ms["rest"] = 1e3 * seconds["full"] - sum(ms.values())
    rows += [
        ("env_steps_per_s", worlds / seconds["full"], "1/s"),
        ("env_step_ms", 1e3 * seconds["full"], "ms"),
    ]
    rows += [(f"{part}_ms", value, "ms") for part, value in ms.items()]
    return rows


def markdown(rows: list[dict]) -> str:
    """The printed table: one line per body and world count, parts as ms and share of the step."""
    table: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        table.setdefault((r["body"], r["worlds"]), {})[r["metric"]] = r["value"]
    parts = ("physics", "vision", "scoring", "rest")
    lines = ["| body | worlds | env steps/s | step ms | " + " | ".join(f"{p} ms (%)" for p in parts) + " |"]
    lines.append("|" + "---|" * (4 + len(parts)))
    for (body, worlds), m in sorted(table.items()):
        step = m["env_step_ms"]
        cells = " | ".join(f"{m[p + '_ms']:.2f} ({100 * m[p + '_ms'] / step:.0f})" for p in parts)
        lines.append(f"| {body} | {worlds} | {m['env_steps_per_s']:,.0f} | {step:.2f} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the table for this machine and write its rows."""
    args = parse(argv)
    plat = args.platform if args.platform != "auto" else ("gpu" if bench._has_gpu() else "cpu")
    from boxjax import platform

    platform.configure(plat, args.cache)
    gpu = plat == "gpu"
    bodies = (args.bodies or ("muscular" if gpu else "simple")).split(",")
    worlds_list = [int(w) for w in (args.worlds or ("2048,4096" if gpu else "4,8")).split(",")]
    unroll = args.unroll or (16 if gpu else 4)
    device = bench.device_name()
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    common = {
        "bench": "block",
        "device": device,
        "task": "block",
        "platform": plat,
        "command": "python experiments/bench_block.py "
        + shlex.join(argv if argv is not None else sys.argv[1:]),
        "date": date,
        "versions": bench.versions(),
        "unroll": unroll,
    }
    os.makedirs(args.out, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in device.lower()).strip("-")
    path = os.path.join(args.out, f"block-{slug}-{date[:10]}.jsonl")
    rows = []
    with open(path, "a") as f:
        for body in bodies:
            for worlds in worlds_list:
                for metric, value, unit in measure(body, worlds, unroll, args.repeats):
                    row = {
                        **common,
                        "body": body,
                        "worlds": worlds,
                        "metric": metric,
                        "value": value,
                        "unit": unit,
                    }
                    rows.append(row)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                print(f"measured {body} at {worlds} worlds", flush=True)
    print(markdown(rows))
    print(f"rows written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
