#!/usr/bin/env bash
# The benchmark campaign on a GPU machine (one rented by the hour will do), one phase at a time.
#
#   rsync -a --exclude .venv --exclude runs ./ HOST:boxjax/      # this checkout, .git included: rows name
#   ssh HOST 'cd boxjax && pip install -e ".[gpu]"'               # the commit they measured (or set
#   ssh HOST 'cd boxjax && bash tools/gpu_campaign.sh seed-bench' # BOXJAX_COMMIT)
#   rsync -a HOST:boxjax/campaign-out/ ./campaign-out/
#
# Usage: bash tools/gpu_campaign.sh [--out DIR] PHASE [ARGS]   (DIR: default ./campaign-out)
# Every phase appends its console to DIR/logs/; rows go to DIR/bench/ (they belong under results/bench/);
# training phases copy their runs' metrics and summaries to DIR/runs/. `help` lists the phases.
# JAX's and Warp's compiles are cached in $BOXJAX_CACHE (default ~/.cache/boxjax): a phase after the first
# finds them warm.
set -u
SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
OUTDIR=./campaign-out
if [ "${1:-}" = --out ]; then OUTDIR=$2; shift 2; fi
if [ "${1:-help}" != help ]; then
  mkdir -p "$OUTDIR/logs" "$OUTDIR/bench" "$OUTDIR/runs"
  OUTDIR=$(cd "$OUTDIR" && pwd)
fi
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SHIPPED_BLOCKER=boxjax/data/blockers/block-muscular.msgpack
# the seed's blocking world: muscular against the simulated opponent, the shipped walking teacher beside the
# policy, 2,048 worlds x 16 steps, 4 epochs of minibatch 2,048 (the task's defaults)
SEED_BENCH=(--platform gpu --iteration-only --teacher shipped --bodies muscular --opponents simulated
  --shapes 2048x16 --out "$OUTDIR/bench")

gpu_name() { nvidia-smi --query-gpu=name --format=csv,noheader | head -1; }
commit() { echo "${BOXJAX_COMMIT:-$(git rev-parse --short HEAD)}"; }
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$OUTDIR/logs/campaign.txt"; }
quiet() { grep -v "^Module "; }  # Warp's per-module compile lines
keep() {  # keep RUN_DIR...: each run's metrics and summary into DIR/runs/
  local dir
  for dir in "$@"; do mkdir -p "$OUTDIR/runs/${dir##*/}" && cp "$dir"/metrics.jsonl "$dir"/summary.json "$OUTDIR/runs/${dir##*/}/" 2>/dev/null; done
}
seed_train() {  # seed_train NAME MINUTES SEED [block.py args]: a blocking training run in the seed's world from the shipped blocker
  local name=$1 minutes=$2 seed=$3; shift 3
  $PY experiments/block.py --platform gpu --body muscular --minutes "$minutes" --iterations 100000 \
    --checkpoint-every 100000 --seed "$seed" --teacher auto --name "$name" --init "$SHIPPED_BLOCKER" "$@" 2>&1 \
    | quiet > "$OUTDIR/logs/$name.txt"
}

