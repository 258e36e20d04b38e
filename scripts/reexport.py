"""Re-export an artifact's predictor files (shortlists, dispatch rules, model-side OOD rules) for the same booster.

    .venv/bin/python scripts/reexport.py SOURCE_ARTIFACT TARGET_DIR [SETTINGS_JSON]     (~25 min on this 2-core machine)

``SETTINGS_JSON``: keyword arguments of :func:`~tilecost.predict.prepare_artifact_files` (e.g. ``'{"samples": 400}'``);
the defaults, which ``tilecost train --export-dir`` uses, without it.

Keeps the booster, the sidecar's fields (device, Triton, domain, training record, the shape-side OOD calibration
and each held-out problem's top-1) and ``measured.json`` exactly; recomputes what
:func:`tilecost.predict.prepare_artifact_files` writes with today's code, scoring with the booster's
``inplace_predict`` as ``tilecost train --export-dir`` does. For a change of the predictor's precomputation
(the twenty-fifth session's stride-ragged lists) without a retrained model.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import xgboost as xgb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tilecost.predict.artifact import load_artifact  # noqa: E402
from tilecost.train.export import MEASURED_FILE, export_artifact, main_trees_scorer  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        raise SystemExit(__doc__)
    source, target = Path(args[0]), Path(args[1])
    settings = json.loads(args[2]) if len(args) == 3 else None
    metadata, files = load_artifact(source)
    model = files[metadata.model_file]
    scorer = main_trees_scorer(xgb.Booster(model_file=bytearray(model)), metadata.level_trees)
    measured = json.loads(files[MEASURED_FILE])
    fresh = dataclasses.replace(metadata, files={})
    path, written = export_artifact(target, model, fresh, measured, scorer=scorer, settings=settings)
    print(f"re-exported {source} into {path}: {', '.join(written)}")
    return path


if __name__ == "__main__":
    main()
