"""The out-of-distribution flags fitted on the predictor's own answers.

The bar the flags are judged by (issue 5) is about what a caller gets: of the held-out problems whose *answer* is
below 0.90 of the best, how many are flagged, and how many good answers are flagged too. Until the forty-second
session the export fitted the flags on another label, the full model's choice over every candidate
(``tilecost train``'s evaluation), and the predictor, which scores a shortlist, does not always choose it: the
forty-first session's artifact flagged 9.98% of the good choices it was fitted on, and 10.5% of the good answers the
benchmark judges it by (BENCHMARKS §5).

:func:`calibrate_on_answers` refits both sides on the answers an artifact gives: the shape-side thresholds
(:func:`~.ood.calibrate_ood`: range margin, sparse-neighbourhood distance, with the leave-one-out test) and the
model-side rules (:func:`~.ood.fit_flag_rules`, on the signals the predictor computes for each answer), with the
settings the artifact's calibration was fitted with. ``metadata.ood`` then records ``"labels": "answers"``, its
``heldout_top1`` holds the answers' fractions and ``heldout_flagged`` the keys of the answers the refitted artifact
flags, as a caller gets them (since the forty-sixth session: so that a later tilecost that cannot load the artifact,
another feature schema, still judges its flags, :func:`tilecost.train.answer_gate.stored_answers`). Nothing else of
the artifact changes: booster, shortlists, dispatch rules, measured answers, sidecar fields. Training's export runs it
after writing an artifact when it has held-out problems (:func:`tilecost.train.export.export_artifact`);
``scripts/reexport.py --answers-on DATASET`` runs it on an artifact already made.

The fractions come from the caller (training computes them with
:func:`tilecost.train.answer_gate.artifact_answers`, as the answer gate and the benchmark do: best measured time over
the answer's measured time, 0 for a configuration never timed), so this module needs neither pandas nor a dataset.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilecost.problem import Problem

from .artifact import METADATA_FILE, ArtifactMetadata, load_artifact, save_artifact
from .export import PREDICTOR_FILE, calibration_row, model_side_ood
from .ood import OODChecker, calibrate_ood

__all__ = ["ANSWER_LABELS", "FLAGGED_KEY", "calibrate_on_answers", "calibration_settings"]

# metadata.ood["labels"] of an artifact whose flags were fitted on the predictor's answers (absent: the full model's
# choices, as every artifact before the forty-second session).
ANSWER_LABELS = "answers"
# metadata.ood[FLAGGED_KEY]: the held-out problem keys whose answer the artifact flags (absent before the forty-sixth
# session's artifacts).
FLAGGED_KEY = "heldout_flagged"


def calibrate_on_answers(directory: str | Path, fractions: Mapping[str, float]) -> ArtifactMetadata:
    """Refit the artifact in ``directory``'s flags on its answers' ``fractions`` (held-out problem key → best measured
    time over the answer's measured time, in [0, 1]; 0 for an answer never timed) and rewrite it in place; returns
    the new sidecar. Raises ``ValueError`` naming the first bad entry (not a problem key, not a number in [0, 1], a
    problem the artifact was trained on), before anything is written."""
    from .predictor import Predictor

    directory = Path(directory)
    metadata, files = load_artifact(directory)
    problems = _checked(fractions, metadata)
    labels = {p: min(1.0, float(fractions[p.key])) for p in problems}
    ood = metadata.ood
    training = [Problem.from_key(key) for key in metadata.domain.get("problems", ())]
    shape_side = calibrate_ood(problems, [labels[p] for p in problems], training, **calibration_settings(ood))
    shape_side["labels"] = ANSWER_LABELS
    # The model-side rules, on the signals the predictor computes for each answer (its groups with shortlists, as the
    # export fits them), the shape-side flags now being the new ones.
    predictor = Predictor.load(directory, triton_version=metadata.triton_version)
    checker = OODChecker.from_metadata(metadata.domain, shape_side)
    rows = []
    for problem in problems:
        if f"{problem.dtype.value}-{problem.layout.value}" not in predictor._shortlists:
            continue  # a group the artifact has no lists for: the export fits no rule on it either
        group = predictor._group(problem.dtype, problem.layout)
        assert group.shortlist is not None
        rows.append(calibration_row(problem, group.scorer, group.shortlist, group.width, checker))
    if PREDICTOR_FILE in files:  # an artifact without the predictor's precomputation has no model-side rules
        header = json.loads(files[PREDICTOR_FILE])
        if rows:
            header["ood"] = model_side_ood(rows, labels, shape_side)
        else:
            header.pop("ood", None)
        files[PREDICTOR_FILE] = json.dumps(header, indent=1, sort_keys=True).encode()
    updated = dataclasses.replace(metadata, ood=shape_side, files={})
    model = files.pop(metadata.model_file)
    save_artifact(directory, model, updated, files)
    # Which answers the refitted artifact flags, asked as a caller asks (both sides' flags, never from the tuning
    # database), then written beside the fractions; a crash before this write leaves a complete artifact without them.
    # Only the sidecar changes: the files and their checksums are the ones just written, which the load checked.
    refitted = Predictor.load(directory, triton_version=metadata.triton_version)
    flagged = sorted(p.key for p in problems if refitted.predict_best(p, measured=False).ood)
    final = dataclasses.replace(refitted.metadata, ood={**shape_side, FLAGGED_KEY: flagged})
    (directory / METADATA_FILE).write_text(final.to_json())
    return final


def calibration_settings(ood: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`~.ood.calibrate_ood` that ``metadata.ood`` was fitted with (good fraction,
    false-flag budget, neighbours, neighbourhood, the leave-one-out test's p-value), to fit it again alike; the
    function's defaults where the sidecar does not say."""
    settings: dict[str, Any] = {
        "good_fraction": float(ood.get("good_top1_fraction", 0.90)),
        "max_good_flagged": float(ood.get("max_good_flagged", 0.10)),
    }
    for name, kind in (("neighbours", int), ("neighbourhood", str)):
        if name in ood:
            settings[name] = kind(ood[name])
    if "max_p_value" in ood.get("calibration", {}):
        settings["max_p_value"] = float(ood["calibration"]["max_p_value"])
    return settings


def _checked(fractions: Mapping[str, float], metadata: ArtifactMetadata) -> list[Problem]:
    """The held-out problems of ``fractions``, sorted by key, after checking every entry."""
    if not isinstance(fractions, Mapping) or not fractions:
        raise ValueError("fractions: no held-out answer to calibrate on (a mapping of problem key -> fraction)")
    trained = set(metadata.domain.get("problems", ()))
    problems: list[Problem] = []
    for key in sorted(fractions):
        value = fractions[key]
        try:
            problem = Problem.from_key(key)
        except (TypeError, ValueError) as exc:
            example = "'4096x4096x4096-bf16-nt'"
            raise ValueError(f"fractions: {key!r} is not a problem key such as {example} ({exc})") from exc
        if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0.0 <= value <= 1.0 + 1e-9:
            raise ValueError(f"fractions[{key!r}]={value!r}: a fraction is a number in [0, 1] (0: never timed)")
        if key in trained:
            raise ValueError(f"fractions: {key} is one of the artifact's training problems, not a held-out one")
        problems.append(problem)
    return problems