case "${1:-help}" in
  help)
    sed -n '/^case/,/^esac/p' "$SCRIPT" | sed -nE 's/^  ([a-z-]+)\)  # \1 (.*)$/  \1 \2/p; s/^  ([a-z-]+)\)  # (.*)$/  \1: \2/p'
    ;;
  smoke)  # the GPU and the library versions
    log smoke
    nvidia-smi -L | tee -a "$OUTDIR/logs/campaign.txt"
    $PY -c "import jax, mujoco, warp; print(jax.__version__, jax.devices(), mujoco.__version__, warp.config.version)" \
      2>&1 | tail -1 | tee -a "$OUTDIR/logs/campaign.txt"
    ;;
  gpu-tests)  # the GPU tests: MJX (warp and jax) against MuJoCo C, our factorisation against MuJoCo Warp's
    log "GPU tests"
    $PY -m pytest -q -rs tests/test_physics.py tests/test_factor.py 2>&1 | quiet | tee "$OUTDIR/logs/gpu-tests.txt" | tail -30
    ;;
  stance-speed)  # stance-speed BODIES WORLDS: the stance task's speed table (steps/s, s/iteration, $ per 1,000)
    log "stance speed: $2 at $3 worlds"
    $PY experiments/bench.py --platform gpu --bodies "$2" --worlds "$3" --unroll 16 --out "$OUTDIR/bench" 2>&1 \
      | quiet | tee -a "$OUTDIR/logs/stance-speed.txt" | tail -25
    ;;
  factor-speed)  # our mass-matrix factorisation kernel against MuJoCo Warp's
    log "factor speed"
    $PY experiments/bench_factor.py --out "$OUTDIR/bench" 2>&1 | quiet | tee "$OUTDIR/logs/factor-speed.txt" | tail -25
    ;;
  block-speed)  # block-speed BODIES SHAPES [bench_block.py args]: the block iteration and where its time goes
    bodies=$2; shapes=$3; shift 3
    log "block speed: $bodies at $shapes $*"
    $PY experiments/bench_block.py --platform gpu --bodies "$bodies" --shapes "$shapes" --out "$OUTDIR/bench" "$@" 2>&1 \
      | quiet | tee -a "$OUTDIR/logs/block-speed.txt" | tail -20
    ;;
  physics-profile)  # physics-profile [profile_physics.py args]: MuJoCo Warp's step per traced function, per model variant
    shift
    log "physics profile $*"
    $PY experiments/profile_physics.py --out "$OUTDIR/bench/physprof.jsonl" "$@" 2>&1 | quiet \
      | tee -a "$OUTDIR/logs/physics-profile.txt" | tail -150
    ;;
  cpu-speed)  # cpu-speed [bench_cpu.py args]: the CPU path on this machine's cores against a bare mj_step
    shift
    log "CPU speed $*"
    $PY experiments/bench_cpu.py --out "$OUTDIR/bench" "$@" 2>&1 | tee -a "$OUTDIR/logs/cpu-speed.txt" | tail -20
    ;;
  stance-solve)  # stance-solve BODY WORLDS [stance.py args]: time to solve the stance from the process start (solve rows)
    body=$2; worlds=$3; shift 3; run=solve-$body-$worlds
    log "stance solve: $body, $worlds worlds $*"
    $PY experiments/stance.py --platform gpu --body "$body" --envs "$worlds" --unroll 16 --iterations 3000 \
      --checkpoint-every 100 --name "$run" "$@" 2>&1 | quiet > "$OUTDIR/logs/$run.txt"
    tail -2 "$OUTDIR/logs/$run.txt"
    $PY experiments/run_report.py "runs/$run" | tee -a "$OUTDIR/logs/campaign.txt"
    rule=fast; [[ " $* " == *" --rule seed "* ]] && rule=seed
    seed=0; [[ " $* " =~ " --seed "([0-9]+) ]] && seed=${BASH_REMATCH[1]}
    $PY experiments/run_report.py "runs/$run" --rows "$OUTDIR/bench/solve-$(date -u +%F).jsonl" --label device="$(gpu_name)" \
      --label body="$body" --label task=stance --label worlds="$worlds" --label unroll=16 --label commit="$(commit)" \
      --label caches="${CACHES:-as found}" --label rule=$rule --label seed=$seed \
      --label command="tools/gpu_campaign.sh stance-solve $body $worlds $*"
    keep "runs/$run"
    ;;
  cold-setup)  # cold-setup BODY WORLDS: set-up with empty JAX and Warp caches, Warp's step modules preloaded (1) and not (0)
    body=$2; worlds=$3
    for preload in ${COLD_PRELOADS:-1 0}; do
      run=coldsetup-$body-$worlds-preload$preload; cache=$(mktemp -d)
      log "cold set-up: $body, $worlds worlds, preload $preload"
      BOXJAX_CACHE=$cache BOXJAX_WARP_PRELOAD=$preload $PY experiments/stance.py --platform gpu --body "$body" \
        --envs "$worlds" --unroll 32 --iterations 2 --name "$run" 2>&1 | quiet > "$OUTDIR/logs/$run.txt"
      $PY -c "import json, sys; s = json.load(open(sys.argv[1])); print(sys.argv[1], s['setup_s'], s['setup_phases_s'])" \
        "runs/$run/summary.json" 2>&1 | tail -1 | tee -a "$OUTDIR/logs/campaign.txt"
      keep "runs/$run"; rm -rf "$cache"
    done
    ;;
  walk-teacher)  # walk-teacher BODY MINUTES [walk.py args]: train a walking teacher; its policy file comes back as DIR/walk-BODY.msgpack
    body=$2; minutes=$3; shift 3
    log "walking teacher: $body, $minutes min $*"
    $PY experiments/walk.py --platform gpu --body "$body" --envs 2048 --unroll 32 --minutes "$minutes" --iterations 5000 \
      --checkpoint-every 50 --name "walk-$body" "$@" 2>&1 | quiet >> "$OUTDIR/logs/walk-$body.txt"
    tail -3 "$OUTDIR/logs/walk-$body.txt"
    $PY -c "import sys; from boxjax.envs.walk import teacher; teacher.export_teacher(*sys.argv[1:])" \
      "runs/walk-$body/checkpoints" "$body" "$OUTDIR/walk-$body.msgpack"
    keep "runs/walk-$body"
    ;;
  stance-for-block)  # stance-for-block BODY: a stance solve whose checkpoints start a blocker (runs/stance-BODY)
    log "stance for a blocker: $2"
    $PY experiments/stance.py --platform gpu --body "$2" --iterations 3000 --checkpoint-every 25 --name "stance-$2" \
      2>&1 | quiet > "$OUTDIR/logs/stance-$2.txt"
    tail -2 "$OUTDIR/logs/stance-$2.txt"
    ;;
  block-train)  # block-train BODY MINUTES [INIT]: train a blocker (from INIT: a stance or block checkpoint); its policy file comes back as DIR/runs/block-BODY/policy.msgpack
    body=$2; run=runs/block-$body
    log "blocker: $body, $3 min ${4:+from $4}"
    $PY experiments/block.py --platform gpu --body "$body" --minutes "$3" --iterations 100000 --seed 0 \
      --name "block-$body" ${4:+--init "$4"} 2>&1 | quiet >> "$OUTDIR/logs/block-$body.txt"
    $PY experiments/learn_report.py "$run" | tee "$OUTDIR/logs/learn-report-$body.txt"
    keep "$run"
    $PY experiments/export_policy.py "$run" "$OUTDIR/runs/block-$body/policy.msgpack" 2>&1 | tail -1
    ;;
  seed-bench)  # seed-bench [bench_block.py args]: the seed's blocking iteration, 5 timed iterations (best and median); e.g. --env solver=cg
    shift
    log "seed bench $*"
    $PY experiments/bench_block.py "${SEED_BENCH[@]}" --repeats "${SEED_REPEATS:-5}" "$@" 2>&1 | quiet \
      | tee -a "$OUTDIR/logs/seed-bench.txt" | tail -6
    ;;
  seed-options)  # the seed bench of each named option that changes the physics (solver cap 2, the CG solver, the frozen opponent)
    for option in solver_iterations=2 solver=cg opponent_freeze_idle=true; do
      SEED_REPEATS=3 bash "$SCRIPT" --out "$OUTDIR" seed-bench --env "$option"
    done
    ;;
  seed-trace)  # the seed bench with two iterations traced: where the device idles (trace_report's gaps in the log)
    log "seed bench, traced"
    rm -rf /tmp/seed-trace
    $PY experiments/bench_block.py "${SEED_BENCH[@]}" --repeats 2 --trace /tmp/seed-trace 2>&1 | quiet \
      | tee -a "$OUTDIR/logs/seed-trace.txt" | tail -40
    mkdir -p "$OUTDIR/traces" && find /tmp/seed-trace -name perfetto_trace.json.gz -exec cp {} "$OUTDIR/traces/seed-world.json.gz" \;
    ;;
  seed-train)  # seed-train MINUTES [SEED [block.py args]]: a training run in the seed's world from the shipped blocker: its mean seconds per iteration (seed_table rows) and what it learns
    shift; minutes=$1; seed=${2:-0}; shift; [ $# -gt 0 ] && shift; run=seedrun-seed$seed; start=$(date -u +%FT%TZ)
    log "seed-world training run: $minutes min, seed $seed $*"
    seed_train "$run" "$minutes" "$seed" "$@"
    $PY experiments/learn_report.py "runs/$run" --windows 3 | tee -a "$OUTDIR/logs/campaign.txt"
    keep "runs/$run"
    $PY experiments/seed_table.py --from-run "runs/$run" --out "$OUTDIR/bench/seedtable-$(date -u +%F).jsonl" \
      --label device="$(gpu_name)" --label platform=gpu --label commit="$(commit)" --label date="$start" \
      --label caches="${CACHES:-as found}" --label teacher=shipped \
      --label command="tools/gpu_campaign.sh seed-train $minutes $seed $*"
    ;;
  seed-cpu)  # seed-cpu MINUTES [COLLECTORS WORLDS]: the same training on this machine's CPUs (decoupled; default 15 x 128 worlds x 16 steps)
    run=seedcpu; collectors=${3:-15}; worlds=${4:-128}; start=$(date -u +%FT%TZ)
    log "seed-world CPU training run: $2 min, $collectors collectors x $worlds worlds, $(nproc) cores"
    $PY experiments/block.py --platform cpu --mode decoupled --body muscular --collectors "$collectors" --worlds "$worlds" \
      --learners 1 --unroll 16 --epochs 4 --minibatch 2048 --minutes "$2" --iterations 100000 --checkpoint-every 100000 \
      --seed 0 --teacher auto --name $run --init "$SHIPPED_BLOCKER" > "$OUTDIR/logs/$run.txt" 2>&1
    $PY experiments/learn_report.py runs/$run --windows 3 | tee -a "$OUTDIR/logs/campaign.txt"
    keep runs/$run
    $PY experiments/seed_table.py --from-run runs/$run --out "$OUTDIR/bench/seedtable-$(date -u +%F).jsonl" \
      --label device="$($PY -c "import os, platform; print(f'cpu:{platform.processor() or platform.machine()} x{os.cpu_count()}')")" \
      --label platform=cpu --label cores="$(nproc)" --label worlds=$((collectors * worlds)) --label commit="$(commit)" \
      --label date="$start" --label teacher=shipped ${PRICE_KEY:+--label price_key="$PRICE_KEY"} \
      --label command="tools/gpu_campaign.sh seed-cpu $2 $collectors $worlds"
    ;;
  train-against)  # train-against BASE_COMMIT MINUTES: this checkout and BASE_COMMIT's code trained side by side on the card, seed 0 (what a change does to learning; the shared card makes the seconds no figure)
    base=$2; minutes=$3; dir=$(mktemp -d); blocker=$(pwd)/$SHIPPED_BLOCKER
    git archive "$base" boxjax experiments | tar -x -C "$dir"
    log "training pair, seed 0, $minutes min: this checkout and $base"
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 seed_train seedpair-after-seed0 "$minutes" 0 &
    (cd "$dir" && BOXJAX_COMMIT=$base PYTHONPATH=$dir XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 SHIPPED_BLOCKER=$blocker \
      seed_train seedpair-before-seed0 "$minutes" 0) &
    wait
    for run in runs/seedpair-after-seed0 "$dir/runs/seedpair-before-seed0"; do
      $PY experiments/learn_report.py "$run" --windows 3 | tee -a "$OUTDIR/logs/campaign.txt"
      keep "$run"
    done
    ;;
  brax-compare)  # brax-compare ENV STEPS [compare_brax.py args]: Brax PPO then boxjax PPO on a Playground environment (the compare extra)
    env=$2; steps=$3; shift 3
    log "Brax against boxjax: $env, $steps steps $*"
    $PY experiments/compare_brax.py "$env" --steps "$steps" --platform gpu --out "$OUTDIR/bench" "$@" 2>&1 | quiet \
      | tee -a "$OUTDIR/logs/compare-$env.txt" | tail -30
    ;;
  ppo-profile)  # ppo-profile ENV [profile_ppo.py args]: boxjax's iteration part by part on a Playground environment
    env=$2; shift 2
    log "PPO profile: $env $*"
    $PY experiments/profile_ppo.py "$env" --platform gpu --out "$OUTDIR/bench" "$@" 2>&1 | quiet \
      | tee -a "$OUTDIR/logs/profile-$env.txt" | tail -12
    ;;
  side-by-side)  # side-by-side "PHASE ARGS" "PHASE ARGS" ...: phases at once on one machine (each with XLA_PYTHON_CLIENT_MEM_FRACTION set, e.g. "XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 seed-train 8 1")
    shift; n=0
    for spec in "$@"; do
      eval "words=($spec)"; vars=()
      while [[ "${words[0]:-}" == *=* ]]; do vars+=("${words[0]}"); words=("${words[@]:1}"); done
      n=$((n + 1)); env "${vars[@]}" bash "$SCRIPT" --out "$OUTDIR" "${words[@]}" > "$OUTDIR/logs/side-$n.txt" 2>&1 &
    done
    wait
    tail -n 4 "$OUTDIR"/logs/side-*.txt
    ;;
  *)
    echo "unknown phase '$1'; bash $0 help lists them" >&2; exit 2 ;;
esac
