"""The model artifact: what training exports and the predictor loads. Data, never a pickle.

An artifact is a directory::

    metadata.json   the sidecar below (``ArtifactMetadata``)
    model.ubj       the XGBoost booster in XGBoost's own UBJSON model format (``Booster.save_model``), or
    model.json      the same booster in XGBoost's JSON format (artifacts of schema version 1, or passed as JSON)
    <extra files>   named in ``metadata.files`` with their SHA-256, e.g. ``measured.json``, the tuning
                    database of measured bests, ``measured-<device class>.json``, another device class's
                    (:func:`device_measured_file`), and whatever the predictor precomputes at export

``metadata.json`` records the artifact schema version, the feature list and feature schema version
the booster was trained on, the target transform, the device class and fingerprint of the
measurements, the Triton version, the training domain (for out-of-distribution checks), and a
SHA-256 of every other file. :func:`load_artifact` refuses an artifact whose checksums, schema
versions or feature list differ from what this tilecost computes, and says what differs.

The sidecar checks its own structure when built (:class:`ArtifactMetadata`), so that one of another shape is
refused at load naming the field. A file it lists is a plain name in the artifact directory: a path (``../x``,
``/etc/x``, ``a/b``) is refused at save and at load, and nothing outside the directory is read.

This module imports only the standard library, :mod:`tilecost.errors` and the UBJSON reader (numpy), so loading
an artifact inside a compiler pulls in neither xgboost nor torch.

Schema version 2 (the thirteenth session) stores the booster as UBJSON: 16.2 MB against 28.7 MB of JSON for the
shipped depth-10 model, and read in a quarter of the time (:mod:`tilecost.predict.ubjson`). Version 1 artifacts
(``model.json``) still load.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
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
    "check_booster",
    "device_measured_file",
    "device_measured_files",
    "load_artifact",
    "save_artifact",
    "swap_in",
]

ARTIFACT_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)
# The booster's file: UBJSON when exported, JSON when a caller saves JSON bytes (and in version 1 artifacts).
MODEL_FILE = "model.ubj"
MODEL_FILES = {"ubj": "model.ubj", "json": "model.json"}
_FORMAT_NAMES = {"ubj": "UBJSON", "json": "JSON"}
METADATA_FILE = "metadata.json"
# ``log_time_us``: the booster predicts ln(time in µs).
# ``log_time_over_roofline``: it predicts ln(time / the seed's roofline time of the same pair), so
# predicted µs = roofline µs × exp(prediction).
TARGETS = ("log_time_us", "log_time_over_roofline")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A device class is a key of tilecost/devices/ (``h200``, ``h100_sxm``): never a path, nor a ``.json`` file name,
# which load_device would read as a spec file.
_DEVICE_CLASS = re.compile(r"[a-z0-9][a-z0-9_-]*")
_DEVICE_MEASURED_PREFIX = "measured-"  # measured-<device class>.json: another device class's measured bests
# JSON may open with whitespace before its object (RFC 8259's four whitespace bytes).
_JSON_OBJECT = re.compile(rb"[ \t\r\n]*\{")
# The numbers of ``ood`` that the predictor and the export read (``neighbours`` is an int); inf is allowed.
_OOD_NUMBERS = ("sparse_distance_log2", "range_margin_log2", "good_top1_fraction", "max_good_flagged")


@dataclass(frozen=True)
class ArtifactMetadata:
    """The sidecar of an artifact. ``files`` maps every other file's name to its SHA-256.

    Built, it checks the type of every field and the form of what the predictor reads (file names and digests,
    the domain's ranges, the fingerprint's SM count, the OOD thresholds), and raises ``ArtifactError`` naming
    the field: a sidecar of another shape is refused at load, not met later as an ``AttributeError``."""

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
    # The dataset ``measured.json`` was built from (digest, files, problems, rows): the training dataset at export,
    # a newer one after ``tilecost refresh-measured``. Empty in artifacts exported before the thirty-first session.
    measured_from: Mapping[str, Any] = field(default_factory=dict)
    # The booster's last ``level_trees`` trees predict each problem's level from its problem columns alone
    # (``CostModel(center_problems=True)``): the same for every candidate of a problem, so a predictor ranks
    # with the other trees and adds the level once per query. 0: no such trees.
    level_trees: int = 0
    artifact_schema_version: int = ARTIFACT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        # Each message names the field (load_artifact adds the directory and metadata.json).
        if not isinstance(self.device_class, str) or not _DEVICE_CLASS.fullmatch(self.device_class):
            raise ArtifactError(
                f"device_class={_shown(self.device_class)} is not a device class key "
                "(lower-case letters, digits, '_' and '-', as 'h200')"
            )
        _check_fingerprint(self.fingerprint)
        if not isinstance(self.triton_version, str):
            raise ArtifactError(f"triton_version={_shown(self.triton_version)} must be a str")
        names = self.feature_names
        if isinstance(names, str) or not isinstance(names, Sequence) or not all(isinstance(x, str) for x in names):
            raise ArtifactError(f"feature_names={_shown(names)} must be a list of str")
        _check_int("feature_schema_version", self.feature_schema_version, 0)
        if not isinstance(self.target, str) or self.target not in TARGETS:
            raise ArtifactError(f"target={_shown(self.target)} is not one of {TARGETS}")
        _check_domain(self.domain)
        _check_files(self.files)
        _check_ood(self.ood)
        _check_mapping("training", self.training)
        _check_mapping("measured_from", self.measured_from)
        _check_int("level_trees", self.level_trees, 0)
        _check_int("artifact_schema_version", self.artifact_schema_version, 1)
        object.__setattr__(self, "feature_names", tuple(self.feature_names))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> ArtifactMetadata:
        """The sidecar from its JSON (``bytes`` must be UTF-8). Raises ``ArtifactError`` naming ``metadata.json``
        and what is wrong: not UTF-8, not JSON, not an object, another schema version, a missing, unknown or
        malformed field."""
        try:
            data = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"{METADATA_FILE} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ArtifactError(f"{METADATA_FILE} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ArtifactError(f"{METADATA_FILE} must hold a JSON object, not {_json_kind(data)}")
        version = data.get("artifact_schema_version")
        if type(version) is not int or version not in READABLE_SCHEMA_VERSIONS:
            raise ArtifactError(
                f"{METADATA_FILE}: artifact schema version {_shown(version)}; "
                f"this tilecost reads versions {READABLE_SCHEMA_VERSIONS}"
            )
        try:
            return cls(**data)
        except TypeError as exc:  # a missing or unknown field
            raise ArtifactError(f"{METADATA_FILE}: {exc}") from exc
        except ArtifactError as exc:  # a malformed field, named by __post_init__
            raise ArtifactError(f"{METADATA_FILE}: {exc}") from None

    @property
    def model_file(self) -> str:
        """The name of the booster's file among :attr:`files` (``model.ubj`` or ``model.json``)."""
        listed = [name for name in MODEL_FILES.values() if name in self.files]
        if len(listed) != 1:
            names = " or ".join(MODEL_FILES.values())
            raise ArtifactError(f"{METADATA_FILE} must list one booster file ({names}); it lists {listed or 'none'}")
        return listed[0]


