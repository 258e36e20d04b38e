"""What the predictor precomputes when training exports an artifact.

Training calls :func:`prepare_artifact_files` with the booster's JSON and the sidecar it is about to
write, and passes the returned files to ``save_artifact(..., extra_files=...)``, which checksums each
in ``metadata.files``. Two files come back:

``predictor.json``
    ``{"format": 1, "groups": {"bf16-nt": {"space_size", "space_sha256", "grid": GridSpec,
    "dispatch": DispatchRule}}}``: per (dtype, layout) of the training domain, the candidate space
    the shortlists index (refused at load if ``tilecost.space`` now builds another), the shortlist
    grid, and the run-time dispatch rule of :mod:`tilecost.predict.dispatch`.
``shortlists.npz``
    per group, ``<group>.table`` and ``<group>.lists`` of :class:`~.shortlist.ShortlistTable`
    (plain integer arrays; read with ``allow_pickle=False``).

Building the shortlists scores every candidate (~2,000) of every sample shape (~40,000 over the
first H200 domain with the defaults) with the full model: the numpy evaluator takes ~12 µs per row
for 300 trees of depth 8 (hours in all); pass ``scorer=booster.inplace_predict`` (one thread:
~4 µs a row for 300×8, ~1.4 µs for 100 trees of depth 6; two threads were slower on these
batches), checked against the numpy evaluation of ``model_json`` before use. Tests should pass a
coarse grid (``step_log2=8, top_n=4, interior_samples=0``), which builds in a second or two.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from tilecost.device import load_device
from tilecost.errors import ArtifactError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION, feature_matrix
from tilecost.problem import Problem

from .artifact import ArtifactMetadata
from .dispatch import fit_dispatch
from .ood import OODChecker
from .scoring import GroupScorer, Scorer
from .shortlist import GridSpec, build_shortlists, space_digest
from .trees import TreeEnsemble

__all__ = ["PREDICTOR_FILE", "PREDICTOR_FORMAT", "SHORTLISTS_FILE", "prepare_artifact_files"]

PREDICTOR_FILE = "predictor.json"
SHORTLISTS_FILE = "shortlists.npz"
PREDICTOR_FORMAT = 1


def prepare_artifact_files(
    model_json: bytes,
    metadata: ArtifactMetadata,
    *,
    scorer: Scorer | None = None,
    step_log2: float = 1.0,
    margin_log2: float = 0.5,
    top_n: int = 8,
    interior_samples: int = 4,
    radius_log2: float = 1.5,
    seed: int = 0,
) -> dict[str, bytes]:
    """Files the predictor needs besides the booster, by name, for ``save_artifact``'s ``extra_files``.

    A deterministic function of its arguments (seeded sampling, no dataset access). The shortlists
    cover each (dtype, layout) of ``metadata.domain``'s training problems (``training_domain``) over
    their log2 range plus ``margin_log2`` octaves; see :mod:`tilecost.predict.shortlist` for
    ``step_log2``, ``top_n``, ``interior_samples`` and ``radius_log2`` (cells farther than that from
    every training problem are not built: they borrow the nearest built cell's lists). Raises
    ``ArtifactError`` when the model does not evaluate (unsupported booster, feature list or schema
    not this tilecost's).
    """
    if tuple(metadata.feature_names) != FEATURE_NAMES or metadata.feature_schema_version != FEATURE_SCHEMA_VERSION:
        raise ArtifactError("metadata's feature list or feature schema version is not this tilecost's")
    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    device = load_device(metadata.device_class)
    domain = OODChecker.from_metadata(metadata.domain, {})
    groups: dict[str, list[Problem]] = {}
    for key in metadata.domain.get("problems", ()):
        problem = Problem.from_key(key)
        groups.setdefault(f"{problem.dtype.value}-{problem.layout.value}", []).append(problem)
    if not groups:
        raise ArtifactError("metadata.domain lists no training problems; build it with training_domain()")
    score = ensemble.predict if scorer is None else _checked(scorer, ensemble, device, groups)
    described: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, problems in sorted(groups.items()):
        first = problems[0]
        group = GroupScorer.build(device, first.dtype, first.layout, metadata.target, score)
        spec = GridSpec.covering(
            domain.log2_min[name].tolist(), domain.log2_max[name].tolist(), step_log2=step_log2,
            margin_log2=margin_log2, top_n=top_n, interior_samples=interior_samples, seed=seed,
            radius_log2=radius_log2,
        )  # fmt: skip
        points = np.log2(np.array([[p.m, p.n, p.k] for p in problems], dtype=np.float64))
        table = build_shortlists(spec, first.dtype, first.layout, lambda p: group.ranked(p)[0], points)  # noqa: B023
        rule = fit_dispatch(group, problems)
        described[name] = {
            "space_size": len(group.space),
            "space_sha256": space_digest(group.space),
            "grid": spec.to_dict(),
            "dispatch": rule.to_dict(),
        }
        arrays[f"{name}.table"], arrays[f"{name}.lists"] = table.table, table.lists
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub types the kwargs as allow_pickle
    header = {"format": PREDICTOR_FORMAT, "groups": described}
    return {PREDICTOR_FILE: json.dumps(header, indent=1, sort_keys=True).encode(), SHORTLISTS_FILE: buffer.getvalue()}


def _checked(scorer: Scorer, ensemble: TreeEnsemble, device: Any, groups: Mapping[str, list[Problem]]) -> Scorer:
    """``scorer`` after checking that it gives the numpy evaluation's values on real feature rows."""
    problem = next(iter(groups.values()))[0]
    group = GroupScorer.build(device, problem.dtype, problem.layout, "log_time_us", ensemble.predict)
    rows = feature_matrix(problem, group.everything.features.take(np.arange(0, len(group.space), 37)), device)
    theirs = np.asarray(scorer(rows), dtype=np.float64)
    ours = ensemble.predict(rows)
    if theirs.shape != ours.shape or not np.allclose(theirs, ours, rtol=1e-5, atol=1e-4):
        raise ArtifactError("scorer's predictions differ from model_json's trees; pass the booster that wrote it")
    return scorer
