#!/usr/bin/env bash
# The main job (README) on the shipped default: train the H200 cost model on the real H200 dataset in
# datasets/measurements, log the run to the local MLflow store (sqlite:///mlflow.db), print the evaluation
# table on held-out problems, export the predictor artifact to build/model-h200 (the shipped model in
# tilecost/models/h200 is left as it is), then ask that predictor about shapes it never measured.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[train]'
EXPORT=${TILECOST_EXPORT:-build/model-h200}
.venv/bin/tilecost train --device-class h200 --export-dir "$EXPORT" "$@"
for shape in "4096 4096 4096" "24 14336 4096" "3000 5000 777" "1 4096 262144"; do
    .venv/bin/tilecost predict $shape --artifact "$EXPORT" --top 3
done
