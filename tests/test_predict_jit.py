"""The compiled path (numba) against its numpy references: the trees, the shortlist's features and
feasibility, and whole answers; and that it stays optional (off without numba or with TILECOST_JIT=0).

Tests that need numba are skipped, not failed, where it is not installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilecost import Predictor, Problem
from tilecost.device import load_device
from tilecost.features import FEATURE_NAMES, feature_matrix
from tilecost.predict.feasibility import feasible_mask
from tilecost.predict.jit import JIT_ENV, CompiledShortlist, jit_enabled
from tilecost.predict.scoring import GroupScorer
from tilecost.predict.trees import TreeEnsemble
from tilecost.problem import DType, Layout

from . import test_predict_fixture as fixtures
from .test_predict_fixture import Dataset
from .test_predict_trees import _tiny_model

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules
dataset = fixtures.dataset  # the session fixture, shared by the predictor's test modules

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed (pip install tilecost[fast])")


@pytest.fixture(autouse=True)
def _jit_as_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose the path themselves, whatever TILECOST_JIT the suite runs with."""
    monkeypatch.delenv(JIT_ENV, raising=False)


@pytest.fixture(scope="module")
def model_json(artifact: Path) -> bytes:
    """The fixture artifact's booster (stored as UBJSON) in XGBoost's JSON format."""
    import xgboost as xgb

    return bytes(xgb.Booster(model_file=bytearray((artifact / "model.ubj").read_bytes())).save_raw("json"))


def _rows(data: Dataset, count: int, seed: int) -> np.ndarray:
    return data.features[np.random.default_rng(seed).choice(len(data.features), count, replace=False)]


