#!/usr/bin/env bash
# The main job (README) on the shipped default: train the H200 cost model on the real H200 dataset in
# datasets/measurements, log the run to the local MLflow store (sqlite:///mlflow.db), print the evaluation
# table on held-out problems, export the predictor artifact, then ask the predictor about unseen shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[train]'
.venv/bin/tilecost train --device-class h200 --export "${TILECOST_EXPORT:-build/model-h200}" "$@"
.venv/bin/tilecost predict 4096 4096 4096 --model "${TILECOST_EXPORT:-build/model-h200}"
.venv/bin/tilecost predict 24 14336 4096 --model "${TILECOST_EXPORT:-build/model-h200}"
.venv/bin/tilecost predict 1 4096 262144 --model "${TILECOST_EXPORT:-build/model-h200}"
