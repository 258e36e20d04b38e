"""Loading refuses corrupted or mismatched artifacts with a message saying what differs."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tilecost import DType, Layout, OODReason, Predictor
from tilecost.errors import ArtifactError
from tilecost.predict import ArtifactMetadata, load_artifact, save_artifact

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules


@pytest.fixture
def copy(tmp_path: Path, artifact: Path) -> Path:
    return Path(shutil.copytree(artifact, tmp_path / "h200"))


_resave = fixtures.resave_artifact


def test_a_changed_byte_fails_the_checksum(copy: Path) -> None:
    model = copy / "model.ubj"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 1
    model.write_bytes(bytes(data))

    with pytest.raises(ArtifactError, match="model.ubj does not match its checksum"):
        Predictor.load(copy)


def test_a_schema_version_1_artifact_with_a_json_booster_still_loads(copy: Path, artifact: Path) -> None:
    import xgboost as xgb

    meta, blobs = load_artifact(copy)
    as_json = bytes(xgb.Booster(model_file=bytearray(blobs.pop(meta.model_file))).save_raw("json"))
    (copy / "model.ubj").unlink()
    save_artifact(copy, as_json, meta, blobs)
    (copy / "metadata.json").write_text(json.dumps({**json.loads((copy / "metadata.json").read_text()),
                                                    "artifact_schema_version": 1}))  # fmt: skip
    shape = (3000, 5000, 700)

    old = Predictor.load(copy)

    assert load_artifact(copy)[0].model_file == "model.json"
    assert old.predict_best(shape, measured=False) == Predictor.load(artifact).predict_best(shape, measured=False)


def test_a_sidecar_must_list_exactly_one_booster_file(copy: Path) -> None:
    meta = json.loads((copy / "metadata.json").read_text())
    (copy / "model.json").write_bytes(b"{}")
    both = {**meta["files"], "model.json": hashlib.sha256(b"{}").hexdigest()}
    (copy / "metadata.json").write_text(json.dumps({**meta, "files": both}))

    with pytest.raises(ArtifactError, match=r"must list one booster file \(model.ubj or model.json\)"):
        Predictor.load(copy)

    none = {k: v for k, v in meta["files"].items() if k != "model.ubj"}
    (copy / "metadata.json").write_text(json.dumps({**meta, "files": none}))
    with pytest.raises(ArtifactError, match="it lists none"):
        Predictor.load(copy)


def test_a_missing_file_is_named(copy: Path) -> None:
    (copy / "shortlists.npz").unlink()

    with pytest.raises(ArtifactError, match="shortlists.npz is missing"):
        Predictor.load(copy)


def test_another_feature_list_is_refused(copy: Path) -> None:
    meta = json.loads((copy / "metadata.json").read_text())
    _resave(copy, metadata={"feature_names": [*meta["feature_names"][:-1], "made_up"]})

    with pytest.raises(ArtifactError, match=r"feature list differs \(only in artifact: \['made_up'\]"):
        Predictor.load(copy)


def test_another_feature_schema_is_refused(copy: Path) -> None:
    _resave(copy, metadata={"feature_schema_version": 999})

    with pytest.raises(ArtifactError, match="feature schema 999"):
        Predictor.load(copy)


def test_another_artifact_schema_is_refused(copy: Path) -> None:
    meta = json.loads((copy / "metadata.json").read_text())
    (copy / "metadata.json").write_text(json.dumps({**meta, "artifact_schema_version": 7}))

    with pytest.raises(ArtifactError, match="artifact schema version 7"):
        Predictor.load(copy)


def test_a_malformed_measurement_file_is_refused(copy: Path) -> None:
    _resave(
        copy, files={"measured.json": json.dumps({"8x8x8-bf16-nt": {"config_id": "nonsense", "time_us": 1}}).encode()}
    )

    with pytest.raises(ArtifactError, match="measured.json is malformed"):
        Predictor.load(copy)


def test_shortlists_of_another_candidate_space_are_refused(copy: Path) -> None:
    header = json.loads((copy / "predictor.json").read_text())
    header["groups"]["bf16-nt"]["space_sha256"] = "0" * 64
    _resave(copy, files={"predictor.json": json.dumps(header).encode()})
    predictor = Predictor.load(copy)

    with pytest.raises(ArtifactError, match="candidate space of this tilecost differs"):
        predictor.predict_best((100, 100, 100))


def test_another_device_flags_every_answer_or_refuses_when_strict(artifact: Path) -> None:
    predictor = Predictor.load(artifact, device="h100_sxm", triton_version=None)

    reasons = set(predictor.predict_best((4096, 4096, 4096)).ood.reasons) - {OODReason.MODEL_UNCERTAIN}
    assert reasons == {OODReason.DEVICE_MISMATCH}
    with pytest.raises(ArtifactError, match=r"artifact is for h200 .* asked for h100_sxm .*device_mismatch"):
        Predictor.load(artifact, device="h100_sxm", strict=True)


def test_another_triton_version_flags_every_answer_or_refuses_when_strict(artifact: Path) -> None:
    flagged = Predictor.load(artifact, triton_version="9.9.9").predict_best((4096, 4096, 4096))
    unknown = Predictor.load(artifact, triton_version=None).predict_best((4096, 4096, 4096))

    assert OODReason.TRITON_VERSION_MISMATCH in flagged.ood.reasons
    assert OODReason.TRITON_VERSION_MISMATCH not in unknown.ood.reasons
    with pytest.raises(ArtifactError, match="triton_version_mismatch"):
        Predictor.load(artifact, triton_version="9.9.9", strict=True)


def test_without_shortlists_every_candidate_is_scored(copy: Path) -> None:
    meta, blobs = load_artifact(copy)
    files = {
        name: data for name, data in blobs.items() if name not in ("predictor.json", "shortlists.npz", meta.model_file)
    }
    for name in ("predictor.json", "shortlists.npz", "metadata.json"):
        (copy / name).unlink()
    save_artifact(copy, blobs[meta.model_file], ArtifactMetadata(**{**asdict(meta), "files": {}}), files)
    predictor = Predictor.load(copy)

    answer = predictor.predict_best((1000, 1000, 1000), measured=False)

    assert answer.config == predictor.rank((1000, 1000, 1000), 1, exhaustive=True, measured=False)[0].config
    with pytest.raises(ArtifactError, match="no dispatch rule"):
        predictor.dispatch_rule(DType.BF16, Layout.NT)


def _npz_with(copy: Path, **changed: np.ndarray) -> bytes:
    """The artifact's shortlists.npz with some arrays replaced (keys: ``"<group>.<part>"``, dots as ``__``)."""
    with np.load(copy / "shortlists.npz", allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays.update({key.replace("__", "."): value for key, value in changed.items()})
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _groups(copy: Path) -> list[str]:
    return sorted(json.loads((copy / "predictor.json").read_text())["groups"])


def test_a_shortlist_table_of_the_wrong_shape_is_refused_at_load(copy: Path) -> None:
    group = _groups(copy)[0]
    with np.load(copy / "shortlists.npz") as npz:
        table = npz[f"{group}.table"]
    _resave(copy, files={"shortlists.npz": _npz_with(copy, **{f"{group}__table": table[:, :, :, :4]})})

    with pytest.raises(ArtifactError, match=rf"{group}.table has shape .* the grid needs"):
        Predictor.load(copy)


def test_a_missing_group_array_is_refused_at_load(copy: Path) -> None:
    group = _groups(copy)[-1]
    with np.load(copy / "shortlists.npz") as npz:
        arrays = {name: npz[name] for name in npz.files if name != f"{group}.lists"}
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    _resave(copy, files={"shortlists.npz": out.getvalue()})

    with pytest.raises(ArtifactError, match=rf"shortlists.npz has no {group}.lists array"):
        Predictor.load(copy)


def test_loading_reads_no_group_s_lists_and_a_query_reads_its_own_group_s() -> None:
    """The shipped artifact (eight groups): lists are decoded when their group is first asked about."""
    predictor = Predictor.load("h200")
    archive = predictor._shortlists  # the artifact's shortlists.npz, a ShortlistArchive

    assert len(archive) == 8 and archive.decoded == ()  # type: ignore[attr-defined]
    predictor.predict_best((3000, 5000, 700), dtype="fp16", layout="nn", measured=False)
    predictor.predict_best((3001, 5000, 700), dtype="fp16", layout="nn", measured=False)
    assert archive.decoded == ("fp16-nn",)  # type: ignore[attr-defined]


def test_lists_a_header_cannot_show_wrong_are_refused_at_their_group_s_first_query(copy: Path) -> None:
    """A table pointing past the lists loads (its header is right) and is refused when the group is built."""
    group = _groups(copy)[0]
    with np.load(copy / "shortlists.npz") as npz:
        table = npz[f"{group}.table"].copy()
        table[0, 0, 0, 0] = len(npz[f"{group}.lists"])
    _resave(copy, files={"shortlists.npz": _npz_with(copy, **{f"{group}__table": table})})
    predictor = Predictor.load(copy)
    dtype, layout = group.rsplit("-", 1)

    with pytest.raises(ArtifactError, match="shortlist table refers to lists that do not exist"):
        predictor.predict_best((3000, 5000, 700), dtype=dtype, layout=layout, measured=False)


# --- a corrupted or malformed artifact is always refused with ArtifactError naming the file ----------------------


def _rewrite(directory: Path, name: str, data: bytes) -> None:
    """Replace one file of an artifact; its checksum in the sidecar follows, so only the content is wrong."""
    (directory / name).write_bytes(data)
    if name != "metadata.json":
        meta = json.loads((directory / "metadata.json").read_text())
        meta["files"][name] = hashlib.sha256(data).hexdigest()
        (directory / "metadata.json").write_text(json.dumps(meta))


def _edit_sidecar(directory: Path, change: Callable[[dict[str, Any]], object]) -> None:
    meta = json.loads((directory / "metadata.json").read_text())
    change(meta)
    (directory / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(files=list(m["files"])), "files must be an object, not a list"),
        (lambda m: m.update(fingerprint=None), "fingerprint must be an object, not null"),
        (lambda m: m["fingerprint"].update(sm_count="abc"), "fingerprint.sm_count='abc' must be an int >= 1"),
        (lambda m: m.update(domain=[]), "domain must be an object, not a list"),
        (lambda m: m["domain"].update(problems=[5]), "domain.problems=[5] must be a list of str"),
        (lambda m: m["domain"].update(problem_dims=[[16, 16]]), "domain.problem_dims has a row [16, 16]"),
        (lambda m: m["domain"].update(problem_dims=[[16, 0, 16, "bf16", "nt"]]), "domain.problem_dims has a row"),
        (lambda m: m["domain"].update(log2_min={"m": 0, "n": "x", "k": 0}), "domain.log2_min="),
        (lambda m: m["domain"].update(log2_k=[3.0]), "domain.log2_k=[3.0] must be [min, max]"),
        (lambda m: m.update(ood=None), "ood must be an object, not null"),
        (lambda m: m["ood"].update(neighbours="1"), "ood.neighbours='1' must be an int >= 1"),
        (lambda m: m["ood"].update(heldout_flagged="1x2x3-bf16-nt"), "ood.heldout_flagged='1x2x3-bf16-nt' must list"),
        (
            lambda m: m["ood"].update(heldout_flagged=["9x9x9-bf16-nt"]),
            "ood.heldout_flagged=['9x9x9-bf16-nt'] must list keys of ood.heldout_top1",
        ),
        (lambda m: m.update(training=[]), "training must be an object, not a list"),
        (lambda m: m.update(device_class="../../h200.json"), "device_class='../../h200.json' is not a device class"),
        (lambda m: m.update(triton_version=None), "triton_version=None must be a str"),
        (lambda m: m.update(feature_names="log2_m"), "feature_names='log2_m' must be a list of str"),
        (lambda m: m.update(feature_schema_version="1"), "feature_schema_version='1' must be an int >= 0"),
        (lambda m: m.update(level_trees=None), "level_trees=None must be an int >= 0"),
        (lambda m: m.update(artifact_schema_version=True), "artifact schema version True"),
    ],
)
def test_a_sidecar_of_the_wrong_structure_is_refused_naming_the_field(
    copy: Path, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    _edit_sidecar(copy, change)

    with pytest.raises(ArtifactError, match=re.escape(f"{copy}: metadata.json: {message}")):
        Predictor.load(copy)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'\xff\xfe{"files": {}}', "metadata.json is not UTF-8 text: invalid start byte at byte 0"),
        (b'{"files": ', "metadata.json is not valid JSON"),
        (b"[" * 100_000, "metadata.json is not valid JSON"),  # nested past the json module's recursion limit
        (b"[]", "metadata.json must hold a JSON object, not a list"),
        (b"null", "metadata.json must hold a JSON object, not null"),
    ],
)
def test_a_sidecar_that_is_not_utf8_json_holding_an_object_is_refused_naming_it(
    copy: Path, data: bytes, message: str
) -> None:
    (copy / "metadata.json").write_bytes(data)

    with pytest.raises(ArtifactError, match=re.escape(f"{copy}: {message}")):
        Predictor.load(copy)


