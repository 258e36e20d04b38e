#!/usr/bin/env bash
# The main job (README) on the shipped default: train the H200 cost model on the real H200 dataset in
# datasets/measurements, log the run to the local MLflow store (sqlite:///mlflow.db, registered model
# tilecost-h200, alias champion), print the evaluation table on the held-out problems, then ask the
# shipped predictor (tilecost/models/h200) about three shapes it never measured (the last far outside the training
# range, flagged) and one it measured (24 x 14336 x 4096: its measured best leads, the model's predictions follow).
# Exporting a new predictor artifact is `tilecost train --export-dir DIR` (without it nothing is exported; 19-28 min more on a 2-core machine up to
# the twentieth session, most of it the shortlists; ~8 min less since the dispatch search is compiled, 547 -> 58 s: docs/BENCHMARKS.md §5).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[train,fast]'
.venv/bin/tilecost train --device-class h200 --no-export "$@"
for shape in "4096 4096 4096" "24 14336 4096" "3000 5000 777" "1 4096 262144"; do
    .venv/bin/tilecost predict $shape --top 3
done
