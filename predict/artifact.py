"""The model artifact: what training exports and the predictor loads. Data, never a pickle.

An artifact is a directory::

    metadata.json   the sidecar below (``ArtifactMetadata``)
    model.ubj       the XGBoost booster in XGBoost's own UBJSON model format (``Booster.save_model``), or
    model.json      the same booster in XGBoost's JSON format (artifacts of schema version 1, or passed as JSON)
    <extra files>   named in ``metadata.files`` with their SHA-256, e.g. ``measured.json``, the tuning
                    database of measured bests, and whatever the predictor precomputes at export

``metadata.json`` records the artifact schema version, the feature list and feature schema version
the booster was trained on, the target transform, the device class and fingerprint of the
measurements, the Triton version, the training domain (for out-of-distribution checks), and a
SHA-256 of every other file. :func:`load_artifact` refuses an artifact whose checksums, schema
versions or feature list differ from what this tilecost computes, and says what differs.

This module imports only the standard library and :mod:`tilecost.features`' constants, so loading
an artifact inside a compiler pulls in neither xgboost nor torch.

Schema version 2 (the thirteenth session) stores the booster as UBJSON: 16.2 MB against 28.7 MB of JSON for the
shipped depth-10 model, and read in a quarter of the time (:mod:`tilecost.predict.ubjson`). Version 1 artifacts
(``model.json``) still load.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilecost.errors import ArtifactError

from . import ubjson

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "MODEL_FILE",
    "MODEL_FILES",
    "METADATA_FILE",
    "TARGETS",
    "ArtifactMetadata",
    "booster_format",
    "load_artifact",
    "save_artifact",
]

ARTIFACT_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
# The booster's file: UBJSON when exported, JSON when a caller saves JSON bytes (and in version 1 artifacts).
MODEL_FILE = "model.ubj"
MODEL_FILES = {"ubj": "model.ubj", "json": "model.json"}
METADATA_FILE = "metadata.json"
# ``log_time_us``: the booster predicts ln(time in µs).
# ``log_time_over_roofline``: it predicts ln(time / the seed's roofline time of the same pair), so
# predicted µs = roofline µs × exp(prediction).
TARGETS = ("log_time_us", "log_time_over_roofline")


@dataclass(frozen=True)
class ArtifactMetadata:
    """The sidecar of an artifact. ``files`` maps every other file's name to its SHA-256."""

    device_class: str
    fingerprint: Mapping[str, Any]  # gpu_name, sm_count, compute_capability, driver/cuda/torch/triton versions
    triton_version: str
    feature_names: tuple[str, ...]
    feature_schema_version: int
    target: str
    domain: Mapping[str, Any]  # training domain: dtypes, layouts, per-dim log2 ranges, training problems
    files: Mapping[str, str] = field(default_factory=dict)
    ood: Mapping[str, Any] = field(default_factory=dict)  # calibrated out-of-distribution thresholds
    training: Mapping[str, Any] = field(default_factory=dict)  # params, seed, dataset digest, metrics
    # The booster's last ``level_trees`` trees predict each problem's level from its problem columns alone
    # (``CostModel(center_problems=True)``): the same for every candidate of a problem, so a predictor ranks
    # with the other trees and adds the level once per query. 0: no such trees.
    level_trees: int = 0
    artifact_schema_version: int = ARTIFACT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ArtifactError(f"target={self.target!r} is not one of {TARGETS}")
        if isinstance(self.level_trees, bool) or not isinstance(self.level_trees, int) or self.level_trees < 0:
            raise ArtifactError(f"level_trees={self.level_trees!r} must be a non-negative int")
        object.__setattr__(self, "feature_names", tuple(self.feature_names))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ArtifactMetadata:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ArtifactError(f"{METADATA_FILE} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ArtifactError(f"{METADATA_FILE} must hold a JSON object")
        version = data.get("artifact_schema_version")
        if version not in READABLE_SCHEMA_VERSIONS:
            raise ArtifactError(
                f"artifact schema version {version!r}; this tilecost reads versions {READABLE_SCHEMA_VERSIONS}"
            )
        try:
            return cls(**data)
        except TypeError as exc:
            raise ArtifactError(f"{METADATA_FILE}: {exc}") from exc

    @property
    def model_file(self) -> str:
        """The name of the booster's file among :attr:`files` (``model.ubj`` or ``model.json``)."""
        listed = [name for name in MODEL_FILES.values() if name in self.files]
        if len(listed) != 1:
            names = " or ".join(MODEL_FILES.values())
            raise ArtifactError(f"{METADATA_FILE} must list one booster file ({names}); it lists {listed or 'none'}")
        return listed[0]


def booster_format(model: bytes) -> str:
    """``"ubj"`` for XGBoost's UBJSON, ``"json"`` for its JSON: a UBJSON object opens with ``{`` and then a
    length marker, a typed-object header or ``}``; a JSON one with ``{`` and whitespace or a quote."""
    return "ubj" if ubjson.opens_object(model) else "json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_artifact(
    directory: str | Path, model: bytes, metadata: ArtifactMetadata, extra_files: Mapping[str, bytes] = {}
) -> Path:
    """Write an artifact directory; checksums of the model and every extra file go into the sidecar. ``model``
    is the booster as ``Booster.save_raw`` gives it, UBJSON (written as ``model.ubj``) or JSON (``model.json``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in extra_files:
        if "/" in name or name == METADATA_FILE or name in MODEL_FILES.values():
            raise ValueError(f"extra file name {name!r} is not allowed")
    files = {MODEL_FILES[booster_format(model)]: model, **extra_files}
    sums = {name: _sha256(data) for name, data in files.items()}
    meta = ArtifactMetadata(**{**asdict(metadata), "files": sums, "artifact_schema_version": ARTIFACT_SCHEMA_VERSION})
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / METADATA_FILE).write_text(meta.to_json())
    return directory


def load_artifact(
    directory: str | Path, expected_features: tuple[str, ...] | None = None, expected_feature_schema: int | None = None
) -> tuple[ArtifactMetadata, dict[str, bytes]]:
    """Read and verify an artifact; returns its metadata and the bytes of every file it lists.

    Raises :class:`~tilecost.errors.ArtifactError` naming what is missing or differs: a file, a
    checksum, the artifact schema version, the feature schema version or the feature list.
    """
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    if not meta_path.is_file():
        raise ArtifactError(f"{directory}: no {METADATA_FILE}; not a tilecost model artifact")
    meta = ArtifactMetadata.from_json(meta_path.read_text())
    try:
        meta.model_file  # noqa: B018  (checks that exactly one booster file is listed)
    except ArtifactError as exc:
        raise ArtifactError(f"{directory}: {exc}") from None
    blobs: dict[str, bytes] = {}
    for name, digest in meta.files.items():
        path = directory / name
        if not path.is_file():
            raise ArtifactError(f"{directory}: {name} is missing")
        data = path.read_bytes()
        if _sha256(data) != digest:
            raise ArtifactError(f"{directory}: {name} does not match its checksum in {METADATA_FILE} (corrupted?)")
        blobs[name] = data
    if expected_feature_schema is not None and meta.feature_schema_version != expected_feature_schema:
        raise ArtifactError(
            f"{directory}: trained on feature schema {meta.feature_schema_version}, "
            f"this tilecost computes schema {expected_feature_schema}; retrain or install the matching tilecost"
        )
    if expected_features is not None and tuple(meta.feature_names) != tuple(expected_features):
        ours, theirs = set(expected_features), set(meta.feature_names)
        raise ArtifactError(
            f"{directory}: feature list differs (only in artifact: {sorted(theirs - ours)}, "
            f"only here: {sorted(ours - theirs)}, or a different order)"
        )
    return meta, blobs