def device_measured_file(device_class: str) -> str:
    """The artifact file holding another device class's measured bests (``tilecost refresh-measured --for``):
    ``{"device_class", "measured_from", "problems": {problem key: the entry measured.json has}}``."""
    if not isinstance(device_class, str) or not _DEVICE_CLASS.fullmatch(device_class):
        raise ValueError(f"device_class={device_class!r} is not a device class key (as 'h100_sxm')")
    return f"{_DEVICE_MEASURED_PREFIX}{device_class}.json"


def device_measured_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The other device classes' tables among an artifact's ``files`` (:func:`device_measured_file`'s names)."""
    return {name: data for name, data in files.items() if name.startswith(_DEVICE_MEASURED_PREFIX)}


def booster_format(model: bytes) -> str:
    """``"ubj"`` for XGBoost's UBJSON, ``"json"`` for its JSON: a UBJSON object opens with ``{`` and then a
    length marker, a typed-object header or ``}``; a JSON one with ``{`` and whitespace or a quote."""
    return "ubj" if ubjson.opens_object(model) else "json"


def check_booster(model: bytes, name: str | None = None) -> str:
    """The booster's format (:func:`booster_format`) once its first bytes show one; else ``ArtifactError`` naming
    ``name``, the file the bytes were read from: empty, opening like neither of XGBoost's formats, or (``name``
    given) not like the format its name says (``model.ubj``: UBJSON; ``model.json``: JSON)."""
    label = name or "the booster"
    if not len(model):
        raise ArtifactError(f"{label} is empty (0 bytes), not an XGBoost booster")
    found = booster_format(model)
    if found == "json" and not _JSON_OBJECT.match(model):
        raise ArtifactError(
            f"{label} is not an XGBoost booster: it opens like neither a UBJSON nor a JSON object "
            f"(first bytes {bytes(model[:8])!r})"
        )
    if name is not None and name in MODEL_FILES.values() and name != MODEL_FILES[found]:
        expected = next(kind for kind, file in MODEL_FILES.items() if file == name)
        raise ArtifactError(
            f"{name} does not hold an XGBoost {_FORMAT_NAMES[expected]} booster: it opens like "
            f"{_FORMAT_NAMES[found]} (first bytes {bytes(model[:8])!r})"
        )
    return found


def _file_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a file of an artifact, or None: it must be a plain name in the artifact's
    directory, never a path that reaches elsewhere (``../x``, ``/etc/x``, ``a/b``), nor the sidecar itself."""
    if not isinstance(name, str) or not name:
        return "is not a file name"
    if name in (".", "..") or any(c in name for c in "/\\:\0"):
        return "is not a plain file name in the artifact directory (a path, or a name with a separator)"
    if name == METADATA_FILE:
        return "is the sidecar itself"
    return None


def _shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about values that may be large."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _json_kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(field: str, value: object, least: int) -> None:
    if type(value) is not int or value < least:
        raise ArtifactError(f"{field}={_shown(value)} must be an int >= {least}")


def _check_mapping(field: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ArtifactError(f"{field} must be an object, not {_json_kind(value)}")
    return value


def _check_fingerprint(fingerprint: object) -> None:
    """An object; its ``sm_count``, which the predictor compares with the device's, an int >= 1 (or absent)."""
    fingerprint = _check_mapping("fingerprint", fingerprint)
    sm_count = fingerprint.get("sm_count")
    if sm_count is not None and (type(sm_count) is not int or sm_count < 1):
        raise ArtifactError(f"fingerprint.sm_count={_shown(sm_count)} must be an int >= 1")


def _check_files(files: object) -> None:
    """An object of plain file names (:func:`_file_name_problem`) to SHA-256 hex digests."""
    files = _check_mapping("files", files)
    for name, digest in files.items():
        problem = _file_name_problem(name)
        if problem is not None:
            raise ArtifactError(f"files: the entry {_shown(name)} {problem}")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ArtifactError(f"files[{name!r}]={_shown(digest)} is not a SHA-256 digest (64 lower-case hex digits)")


def _check_domain(domain: object) -> None:
    """What :func:`~tilecost.predict.training_domain` and train's export write: lists of str (``dtypes``,
    ``layouts``, ``problems``, whose values the predictor's OOD checker parses), finite ``log2_min``/``log2_max``
    per dimension ``m``, ``n``, ``k``, ``log2_m``/``log2_n``/``log2_k`` as ``[min, max]``, and ``problem_dims``
    as rows ``[m, n, k, dtype, layout]`` of positive extents."""
    domain = _check_mapping("domain", domain)
    for key in ("dtypes", "layouts", "problems"):
        values = domain.get(key, [])
        if not isinstance(values, list) or not all(isinstance(x, str) for x in values):
            raise ArtifactError(f"domain.{key}={_shown(values)} must be a list of str")
    for key in ("log2_min", "log2_max"):
        if key in domain:
            bounds = domain[key]
            if not isinstance(bounds, Mapping) or not all(_finite(bounds.get(dim)) for dim in "mnk"):
                raise ArtifactError(f"domain.{key}={_shown(bounds)} must give a finite number for each of m, n, k")
    for dim in "mnk":
        key = f"log2_{dim}"
        if key in domain:
            pair = domain[key]
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_finite, pair)) and pair[0] <= pair[1]):
                raise ArtifactError(f"domain.{key}={_shown(pair)} must be [min, max], finite numbers, min <= max")
    rows = domain.get("problem_dims", [])
    if not isinstance(rows, list):
        raise ArtifactError(f"domain.problem_dims must be a list of [m, n, k, dtype, layout], not {_json_kind(rows)}")
    for row in rows:  # ~0.25 µs a row: the shipped model's 4096 in ~1 ms of a ~370 ms Predictor.load
        if not _is_dims_row(row):
            raise ArtifactError(
                f"domain.problem_dims has a row {_shown(row)}; rows are [m, n, k, dtype, layout], m, n, k >= 1"
            )