@pytest.mark.parametrize("where", ["parent", "absolute", "subfolder", "backslash"])
def test_a_file_entry_outside_the_artifact_directory_is_refused(copy: Path, artifact: Path, where: str) -> None:
    """Each entry names a file that exists and whose checksum matches: only its name is wrong."""
    outside = copy.parent / "outside.json"
    outside.write_bytes(b"{}")
    (copy / "sub").mkdir()
    (copy / "sub" / "inside.json").write_bytes(b"{}")
    name = {"parent": "../outside.json", "absolute": str(outside), "subfolder": "sub/inside.json",
            "backslash": "..\\outside.json"}[where]  # fmt: skip
    _edit_sidecar(copy, lambda m: m["files"].update({name: hashlib.sha256(b"{}").hexdigest()}))

    with pytest.raises(ArtifactError, match=re.escape(f"files: the entry {name!r} is not a plain file name")):
        load_artifact(copy)
    with pytest.raises(ValueError, match=re.escape(f"extra file name {name!r} is not allowed")):
        save_artifact(copy.parent / "saved", b"{}", load_artifact(artifact)[0], {name: b"{}"})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "model.ubj is empty (0 bytes), not an XGBoost booster"),
        (b'{"learner": {}}', "model.ubj does not hold an XGBoost UBJSON booster: it opens like JSON"),
        (b"\x00\x01garbage", "model.ubj is not an XGBoost booster: it opens like neither a UBJSON nor a JSON object"),
    ],
)
def test_a_booster_file_that_is_empty_or_of_another_format_is_named(copy: Path, data: bytes, message: str) -> None:
    _rewrite(copy, "model.ubj", data)

    with pytest.raises(ArtifactError, match=re.escape(f"{copy}: {message}")):
        Predictor.load(copy)


