#!/usr/bin/env bash
# One device call of a collection session on the H200 (run from the repo root on the device machine):
#   bash benchmarks/h200_round.sh STEP...   with STEP in: tests seed autotune fidelity scaling collect nightly
# Steps run in the order given (`tests` keeps pytest's whole output in $OUT/gpu_tests.log); `collect` (and `nightly`) get the time left until TOTAL_S (default 570 s
# after the start). Results land in $OUT: run.log, the benchmarks' JSON, and measurements.tgz (the dataset's
# files that the checkout lacks, as datasets/measurements/..., to be unpacked into the checkout). TRITON_CACHE_DIR is a folder of the checkout
# that git ignores, so a warm machine keeps compiled kernels from one call to the next. RUN_ID, if set, is
# passed to `collect` (to resume a plan under the run id it started with after the settings changed).
# GPU, if set, is the one GPU this call uses (CUDA_VISIBLE_DEVICES): on a two-GPU machine two calls of this
# script, each with its own GPU and OUT, run side by side. WORKERS (default 15) compile processes.
# CONFIGS (default 96) is the number of candidates per problem of the `scaling` step's plan.
# ARGS, if set, replaces `--plan $PLAN` of `collect` (e.g. built-in families: ARGS="--family layers=70 --dtypes bf16").
# DATASET (default .devdata/measurements, ignored by git) is where this call writes: it starts as a copy of the
# checkout's datasets/measurements and persists on a warm machine, so the next call skips what this one measured
# even before its archive is unpacked here.
# `nightly` is the GPU half of docs/NIGHTLY.md's real night (plan, sentinels, collect; NIGHT, default today):
# its state lands in $OUT/nightly.tgz; training, export and the report run on a machine with xgboost. The state
# directory `nightly/` is ignored by git, so the device tool must carry it (`carry: ["nightly"]`), or the night
# finds no sentinel reference and becomes one (the eleventh session's night compared nothing on the device).
set -uo pipefail
OUT=${OUT:-/tmp/tilecost-out}
mkdir -p "$OUT"
START=$(date +%s)
TOTAL_S=${TOTAL_S:-570}
PLAN=${PLAN:-datasets/plans/2026-11-29-four-combos.json}
WORKERS=${WORKERS:-15}
SAMPLE=${SAMPLE:-0.25}
NIGHT=${NIGHT:-$(date -u +%Y-%m-%d)}
DATASET=${DATASET:-.devdata/measurements}
[ -n "${GPU:-}" ] && export CUDA_VISIBLE_DEVICES=$GPU
LOG="$OUT/run.log"
# A slimmed tree (scripts/device_tree.sh) left these runs' files behind: resuming one would time its measured
# problems again (the sixtieth session's call 6 re-timed ten), so refuse before installing anything.
if [ -n "${RUN_ID:-}" ] && [ -f .device-slim ] && grep -qxF "$RUN_ID" .device-slim; then
    echo "refused: run $RUN_ID's files were left out of this tree by scripts/device_tree.sh slim (.device-slim);" \
        "slim again with SLIM_KEEP_RUNS naming it" | tee -a "$LOG"
    exit 5
fi
left() { echo $((TOTAL_S - ($(date +%s) - START))); }
say() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }

# Two lanes start side by side: one installs (under a lock), and only when this checkout is not installed yet.
# A reinstall rewrites the `tilecost` script while the other lane's sweep spawns processes, which re-run the
# parent's main script (multiprocessing's spawn): in the eleventh session's call 2 three of them died on the
# missing script and that lane's collect hung until its hard timeout.
installed() {
    command -v tilecost >/dev/null && python3 -c "import os, sys, tilecost
sys.exit(not os.path.realpath(tilecost.__file__).startswith(os.path.realpath('.') + os.sep))" 2>/dev/null
}
install() { installed || python3 -m pip install -q --no-deps --no-build-isolation -e .; }
if command -v flock >/dev/null; then
    ( flock 9; install ) 9>/tmp/tilecost-install.lock >>"$LOG" 2>&1
else
    install >>"$LOG" 2>&1
fi || { tail -20 "$LOG"; exit 1; }
export TRITON_CACHE_DIR=$PWD/.triton-cache PYTHONUNBUFFERED=1
mkdir -p "$TRITON_CACHE_DIR" "$DATASET"
# Coreutils 9.5 and later warn that `cp -n` is non-portable; `--update=none` (9.3 and later) says the same without the
# warning, and older ones (the 2-core development machine has 9.1) fall back to `-n`.
cp -r --update=none datasets/measurements/. "$DATASET"/ 2>/dev/null || cp -rn datasets/measurements/. "$DATASET"/
say "installed; $(nvidia-smi --query-gpu=name,driver_version,temperature.gpu,power.draw --format=csv,noheader)"

