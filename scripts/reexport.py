"""Re-export an artifact's predictor files (shortlists, dispatch rules, model-side OOD rules) for the same booster.

    .venv/bin/python scripts/reexport.py [--recalibrate | --recalibrate-on DATASET] SOURCE_ARTIFACT TARGET_DIR
        [SETTINGS_JSON]   (~25 min on this 2-core machine)
    .venv/bin/python scripts/reexport.py --answers-on DATASET SOURCE_ARTIFACT TARGET_DIR   (~1 min)

``SETTINGS_JSON``: keyword arguments of :func:`~tilecost.predict.prepare_artifact_files` (e.g. ``'{"samples": 400}'``);
the defaults, which ``tilecost train --export-dir`` uses, without it.

Keeps the booster, the sidecar's fields (device, Triton, domain, training record, the shape-side OOD calibration
and each held-out problem's top-1), ``measured.json`` and other device classes' ``measured-<class>.json`` exactly;
recomputes what :func:`tilecost.predict.prepare_artifact_files` writes with today's code, scoring with the booster's
``inplace_predict`` as ``tilecost train --export-dir`` does. For a change of the predictor's precomputation
(the twenty-fifth session's stride-ragged lists) without a retrained model.

``--recalibrate``: the shape-side OOD calibration is fitted again (:func:`~tilecost.predict.calibrate_ood`, today's
code, on the stored held-out top-1 fractions and training domain) instead of kept, and the model-side rules on it:
for a change of the calibration (the twenty-seventh session's significance test) without a retrained model.

``--recalibrate-on DATASET``: the same, on the held-out problems DATASET (``datasets/measurements``) holds now rather
than the stored fractions: the artifact's own model scores every candidate of each, as ``tilecost train`` evaluates a
new model, and the fractions, the calibration and the model-side rules are fitted on them (the fortieth session: the
pattern neighbourhood, fitted on the 575 held-out problems measured by then, where the shipped artifact stored 475).
Every held-out problem must lie outside the artifact's training domain. Since the forty-second session the flags are
then fitted again on the re-exported predictor's own answers to those problems, as ``tilecost train --export-dir``
fits them (:mod:`tilecost.predict.answer_calibration`).

``--answers-on DATASET``: nothing is recomputed but the flags: SOURCE is copied to TARGET_DIR as it is and its
out-of-distribution flags (shape side and model side) are fitted on the answers its predictor gives the held-out
problems of DATASET (:func:`~tilecost.predict.answer_calibration.calibrate_on_answers`): for an artifact whose flags
were fitted on the full model's choices. An artifact whose flags were fitted on answers (``metadata.ood.labels``) is
refused by ``--recalibrate``, whose stored fractions would then be the answers of lists a re-export rebuilds; a plain
re-export keeps its flags and their labels as they are, and exits with an error naming the ``--answers-on`` step when
the lists it rebuilt differ from the source's (the flags were fitted on the old lists' answers).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import xgboost as xgb

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tilecost.predict.answer_calibration import ANSWER_LABELS, calibration_settings  # noqa: E402
from tilecost.predict.artifact import ArtifactMetadata, device_measured_files, load_artifact  # noqa: E402
from tilecost.predict.export import PREDICTOR_FILE  # noqa: E402
from tilecost.predict.ood import calibrate_ood  # noqa: E402
from tilecost.problem import Problem  # noqa: E402
from tilecost.train.export import MEASURED_FILE, SHORTLISTS_FILE, export_artifact, main_trees_scorer  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--answers-on"]:
        if len(args) != 4 or args[2].startswith("--"):
            raise SystemExit(__doc__)
        return answers_on(Path(args[2]), Path(args[3]), args[1])
    recalibrate = args[:1] == ["--recalibrate"]
    dataset = args[1] if args[:1] == ["--recalibrate-on"] and len(args) > 1 else None
    args = args[1:] if recalibrate else args[2:] if dataset is not None else args
    if len(args) not in (2, 3) or args[0].startswith("--"):
        raise SystemExit(__doc__)
    source, target = Path(args[0]), Path(args[1])
    settings = json.loads(args[2]) if len(args) == 3 else None
    metadata, files = load_artifact(source)
    model = files[metadata.model_file]
    scorer = main_trees_scorer(xgb.Booster(model_file=bytearray(model)), metadata.level_trees)
    measured = json.loads(files[MEASURED_FILE])
    ood = metadata.ood
    heldout = None
    if recalibrate:
        ood = recalibrated(metadata)
    elif dataset is not None:
        heldout = heldout_rows(metadata, dataset, "--recalibrate-on")
        ood = recalibrated_on(source, metadata, heldout)
    fresh = dataclasses.replace(metadata, files={}, ood=ood)
    path, written = export_artifact(
        target, model, fresh, measured, scorer=scorer, settings=settings, heldout=heldout,
        device_tables=device_measured_files(files),
    )  # fmt: skip
    print(f"re-exported {source} into {path}: {', '.join(written)}")
    if not recalibrate and dataset is None and ood.get("labels") == ANSWER_LABELS and not same_lists(files, path):
        raise SystemExit(
            f"{path}: re-exported, but its flags (metadata.ood: heldout_top1, heldout_flagged, the calibration) were "
            f"fitted on the answers of {source}'s lists, and the lists rebuilt here differ; fit them on the new "
            f"lists' answers: scripts/reexport.py --answers-on DATASET {path} NEW_DIRECTORY"
        )
    return path


def same_lists(before: Mapping[str, bytes], target: Path) -> bool:
    """Whether the artifact at ``target`` holds the shortlists and list settings of the artifact files ``before``:
    then its predictor gives the same answers, and flags fitted on those answers still hold."""
    import io

    import numpy as np

    after = load_artifact(target)[1]
    if SHORTLISTS_FILE not in before or SHORTLISTS_FILE not in after:
        return SHORTLISTS_FILE not in before and SHORTLISTS_FILE not in after
    groups = [json.loads(files[PREDICTOR_FILE])["groups"] for files in (before, after)]
    if groups[0] != groups[1]:
        return False
    with (
        np.load(io.BytesIO(before[SHORTLISTS_FILE]), allow_pickle=False) as old,
        np.load(io.BytesIO(after[SHORTLISTS_FILE]), allow_pickle=False) as new,
    ):
        return set(old.files) == set(new.files) and all(np.array_equal(old[k], new[k]) for k in old.files)


def answers_on(source: Path, target: Path, dataset: str) -> Path:
    """``--answers-on``: SOURCE copied to ``target`` unchanged, then its flags fitted on its answers to DATASET's
    held-out problems."""
    import shutil

    from tilecost.predict.answer_calibration import calibrate_on_answers
    from tilecost.train.answer_gate import artifact_answers

    metadata, _ = load_artifact(source)  # checks the source before anything is written
    heldout = heldout_rows(metadata, dataset, "--answers-on")
    if target.exists():
        raise SystemExit(f"--answers-on: {target} exists; name a new directory")
    shutil.copytree(source, target)
    after = calibrate_on_answers(target, artifact_answers(target, heldout).fractions)
    stats = after.ood["calibration"]
    print(f"flags of {source} fitted on its answers to {stats['heldout_problems']} held-out problems into {target}: "
          f"{stats['bad_caught']} of {stats['bad_problems']} bad answers caught, "
          f"{stats['good_flagged_rate']:.2%} of the good ones flagged (adopted: {stats['adopted']})")  # fmt: skip
    return target


def recalibrated(metadata: ArtifactMetadata) -> dict[str, object]:
    """``metadata.ood`` fitted again from its own held-out fractions on its training domain, with the settings it was
    fitted with (:func:`~tilecost.predict.answer_calibration.calibration_settings`: good fraction, false-flag budget,
    neighbours, neighbourhood and the leave-one-out test's p-value; until the forty-eighth session the last two were
    left at today's defaults)."""
    ood = metadata.ood
    if not ood.get("heldout_top1"):
        raise SystemExit("--recalibrate: the artifact stores no held-out top-1 fractions (metadata.ood.heldout_top1)")
    if ood.get("labels") == ANSWER_LABELS:
        raise SystemExit(
            "--recalibrate: the stored held-out fractions are the answers of the lists a re-export rebuilds "
            "(metadata.ood.labels); fit the flags on the new lists' answers with --recalibrate-on DATASET"
        )
    heldout = {Problem.from_key(key): float(value) for key, value in ood["heldout_top1"].items()}
    training = [Problem.from_key(key) for key in metadata.domain["problems"]]
    return calibrate_ood(list(heldout), list(heldout.values()), training, **calibration_settings(ood))


def heldout_rows(metadata: ArtifactMetadata, dataset: str, option: str) -> pd.DataFrame:
    """The timed rows of DATASET's held-out problems of the artifact's device class, none of them a problem the
    artifact was trained on."""
    from tilecost.train.dataset import load_measurements
    from tilecost.train.loading import heldout_trained_on
    from tilecost.train.pipeline import split_by_role

    _, heldout = split_by_role(load_measurements(dataset, metadata.device_class))
    if heldout.empty:
        raise SystemExit(f"{option} {dataset}: the dataset holds no held-out problem of {metadata.device_class}")
    seen = heldout_trained_on(metadata, heldout)
    if seen:
        raise SystemExit(f"{option} {dataset}: the artifact was trained on held-out problem(s) {seen[:5]}")
    return heldout


def recalibrated_on(source: Path, metadata: ArtifactMetadata, heldout: pd.DataFrame) -> dict[str, object]:
    """``metadata.ood`` fitted on the held-out problems of ``heldout``, each scored over every candidate by the
    artifact's own model (:func:`tilecost.train.export.ood_calibration`, as a fresh export fits it before the
    flags are fitted on its answers), on its training domain."""
    from tilecost.device import load_device
    from tilecost.train.export import ood_calibration
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.pipeline import evaluate_model

    evaluation = evaluate_model(load_artifact_model(source)[0], heldout, load_device(metadata.device_class))
    return ood_calibration(evaluation, [Problem.from_key(key) for key in metadata.domain["problems"]])


if __name__ == "__main__":
    main()