ARTIFACT_FILES = ("metadata.json", "model.ubj", "measured.json", "predictor.json", "shortlists.npz")


def test_the_truncation_test_covers_every_file_of_the_fixture_artifact(artifact: Path) -> None:
    assert sorted(p.name for p in artifact.iterdir()) == sorted(ARTIFACT_FILES)


@pytest.mark.parametrize("length", ["empty", "half"])
@pytest.mark.parametrize("name", ARTIFACT_FILES)
def test_a_truncated_file_is_refused_with_an_artifact_error_naming_it(copy: Path, name: str, length: str) -> None:
    """With its checksum recomputed, so that the content itself must be checked."""
    data = (copy / name).read_bytes()
    _rewrite(copy, name, b"" if length == "empty" else data[: len(data) // 2])

    with pytest.raises(ArtifactError, match=re.escape(name)):
        Predictor.load(copy)


def test_an_artifact_of_a_device_class_without_a_spec_is_refused_unless_a_device_is_given(copy: Path) -> None:
    _resave(copy, metadata={"device_class": "zz9"})

    with pytest.raises(ArtifactError, match=r"device_class 'zz9' has no device spec in this tilecost.*pass device="):
        Predictor.load(copy)
    assert Predictor.load(copy, device="h200").predict_best((300, 400, 500)).ood  # flagged: another device


@pytest.mark.parametrize("name", ["measured.json", "predictor.json"])
def test_a_deeply_nested_json_file_is_refused_as_malformed(copy: Path, name: str) -> None:
    _resave(copy, files={name: b"[" * 100_000 + b"]" * 100_000})

    with pytest.raises(ArtifactError, match=rf"{name}.* is malformed"):
        Predictor.load(copy)
