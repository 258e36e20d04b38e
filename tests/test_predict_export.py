"""What the predictor precomputes at export: prepare_artifact_files and the shortlist grid."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tilecost import DType, Layout, Problem, load_device
from tilecost.errors import ArtifactError
from tilecost.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from tilecost.predict import ArtifactMetadata, TreeEnsemble, prepare_artifact_files, training_domain
from tilecost.predict.artifact import load_artifact
from tilecost.predict.scoring import GroupScorer
from tilecost.predict.shortlist import (
    STRIDE_SHARE,
    GridSpec,
    ShortlistTable,
    build_shortlists,
    containment,
    sample_shapes,
    stride_ragged,
    stride_ragged_samples,
    stride_steps,
)

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules

PROBLEMS = [Problem(64, 4096, 4096), Problem(1000, 1000, 1000), Problem(17, 300, 5000), Problem(2048, 512, 64)]
# One cell per axis and a few dozen sample shapes: quick to build with the numpy evaluator.
TINY = {"step_log2": 40.0, "top_n": 3, "samples": 24, "validation": 8, "list_width": 8, "default_width": 4}


@pytest.fixture(scope="module")
def model_json(artifact: Path) -> bytes:
    """The fixture artifact's booster (stored as UBJSON) in XGBoost's JSON format."""
    import xgboost as xgb

    return bytes(xgb.Booster(model_file=bytearray((artifact / "model.ubj").read_bytes())).save_raw("json"))


@pytest.fixture(scope="module")
def group(model_json: bytes) -> GroupScorer:
    ensemble = TreeEnsemble.from_json(model_json)
    return GroupScorer.build(load_device("h200"), DType.BF16, Layout.NT, "log_time_us", ensemble.predict)


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
    assert header["format"] == 2 and group["grid"]["shape"] == [1, 1, 1]
    assert 1 <= len(group["dispatch"]["configs"]) <= 4
    assert group["validation"]["shapes"] == 8 and group["validation"]["default_width"] == 4
    assert set(group["validation"]["containment"]) == {"4", "8"}
    stride = group["validation"]["stride_ragged"]  # the class's own samples and validation shapes
    assert stride["samples"] >= round(TINY["samples"] * STRIDE_SHARE) and stride["shapes"] == 2
    assert set(stride["containment"]) == {"4", "8"}
    assert "ood" not in header  # metadata.ood carries no held-out fractions to fit rules on
    with np.load(io.BytesIO(first["shortlists.npz"]), allow_pickle=False) as arrays:
        assert arrays["bf16-nt.table"].shape == (1, 1, 1, 16)  # 8 alignment variants, each also stride-ragged
        assert arrays["bf16-nt.lists"].shape[1] == 8


def test_every_group_gets_its_lists_and_validation(model_json: bytes, metadata: ArtifactMetadata) -> None:
    """Groups of the training domain each get lists; fp8 nn, which has no stride-ragged shape, no class validation."""
    problems = [*PROBLEMS, Problem(512, 1024, 1000, "fp32", "nn"), Problem(256, 2048, 2048, "fp8e4m3", "nn")]
    several = ArtifactMetadata(**{**asdict(metadata), "domain": training_domain(problems)})

    files = prepare_artifact_files(model_json, several, **TINY)

    groups = json.loads(files["predictor.json"])["groups"]
    assert set(groups) == {"bf16-nt", "fp32-nn", "fp8e4m3-nn"}
    assert "stride_ragged" in groups["fp32-nn"]["validation"]
    assert "stride_ragged" not in groups["fp8e4m3-nn"]["validation"]
    with np.load(io.BytesIO(files["shortlists.npz"]), allow_pickle=False) as arrays:
        assert all(arrays[f"{name}.table"].shape[-1] == 16 for name in groups)


def test_a_scorer_must_be_the_same_model(model_json: bytes, metadata: ArtifactMetadata) -> None:
    with pytest.raises(ArtifactError, match="scorer's predictions differ"):
        prepare_artifact_files(model_json, metadata, scorer=lambda x: np.zeros(len(x)), **TINY)


def test_with_level_trees_the_scorer_scores_the_main_trees_only(model_json: bytes, metadata: ArtifactMetadata) -> None:
    import xgboost as xgb

    # The fixture's last 10 of 40 trees stand in for level trees: ranked with the first 30, added once.
    with_level = ArtifactMetadata(**{**asdict(metadata), "level_trees": 10})
    booster = xgb.Booster(model_file=bytearray(model_json))
    booster.set_param({"nthread": 1})

    numpy_files = prepare_artifact_files(model_json, with_level, **TINY)
    # A scorer of the first 30 trees is accepted; the same bits as the export's own walk give the same files.
    # (XGBoost's float32 sums are accepted too, but can order a near-tie the other way: with the eleventh
    # session's data, the fixture model's lists differed from the numpy walk's in one such place.)
    first_30 = TreeEnsemble.from_json(model_json, FEATURE_NAMES).first_trees(30)
    main_only = prepare_artifact_files(model_json, with_level, scorer=first_30.predict, **TINY)
    prepare_artifact_files(
        model_json, with_level, scorer=lambda x: booster.inplace_predict(x, iteration_range=(0, 30)), **TINY
    )

    assert main_only == numpy_files
    assert numpy_files != prepare_artifact_files(model_json, metadata, **TINY)  # the split matters
    with pytest.raises(ArtifactError, match="scorer's predictions differ"):
        prepare_artifact_files(model_json, with_level, scorer=booster.inplace_predict, **TINY)


def test_metadata_must_describe_the_training_domain_and_features(model_json: bytes, metadata: ArtifactMetadata) -> None:
    ranges_only = {"dtypes": ["bf16"], "log2_min": dict.fromkeys("mnk", 0), "log2_max": dict.fromkeys("mnk", 1)}
    with pytest.raises(ArtifactError, match="domain lists no training problems"):
        prepare_artifact_files(model_json, ArtifactMetadata(**{**asdict(metadata), "domain": ranges_only}))
    with pytest.raises(ArtifactError, match="feature list or feature schema"):
        prepare_artifact_files(model_json, ArtifactMetadata(**{**asdict(metadata), "feature_schema_version": 0}))


def test_batched_top_configs_equal_ranking_each_problem_alone(group: GroupScorer) -> None:
    problems = [*PROBLEMS, Problem(1, 7, 3), Problem(300, 5000, 17)]

    tops = group.top_configs(problems, 5, workers=2)

    for problem, top in zip(problems, tops, strict=True):
        ranked = group.ranked(problem)[0][:5]
        assert top[: len(ranked)].tolist() == ranked.tolist()
        assert (top[len(ranked) :] == -1).all()


def test_a_prescore_narrows_what_the_full_model_ranks(group: GroupScorer, model_json: bytes) -> None:
    problems = [*PROBLEMS, Problem(1, 7, 3), Problem(300, 5000, 17)]
    exact = group.top_configs(problems, 5, workers=2)
    ensemble = TreeEnsemble.from_json(model_json)

    # The full model as its own prescore: its best 8 hold its best 5, so the ranking is unchanged.
    assert np.array_equal(group.top_configs(problems, 5, workers=2, prescore=ensemble.predict, keep=8), exact)
    # A coarse prescore: the full model ranks only the prescore's best 16 of each problem, so every
    # answer is among them (ties at the 16th included), in the full model's order.
    coarse = ensemble.first_trees(3)
    prescored = GroupScorer.build(group.device, group.dtype, group.layout, group.target, coarse.predict)
    narrowed = group.top_configs(problems, 5, workers=2, prescore=coarse.predict, keep=16)
    for problem, top in zip(problems, narrowed, strict=True):
        indices, times = group.times_us(problem, group.everything)
        full = dict(zip(indices.tolist(), times.tolist(), strict=True))
        if len(indices) <= 16:  # nothing to narrow
            assert top[: min(5, len(indices))].tolist() == group.ranked(problem)[0][:5].tolist()
            continue
        coarse_indices, coarse_times = prescored.times_us(problem, group.everything)
        kept = coarse_indices[coarse_times <= np.sort(coarse_times)[15]].tolist()
        assert set(top.tolist()) <= set(kept)
        assert [full[i] for i in top] == sorted(full[i] for i in top)
    with pytest.raises(ValueError, match="keep=3 is not allowed"):
        group.top_configs(problems, 5, prescore=coarse.predict, keep=3)


def test_first_trees_are_the_sum_of_the_first_trees(model_json: bytes) -> None:
    ensemble = TreeEnsemble.from_json(model_json)
    rows = np.random.default_rng(0).normal(size=(7, ensemble.num_features)).astype(np.float32)

    first, rest = ensemble.first_trees(2), ensemble.first_trees(ensemble.num_trees + 5)

    assert first.num_trees == 2 and rest.num_trees == ensemble.num_trees
    assert np.array_equal(rest.predict_numpy(rows), ensemble.predict_numpy(rows))
    # Two trees' leaves: the base score plus the sum of each tree's reached leaf alone.
    alone = [TreeEnsemble(**{**asdict(ensemble), "roots": ensemble.roots[i : i + 1]}) for i in (0, 1)]
    leaves = [a.predict_numpy(rows) - a.base_score for a in alone]
    np.testing.assert_allclose(first.predict_numpy(rows), ensemble.base_score + leaves[0] + leaves[1], rtol=1e-6)
    np.testing.assert_array_equal(first.predict(rows), first.predict_numpy(rows))  # compiled where numba is
    with pytest.raises(ValueError, match="count=0"):
        ensemble.first_trees(0)


def test_every_sample_shape_finds_its_best_in_its_own_list(group: GroupScorer) -> None:
    # Two cells along m; lists wide enough to keep every sample's winners: the containment of the
    # shapes the lists were built from is then exact, whatever the prefix order.
    spec = GridSpec((4.0, 8.0, 8.0), 4.0, (2, 1, 1), top_n=2, samples=40, list_width=200, seed=0)
    shapes = sample_shapes(spec, np.empty((0, 3)), 40, seed=3)
    tops = group.top_configs([Problem(*map(int, s)) for s in shapes], 2)

    table = build_shortlists(spec, shapes, tops)

    assert containment(table, shapes, tops[:, 0], [200]) == {200: 1.0}
    # A list starts with its own cell's winners: the most frequent best of the cell's samples leads.
    cell, variant = tuple(spec.cells(shapes[:1])[0]), int(shapes[0][0] % 16 == 0) | int(shapes[0][1] % 16 == 0) << 1
    variant |= int(shapes[0][2] % 16 == 0) << 2
    same = (spec.cells(shapes) == cell).all(axis=1) & [
        (int(m % 16 == 0) | int(n % 16 == 0) << 1 | int(k % 16 == 0) << 2) == variant for m, n, k in shapes
    ]
    winners, counts = np.unique(tops[same, 0], return_counts=True)
    assert table.lists[table.table[cell + (variant,)]][0] in winners[counts == counts.max()]


def test_lists_rank_by_weight_and_empty_cells_borrow_the_nearest() -> None:
    # Three cells along m (2**0..2**3, 2**3..2**6, 2**6..2**9); samples only in the first, unaligned.
    spec = GridSpec((0.0, 4.0, 4.0), 3.0, (3, 1, 1), top_n=2, samples=3, list_width=3, seed=0)
    shapes = np.array([[3, 17, 17], [5, 17, 17], [6, 17, 17]])
    tops = np.array([[7, 9], [7, 8], [9, -1]])  # weights: 7 -> 1 + 1, 9 -> 0.5 + 1, 8 -> 0.5

    table = build_shortlists(spec, shapes, tops)

    first = table.table[0, 0, 0, 0]
    assert table.lists[first].tolist() == [7, 9, 8]
    assert table.members(first, 2).tolist() == [7, 9]  # a prefix, in space order
    # The middle cell has only its neighbour's samples (same order); the last borrows the nearest.
    assert table.lists[table.table[1, 0, 0, 0]].tolist() == [7, 9, 8]
    assert table.lists[table.table[2, 0, 0, 0]].tolist() == [7, 9, 8]
    assert table.list_id(Problem(100, 17, 17)) == table.table[2, 0, 0, 0]
    assert table.list_id(Problem(2**20 + 1, 1, 2**20 + 1)) == table.table[2, 0, 0, 0]  # beyond the grid: clipped


def test_a_cut_is_the_lists_sorted_head_its_late_members_and_the_rest() -> None:
    spec = GridSpec((0.0, 4.0, 4.0), 3.0, (1, 1, 1), top_n=1, samples=1, list_width=6, seed=0)
    lists = np.array([[9, 3, 7, 1, 8, 2], [5, 4, -1, -1, -1, -1], [6, 0, 2, -1, -1, -1]], dtype=np.int32)
    table = ShortlistTable(spec, np.zeros((1, 1, 1, 8), dtype=np.int32), lists)

    cut = table.cut(0, 4, extend_from=2)
    assert (cut.head.tolist(), cut.late.tolist(), cut.tail.tolist()) == ([1, 3, 7, 9], [7, 1], [8, 2])
    assert cut.head.dtype == np.intp and not cut.head.flags.writeable  # a view of the sorted heads
    assert table.cut(1, 4, extend_from=2).head.tolist() == [4, 5]  # shorter than the width: no padding
    short = table.cut(2, 3, extend_from=1)
    assert (short.head.tolist(), short.late.tolist(), short.tail.tolist()) == ([0, 2, 6], [], [])
    assert table.cut(0, 4, extend_from=None).tail.tolist() == []  # never extended
    assert table.cut(0, None).head.tolist() == [1, 2, 3, 7, 8, 9]  # the whole list
    assert table.cut(2, 2).head.tolist() == [0, 6]


def test_sample_shapes_cover_the_grid_and_both_alignments() -> None:
    spec = GridSpec((0.0, 4.0, 4.0), 2.0, (6, 5, 5), top_n=1, samples=1000, list_width=1, seed=0)
    training = np.log2(np.array([[64.0, 4096.0, 4096.0]]))

    shapes = sample_shapes(spec, training, 1000, seed=0)

    assert np.array_equal(shapes, sample_shapes(spec, training, 1000, seed=0))
    assert shapes.shape == (1000, 3) and shapes.min() >= 1
    assert (np.log2(shapes) <= spec.log2_high + 0.5).all()
    large = shapes >= 64
    assert 0.4 < (shapes[large] % 16 == 0).mean() < 0.65  # round numbers and multiples of 16: half of them
    assert (shapes[large] % 16 == 8).any()  # and 8-aligned ones among the ragged rest
    round_ = np.isin(shapes, [c * 2**j for c in (1, 3, 5, 7, 9) for j in range(32)])
    assert 0.2 < round_.mean() < 0.5  # a quarter are round, and some others by chance (small extents)
    # Each alignment variant (M, N, K a multiple of 16 or not) gets about an eighth of the shapes.
    variants = (shapes % 16 == 0) @ np.array([1, 2, 4])
    assert np.bincount(variants, minlength=8).min() > 1000 / 8 * 0.5


def test_grids_cover_the_domain_with_a_margin() -> None:
    def covering(low: list[float], high: list[float], margin: float) -> GridSpec:
        return GridSpec.covering(low, high, step_log2=1.0, margin_log2=margin, top_n=4, samples=10, list_width=8,
                                 seed=0)  # fmt: skip

    spec = covering([0.0, 3.3, 10.0], [16.0, 5.0, 10.0], 0.5)

    assert spec.origin_log2 == (0.0, 2.0, 9.0)
    assert spec.shape == (17, 4, 2)  # 0..16.5, 2..5.5, 9..10.5 in steps of 1
    assert covering([30.0] * 3, [31.0] * 3, 5.0).shape == (6, 6, 6)  # 25..log2(2**31 - 1)
    with pytest.raises(ValueError, match="step_log2 > 0"):
        GridSpec((0.0,) * 3, 0.0, (1, 1, 1), 1, 1, 1, 0)


@pytest.mark.parametrize(
    ("dtype", "layout", "steps"),
    [("bf16", "nt", (8, 8)), ("fp16", "nn", (8, 8)), ("fp32", "nt", (4, 4)), ("fp32", "nn", (4, 4)),
     ("fp8e4m3", "nt", (8, 16)), ("fp8e4m3", "nn", (16, 16))],
)  # fmt: skip
def test_stride_steps_are_what_16_byte_row_strides_need(dtype: str, layout: str, steps: tuple[int, int]) -> None:
    assert stride_steps(DType(dtype), Layout(layout)) == steps
    n_step, k_step = steps
    # The step's multiples off 16 are stride-ragged, the extents between them are not.
    if n_step < 16:
        assert stride_ragged(Problem(100, 48 + n_step, 64, dtype, layout))
        assert not stride_ragged(Problem(100, 48 + n_step // 2, 64, dtype, layout))
    if k_step < 16:
        assert stride_ragged(Problem(100, 64, 48 + k_step, dtype, layout))
        assert not stride_ragged(Problem(100, 64, 48 + k_step // 2, dtype, layout))
    assert not stride_ragged(Problem(100, 64, 64, dtype, layout))  # aligned: the plain variants


@pytest.mark.parametrize(("dtype", "layout"), [("bf16", "nt"), ("fp32", "nn"), ("fp8e4m3", "nt"), ("fp8e4m3", "nn")])
def test_stride_ragged_samples_are_all_of_the_class(dtype: str, layout: str) -> None:
    spec = GridSpec((0.0, 4.0, 4.0), 2.0, (6, 5, 5), top_n=1, samples=1000, list_width=1, seed=0)
    training = np.log2(np.array([[64.0, 4096.0, 4096.0]]))
    steps = stride_steps(DType(dtype), Layout(layout))

    shapes = stride_ragged_samples(spec, training, 500, 7, steps)

    if steps == (16, 16):
        assert shapes.shape == (0, 3)  # fp8 nn: no shape has 16-byte strides with N or K off multiples of 16
        return
    assert shapes.shape == (500, 3) and np.array_equal(shapes, stride_ragged_samples(spec, training, 500, 7, steps))
    assert all(stride_ragged(Problem(int(m), int(n), int(k), dtype, layout)) for m, n, k in shapes)
    assert (shapes[:, 0] % 16 != 0).any() and (shapes[:, 0] % 16 == 0).any()  # M as sample_shapes draws it
    for axis, step in zip((1, 2), steps, strict=True):
        residues = set((shapes[:, axis] % 16).tolist())
        assert residues <= set(range(0, 16, step)) and (step == 16 or residues - {0})


def test_stride_ragged_shapes_get_lists_of_their_own() -> None:
    # One cell; bf16 nt. 24 and 40 are 8-aligned (stride-ragged in bf16), 17 is not: same alignment bits, two lists.
    spec = GridSpec((0.0, 4.0, 4.0), 40.0, (1, 1, 1), top_n=2, samples=4, list_width=3, seed=0)
    shapes = np.array([[3, 24, 24], [5, 40, 24], [3, 17, 17], [5, 17, 19]])
    strided = np.array([stride_ragged(Problem(*map(int, s))) for s in shapes])
    tops = np.array([[7, 9], [7, 8], [1, 2], [2, -1]])

    table = build_shortlists(spec, shapes, tops, strided)

    assert strided.tolist() == [True, True, False, False] and table.stride_variants
    assert table.lists[table.list_id(Problem(9, 40, 40))].tolist() == [7, 8, 9]  # the class's samples alone (8, 9 tie)
    assert table.lists[table.list_id(Problem(9, 17, 33))].tolist() == [2, 1, -1]  # the plain variant's
    # A stride variant without samples (N ragged, K aligned here) takes its alignment's plain list.
    assert table.list_id(Problem(9, 40, 32)) == table.list_id(Problem(9, 33, 32))
    assert table.stride_list_id(Problem(9, 40, 40)) is None  # no aligned list added: its own is built for it
    with pytest.raises(ValueError, match="stride flags"):
        build_shortlists(spec, shapes, tops, strided[:2])


def _reexport_script() -> Any:
    """``scripts/reexport.py`` as a module (scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reexport", Path(__file__).parents[1] / "scripts" / "reexport.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_re_export_keeps_booster_sidecar_and_measurements_and_rebuilds_the_lists(
    artifact: Path, tmp_path: Path
) -> None:
    """``scripts/reexport.py``: the same model, sidecar fields and measured answers (another device class's too);
    new predictor files."""
    from tilecost.train.refresh import refresh_measured

    module = _reexport_script()
    settings = {"step_log2": 40.0, "samples": 48, "validation": 8, "list_width": 8, "default_width": 4}
    source = tmp_path / "source"  # with the shipped dataset's H100 measured bests beside its own
    refresh_measured(artifact, fixtures.DATASET, out=source, for_device="h100_sxm")

    path = module.main([str(source), str(tmp_path / "again"), json.dumps(settings)])

    before, old = load_artifact(source)
    after, new = load_artifact(path)
    assert new[after.model_file] == old[before.model_file]
    assert json.loads(new["measured.json"]) == json.loads(old["measured.json"])
    assert new["measured-h100_sxm.json"] == old["measured-h100_sxm.json"]
    assert asdict(after) | {"files": {}} == asdict(before) | {"files": {}}
    groups = json.loads(new["predictor.json"])["groups"]
    assert groups.keys() == json.loads(old["predictor.json"])["groups"].keys()
    assert all(g["grid"]["samples"] <= 48 and g["validation"]["default_width"] == 4 for g in groups.values())
    with np.load(io.BytesIO(new["shortlists.npz"]), allow_pickle=False) as arrays:
        assert {arrays[f"{name}.table"].shape[-1] for name in groups} == {16}
    with pytest.raises(SystemExit):
        module.main([str(artifact)])


def test_a_re_export_can_fit_the_shape_side_calibration_again(artifact: Path, tmp_path: Path) -> None:
    """``scripts/reexport.py --recalibrate``: ``metadata.ood`` fitted by today's ``calibrate_ood`` on the stored
    held-out fractions and training domain, with the stored settings; everything else as a plain re-export."""
    from tilecost.predict import calibrate_ood

    module = _reexport_script()
    settings = {"step_log2": 40.0, "samples": 48, "validation": 8, "list_width": 8, "default_width": 4}
    # A source whose stored calibration today's code would not fit: a threshold of 0.01 octaves, no record.
    source = tmp_path / "source"
    shutil.copytree(artifact, source)
    header = json.loads((source / "metadata.json").read_text())
    header["ood"] |= {"sparse_distance_log2": 0.01, "calibration": {}}
    (source / "metadata.json").write_text(json.dumps(header))
    before, _ = load_artifact(source)
    stored = {Problem.from_key(k): v for k, v in before.ood["heldout_top1"].items()}
    training = [Problem.from_key(k) for k in before.domain["problems"]]

    path = module.main(["--recalibrate", str(source), str(tmp_path / "again"), json.dumps(settings)])

    after, _ = load_artifact(path)
    assert dict(after.ood) == calibrate_ood(list(stored), list(stored.values()), training)
    assert after.ood["sparse_distance_log2"] != 0.01
    assert "adopted" in after.ood["calibration"] and after.ood["heldout_top1"] == before.ood["heldout_top1"]
    assert asdict(after) | {"files": {}, "ood": {}} == asdict(before) | {"files": {}, "ood": {}}
    without = replace(before, ood={k: v for k, v in before.ood.items() if k != "heldout_top1"})
    with pytest.raises(SystemExit, match="no held-out top-1 fractions"):
        module.recalibrated(without)


def test_a_recalibration_keeps_the_neighbourhood_and_p_value_the_sidecar_was_fitted_with(
    artifact: Path, tmp_path: Path
) -> None:
    """``--recalibrate`` fits again with the sidecar's own neighbourhood and leave-one-out p-value, not today's
    defaults: a source fitted over the dtype-and-layout neighbourhood with p 0.2 is fitted again so."""
    from tilecost.predict import calibrate_ood

    module = _reexport_script()
    source = tmp_path / "source"
    shutil.copytree(artifact, source)
    header = json.loads((source / "metadata.json").read_text())
    stored = {Problem.from_key(k): v for k, v in header["ood"]["heldout_top1"].items()}
    training = [Problem.from_key(k) for k in header["domain"]["problems"]]
    header["ood"] = calibrate_ood(list(stored), list(stored.values()), training, neighbourhood="dtype-layout",
                                  max_p_value=0.2)  # fmt: skip
    assert header["ood"]["neighbourhood"] == "dtype-layout" and header["ood"]["calibration"]["max_p_value"] == 0.2
    (source / "metadata.json").write_text(json.dumps(header))
    before, _ = load_artifact(source)

    again = module.recalibrated(before)

    assert again == calibrate_ood(list(stored), list(stored.values()), training, neighbourhood="dtype-layout",
                                  max_p_value=0.2)  # fmt: skip
    assert again["neighbourhood"] == "dtype-layout" and again["calibration"]["max_p_value"] == 0.2


def test_a_re_export_can_fit_the_calibration_on_a_dataset_s_held_out_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``scripts/reexport.py --recalibrate-on DATASET``: ``metadata.ood`` fitted again on the held-out problems the
    dataset holds, as the export of a freshly trained model fits it (the full model's choices for its settings, then
    the re-exported predictor's answers); ``--answers-on DATASET`` fits the flags alone; a dataset without held-out
    problems is refused."""
    from tests.test_train_fixtures import write_dataset
    from tilecost.cli import main as cli
    from tilecost.train.answer_gate import artifact_answers
    from tilecost.train.dataset import load_measurements
    from tilecost.train.pipeline import split_by_role

    dataset = write_dataset(tmp_path / "ds")
    source = tmp_path / "source"
    with monkeypatch.context() as patched:  # the predictor's precomputation is the re-export's to build
        patched.setattr("tilecost.predict.prepare_artifact_files", lambda *_, **__: {})
        tiny = ["--param", "n_estimators=10", "--param", "max_depth=3", "--n-jobs", "1", "--no-mlflow"]
        assert cli(["train", "--dataset", str(dataset), "--export-dir", str(source), *tiny]) == 0
    exported, _ = load_artifact(source)
    assert exported.ood["neighbourhood"] == "pattern" and exported.ood["heldout_top1"]
    # A stored calibration today's code would not fit, and no held-out fractions to fit one from.
    header = json.loads((source / "metadata.json").read_text())
    header["ood"] = {"sparse_distance_log2": 0.01, "neighbourhood": "dtype-layout"}
    (source / "metadata.json").write_text(json.dumps(header))
    module = _reexport_script()
    settings = {"step_log2": 40.0, "samples": 48, "validation": 8, "list_width": 8, "default_width": 4}

    path = module.main(["--recalibrate-on", str(dataset), str(source), str(tmp_path / "again"), json.dumps(settings)])

    after, files = load_artifact(path)
    # The training run's own calibration fitted again (its settings: the pattern neighbourhood, not the broken
    # source's), then the flags fitted on the re-exported predictor's answers to the dataset's held-out problems.
    heldout = split_by_role(load_measurements(dataset, "h200"))[1]
    answers = artifact_answers(path, heldout).fractions
    assert after.ood["labels"] == "answers" and after.ood["neighbourhood"] == exported.ood["neighbourhood"]
    assert after.ood["heldout_top1"] == {k: round(min(1.0, f), 6) for k, f in answers.items()}
    assert json.loads(files["predictor.json"])["ood"]["calibration"]["problems"] == len(answers)
    # --answers-on fits the flags alone, on the answers of the lists as they are: here the same again.
    again = module.main(["--answers-on", str(dataset), str(path), str(tmp_path / "answers")])
    twice, twice_files = load_artifact(again)
    assert dict(twice.ood) == dict(after.ood) and twice_files == files
    with pytest.raises(SystemExit, match="exists; name a new directory"):
        module.main(["--answers-on", str(dataset), str(path), str(again)])
    # A plain re-export keeps flags fitted on answers while it rebuilds the same lists, and says when it does not.
    same = module.main([str(path), str(tmp_path / "same"), json.dumps(settings)])
    assert load_artifact(same)[0].ood == after.ood
    other = settings | {"samples": 40}
    with pytest.raises(SystemExit, match=r"lists rebuilt here differ.*--answers-on DATASET"):
        module.main([str(path), str(tmp_path / "other"), json.dumps(other)])
    with pytest.raises(SystemExit):  # no settings: nothing is re-exported
        module.main(["--answers-on", str(dataset), str(path), str(tmp_path / "x"), json.dumps(settings)])
    with pytest.raises(SystemExit, match="holds no held-out problem of h200"):
        module.main(["--recalibrate-on", str(write_dataset(tmp_path / "no-heldout", heldout=())), str(source), "x"])
    with pytest.raises(SystemExit):
        module.main(["--recalibrate-on", str(source)])
