#!/usr/bin/env bash
# Eleventh session, on the H200: reproduce call 2's hang. In that call one lane's `pip install -e .` rewrote the
# `tilecost` script while the other lane's collect spawned its compile and measuring processes (multiprocessing's
# spawn re-runs the parent's main script in each child); three children died on the missing script and the
# collect printed nothing more until its hard timeout 9 minutes later. Here a collect runs from a copy of the
# script that vanishes for 3 s, DELAY seconds after the start; if it is still running 60 s later (its budget is
# 20 s) every thread's stack is dumped (SIGUSR1: tilecost.cli) and it is killed.
#   CUDA_VISIBLE_DEVICES=1 OUT=... bash scripts/spawn_race_repro.sh
set -u
OUT=${OUT:-/tmp/tilecost-out}/hang
mkdir -p "$OUT"
export TRITON_CACHE_DIR=$PWD/.triton-cache
for delay in ${DELAYS:-0.3 0.8 1.5}; do
    cp "$(command -v tilecost)" /tmp/tc.py
    rm -rf /tmp/hang-ds
    python3 /tmp/tc.py collect --family random=3 --dtypes fp32 --layouts nt --dataset /tmp/hang-ds \
        --sample-fraction 0.05 --min-sample 16 --workers 15 --time-budget-s 20 --run-id "rhang$delay" \
        >"$OUT/collect-$delay.log" 2>&1 &
    pid=$!
    sleep "$delay"; mv /tmp/tc.py /tmp/tc.bak; sleep 3; mv /tmp/tc.bak /tmp/tc.py
    for _ in $(seq 60); do sleep 1; kill -0 $pid 2>/dev/null || break; done
    if kill -0 $pid 2>/dev/null; then
        echo "delay $delay: still running 60 s after the start (budget 20 s)" | tee -a "$OUT/summary.txt"
        kill -USR1 $pid; sleep 2
        ps -o pid,ppid,stat,etime,cmd --ppid $pid >"$OUT/children-$delay.txt" 2>&1
        pkill -9 -P $pid; kill -9 $pid
    else
        wait $pid; echo "delay $delay: exit $?" | tee -a "$OUT/summary.txt"
    fi
    echo "  children that died on the missing script: $(grep -c FileNotFoundError "$OUT/collect-$delay.log")" | tee -a "$OUT/summary.txt"
    tail -2 "$OUT/collect-$delay.log" | cut -c1-300 | sed 's/^/  /' | tee -a "$OUT/summary.txt"
done
