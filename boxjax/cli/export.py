"""Write a trained policy as one small file:
`boxjax export RUN_OR_CHECKPOINT OUT.msgpack`.

The newest checkpoint's network and observation statistics with its meta (`boxjax.models.checkpoint.
save_policy`), nothing to resume from; `boxjax watch OUT.msgpack` plays it. The package's trained blockers
(`boxjax/data/blockers/block-BODY.msgpack`, what `boxjax watch --body BODY` plays) are made this way.
"""

from __future__ import annotations

import argparse
import os

from boxjax.cli import common, watch


def main(argv: list[str] | None = None) -> int:
    """Load the checkpoint as `boxjax watch` does, write its policy file, print its size."""
    p = common.Parser(
        prog="boxjax export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="RUN_OR_CHECKPOINT", help="runs/NAME or a checkpoint directory")
    p.add_argument("out", help="the policy file to write (.msgpack)")
    p.add_argument(
        "--agent",
        default=None,
        help="of a run with several learners (self-play), the agent whose policy to write (default the "
        "primary one, our fighter); the file then holds that agent alone",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    args = p.parse_args(argv)
    from boxjax import platform

    platform.configure("cpu", None)
    from boxjax.models import checkpoint

    source = watch.checkpoint_dir(args.source)
    step = checkpoint.latest_step(source)
    meta = {**checkpoint.read_meta(source, step), "source_step": int(step)}
    _, _, policy = watch.load(source, meta, 1, agent=args.agent)
    checkpoint.save_policy(
        args.out, {"params": policy.params, "normalizer": policy.normalizer}, one_agent(meta, args.agent)
    )
    size = os.path.getsize(args.out)
    print(f"export: {meta['env']} body={meta['body']} step {step} -> {args.out} ({size} bytes)")
    return 0


def one_agent(meta: dict, agent: str | None) -> dict:
    """The meta of the policy file: a several-agent run's as `agents.agent_meta` gives it for `agent` (the
    primary one by default); a single-agent meta as it is."""
    from boxjax.rl import agents

    named = meta.get("agents")
    return agents.agent_meta(meta, agent or named[0]["name"]) if named else meta


if __name__ == "__main__":
    raise SystemExit(common.run_main(main))