for step in "$@"; do
    case $step in
    tests)
        say "gpu tests"
        TILECOST_DEVICE=cuda timeout 300 python3 -m pytest -m gpu tests -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -8 | tee -a "$LOG" ;;
    seed)
        say "seed-figure problems (BLOCK_K=64, every candidate)"
        timeout 200 tilecost collect --plan datasets/plans/seed_figure.json --dataset "$DATASET" \
            --sample-fraction 1.0 --workers "$WORKERS" 2>&1 | tail -4 | tee -a "$LOG" ;;
    autotune)
        say "autotune: model-pruned top-5 against the full autotune"
        timeout 200 python3 benchmarks/autotune_h200.py --out "$OUT/autotune.json" 2>&1 | tail -5 | tee -a "$LOG" ;;
    fidelity)
        say "collector throughput and fidelity (private cold Triton cache)"
        env -u TRITON_CACHE_DIR timeout 450 python3 benchmarks/collector_fidelity.py --configs 32 \
            --fidelity-problems 5 --workers "$WORKERS" --out "$OUT/fidelity.json" >"$OUT/fidelity.log" 2>&1
        tail -12 "$OUT/fidelity.log" | tee -a "$LOG" ;;
    scaling)
        say "per-GPU scaling: four collect runs of the reference plan, one GPU and all (every GPU of the host)"
        timeout $(( $(left) - 30 )) python3 benchmarks/gpu_scaling.py --configs "${CONFIGS:-96}" --workers "$WORKERS" --out "$OUT/scaling.json" \
            >"$OUT/scaling.log" 2>&1
        say "scaling exit $?"; tail -5 "$OUT/scaling.log" | cut -c1-400 | tee -a "$LOG" ;;
    collect)
        budget=$(( $(left) - 90 ))
        say "collect ${ARGS:-$PLAN}, time budget ${budget}s"
        if [ "$budget" -gt 30 ]; then
            # shellcheck disable=SC2086  # ARGS is a list of words
            timeout $((budget + 75)) tilecost collect ${ARGS:---plan $PLAN} --dataset "$DATASET" \
                --sample-fraction "$SAMPLE" --workers "$WORKERS" --time-budget-s "$budget" ${RUN_ID:+--run-id "$RUN_ID"} \
                >"$OUT/collect.log" 2>&1
            say "collect exit $?"; tail -3 "$OUT/collect.log" | tee -a "$LOG"
        fi ;;
    nightly)
        budget=$(( $(left) - 90 ))
        say "nightly $NIGHT (plan, sentinels, collect), time budget ${budget}s"
        ls nightly/sentinels/reference-*.json >/dev/null 2>&1 \
            || say "no sentinel reference in nightly/ (carried?): this night becomes the reference"
        timeout $((budget + 75)) tilecost nightly --device-class h200 --night "$NIGHT" --steps plan,sentinels,collect \
            --dataset "$DATASET" --state-dir nightly --no-env-shard \
            --query-log datasets/plans/2026-11-29-flagged-queries.jsonl --max-flagged 2 \
            --family random=1 --family decode=1 --sentinels 3 --sentinel-configs 16 --workers "$WORKERS" \
            --time-budget-s "$budget" >"$OUT/nightly.log" 2>&1
        say "nightly exit $?"; tail -12 "$OUT/nightly.log" | tee -a "$LOG"
        tar czf "$OUT/nightly.tgz" nightly ;;
    *) say "unknown step $step" ;;
    esac
done
# Only the files this checkout lacks (the twelfth session's whole dataset outgrew what the device tool returns):
# their paths relative to the dataset, listed outside $OUT (the tool drops names containing '=').
NEW=$(mktemp)
( cd "$DATASET" && find . -name '*.parquet' | while read -r f; do
    [ -e "$OLDPWD/datasets/measurements/$f" ] || echo "$f"; done ) >"$NEW"
tar czf "$OUT/measurements.tgz" --transform "s,^\./,datasets/measurements/," -C "$DATASET" -T "$NEW"
say "done; $(wc -l <"$NEW") new files in measurements.tgz"
