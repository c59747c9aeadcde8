#!/usr/bin/env bash
# What one GPU-machine session runs, phase by phase (each phase fits one 10-minute device call).
# Usage, on the GPU machine after ../shared/gpu's wheel install:  bash tools/gpu_session.sh PHASE
# Logs and result rows land in $OUT; benchmark rows belong under results/bench/, logs stay out of the tree.
# The machine's copy of the tree keeps the session's first git commit: start the call with
# `BOXJAX_COMMIT=$(git rev-parse HEAD)` (run here) so the rows name the code they measured.
set -u
SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 BOXJAX_CACHE=/tmp/bxcache
export WARP_CACHE_PATH=$BOXJAX_CACHE/warp
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"
log() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$OUT/logs/session.txt"; }
bundle() { tar czf "$OUT/results-$1.tgz" results runs/*/metrics.jsonl runs/*/summary.json "$OUT/logs" 2>/dev/null; }
bgwait() {  # bgwait NAME LIMIT_S: waits up to LIMIT_S for the background phase NAME; its OUT comes back as $OUT/bg-NAME
  local pid end=$((SECONDS + $2)); pid=$(cat "/tmp/bg/$1.pid")
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 5; done
  mkdir -p "$OUT/bg-$1" && cp -r "/tmp/bg/$1/." "$OUT/bg-$1/"
  if kill -0 "$pid" 2>/dev/null; then log "background $1 still running"; else log "background $1 ended"; fi
}

case "$1" in
  smoke)
    log smoke
    nvidia-smi -L | tee -a "$OUT/logs/session.txt"
    python3 -c "import jax, mujoco, warp; print(jax.__version__, jax.devices(), mujoco.__version__, warp.config.version)" \
      2>&1 | tail -1 | tee -a "$OUT/logs/session.txt"
    ;;
  tests)
    log "GPU tests: physics parity and the factor kernel"
    timeout 300 python3 -m pytest -q -rs tests/test_physics.py tests/test_factor.py -s 2>&1 \
      | grep -v "^Module " | tee "$OUT/logs/gpu-tests.txt" | tail -30
    ;;
  stance)  # stance BODY WORLDS MINUTES [extra args]
    body=$2; worlds=$3; minutes=$4; shift 4
    log "stance $body $worlds worlds, $minutes min $*"
    timeout $((60 * ${minutes%.*} + 150)) python3 experiments/stance.py --platform gpu --body "$body" \
      --envs "$worlds" --minutes "$minutes" --name "h200-$body-$worlds" "$@" 2>&1 \
      | grep -v "^Module " | tee "$OUT/logs/stance-$body-$worlds.txt" | tail -25
    ;;
  parity)  # the MJX-JAX parity test alone (after the matmul-precision fix)
    log "parity test, impl jax"
    XLA_PYTHON_CLIENT_MEM_FRACTION=0.1 timeout 280 python3 -m pytest -q -rs tests/test_physics.py -k "jax" 2>&1 | grep -v "^Module " \
      > "$OUT/logs/gpu-parity.txt"; tail -3 "$OUT/logs/gpu-parity.txt"
    ;;
  sweep)  # sweep MINUTES WORLDS: concurrent short simple-body stance runs to pick PPO settings
    minutes=$2; worlds=$3
    log "sweep simple $worlds worlds $minutes min, 4 concurrent runs"
    one() {
      name=$1; shift
      XLA_PYTHON_CLIENT_MEM_FRACTION=0.18 timeout $((60 * ${minutes%.*} + 120)) python3 experiments/stance.py --platform gpu --body simple \
        --envs "$worlds" --unroll 32 --minutes "$minutes" --checkpoint-every 1000 --name "sweep-$name" "$@" \
        2>&1 | grep -v "^Module " > "$OUT/logs/sweep-$name.txt"
    }
    declare -A ARGS=(
      [base]=""
      [std16]="--ppo init_log_std=-1.6"
      [std16lr]="--ppo init_log_std=-1.6 --ppo learning_rate=1e-3"
      [std16lr-u16]="--ppo init_log_std=-1.6 --ppo learning_rate=1e-3 --unroll 16"
    )
    for name in "${!ARGS[@]}"; do one "$name" ${ARGS[$name]} & done
    wait
    python3 experiments/run_report.py runs/sweep-* | tee -a "$OUT/logs/session.txt"
    best=$(python3 experiments/run_report.py --best runs/sweep-*)
    echo "${ARGS[${best#runs/sweep-}]}" > /tmp/best-args
    log "best sweep run: $best -> $(cat /tmp/best-args)"
    ;;
  solve)  # solve BODY WORLDS [extra args]: one timed time-to-solve run, alone on the GPU (or beside another
    # through `par`: SOLVE_TAG suffixes the run name, SOLVE_MEM is its GPU memory share, SOLVE_UNROLL its
    # steps per world, default 16)
    body=$2; worlds=$3; shift 3
    run="solve-$body-$worlds${SOLVE_TAG:-}"
    log "solve $body $worlds $* ($run)"
    limit=${SOLVE_LIMIT_S:-300}
    XLA_PYTHON_CLIENT_MEM_FRACTION=${SOLVE_MEM:-0.75} timeout "$limit" python3 experiments/stance.py --platform gpu \
      --body "$body" --envs "$worlds" --unroll "${SOLVE_UNROLL:-16}" --iterations 3000 --checkpoint-every 100 --name "$run" \
      $(cat /tmp/best-args 2>/dev/null) "$@" 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt"
    tail -2 "$OUT/logs/$run.txt"
    python3 experiments/run_report.py "runs/$run" | tee -a "$OUT/logs/session.txt"
    mkdir -p "$OUT/$run" && cp runs/$run/{metrics.jsonl,summary.json} "$OUT/$run/"
    ;;
  coldsetup)  # coldsetup BODY WORLDS: set-up with empty JAX and Warp caches, Warp's step modules preloaded
    # side by side (1) and not (0, BOXJAX_WARP_PRELOAD=0), COLD_PRELOADS of them in order (default "1 0");
    # two iterations each. On a fresh machine the first run fills the session's cache ($BOXJAX_CACHE, still
    # empty then) so later phases find its kernels; every other run gets a throwaway empty cache.
    body=$2; worlds=$3
    for preload in ${COLD_PRELOADS:-1 0}; do
      run="coldsetup-$body-$worlds-preload$preload"; cache=/tmp/cold-$run
      [ -e "$BOXJAX_CACHE" ] || cache=$BOXJAX_CACHE
      log "cold set-up $body $worlds, preload $preload, cache $cache"
      [ "$cache" = "$BOXJAX_CACHE" ] || rm -rf "$cache"
      BOXJAX_CACHE=$cache WARP_CACHE_PATH=$cache/warp BOXJAX_WARP_PRELOAD=$preload \
        timeout "${COLD_LIMIT_S:-200}" python3 experiments/stance.py --platform gpu --body "$body" --envs "$worlds" \
        --unroll 32 --iterations 2 --name "$run" 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt"
      python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[1], s['setup_s'], \
