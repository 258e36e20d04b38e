"""What the predictor precomputes at export: prepare_artifact_files and the shortlist grid."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tilecost import DType, Layout, Problem, load_device
from tilecost.errors import ArtifactError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.predict import ArtifactMetadata, TreeEnsemble, prepare_artifact_files, training_domain
from tilecost.predict.scoring import GroupScorer
from tilecost.predict.shortlist import GridSpec, build_shortlists

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules

PROBLEMS = [Problem(64, 4096, 4096), Problem(1000, 1000, 1000), Problem(17, 300, 5000), Problem(2048, 512, 64)]
TINY = {"step_log2": 40.0, "top_n": 3, "interior_samples": 1}  # one cell per axis: quick to build


@pytest.fixture(scope="module")
def model_json(artifact: Path) -> bytes:
    return (artifact / "model.json").read_bytes()


@pytest.fixture(scope="module")
def metadata() -> ArtifactMetadata:
    return ArtifactMetadata(
        device_class="h200", fingerprint={"sm_count": 132}, triton_version="3.6.0", feature_names=FEATURE_NAMES,
        feature_schema_version=FEATURE_SCHEMA_VERSION, target="log_time_us", domain=training_domain(PROBLEMS),
    )  # fmt: skip


def test_numpy_export_is_deterministic_and_complete(model_json: bytes, metadata: ArtifactMetadata) -> None:
    first = prepare_artifact_files(model_json, metadata, **TINY)
    second = prepare_artifact_files(model_json, metadata, **TINY)

    assert first == second
    header = json.loads(first["predictor.json"])
    group = header["groups"]["bf16-nt"]
    assert header["format"] == 1 and group["grid"]["shape"] == [1, 1, 1]
    assert 1 <= len(group["dispatch"]["configs"]) <= 4
    with np.load(io.BytesIO(first["shortlists.npz"]), allow_pickle=False) as arrays:
        assert arrays["bf16-nt.table"].shape == (1, 1, 1, 8)


def test_a_scorer_must_be_the_same_model(model_json: bytes, metadata: ArtifactMetadata) -> None:
    with pytest.raises(ArtifactError, match="scorer's predictions differ"):
        prepare_artifact_files(model_json, metadata, scorer=lambda x: np.zeros(len(x)), **TINY)


def test_metadata_must_describe_the_training_domain_and_features(model_json: bytes, metadata: ArtifactMetadata) -> None:
    ranges_only = {"dtypes": ["bf16"], "log2_min": dict.fromkeys("mnk", 0), "log2_max": dict.fromkeys("mnk", 1)}
    with pytest.raises(ArtifactError, match="domain lists no training problems"):
        prepare_artifact_files(model_json, ArtifactMetadata(**{**asdict(metadata), "domain": ranges_only}))
    with pytest.raises(ArtifactError, match="feature list or feature schema"):
        prepare_artifact_files(model_json, ArtifactMetadata(**{**asdict(metadata), "feature_schema_version": 0}))


def test_each_list_holds_the_top_n_of_its_sample_shapes(model_json: bytes) -> None:
    ensemble = TreeEnsemble.from_json(model_json)
    group = GroupScorer.build(load_device("h200"), DType.BF16, Layout.NT, "log_time_us", ensemble.predict)
    spec = GridSpec((6.0, 6.0, 6.0), 2.0, (2, 1, 1), top_n=2, interior_samples=0, seed=0)

    table = build_shortlists(spec, DType.BF16, Layout.NT, lambda p: group.ranked(p)[0])

    # Cell (0, 0, 0), all extents multiples of 16 (variant 7): corners 2**6 and 2**8 on each axis.
    members = set(table.members(int(table.table[0, 0, 0, 7])).tolist())
    for m in (64, 256):
        for n in (64, 256):
            for k in (64, 256):
                assert set(group.ranked(Problem(m, n, k))[0][:2].tolist()) <= members
    # Looking up: 100 x 100 x 100 is in cell (0, 0, 0), unaligned (variant 0); beyond the grid clips.
    assert table.list_id(Problem(100, 100, 100)) == table.table[0, 0, 0, 0]
    assert table.list_id(Problem(2**20 + 1, 1, 2**20 + 1)) == table.table[1, 0, 0, 0]


def test_grids_cover_the_domain_with_a_margin() -> None:
    spec = GridSpec.covering([0.0, 3.3, 10.0], [16.0, 5.0, 10.0], step_log2=1.0, margin_log2=0.5,
                             top_n=4, interior_samples=0, seed=0)  # fmt: skip

    assert spec.origin_log2 == (0.0, 2.0, 9.0)
    assert spec.shape == (17, 4, 2)  # 0..16.5, 2..5.5, 9..10.5 in steps of 1
    assert GridSpec.covering([30.0] * 3, [31.0] * 3, step_log2=1.0, margin_log2=5.0, top_n=1,
                             interior_samples=0, seed=0).shape == (6, 6, 6)  # 25..log2(2**31 - 1)  # fmt: skip
    with pytest.raises(ValueError, match="step_log2 > 0"):
        GridSpec((0.0,) * 3, 0.0, (1, 1, 1), 1, 0, 0)
    assert math.isinf(GridSpec((0.0,) * 3, 1.0, (1, 1, 1), 1, 0, 0).radius_log2)
