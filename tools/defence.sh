#!/usr/bin/env bash
# Blockers trained for defence on one GPU machine: runs from the shipped muscular blocker in the seed's world
# (muscular against the simulated opponent, the shipped walking teacher), side by side on the card, in the
# background; each new checkpoint exported as a policy file for `boxjax eval RUN --checkpoints`-style curves.
#
#   tools/defence.sh OUTDIR start NAME MINUTES [train args]   start a training run (setsid: it outlives the shell);
#                                                              MINUTES is wall time from the process start, set-up
#                                                              included: on a fresh H100 machine (empty JAX and
#                                                              Warp caches) the set-up alone took 309 s at 3c407e7
#                                                              (results/logs/defence-proc-fall-cold-setup-*), warm
#                                                              36.5 s, so a short run on a fresh machine needs
#                                                              5 more minutes
#   tools/defence.sh OUTDIR wait SECONDS NAME...               until the runs end or SECONDS pass, exporting
#                                                              every new checkpoint and evaluating it on the
#                                                              held-out punches (CPU path, in the background);
#                                                              then each run's last lines
#   tools/defence.sh OUTDIR baseline                           the shipped muscular blocker evaluated likewise
#                                                              (held-out and classic punches), in the background
#   tools/defence.sh OUTDIR crossplay NAME                     a self-play run's (--env opponent_policy=learned)
#                                                              blocker versions against its opponent versions and
#                                                              the scripted punches (`boxjax eval --crossplay`,
#                                                              GPU, in the foreground)
#   tools/defence.sh OUTDIR collect NAME...                    OUTDIR/NAME.tgz: metrics, summary, log, policies,
#                                                              evaluations (those running get EVAL_WAIT_S, 150)
#
# Needs mujoco, mujoco-mjx, mujoco-warp and warp-lang importable (PYTHONPATH) and a CUDA JAX. Compiled code is
# cached in $BOXJAX_CACHE (default /tmp/bxcache) for every phase; MEM_FRACTION (default 0.45) is each run's share
# of the GPU's memory, CHECKPOINT_EVERY (default 250) its checkpoint interval in iterations. PLATFORM=cpu starts
# the run on the CPU path instead (MuJoCo C on this machine's cores: COLLECTORS, default 10, decoupled collectors
# of 128 worlds x 16 steps and one learner, 4 epochs of 2,048), the same start and task.
set -u
out=$1; phase=$2; shift 2
work=/tmp/defence
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1 BOXJAX_CACHE=${BOXJAX_CACHE:-/tmp/bxcache}
export WARP_CACHE_PATH=$BOXJAX_CACHE/warp

evaluate() {  # evaluate DIR SOURCE_ARGS...: `boxjax eval` on the CPU path into DIR/eval, in the background
  local dir=$1; shift
  mkdir -p "$dir/eval"
  setsid nohup python3 -m boxjax eval "$@" --platform cpu --worlds "${EVAL_WORLDS:-32}" --steps "${EVAL_STEPS:-1200}" \
    --out "$dir/eval" >> "$dir/eval/log.txt" 2>&1 &
}

export_new() {  # export_new NAME: the run's newest checkpoint as $work/NAME/policies/NAME-STEP.msgpack, once,
  # then evaluated on the held-out punches
  local step policy
  step=$(python3 -c "from boxjax.models import checkpoint as c; print(c.latest_step('runs/$1/checkpoints'))" 2>/dev/null) || return 0
  policy=$work/$1/policies/$1-$step.msgpack
  mkdir -p "$work/$1/policies"
  [ -e "$policy" ] && return 0
  if python3 -m boxjax export "runs/$1" "$policy" > /dev/null 2>&1; then
    evaluate "$work/$1" "$policy" --punches heldout
  else
    rm -f "$policy"
  fi
}

case $phase in
  start)
    name=$1; minutes=$2; shift 2
    mkdir -p "$work/$name"
    shape=(--platform gpu)
    [ "${PLATFORM:-gpu}" = cpu ] && shape=(--platform cpu --mode decoupled --collectors "${COLLECTORS:-10}" \
      --worlds 128 --learners 1 --unroll 16 --epochs 4 --minibatch 2048)
    XLA_PYTHON_CLIENT_MEM_FRACTION=${MEM_FRACTION:-0.45} setsid nohup python3 -m boxjax train --task block \
      "${shape[@]}" --body muscular --teacher auto --init boxjax/data/blockers/block-muscular.msgpack \
      --minutes "$minutes" --iterations 100000 --checkpoint-every "${CHECKPOINT_EVERY:-250}" --name "$name" "$@" \
      > "$work/$name/log.txt" 2>&1 &
    echo $! > "$work/$name/pid"
    echo "$(date -u +%FT%TZ) started $name: $minutes min $*"
    ;;
  wait)
    end=$((SECONDS + $1)); shift
    while [ $SECONDS -lt $end ]; do
      alive=0
      for n in "$@"; do
        export_new "$n"
        kill -0 "$(cat "$work/$n/pid")" 2>/dev/null && alive=1
      done
      [ $alive = 0 ] && break
      sleep 15
    done
    for n in "$@"; do echo "== $n"; grep -v "^Module " "$work/$n/log.txt" | tail -n 3 | cut -c1-400; done
    ;;
  baseline)
    evaluate "$work/shipped" --body muscular --punches heldout,classic
    ;;
  crossplay)
    mkdir -p "$work/$1/crossplay"
    python3 -m boxjax eval "runs/$1" --crossplay --platform gpu --worlds "${EVAL_WORLDS:-256}" \
      --steps "${EVAL_STEPS:-600}" --out "$work/$1/crossplay" 2>&1 | grep -v "^Module " | tee "$work/$1/crossplay/log.txt"
    ;;
  collect)
    end=$((SECONDS + ${EVAL_WAIT_S:-150}))  # the evaluations still running finish first, for a while
    for n in "$@"; do export_new "$n"; done
    while pgrep -f "boxjax eval" > /dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
    for n in "$@"; do
      cp "runs/$n/metrics.jsonl" "runs/$n/summary.json" "$work/$n/" 2>/dev/null
      tar czf "$out/$n.tgz" -C "$work" "$n"
    done
    [ -d "$work/shipped" ] && tar czf "$out/shipped.tgz" -C "$work" shipped
    ls -la "$out"
    ;;
  *) echo "usage: tools/defence.sh OUTDIR start|wait|baseline|crossplay|collect ..."; exit 2 ;;
esac
