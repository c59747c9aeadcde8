"""Train the stance task: `python experiments/stance.py --platform cpu|gpu --body simple ...`.

Writes runs/<name>/metrics.jsonl (one JSON object per iteration) and checkpoints under
runs/<name>/checkpoints, and prints the time to solve when the curriculum is solved.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cli  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train, report."""
    parser = _cli.base_parser(__doc__)
    parser.add_argument("--keep-going", action="store_true", help="do not stop when solved")
    parser.add_argument(
        "--factor",
        choices=("auto", "fused", "stock"),
        default="auto",
        help="MuJoCo Warp mass-matrix factorisation (auto: fused for the 89-DoF bodies)",
    )
    args = parser.parse_args(argv)

    from boxjax import platform

    platform.configure(args.platform, args.cache)
    import jax

    from boxjax import envs
    from boxjax.rl import ppo

    defaults = ppo.PPOConfig(num_envs=1024, unroll_length=32, minibatch_size=2048)
    config = ppo.PPOConfig(**{**defaults.to_dict(), **_cli.ppo_overrides(args)})
    fused = {"auto": None, "fused": True, "stock": False}[args.factor]
    from boxjax.envs.stance import StanceConfig

    options = _cli.field_values(args.env, StanceConfig())
    env = envs.make("stance", body=args.body, num_worlds=config.num_envs, fused_factor=fused, **options)
    name = args.name or f"stance-{args.body}-{args.platform}-{config.num_envs}"
    out = _cli.run_dir(name)
    progress = _cli.Progress(
        args.iterations,
        os.path.join(out, "metrics.jsonl"),
        extra=(("curriculum/level", "amp {:.0f}/" + str(env.config.levels), "level"),),
    )
    print(
        f"stance: body={args.body} impl={env.physics.impl} worlds={config.num_envs} "
        f"unroll={config.unroll_length} obs={env.observation_size} act={env.action_size} -> {out}",
        flush=True,
    )
    try:
        result, history = ppo.train_run(
            env,
            config,
            jax.random.PRNGKey(args.seed),
            iterations=args.iterations,
            minutes=args.minutes,
            progress_fn=progress,
            checkpoint_dir=os.path.join(out, "checkpoints"),
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            init=args.init,
            stop_when_solved=not args.keep_going,
            stop_on_overflow=args.stop_on_overflow,
            start_time_s=_cli.PROCESS_START_S,
        )
    finally:
        progress.close()
    if not history:
        print("nothing to do: the checkpoint already reached --iterations")
        return 0
    summary = {
        "setup_s": history[0].get("setup_s"),
        "iterations": int(history[-1]["iteration"]),
        "solved": result.solved_at_s is not None,
        "time_to_solve_s": result.solved_at_s,
        "train_s_to_solve": None
        if result.solved_at_s is None
        else result.solved_at_s - history[0]["setup_s"],
        "overrides": {"ppo": args.ppo, "env": args.env},
        "first_return": history[0]["episode/return"],
        "last_return": history[-1]["episode/return"],
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if result.solved_at_s is not None:
        print(
            f"SOLVED in {result.solved_at_s:.1f} s after {summary['iterations']} iterations "
            f"(set-up {summary['setup_s']:.1f} s, training {summary['train_s_to_solve']:.1f} s)"
        )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
