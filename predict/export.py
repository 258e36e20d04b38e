"""What the predictor precomputes when training exports an artifact.

Training calls :func:`prepare_artifact_files` with the booster's JSON and the sidecar it is about to
write, and passes the returned files to ``save_artifact(..., extra_files=...)``, which checksums each
in ``metadata.files``. Two files come back:

``predictor.json``
    ``{"format": 2, "groups": {"bf16-nt": {"space_size", "space_sha256", "grid": GridSpec,
    "validation": {...}, "dispatch": DispatchRule}}, "ood": {"rules": [...], "calibration": {...}}}``:
    per (dtype, layout) of the training domain, the candidate space the shortlists index (refused at
    load if ``tilecost.space`` now builds another), the shortlist grid, how often the lists held the
    full model's best on shapes they were not built from (``validation``: shapes, ``containment``
    per prefix width, ``default_width``: the width the predictor scores by default), and the run-time
    dispatch rule of :mod:`tilecost.predict.dispatch`; then the model-side out-of-distribution rules
    of :mod:`tilecost.predict.ood`, fitted on the held-out problems whose fractions ``metadata.ood``
    carries (none without them); training then fits both sides of the flags again on the written predictor's own
    answers (:mod:`tilecost.predict.answer_calibration`).
``shortlists.npz``
    per group, ``<group>.table`` and ``<group>.lists`` of :class:`~.shortlist.ShortlistTable`
    (plain integer arrays; read with ``allow_pickle=False``).

Cost: the lists rank every candidate of ``samples`` sample shapes with the model's first
``prescore_trees`` trees and the best ``prescore_keep`` of each with the full model (and every
candidate of ``validation`` more with the full model), 450-1,100 feasible rows a shape on the H200
bf16 space. Pass
``scorer=booster.inplace_predict``: 2-4 µs a row for 300 trees of depth 8 in large batches, where
the numpy evaluator takes ~7 µs; with ``metadata.level_trees`` it must score the main trees only
(``booster.inplace_predict(x, iteration_range=(0, main trees))``: the level trees are added once per problem,
as the predictor does). It is checked against the numpy evaluation of ``model`` first,
and called from ``workers`` threads at once (default: one per CPU; XGBoost predicts thread-safely
and releases the GIL). With the defaults an export takes ~9-10 minutes on this 2-core machine. Tests
should pass ``samples=64, validation=16`` or so.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tilecost.device import load_device
from tilecost.errors import ArtifactError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION, feature_matrix
from tilecost.problem import Problem

from .artifact import ArtifactMetadata
from .dispatch import fit_dispatch
from .ood import OODChecker, answer_signals, fit_flag_rules
from .scoring import GroupScorer, Scorer
from .shortlist import (
    STRIDE_SHARE,
    GridSpec,
    ShortlistTable,
    build_shortlists,
    containment,
    sample_shapes,
    space_digest,
    stride_ragged,
    stride_ragged_samples,
    stride_steps,
)
from .trees import TreeEnsemble

__all__ = ["PREDICTOR_FILE", "PREDICTOR_FORMAT", "SHORTLISTS_FILE", "VALIDATION_WIDTHS", "prepare_artifact_files"]

PREDICTOR_FILE = "predictor.json"
SHORTLISTS_FILE = "shortlists.npz"
PREDICTOR_FORMAT = 2
# Prefix widths whose containment the export measures.
VALIDATION_WIDTHS = (4, 8, 12, 16, 24, 32, 48, 64)
_MIN_GROUP_SAMPLES = 4_000
_MIN_GROUP_VALIDATION = 500


def prepare_artifact_files(
    model: bytes,
    metadata: ArtifactMetadata,
    *,
    scorer: Scorer | None = None,
    step_log2: float = 1.0,
    margin_log2: float = 0.5,
    samples: int = 384_000,
    top_n: int = 8,
    list_width: int = 64,
    default_width: int = 8,
    validation: int = 2_000,
    seed: int = 0,
    workers: int | None = None,
    prescore_trees: int = 150,
    prescore_keep: int = 64,
    stride_share: float = STRIDE_SHARE,
) -> dict[str, bytes]:
    """Files the predictor needs besides the booster, by name, for ``save_artifact``'s ``extra_files``.

    A deterministic function of its arguments (seeded sampling, no dataset access). The shortlists
    cover each (dtype, layout) of ``metadata.domain``'s training problems (``training_domain``) over
    their log2 range plus ``margin_log2`` octaves; see :mod:`tilecost.predict.shortlist` for
    ``step_log2``, ``top_n`` and ``list_width``. ``samples`` and ``validation`` are totals over the
    groups, split in proportion to their training problems (at least 4,000 and 500 a group), so that
    the export's time stays about the same as dtypes and layouts are added, while each group's lists
    get fewer samples: on the first H200 model (one group), 24,000 samples instead of 48,000 lowered
    containment at width 16 from 0.80 to 0.73. A group with few training problems has most of its
    shapes flagged out of distribution anyway.
    ``default_width`` is how many members of a list the predictor scores unless told otherwise (8 since
    the twelfth session: with trees of depth 10, 22 members took new-shape p50 136 µs on this 2-core
    machine, 8 members 74 µs, for a measured held-out top-1 of 0.951 against 0.952 (geometric mean;
    BENCHMARKS §5); until then 22, chosen on the 61-held-out model for p50 87-89 µs and 83.3% agreement);
    ``validation`` shapes, drawn apart from the samples, measure how often a list holds the full
    model's best (ranking every candidate). The samples' rankings are the full model's among the
    ``prescore_keep`` best candidates of the model's first ``prescore_trees`` trees
    (:meth:`GroupScorer.top_configs`; 0: every candidate), which costs half as much: on the
    61-held-out H200 model (300 trees), the first 150 trees' best 64 gave the full model's best for
    597 of 600 sample shapes and 98.9% of their top 8, so a sample costs half of what ranking every
    candidate did. More samples buy agreement: doubling them from 8,000 to 16,000 for bf16/nt had raised
    how often a list held the full model's best at ~17 rows scored from 68% to 76% of random shapes, and
    96,000 → 384,000 (the default since the fourth session; ~500 s of the export instead of ~130 s)
    raised agreement with scoring every candidate at the default width from 48 to 53 of 61 held-out
    problems and from 82% to 87% of random shapes (docs/BENCHMARKS.md §5). ``stride_share`` of each group's
    samples are added from the stride-ragged class (:func:`~.shortlist.stride_ragged_samples`; none in a group
    without it, fp8 nn), whose 8 variants of the table's 16 get lists of their own; that share of validation shapes
    of the class measure those lists' containment (``validation.stride_ragged``). Raises ``ArtifactError``
    when the model does not evaluate (unsupported booster,
    feature list or schema not this tilecost's).
    """
    if tuple(metadata.feature_names) != FEATURE_NAMES or metadata.feature_schema_version != FEATURE_SCHEMA_VERSION:
        raise ArtifactError("metadata's feature list or feature schema version is not this tilecost's")
    ensemble = TreeEnsemble.from_model(model, FEATURE_NAMES)
    device = load_device(metadata.device_class)
    domain = OODChecker.from_metadata(metadata.domain, metadata.ood)
    groups: dict[str, list[Problem]] = {}
    for key in metadata.domain.get("problems", ()):
        problem = Problem.from_key(key)
        groups.setdefault(f"{problem.dtype.value}-{problem.layout.value}", []).append(problem)
    if not groups:
        raise ArtifactError("metadata.domain lists no training problems; build it with training_domain()")
    level = None
    if 0 < metadata.level_trees < ensemble.num_trees:
        # As the predictor does: rank with the main trees and add the level trees once per problem (they
        # read only its columns), so a sample's candidates walk the 300 main trees each, not all 500.
        level = ensemble.last_trees(metadata.level_trees).predict
        ensemble = ensemble.first_trees(ensemble.num_trees - metadata.level_trees)
    score = ensemble.predict if scorer is None else _checked(scorer, ensemble, device, groups)
    coarse = ensemble.first_trees(prescore_trees).predict if 0 < prescore_trees < ensemble.num_trees else None
    heldout = {Problem.from_key(k): float(f) for k, f in metadata.ood.get("heldout_top1", {}).items()}
    described: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    calibration: list[tuple[Problem, dict[str, float], bool]] = []  # (problem, signals, already flagged)
    total_problems = sum(len(problems) for problems in groups.values())
    for name, problems in sorted(groups.items()):
        first = problems[0]
        share = len(problems) / total_problems  # samples follow the training problems
        group_samples = max(round(samples * share), min(samples, _MIN_GROUP_SAMPLES))
        group_validation = max(round(validation * share), min(validation, _MIN_GROUP_VALIDATION))
        group = GroupScorer.build(device, first.dtype, first.layout, metadata.target, score, level=level)
        spec = GridSpec.covering(
            domain.log2_min[name].tolist(), domain.log2_max[name].tolist(), step_log2=step_log2,
            margin_log2=margin_log2, top_n=top_n, samples=group_samples, list_width=list_width, seed=seed,
        )  # fmt: skip
        points = np.log2(np.array([[p.m, p.n, p.k] for p in problems], dtype=np.float64))
        steps = stride_steps(first.dtype, first.layout)
        shapes = np.concatenate([
            sample_shapes(spec, points, group_samples, seed),
            stride_ragged_samples(spec, points, round(group_samples * stride_share), seed, steps),
        ])  # fmt: skip
        sampled = _problems(shapes, first)
        tops = group.top_configs(sampled, top_n, workers=workers, prescore=coarse, keep=max(prescore_keep, top_n))
        strided = np.array([stride_ragged(p) for p in sampled], dtype=bool)
        table = build_shortlists(spec, shapes, tops, strided)
        widths = [w for w in VALIDATION_WIDTHS if w <= list_width]
        checks = sample_shapes(spec, points, group_validation, seed + 1)
        best = group.top_configs(_problems(checks, first), 1, workers=workers)[:, 0]
        checked: dict[str, Any] = {
            "shapes": len(checks), "default_width": min(default_width, list_width),
            "containment": {str(w): round(c, 4) for w, c in containment(table, checks, best, widths, first).items()},
        }  # fmt: skip
        stride_checks = stride_ragged_samples(spec, points, round(group_validation * stride_share), seed + 1, steps)
        if len(stride_checks):
            stride_best = group.top_configs(_problems(stride_checks, first), 1, workers=workers)[:, 0]
            contained = containment(table, stride_checks, stride_best, widths, first)
            checked["stride_ragged"] = {
                "samples": int(strided.sum()), "shapes": len(stride_checks),
                "containment": {str(w): round(c, 4) for w, c in contained.items()},
            }  # fmt: skip
        rule = fit_dispatch(group, problems)
        described[name] = {
            "space_size": len(group.space),
            "space_sha256": space_digest(group.space),
            "grid": spec.to_dict(),
            "validation": checked,
            "dispatch": rule.to_dict(),
        }  # fmt: skip
        arrays[f"{name}.table"], arrays[f"{name}.lists"] = table.table, table.lists
        for problem in heldout:
            if (problem.dtype, problem.layout) == (first.dtype, first.layout):
                calibration.append(calibration_row(problem, group, table, min(default_width, list_width), domain))
    header: dict[str, Any] = {"format": PREDICTOR_FORMAT, "groups": described}
    if calibration:
        header["ood"] = model_side_ood(calibration, heldout, metadata.ood)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub types the kwargs as allow_pickle
    return {PREDICTOR_FILE: json.dumps(header, indent=1, sort_keys=True).encode(), SHORTLISTS_FILE: buffer.getvalue()}


def model_side_ood(
    calibration: Sequence[tuple[Problem, Mapping[str, float], bool]], fractions: Mapping[Problem, float],
    ood: Mapping[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """``predictor.json``'s ``"ood"``: the model-side rules :func:`~.ood.fit_flag_rules` fits on the held-out
    problems' calibration rows (:func:`calibration_row`), a problem bad when its fraction in ``fractions`` is below
    ``ood``'s ``good_top1_fraction``, with ``ood``'s false-flag budget, and how they separate them."""
    good_fraction = float(ood.get("good_top1_fraction", 0.90))
    rules, stats = fit_flag_rules(
        [signals for _, signals, _ in calibration], [fractions[p] < good_fraction for p, _, _ in calibration],
        [already for _, _, already in calibration], max_good_flagged=float(ood.get("max_good_flagged", 0.10)),
    )  # fmt: skip
    return {"rules": [r.to_dict() for r in rules], "calibration": stats}


def _problems(shapes: np.ndarray, like: Problem) -> list[Problem]:
    return [Problem(int(m), int(n), int(k), like.dtype, like.layout) for m, n, k in shapes]


def calibration_row(
    problem: Problem, group: GroupScorer, table: ShortlistTable, width: int | None, domain: OODChecker
) -> tuple[Problem, dict[str, float], bool]:
    """A held-out problem's signals as the predictor computes them (its list's first ``width``
    members scored, the rest when their best sits late: :meth:`ShortlistTable.cut`), and whether the
    distance or range rules flag it already."""
    _, cut = table.problem_cut(problem, width)
    tail = (lambda: group.subset(np.sort(cut.tail))) if len(cut.tail) else None
    found, _ = group.best_two_extending(problem, group.subset(cut.head), cut.late, tail)
    if found is None:
        found = group.best_two(problem, group.everything)
    assert found is not None, f"{problem.key}: no feasible candidate"
    verdict = domain.verdict(problem)
    signals = answer_signals(problem, found[1], found[2], verdict.neighbour_distance_log2)
    return problem, signals, bool(verdict)


def _checked(scorer: Scorer, ensemble: TreeEnsemble, device: Any, groups: Mapping[str, list[Problem]]) -> Scorer:
    """``scorer`` after checking that it gives the numpy evaluation's values on real feature rows."""
    problem = next(iter(groups.values()))[0]
    group = GroupScorer.build(device, problem.dtype, problem.layout, "log_time_us", ensemble.predict)
    rows = feature_matrix(problem, group.everything.features.take(np.arange(0, len(group.space), 37)), device)
    theirs = np.asarray(scorer(rows), dtype=np.float64)
    ours = ensemble.predict(rows)
    if theirs.shape != ours.shape or not np.allclose(theirs, ours, rtol=1e-5, atol=1e-4):
        raise ArtifactError("scorer's predictions differ from the booster's trees; pass the booster that wrote it")
    return scorer