s['setup_phases_s'], s['setup_marks_s'])" "runs/$run/summary.json" 2>&1 | tail -1 | tee -a "$OUT/logs/session.txt"
      mkdir -p "$OUT/$run" && cp "runs/$run/summary.json" "$OUT/$run/" 2>/dev/null
    done
    ;;
  bench)  # bench BODIES WORLDS
    log "bench $2 at $3"
    timeout "${BENCH_LIMIT_S:-540}" python3 experiments/bench.py --platform gpu --bodies "$2" --worlds "$3" --unroll 16 \
      --price "H200 (cloud, on-demand)" 2>&1 | grep -v "^Module " | tee -a "$OUT/logs/bench.txt" | tail -25
    ;;
  factor)
    log "factor bench"
    timeout "${FACTOR_LIMIT_S:-420}" python3 experiments/bench_factor.py 2>&1 | grep -v "^Module " | tee "$OUT/logs/factor.txt" | tail -25
    ;;
  walk)  # walk BODY MINUTES [extra]: train the walking teacher; its policy comes back in $OUT as walk-BODY.msgpack (with the metrics);
    # WALK_RESUME=1 continues runs/walk-BODY from its checkpoints (give the same extra arguments)
    body=$2; minutes=$3; shift 3
    log "walk $body $minutes min $* ${WALK_RESUME:+(resumed)}"
    XLA_PYTHON_CLIENT_MEM_FRACTION=${WALK_MEM:-0.75} timeout "${WALK_LIMIT_S:-300}" python3 experiments/walk.py --platform gpu --body "$body" --envs 2048 \
      --unroll 32 --minutes "$minutes" --iterations 5000 --checkpoint-every 50 --name "walk-$body" \
      ${WALK_RESUME:+--resume runs/walk-$body/checkpoints} "$@" 2>&1 \
      | grep -v "^Module " >> "$OUT/logs/walk-$body.txt"; tail -3 "$OUT/logs/walk-$body.txt"
    python3 -c "import sys, json; from boxjax.envs.walk import teacher; \
print(json.dumps(teacher.export_teacher(sys.argv[1], sys.argv[2], sys.argv[3])['source_step']))" \
      "runs/walk-$body/checkpoints" "$body" "$OUT/walk-$body.msgpack" 2>&1 | tail -1
    cp runs/walk-$body/metrics.jsonl "$OUT/walk-$body-metrics.jsonl"
    ;;
  block)  # block BODIES SHAPES [extra]: the blocking-task bench (iteration and its breakdown); with
    # `--trace DIR` the perfetto traces come back flat in $OUT/traces/ (nested folders do not come back)
    bodies=$2; shapes=$3; shift 3
    log "block bench $bodies at $shapes $*"
    timeout "${BLOCK_LIMIT_S:-400}" python3 experiments/bench_block.py --platform gpu --bodies "$bodies" \
      --shapes "$shapes" "$@" 2>&1 | grep -v "^Module " | tee -a "$OUT/logs/block.txt" | tail -20
    args=("$@")
    for i in "${!args[@]}"; do
      [ "${args[$i]}" = --trace ] || continue
      mkdir -p "$OUT/traces"
      find "${args[$((i + 1))]}" -name perfetto_trace.json.gz | while read -r trace; do
        shape=${trace#"${args[$((i + 1))]}"/}; cp "$trace" "$OUT/traces/${shape%%/*}-$(date +%s%N).json.gz"
      done
    done
    ;;
  graphs)  # graphs BODY SHAPE [extra]: the block iteration once per MuJoCo Warp graph mode (GRAPH_MODES,
    # default "warp warp_staged_ex"), each with its CUDA graphs captured per iteration (it_graph_captures)
    body=$2; shape=$3; shift 3
    for mode in ${GRAPH_MODES:-warp warp_staged_ex}; do
      bash "$0" block "$body" "$shape" --iteration-only --graph-mode "$mode" --out "$OUT/bench" "$@"
    done
    ;;
  levers)  # levers BODY SHAPE [extra]: the block iteration once per LEVERS entry: "built" as built, else
    # NAME=VALUE[,NAME=VALUE] MuJoCo options for --mj-option (default "built ccd_iterations=35 ccd_iterations=8").
    # Each entry is one bench of up to BLOCK_LIMIT_S: keep entries x BLOCK_LIMIT_S inside the device call's
    # 600 s. On one H200 (2026-12-02): on a fresh machine ~100 s of Warp compiling before the reset, then
    # up to 200 s of XLA compiling the iteration (180 s cut all three benches of a fresh start); once compiled
    # (a later bench, new options) ~60 s. Options go in LEVERS only: an --mj-option among the extra
    # arguments would override every entry's.
    body=$2; shape=$3; shift 3
    for arg in "$@"; do
      case $arg in --mj-o*) log "levers: put MuJoCo options in LEVERS, not among the extra arguments"; exit 2 ;; esac
    done
    for lever in ${LEVERS:-built ccd_iterations=35 ccd_iterations=8}; do
      options=(); [ "$lever" != built ] && for o in ${lever//,/ }; do options+=(--mj-option "$o"); done
      bash "$0" block "$body" "$shape" --iteration-only --out "$OUT/bench" "${options[@]}" "$@"
    done
    ;;
  learn)  # learn BODY MINUTES [INIT]: the block learning check, one run per LEARN_FACTORS entry side by side
    # (default "fused stock": the factor kernel on and off, same seed), and per LEARN_SHAPES entry
    # (WORLDSxUNROLL, e.g. "2048x16 4096x8"; default: block.py's own shape);
    # LEARN_TAG suffixes the run names (a second check on the same machine); LEARN_RESUME=1 continues them;
    # LEARN_ARGS adds block.py arguments (e.g. --teacher)
    # LEARN_MEM: each run's GPU memory share (default 0.9 / runs)
    body=$2; minutes=$3; init=${4:+--init $4}
    factors=(${LEARN_FACTORS:-fused stock}); shapes=(${LEARN_SHAPES:-default})
    for shape in "${shapes[@]}"; do
      [[ $shape == default || $shape =~ ^[0-9]+x[0-9]+$ ]] || { log "bad LEARN_SHAPES entry '$shape' (WORLDSxUNROLL)"; exit 2; }
    done
    mem=${LEARN_MEM:-$(awk -v n=$((${#factors[@]} * ${#shapes[@]})) 'BEGIN { printf "%.2f", 0.9 / n }')}
    log "block learning check $body $minutes min, ${factors[*]} ${LEARN_SHAPES:-} ${4:+from $4} ${LEARN_ARGS:-}, memory $mem each"
    for factor in "${factors[@]}"; do
      for shape in "${shapes[@]}"; do
        run="learn-$body-$factor${LEARN_TAG:-}"; sized=""
        [ "$shape" != default ] && run="$run-$shape" && sized="--envs ${shape%x*} --unroll ${shape#*x}"
        from=$init; [ -n "${LEARN_RESUME:-}" ] && from="--resume runs/$run/checkpoints"
        XLA_PYTHON_CLIENT_MEM_FRACTION=$mem timeout "${LEARN_LIMIT_S:-360}" python3 experiments/block.py \
          --platform gpu --body "$body" --minutes "$minutes" --iterations 100000 --checkpoint-every 100000 \
          --factor $factor --seed 0 --name "$run" $sized $from ${LEARN_ARGS:-} 2>&1 | grep -v "^Module " >> "$OUT/logs/$run.txt" &
      done
    done
    wait
    tail -n 2 "$OUT"/logs/learn-$body-*.txt
    python3 experiments/learn_report.py runs/learn-$body-*${LEARN_TAG:-}${LEARN_SHAPES:+*} | tee "$OUT/logs/learn-report-$body.txt"
    for run in runs/learn-$body-*${LEARN_TAG:-}${LEARN_SHAPES:+*}; do
      mkdir -p "$OUT/${run#runs/}" && cp "$run"/metrics.jsonl "$run"/summary.json "$OUT/${run#runs/}/" 2>/dev/null
      # the converted stance checkpoint (model only): a later session's --init without a stance solve
      [ -d "$run/init-from-stance" ] && tar czf "$OUT/${run#runs/}/init-from-stance.tgz" -C "$run" init-from-stance
      # the trained policy as one file (checkpoint folders do not come back): what boxjax/data/blockers ships
      python3 experiments/export_policy.py "$run" "$OUT/${run#runs/}/policy.msgpack" 2>&1 | tail -1
    done
    ;;
  stance-ckpt)  # stance-ckpt BODY: a stance solve whose checkpoints start a learning check (runs/stance-BODY).
    # At most SOLVE_LIMIT_S (default 260 s; checkpoints every 25 iterations, so a run cut short still leaves one)
    body=$2
    log "stance solve for the learning check: $body"
    XLA_PYTHON_CLIENT_MEM_FRACTION=${STANCE_MEM:-0.75} timeout "${SOLVE_LIMIT_S:-260}" python3 experiments/stance.py \
      --platform gpu --body "$body" --iterations 3000 --checkpoint-every 25 --name "stance-$body" 2>&1 | grep -v "^Module " > "$OUT/logs/stance-$body.txt"
    tail -2 "$OUT/logs/stance-$body.txt"
    ;;
  stance-then-learn)  # stance-then-learn BODY MINUTES: `stance-ckpt BODY`, then `learn` from its checkpoint
    # (LEARN_LIMIT_S default 300 s here). One 10-minute call.
    body=$2
    bash "$0" stance-ckpt "$body"
    if [ -d "runs/stance-$body/checkpoints" ]; then
      LEARN_LIMIT_S=${LEARN_LIMIT_S:-300} bash "$0" learn "$body" "$3" "runs/stance-$body/checkpoints"
    else
      log "no stance checkpoint: learning check skipped"
    fi
    ;;
  ccd)  # ccd TASK BODY MINUTES [INIT]: the convex-collision cap's learning check, the same run (seed 0) with the
    # built cap (boxer.CCD_ITERATIONS, 16) and with MuJoCo's default 35 (`--env ccd_iterations=35`) side by
    # side, each with CCD_MEM of the GPU (default 0.45); TASK stance or block (block from INIT, a stance
    # checkpoint); both reports (run_report for a stance, learn_report for blocking) on the pair
    task=$2; body=$3; minutes=$4; init=${5:+--init $5}
    log "convex-collision cap check: $task $body $minutes min, caps 16 and 35 ${5:+from $5}"
    for cap in 16 35; do
      run="ccd-$task-$body-cap$cap"
      XLA_PYTHON_CLIENT_MEM_FRACTION=${CCD_MEM:-0.45} timeout "${CCD_LIMIT_S:-$((60 * ${minutes%.*} + 240))}" \
        python3 experiments/$task.py --platform gpu --body "$body" --minutes "$minutes" --iterations 100000 \
        --checkpoint-every 100000 --seed 0 --name "$run" --env ccd_iterations=$cap $init 2>&1 \
        | grep -v "^Module " > "$OUT/logs/$run.txt" &
    done
    wait
    report=learn_report; [ "$task" = stance ] && report=run_report
    python3 experiments/$report.py runs/ccd-$task-$body-cap16 runs/ccd-$task-$body-cap35 | tee "$OUT/logs/ccd-$task-$body.txt"
    for run in runs/ccd-$task-$body-cap*; do
      mkdir -p "$OUT/${run#runs/}" && cp "$run"/metrics.jsonl "$run"/summary.json "$OUT/${run#runs/}/" 2>/dev/null
    done
    ;;
  par)  # par "SPEC" "SPEC" ...: phases side by side on one machine, each SPEC "[VAR=value ...] PHASE ARGS",
    # split like a shell line (quote values with spaces: "LEARN_FACTORS='fused stock' learn simple 3"); give
    # each GPU phase a memory share (STANCE_MEM, LEARN_MEM, WALK_MEM); console output in $OUT/par-N.txt
    shift; n=0; rm -f "$OUT"/par-*.txt
    for spec in "$@"; do
      eval "words=($spec)"; vars=()
      while [[ "${words[0]:-}" == *=* ]]; do vars+=("${words[0]}"); words=("${words[@]:1}"); done
      n=$((n + 1)); env "${vars[@]}" bash "$0" "${words[@]}" > "$OUT/par-$n.txt" 2>&1 &
    done
    wait
    tail -n 4 "$OUT"/par-*.txt
    ;;
  physprof)  # physprof [profile_physics.py args]: MuJoCo Warp's step per traced function, per model variant
    shift
    log "physics profile $*"
    timeout "${PROF_LIMIT_S:-300}" python3 experiments/profile_physics.py --out "$OUT/physprof.jsonl" "$@" 2>&1 \
      | grep -v "^Module " | tee -a "$OUT/logs/physprof.txt" | tail -150
    ;;
  cpu)  # cpu [bench_cpu.py args, e.g. --task block --body muscular]: the CPU path on this machine's cores
    shift
    log "cpu bench $*"
    timeout "${CPU_LIMIT_S:-200}" python3 experiments/bench_cpu.py "$@" 2>&1 | tee -a "$OUT/logs/cpu.txt" | tail -20
    ;;
  compare)  # compare ENV STEPS [compare_brax.py args]: Brax PPO then boxjax PPO on a Playground environment
    # (the wheels staged with brax, playground, jaxopt, ml_collections and tqdm as extras of stage-wheels.sh)
    env=$2; steps=$3; shift 3
    log "compare $env $steps steps $*"
    timeout "${COMPARE_LIMIT_S:-560}" python3 experiments/compare_brax.py "$env" --steps "$steps" --platform gpu \
      --out "$OUT/bench" "$@" 2>&1 | grep -v "^Module " | tee -a "$OUT/logs/compare-$env.txt" | tail -30
    ;;
  profile)  # profile ENV [profile_ppo.py args]: boxjax's iteration part by part on a Playground environment
    env=$2; shift 2
    log "profile $env $*"
    timeout "${PROFILE_LIMIT_S:-300}" python3 experiments/profile_ppo.py "$env" --platform gpu --out "$OUT/bench" "$@" \
      2>&1 | grep -v "^Module " | tee -a "$OUT/logs/profile-$env.txt" | tail -12
    ;;
  seedbench)  # seedbench [BASE_DIR]: the seed table's blocking iteration (muscular, simulated opponent, shipped
    # teacher, 2,048 x 16, 4 epochs of 2,048; best and median of SEED_REPEATS), first of this tree, then of
    # BASE_DIR's boxjax/ (an earlier commit unpacked there, named by BASE_COMMIT; this tree's experiments/
    # drive it), one after the other on this card; SEED_ARGS adds bench_block.py arguments to this tree's
    case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
      *H100*) price="H100 (cloud, on-demand)" ;; *) price="H200 (cloud, on-demand)" ;;
    esac
    args=(--platform gpu --iteration-only --teacher shipped --bodies muscular --opponents simulated
      --shapes 2048x16 --repeats "${SEED_REPEATS:-5}" --out "$OUT/bench" --price "$price")
    log "seed bench at ${BOXJAX_COMMIT:-this tree} ${SEED_ARGS:-}"
    timeout "${BLOCK_LIMIT_S:-340}" python3 experiments/bench_block.py "${args[@]}" ${SEED_ARGS:-} 2>&1 \
      | grep -v "^Module " | tee -a "$OUT/logs/seedbench.txt" | tail -6
    if [ -n "${2:-}" ]; then
      log "seed bench at ${BASE_COMMIT:?name the base commit} ($2)"
      rm -rf "$2/experiments" && cp -r experiments "$2"/
      (cd "$2" && BOXJAX_COMMIT=$BASE_COMMIT PYTHONPATH=/tmp/site:$PWD timeout "${BASE_LIMIT_S:-230}" \
        python3 experiments/bench_block.py "${args[@]}" 2>&1 | grep -v "^Module " | tee -a "$OUT/logs/seedbench.txt" | tail -6)
    fi
    ;;
  seedrun)  # seedrun MINUTES: a blocking training run as the seed table's (muscular, simulated opponent, the
    # task's defaults, shipped teacher) from the shipped muscular blocker, seed 0, alone on the card: its mean
    # seconds per iteration inside training (run_report) and its learning figures (learn_report)
    run=seedrun-muscular
    log "seed-table training run, $2 min"
    timeout "${SEEDRUN_LIMIT_S:-400}" python3 experiments/block.py --platform gpu --body muscular --minutes "$2" \
      --iterations 100000 --checkpoint-every 100000 --seed 0 --teacher auto --name $run \
      --init boxjax/data/blockers/block-muscular.msgpack 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt"
    tail -n 3 "$OUT/logs/$run.txt"
    python3 experiments/learn_report.py runs/$run | tee -a "$OUT/logs/session.txt"
    mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/" 2>/dev/null
    ;;
  seedcpu)  # seedcpu MINUTES [COLLECTORS WORLDS]: the seed table's blocking training on this machine's CPUs
    # (MuJoCo C, decoupled collectors and one learner; default 15 x 128 worlds x 16 steps = 30,720 steps per
    # iteration, 4 epochs of 2,048) from the shipped muscular blocker, seed 0
    run=seedcpu-muscular; collectors=${3:-15}; worlds=${4:-128}
    log "seed-table CPU run, $2 min, $collectors collectors x $worlds worlds, $(nproc) cores"
    timeout "${SEEDCPU_LIMIT_S:-330}" python3 experiments/block.py --platform cpu --mode decoupled --body muscular \
      --collectors "$collectors" --worlds "$worlds" --learners 1 --unroll 16 --epochs 4 --minibatch 2048 --minutes "$2" \
      --iterations 100000 --checkpoint-every 100000 --seed 0 --teacher auto --name $run \
      --init boxjax/data/blockers/block-muscular.msgpack 2>&1 > "$OUT/logs/$run.txt"
    tail -n 3 "$OUT/logs/$run.txt"
    python3 experiments/learn_report.py runs/$run | tee -a "$OUT/logs/session.txt"
    mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/" 2>/dev/null
    ;;
  issue41)  # issue41 STEP: what issue 41 still needs of a GPU, one device call per STEP (on one machine, in order):
    # 1 the seed-world default benched on this card (our kernel factoring both fighters), then with our kernel
    # on our fighter alone (--factor fused-large, the default before 2026-12-06; same physics); 2 and 3 the default's 9-minute training runs from the shipped
    # blocker, seeds 0 and 1 (the noise of item 4); 4 the CPU path on this machine's cores, 9 minutes (item
    # 3); 5 the physics-changing named options benched (solver iteration cap 2, the CG solver); 6 two
    # 8-minute training runs side by side on the card (figures per iteration do not depend on timing): the
    # default, seed 1, and FAST_ARGS (default "--env solver_iterations=2"), seed 0, both with RUN_ARGS;
    # PAIR_MINUTES each (default 8, counted from the start); 7 the seed bench with two iterations traced
    # (trace_report's idle gaps in the log; the trace in $OUT/traces); 8 the engines' punch outcomes for one
    # policy not learning (MuJoCo Warp against MuJoCo C); 9 the seed bench with the constraint solver's loop
    # unrolled (--solver-loop unrolled: no CUDA while-node; same physics; two iterations traced), then this
    # tree's default (since 71df9cd: the arm fits' Cholesky written out, the gravity-compensation launch left
    # out); 10 BASE_COMMIT's default unpacked from base-BASE_COMMIT.tgz (`git archive BASE_COMMIT
    # boxjax` here: untracked, it travels), then this tree's default with the shipped blocker acting (as in
    # training from it; the bench's own policy is fresh weights); 11 a 9-minute training run, seed 0, named RUN_NAME (default
    # unrolled), with RUN_ARGS (unset: "--solver-loop unrolled"; e.g. RUN_ARGS= RUN_NAME=fp32
    # JAX_DEFAULT_MATMUL_PRECISION=highest: the networks in full float32, as the CPU path's learner computes
    # them, not TF32); 12 item 4's pair: this tree's default and BASE_COMMIT's, PAIR_MINUTES (15) side by
    # side, through `bgstart`/`bgwait` (two calls); 13 the seed bench after its warm-up fix, the default
    # alone (--hessian-tiles, benched in step 13 on 2026-12-06, was slower and is gone); 15 MuJoCo Warp's
    # launch block sizes swept on the physics step; 16 the seed bench with step 15's best (or BLOCK_ARGS's);
    # 17 the GPU test that block sizes step alike; rows via experiments/seed_table.py --from-run
    case $2 in
      1) bash "$0" seedbench
         SEED_REPEATS=3 SEED_ARGS="--factor fused-large" bash "$0" seedbench ;;
      5) SEED_REPEATS=3 SEED_ARGS="${RUN_ARGS:-} --env solver_iterations=2" bash "$0" seedbench
         SEED_REPEATS=3 SEED_ARGS="${RUN_ARGS:-} --env solver=cg" bash "$0" seedbench ;;
      6) fast=${FAST_ARGS:---env solver_iterations=2}
         log "side-by-side training: default seed 1 and '$fast' seed 0, 8 min, ${RUN_ARGS:-}"
         for spec in "default 1" "fast 0"; do
           set -- $spec; run=seedrun-$1-seed$2; extra=""; [ "$1" = fast ] && extra=$fast
           XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 timeout 570 python3 experiments/block.py --platform gpu --body muscular \
             --minutes ${PAIR_MINUTES:-8} --iterations 100000 --checkpoint-every 100000 --seed $2 --teacher auto --name $run \
             --init boxjax/data/blockers/block-muscular.msgpack ${RUN_ARGS:-} $extra 2>&1 | grep -v "^Module " \
             > "$OUT/logs/$run.txt" &
         done
         wait
         for run in seedrun-default-seed1 seedrun-fast-seed0; do
           tail -n 2 "$OUT/logs/$run.txt"
           python3 experiments/learn_report.py runs/$run --windows 3 | tee -a "$OUT/logs/session.txt"
           mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/"
         done ;;
      2|3) seed=$(( $2 - 2 )); run=seedrun-default-seed$seed
         log "seed-table training run, default world, seed $seed, 9 min"
         timeout 570 python3 experiments/block.py --platform gpu --body muscular --minutes 9 --iterations 100000 \
           --checkpoint-every 100000 --seed $seed --teacher auto --name $run \
           --init boxjax/data/blockers/block-muscular.msgpack 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt"
         python3 experiments/learn_report.py runs/$run --windows 3 | tee -a "$OUT/logs/session.txt"
         mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/" ;;
      4) SEEDCPU_LIMIT_S=570 bash "$0" seedcpu 9 ;;
      8) # the engines on identical terms: the shipped muscular blocker not learning (learning rate pinned at
         # 1e-12), face episodes only (ENGINE_KINDS: other kind_weights), MuJoCo Warp (2,048 x 16) and MuJoCo C (the CPU path, 14 x 128 x 16)
         # side by side, ENGINE_MINUTES each: blocked / missed / hit shares of the same policy's punches
         pinned="--ppo learning_rate=1e-12 --ppo learning_rate_bounds=1e-13,1e-12 --ppo desired_kl=0 --env kind_weights=${ENGINE_KINDS:-1,0,0,0,0}"
         common="--body muscular --minutes ${ENGINE_MINUTES:-4} --iterations 100000 --checkpoint-every 100000 --seed 0 \
           --teacher auto --init boxjax/data/blockers/block-muscular.msgpack $pinned"
         log "engines: shipped blocker not learning, kinds ${ENGINE_KINDS:-1,0,0,0,0}, ${ENGINE_MINUTES:-4} min, GPU and CPU side by side"
         XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 timeout 570 python3 experiments/block.py --platform gpu $common \
           --name engine-warp 2>&1 | grep -v "^Module " > "$OUT/logs/engine-warp.txt" &
         timeout 570 python3 experiments/block.py --platform cpu --mode decoupled --collectors 14 --worlds 128 \
           --learners 1 --unroll 16 --epochs 4 --minibatch 2048 $common --name engine-c > "$OUT/logs/engine-c.txt" 2>&1 &
         wait
         for run in engine-warp engine-c; do
           tail -n 2 "$OUT/logs/$run.txt"
           python3 experiments/learn_report.py runs/$run --windows 2 | tee -a "$OUT/logs/session.txt"
           mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/"
         done ;;
      9) rm -rf /tmp/seedtrace-unrolled
         SEED_REPEATS=3 SEED_ARGS="--solver-loop unrolled --trace /tmp/seedtrace-unrolled" BLOCK_LIMIT_S=330 \
           bash "$0" seedbench
         mkdir -p "$OUT/traces" && find /tmp/seedtrace-unrolled -name perfetto_trace.json.gz \
           -exec cp {} "$OUT/traces/seed-world-unrolled.json.gz" \;
         SEED_REPEATS=3 BLOCK_LIMIT_S=235 bash "$0" seedbench ;;
      10) mkdir -p /tmp/base && tar xzf "base-${BASE_COMMIT:?name the base commit}.tgz" -C /tmp/base
          rm -rf /tmp/base/experiments && cp -r experiments /tmp/base/
          log "seed bench at $BASE_COMMIT (/tmp/base)"
          (cd /tmp/base && BOXJAX_COMMIT=$BASE_COMMIT PYTHONPATH=/tmp/site:/tmp/base SEED_REPEATS=3 \
            BLOCK_LIMIT_S=280 bash "$SCRIPT" seedbench)
          SEED_REPEATS=3 SEED_ARGS="--init boxjax/data/blockers/block-muscular.msgpack" BLOCK_LIMIT_S=250 \
            bash "$0" seedbench ;;
      11) run=seedrun-${RUN_NAME:-unrolled}-seed0; args=${RUN_ARGS---solver-loop unrolled}
          log "seed-table training run, seed 0, 9 min, $args"
          timeout 570 python3 experiments/block.py --platform gpu --body muscular --minutes 9 --iterations 100000 \
            --checkpoint-every 100000 --seed 0 --teacher auto --name $run \
            --init boxjax/data/blockers/block-muscular.msgpack $args 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt"
          python3 experiments/learn_report.py runs/$run --windows 3 | tee -a "$OUT/logs/session.txt"
          mkdir -p "$OUT/$run" && cp runs/$run/metrics.jsonl runs/$run/summary.json "$OUT/$run/" ;;
      12) # item 4's pair: this tree's default and BASE_COMMIT's (its boxjax/ and experiments/ from
          # base-BASE_COMMIT.tgz, `git archive BASE_COMMIT boxjax experiments` here), seed 0, PAIR_MINUTES
          # (default 15) side by side on the card: learning figures per iteration (not the table's seconds).
          # Spans two calls: `bgstart pair issue41 12`, then `bgwait pair`.
          minutes=${PAIR_MINUTES:-15}; mkdir -p /tmp/base && tar xzf "base-${BASE_COMMIT:?name the base commit}.tgz" -C /tmp/base
          log "training pair, seed 0, $minutes min: this tree (${BOXJAX_COMMIT:-}) and $BASE_COMMIT side by side"
          for spec in "after $PWD" "before /tmp/base"; do
            set -- $spec; run=seedpair-$1-seed0
            (cd "$2" && PYTHONPATH=/tmp/site:$2 XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 timeout $((60 * minutes + 300)) \
              python3 experiments/block.py --platform gpu --body muscular --minutes "$minutes" --iterations 100000 \
              --checkpoint-every 100000 --seed 0 --teacher auto --name $run \
              --init boxjax/data/blockers/block-muscular.msgpack 2>&1 | grep -v "^Module " > "$OUT/logs/$run.txt") &
          done
          wait
          for dir in runs/seedpair-after-seed0 /tmp/base/runs/seedpair-before-seed0; do
            python3 experiments/learn_report.py "$dir" --windows 3 | tee -a "$OUT/logs/session.txt"
            mkdir -p "$OUT/${dir##*/}" && cp "$dir/metrics.jsonl" "$dir/summary.json" "$OUT/${dir##*/}/"
          done ;;
      13) # the seed bench after the bench's warm-up fix (two capture-free iterations before the timed ones):
          # this tree's default, 5 timed iterations (on a fresh machine its Warp kernels and JAX program
          # compile first: ~4 min of the limit; a 250 s limit cut it off on 2026-12-06)
          SEED_REPEATS=5 BLOCK_LIMIT_S=480 bash "$0" seedbench ;;
      15) # MuJoCo Warp's launch block sizes (same equations): one physics step of the two-fighter world, 2,048
          # worlds, per setting (profile_physics: no JAX program to compile; on a fresh machine MuJoCo Warp's
          # modules compile one after another first); the best so far kept in /tmp/best-block-args.
          # SWEEP_LIMIT_S (default 540) cuts it short on a small budget (the variants run in this order)
          log "launch block sizes: physics step per setting"
          timeout "${SWEEP_LIMIT_S:-540}" python3 experiments/profile_physics.py --body muscular --worlds 2048 --steps 100 \
            --out "$OUT/bench/physprof-block-dims.jsonl" --best-out /tmp/best-block-args --variants base \
            "block_dim.update_gradient_cholesky_blocked=64" "block_dim.update_gradient_cholesky_blocked=128" \
            "block_dim.linesearch_iterative=64" "block_dim.update_gradient_JTDAJ_sparse=256" 2>&1 \
            | grep -v "^Module " \
            | tee "$OUT/logs/block-dims.txt" | grep "^==\|^best" ;;
      16) # the seed bench with BLOCK_ARGS's launch block sizes (e.g. "--block-dim
          # update_gradient_cholesky_blocked=64"; unset: step 15's best, if one saved 2 % of the step), 5 timed
          # iterations
          args=${BLOCK_ARGS:-$(cat /tmp/best-block-args 2>/dev/null)}
          if [ -z "$args" ]; then log "no block sizes to bench (none given, none saved 2 % in step 15)"; exit 0; fi
          SEED_REPEATS=5 SEED_ARGS="$args" BLOCK_LIMIT_S=480 bash "$0" seedbench ;;
      17) # the GPU check that a block size steps like MuJoCo Warp's own (tests/test_physics.py: five control
          # steps of the simple stance world, to the one-call bounds)
          log "launch block sizes: the GPU equivalence test"
          timeout 400 python3 -m pytest -q -rs tests/test_physics.py -k block_dims 2>&1 | tail -3 \
            | tee -a "$OUT/logs/session.txt" ;;
      7) SEED_REPEATS=2 SEED_ARGS="--trace /tmp/seedtrace" bash "$0" seedbench
         mkdir -p "$OUT/traces" && find /tmp/seedtrace -name perfetto_trace.json.gz -exec cp {} "$OUT/traces/seed-world.json.gz" \; ;;
      *) log "issue41 takes a step 1-13"; exit 2 ;;
    esac
    ;;
  bgstart)  # bgstart NAME PHASE [ARGS]: PHASE in the background, outliving this device call (a 15-minute run
    # spans two calls of at most 10 minutes), its OUT /tmp/bg/NAME; this call then waits BG_WAIT_S (default
    # 570) or until it ends. The next call (< 30 s later, or the machine goes back) runs `bgwait NAME`.
    name=$2; shift 2; mkdir -p "/tmp/bg/$name"
    OUT=/tmp/bg/$name setsid nohup bash "$SCRIPT" "$@" > "/tmp/bg/$name/console.txt" 2>&1 &
    echo $! > "/tmp/bg/$name.pid"
    log "background $name: $*"
    bgwait "$name" "${BG_WAIT_S:-570}"
    ;;
  bgwait)  # bgwait NAME [LIMIT_S]: waits up to LIMIT_S (default 570) for the background phase NAME
    bgwait "$2" "${3:-570}"
    ;;
  bundle)
    bundle "$2"
    ;;
esac