def _check_ood(ood: object) -> None:
    """An object whose thresholds are numbers (``neighbours`` an int >= 1), ``heldout_top1`` maps problem keys
    to numbers and ``heldout_flagged`` lists some of those keys; the OOD checker judges their values."""
    ood = _check_mapping("ood", ood)
    for key in _OOD_NUMBERS:
        if key in ood and not _is_number(ood[key]):
            raise ArtifactError(f"ood.{key}={_shown(ood[key])} must be a number")
    if "neighbours" in ood:
        _check_int("ood.neighbours", ood["neighbours"], 1)
    heldout = ood.get("heldout_top1", {})
    if not isinstance(heldout, Mapping) or not all(_is_number(x) for x in heldout.values()):
        raise ArtifactError(f"ood.heldout_top1={_shown(heldout)} must map problem keys to numbers")
    flagged = ood.get("heldout_flagged", [])
    if type(flagged) is not list or not all(type(key) is str and key in heldout for key in flagged):
        raise ArtifactError(f"ood.heldout_flagged={_shown(flagged)} must list keys of ood.heldout_top1")


def _is_dims_row(row: object) -> bool:
    """``[m, n, k, dtype, layout]`` (or ``[m, n, k]``) with extents ints >= 1 and names str."""
    if type(row) is not list or not (len(row) == 3 or (len(row) == 5 and type(row[3]) is str and type(row[4]) is str)):
        return False
    m, n, k = row[0], row[1], row[2]
    return type(m) is int and type(n) is int and type(k) is int and m >= 1 and n >= 1 and k >= 1