def _random_problems(count: int, seed: int) -> list[Problem]:
    """Log-uniform extents from 1 to 2**17, each a multiple of 16 half the time, every dtype and layout."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        dims = [max(1, int(2 ** rng.uniform(0, 17))) for _ in range(3)]
        dims = [max(16, d - d % 16) if rng.random() < 0.5 else d for d in dims]
        out.append(Problem(*dims, DType(rng.choice([d.value for d in DType])), Layout(rng.choice(["nt", "nn"]))))
    return out


def test_turned_off_by_the_environment_the_numpy_walk_answers(
    monkeypatch: pytest.MonkeyPatch, dataset: Dataset, model_json: bytes
) -> None:
    monkeypatch.setenv(JIT_ENV, "0")
    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    rows = _rows(dataset, 50, seed=1)

    assert not jit_enabled()
    assert ensemble.compiled is None
    np.testing.assert_array_equal(ensemble.predict(rows), ensemble.predict_numpy(rows))


def test_importing_the_predictor_does_not_import_numba() -> None:
    code = "import sys, tilecost, tilecost.predict; print(json.dumps(sys.modules.get('numba') is not None))"
    result = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) is False


@needs_numba
def test_compiled_trees_give_the_numpy_walks_bits_and_xgboosts_values(dataset: Dataset, model_json: bytes) -> None:
    xgb = pytest.importorskip("xgboost")
    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    rows = _rows(dataset, 3000, seed=0)

    assert ensemble.compiled is not None
    ours = ensemble.predict(rows)

    # Both sum float32 leaves in float64; 300 of them fit float64's extra 29 bits, so the bits agree.
    np.testing.assert_array_equal(ours, ensemble.predict_numpy(rows))
    np.testing.assert_allclose(ours, xgb.Booster(model_file=bytearray(model_json)).inplace_predict(rows),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


@needs_numba
def test_compiled_trees_send_missing_values_the_default_way(dataset: Dataset, model_json: bytes) -> None:
    xgb = pytest.importorskip("xgboost")
    ensemble = TreeEnsemble.from_json(model_json)
    rows = _rows(dataset, 1000, seed=2)
    rows[np.random.default_rng(3).random(rows.shape) < 0.3] = np.nan
    rows[::7, 5] = np.inf  # +inf goes right at every split and stays at a leaf

    ours = ensemble.compiled.predict(rows)  # type: ignore[union-attr]

    np.testing.assert_array_equal(ours, ensemble.predict_numpy(rows))
    np.testing.assert_allclose(ours, xgb.Booster(model_file=bytearray(model_json)).inplace_predict(rows),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


@needs_numba
def test_compiled_hand_built_tree() -> None:
    ensemble = TreeEnsemble.from_json(json.dumps(_tiny_model()))
    rows = np.array([[1.0, 5.0], [1.0, 10.0], [2.0, 0.0], [np.nan, 0.0], [1.0, np.nan], [np.inf, -np.inf]])

    # As in test_predict_trees: 0.5 + leaf; the last row: x0=inf is not < 2 -> right -> 3.0, a leaf.
    np.testing.assert_array_equal(ensemble.compiled.predict(rows), [1.5, 2.5, 3.5, 3.5, 1.5, 3.5])  # type: ignore[union-attr]


@needs_numba
@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("layout", list(Layout))
def test_compiled_shortlist_features_equal_feasible_mask_and_feature_matrix(
    dtype: DType, layout: Layout, model_json: bytes
) -> None:
    device = load_device("h200")
    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    group = GroupScorer.build(device, dtype, layout, "log_time_us", ensemble.predict, ensemble.compiled)
    compiled = group.compiled
    assert isinstance(compiled, CompiledShortlist)
    everything = group.everything
    members = np.sort(np.random.default_rng(0).choice(len(group.space), 40, replace=False))

    seed = list(DType).index(dtype) * 2 + list(Layout).index(layout)
    ragged_k = [Problem(128, 4096, 11000), Problem(512, 1024, 1032), Problem(128, 4096, 11008)]  # the miscompiled rule
    for problem in [*_random_problems(400, seed=seed), *ragged_k]:
        problem = Problem(problem.m, problem.n, problem.k, dtype, layout)
        mask = feasible_mask(problem, everything.columns, device)
        expected = feature_matrix(problem, everything.features.take(mask), device)

        indices, x = compiled.features(problem, everything.indices)
        some_indices, some_x = compiled.features(problem, members)

        np.testing.assert_array_equal(indices, np.flatnonzero(mask))
        # The same formulas in the same order: equal but for log2's last bit in a few values.
        np.testing.assert_allclose(x, expected, rtol=4e-16, atol=0)
        np.testing.assert_array_equal(x.astype(np.float32), expected.astype(np.float32))
        np.testing.assert_array_equal(some_indices, members[mask[members]])
        np.testing.assert_array_equal(some_x, x[np.isin(indices, members)])


@needs_numba
def test_compiled_and_numpy_predictors_give_the_same_answers(monkeypatch: pytest.MonkeyPatch, artifact: Path) -> None:
    compiled = Predictor.load(artifact, triton_version=None)
    monkeypatch.setenv(JIT_ENV, "0")
    reference = Predictor.load(artifact, triton_version=None)
    assert compiled.ensemble.compiled is not None and reference.ensemble.compiled is None

    for problem in _random_problems(300, seed=7):
        problem = Problem(problem.m, problem.n, problem.k)  # the fixture's group, bf16-nt
        ours, theirs = compiled.predict_best(problem, measured=False), reference.predict_best(problem, measured=False)
        assert (ours.config, ours.ood) == (theirs.config, theirs.ood)
        assert ours.time_us == pytest.approx(theirs.time_us, rel=1e-14)
    ranked = compiled.rank((3000, 5000, 700), 5, exhaustive=True, measured=False)
    assert [p.config for p in ranked] == [
        p.config for p in reference.rank((3000, 5000, 700), 5, exhaustive=True, measured=False)
    ]


@needs_numba
def test_the_compiled_neighbour_distance_is_the_numpy_one_bit_for_bit():
    from tilecost.predict.jit import compiled_distance
    from tilecost.predict.ood import _kth_distance

    kernel = compiled_distance()
    rng = np.random.default_rng(7)
    for count in (0, 1, 2, 5, 111, 400):
        points = rng.uniform(0, 17, size=(count, 3))
        for _ in range(25):
            query = rng.uniform(-2, 20, size=3)
            for neighbours in (1, 2, 3, 10):
                expected = _kth_distance(points, query, neighbours)
                got = kernel(points, float(query[0]), float(query[1]), float(query[2]), neighbours)
                assert got == expected or (np.isinf(got) and np.isinf(expected))


@needs_numba
def test_a_checker_with_the_compiled_distance_gives_the_same_verdicts(artifact):
    plain = Predictor.load(artifact).ood
    assert plain.distance_kernel is not None, "Predictor.load uses the compiled distance where numba is"
    import dataclasses

    numpy_only = dataclasses.replace(plain, distance_kernel=None)
    rng = np.random.default_rng(3)
    for _ in range(300):
        m, n, k = (int(2 ** rng.uniform(0, 17)) for _ in range(3))
        for dtype in (DType.BF16, DType.FP16, DType.FP8):
            problem = Problem(max(m, 1), max(n, 1), max(k, 1), dtype, Layout.NT)
            assert plain.verdict(problem) == numpy_only.verdict(problem)


@needs_numba
@pytest.mark.parametrize("target", ["log_time_us", "log_time_over_roofline"])
def test_the_compiled_best_two_are_the_numpy_paths(model_json: bytes, target: str) -> None:
    # GroupScorer.best_two: the compiled path computes times and the two fastest in the kernel; the
    # numpy path is times_us + argmin + partition. Both targets, shortlist-sized and whole sets.
    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    device = load_device("h200")
    compiled = GroupScorer.build(device, DType.BF16, Layout.NT, target, ensemble.predict, ensemble.compiled)
    reference = GroupScorer.build(device, DType.BF16, Layout.NT, target, ensemble.predict_numpy)
    assert compiled.compiled is not None and reference.compiled is None
    rng = np.random.default_rng(11)
    for problem in _random_problems(60, seed=11):
        problem = Problem(problem.m, problem.n, problem.k)
        members = np.sort(rng.choice(len(compiled.space), size=24, replace=False))
        for candidates in (compiled.subset(members), compiled.everything):
            ours = compiled.best_two(problem, candidates)
            theirs = reference.best_two(problem, reference.subset(candidates.indices))
            if theirs is None:
                assert ours is None
                continue
            assert ours is not None and ours[0] == theirs[0]
            assert ours[1] == pytest.approx(theirs[1], rel=1e-13)
            assert (ours[2] is None) == (theirs[2] is None)
            if theirs[2] is not None:
                assert ours[2] == pytest.approx(theirs[2], rel=1e-13)


@needs_numba
def test_the_shortlist_kernels_are_compiled_for_one_members_type_whatever_the_caller_passes(model_json: bytes) -> None:
    # numba compiles a specialisation per argument type, and a read-only array is another type than a
    # writable one: a widened shortlist (writable) after the shipped ones (read-only) once cost a
    # query 2.5 s of compiling where numba's cache was empty. Every members array the wrappers pass is
    # now intp, C-contiguous and read-only, and the caller's array is left as it was.
    from tilecost.predict.jit import _kernels

    ensemble = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    group = GroupScorer.build(load_device("h200"), DType.BF16, Layout.NT, "log_time_us", ensemble.predict,
                              ensemble.compiled)  # fmt: skip
    compiled = group.compiled
    assert isinstance(compiled, CompiledShortlist)
    frozen = np.arange(0, len(group.space), 7, dtype=np.intp)
    frozen.flags.writeable = False
    writable = np.arange(0, len(group.space), 7, dtype=np.intp)
    strided = np.arange(0, len(group.space), dtype=np.intp)[::7]
    narrow = np.arange(0, len(group.space), 7, dtype=np.int32)
    problem = Problem(38, 404, 32)
    answers = []
    for members in (frozen, writable, strided, narrow):
        answers.append((compiled.features(problem, members)[0].tolist(), compiled.best_two(problem, members, -1),
                        compiled.score(problem, members)[2].tolist()))  # fmt: skip
    assert all(answer == answers[0] for answer in answers)
    assert writable.flags.writeable and strided.flags.writeable and narrow.flags.writeable
    kernels = _kernels()
    for name in ("shortlist_features", "best_two", "score_shortlist"):
        assert len(getattr(kernels, name).signatures) == 1, (name, getattr(kernels, name).signatures)


def _with_level_trees(data: Dataset, model_json: bytes, count: int = 15) -> bytes:
    """The fixture's booster with ``count`` per-problem level trees appended, as ``CostModel(center_problems=
    True)`` appends them: fitted on one row per problem holding only its problem columns."""
    import xgboost as xgb

    from tilecost.features import PROBLEM_FEATURES
    from tilecost.train.model import _joined_booster

    keys = data.columns["problem_key"]
    _, first = np.unique(keys, return_index=True)
    rows = np.full((len(first), len(FEATURE_NAMES)), np.nan)
    rows[:, : len(PROBLEM_FEATURES)] = data.features[first, : len(PROBLEM_FEATURES)]
    level = np.random.default_rng(3).normal(0.0, 0.5, len(first))  # any level per problem
    params = {"max_depth": 3, "eta": 0.3, "base_score": 0.0, "nthread": 1, "tree_method": "hist"}
    level_booster = xgb.train(params, xgb.DMatrix(rows, level, feature_names=list(FEATURE_NAMES)), count)
    main = xgb.Booster(model_file=bytearray(model_json))
    return bytes(_joined_booster([main, level_booster], [1.0, 1.0]).save_raw("json"))


@pytest.mark.parametrize("compiled", [True, False])
def test_level_trees_walked_once_give_the_whole_boosters_answers(
    dataset: Dataset, model_json: bytes, compiled: bool
) -> None:
    # A booster whose last trees are a per-problem level: the predictor ranks with the others and adds
    # the level, walked on one row; the answers must be the whole booster's, walked on every row.
    if compiled and not HAVE_NUMBA:
        pytest.skip("numba is not installed")
    whole = TreeEnsemble.from_json(_with_level_trees(dataset, model_json), FEATURE_NAMES)
    main, level = whole.first_trees(whole.num_trees - 15), whole.last_trees(15)
    assert level.base_score == 0.0 and main.base_score == whole.base_score
    device = load_device("h200")
    split = GroupScorer.build(
        device, DType.BF16, Layout.NT, "log_time_over_roofline", main.predict if compiled else main.predict_numpy,
        main.compiled if compiled else None, level=level.predict if compiled else level.predict_numpy,
        compiled_level=level.compiled if compiled else None,
    )  # fmt: skip
    reference = GroupScorer.build(device, DType.BF16, Layout.NT, "log_time_over_roofline", whole.predict_numpy)
    assert (split.compiled is not None) == compiled
    rng = np.random.default_rng(5)
    for problem in _random_problems(40, seed=5):
        problem = Problem(problem.m, problem.n, problem.k)
        members = np.sort(rng.choice(len(split.space), size=24, replace=False))
        ours, theirs = (
            split.best_two(problem, split.subset(members)),
            reference.best_two(problem, reference.subset(members)),
        )
        if theirs is None:
            assert ours is None
            continue
        assert ours is not None and ours[0] == theirs[0]
        assert ours[1] == pytest.approx(theirs[1], rel=1e-9)
        indices, times = split.times_us(problem, split.subset(members))
        ref_indices, ref_times = reference.times_us(problem, reference.subset(members))
        assert np.array_equal(indices, ref_indices) and times == pytest.approx(ref_times, rel=1e-9)


def test_an_artifact_with_level_trees_answers_with_them_and_a_bad_count_is_refused(
    tmp_path: Path, dataset: Dataset, artifact: Path
) -> None:
    import dataclasses

    from tilecost.errors import ArtifactError
    from tilecost.predict.artifact import load_artifact, save_artifact

    metadata, blobs = load_artifact(artifact)
    model_json = _with_level_trees(dataset, blobs[metadata.model_file])  # saved as JSON: model.json
    extra = {name: data for name, data in blobs.items() if name != metadata.model_file}
    save_artifact(tmp_path / "level", model_json, dataclasses.replace(metadata, level_trees=15), extra)
    predictor = Predictor.load(tmp_path / "level", triton_version=None)
    assert predictor.level is not None and predictor.level.num_trees == 15

    whole = TreeEnsemble.from_json(model_json, FEATURE_NAMES)
    for shape in ((3000, 5000, 700), (17, 4096, 1000), (1, 300, 20000)):
        answer = predictor.predict_best(shape, measured=False)
        problem = Problem(*shape)
        x = feature_matrix(problem, _config_arrays([answer.config]), load_device("h200"))
        expected = float(np.exp(whole.predict_numpy(x)[0]))  # the fixture's target is log_time_us
        assert answer.time_us == pytest.approx(expected, rel=1e-9)

    save_artifact(tmp_path / "bad", model_json, dataclasses.replace(metadata, level_trees=whole.num_trees), extra)
    with pytest.raises(ArtifactError, match="level trees"):
        Predictor.load(tmp_path / "bad", triton_version=None)


def _config_arrays(configs):
    from tilecost.features import ConfigArrays

    return ConfigArrays.from_configs(configs)


@needs_numba
def test_a_rows_prediction_does_not_depend_on_the_rows_walked_with_it(dataset: Dataset, model_json: bytes) -> None:
    # walk_trees moves every row of a block one level down before the next level: a row with NaNs next to
    # rows without, and a last block shorter than ROW_BLOCK, must give each row what it gets alone.
    from tilecost.predict.jit_kernels import ROW_BLOCK

    ensemble = TreeEnsemble.from_json(model_json)
    rows = _rows(dataset, 2 * ROW_BLOCK + 5, seed=4)
    rows[1::3, 7] = np.nan
    assert ensemble.compiled is not None

    together = ensemble.compiled.predict(rows)
    alone = np.array([ensemble.compiled.predict(row[None, :])[0] for row in rows])

    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together, ensemble.predict_numpy(rows))