def _finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(value)  # type: ignore[arg-type]


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
        if _file_name_problem(name) is not None or name in MODEL_FILES.values():
            raise ValueError(f"extra file name {name!r} is not allowed; use a plain file name other than "
                             f"{METADATA_FILE} and {' or '.join(MODEL_FILES.values())}")  # fmt: skip
    files = {MODEL_FILES[booster_format(model)]: model, **extra_files}
    sums = {name: _sha256(data) for name, data in files.items()}
    meta = ArtifactMetadata(**{**asdict(metadata), "files": sums, "artifact_schema_version": ARTIFACT_SCHEMA_VERSION})
    for name, data in files.items():
        (directory / name).write_bytes(data)
    (directory / METADATA_FILE).write_text(meta.to_json())
    return directory


def swap_in(new: str | Path, target: str | Path) -> None:
    """Replace the directory ``target`` by ``new`` (beside it, on the same file system) with two renames:
    ``target`` is the old artifact until the first and the new one from the second on; a crash between them
    leaves the old one as ``.<target name>.old`` beside it, which the next swap removes."""
    import shutil

    new, target = Path(new), Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    new.rename(target)
    if old.exists():
        shutil.rmtree(old)


def load_artifact(
    directory: str | Path, expected_features: tuple[str, ...] | None = None, expected_feature_schema: int | None = None
) -> tuple[ArtifactMetadata, dict[str, bytes]]:
    """Read and verify an artifact; returns its metadata and the bytes of every file it lists.

    Raises :class:`~tilecost.errors.ArtifactError` naming the directory and what is missing, malformed
    or differs: the sidecar (not UTF-8, not JSON, a field of the wrong type, a file entry that is a path),
    a file, a checksum, a booster file that is empty or not of its name's format, the artifact schema
    version, the feature schema version or the feature list.
    """
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    if not meta_path.is_file():
        raise ArtifactError(f"{directory}: no {METADATA_FILE}; not a tilecost model artifact")
    sidecar = _read(directory, METADATA_FILE)
    try:
        meta = ArtifactMetadata.from_json(sidecar)
        model_file = meta.model_file  # checks that exactly one booster file is listed
    except ArtifactError as exc:
        raise ArtifactError(f"{directory}: {exc}") from None
    blobs: dict[str, bytes] = {}
    for name, digest in meta.files.items():  # plain names of this directory (ArtifactMetadata checks them)
        if not (directory / name).is_file():
            raise ArtifactError(f"{directory}: {name} is missing")
        data = _read(directory, name)
        if _sha256(data) != digest:
            raise ArtifactError(f"{directory}: {name} does not match its checksum in {METADATA_FILE} (corrupted?)")
        blobs[name] = data
    try:
        check_booster(blobs[model_file], model_file)
    except ArtifactError as exc:
        raise ArtifactError(f"{directory}: {exc}") from None
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


def _read(directory: Path, name: str) -> bytes:
    try:
        return (directory / name).read_bytes()
    except OSError as exc:  # unreadable: permissions, or replaced by a directory meanwhile
        raise ArtifactError(f"{directory}: {name} cannot be read: {exc.strerror or exc}") from exc
