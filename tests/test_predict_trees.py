"""The numpy evaluator of XGBoost JSON models against xgboost itself, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tilecost.errors import ArtifactError
from tilecost.features import FEATURE_NAMES
from tilecost.predict import ubjson
from tilecost.predict.trees import TreeEnsemble, _renumber_forest, _renumber_trees

from . import test_predict_fixture as fixtures
from .test_predict_fixture import Dataset

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules
dataset = fixtures.dataset  # the session fixture, shared by the predictor's test modules

xgb = pytest.importorskip("xgboost")


@pytest.fixture(scope="module")
def model_json(artifact: Path) -> bytes:
    """The fixture artifact's booster (stored as UBJSON) in XGBoost's JSON format."""
    return bytes(xgb.Booster(model_file=bytearray((artifact / "model.ubj").read_bytes())).save_raw("json"))


def _rows(data: Dataset, count: int, seed: int = 0) -> np.ndarray:
    index = np.random.default_rng(seed).choice(len(data.features), count, replace=False)
    return data.features[index]


def test_equals_xgboost_inplace_predict_on_real_feature_rows(dataset: Dataset, model_json: bytes) -> None:
    rows = _rows(dataset, 3000)
    booster = xgb.Booster(model_file=bytearray(model_json))

    ours = TreeEnsemble.from_json(model_json, FEATURE_NAMES).predict(rows)
    theirs = booster.inplace_predict(rows)

    # Both sum float32 leaf values; ours in float64, so they differ only by float32 rounding (~1e-6 of ~5).
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_missing_values_take_each_node_default_direction(dataset: Dataset, model_json: bytes) -> None:
    rows = _rows(dataset, 1000, seed=2)
    rows[np.random.default_rng(3).random(rows.shape) < 0.3] = np.nan
    booster = xgb.Booster(model_file=bytearray(model_json))

    ours = TreeEnsemble.from_json(model_json).predict(rows)

    np.testing.assert_allclose(ours, booster.inplace_predict(rows), rtol=1e-5, atol=1e-5)


def test_ubjson_and_json_of_one_booster_give_the_same_trees(artifact: Path, model_json: bytes) -> None:
    ubj = (artifact / "model.ubj").read_bytes()

    from_ubj, from_json = TreeEnsemble.from_model(ubj, FEATURE_NAMES), TreeEnsemble.from_model(model_json)

    for name in ("feature", "threshold", "left", "default_left", "is_leaf", "value", "roots"):
        np.testing.assert_array_equal(getattr(from_ubj, name), getattr(from_json, name), err_msg=name)
    assert (from_ubj.base_score, from_ubj.depth) == (from_json.base_score, from_json.depth)
    with pytest.raises(ArtifactError, match="model.ubj is not an XGBoost UBJSON model: UBJSON: the data ends"):
        TreeEnsemble.from_model(ubj[: len(ubj) // 2])


def test_single_rows_equal_the_batch(dataset: Dataset, model_json: bytes) -> None:
    ensemble = TreeEnsemble.from_json(model_json)
    rows = _rows(dataset, 600, seed=4)  # more than one 512-row block

    batch = ensemble.predict(rows)

    np.testing.assert_array_equal(batch[[0, 513, 599]], [ensemble.predict(rows[[i]])[0] for i in (0, 513, 599)])


def _random_tree(rng: np.random.Generator, num_features: int) -> dict:
    """A random valid tree in XGBoost's arrays: node ids shuffled (the root stays 0), depths up to 7, and a few
    orphan nodes no path reaches (with junk children), which a renumbering must leave out."""
    left, right, nodes = [-1], [-1], 1
    frontier = [(0, 0)]
    while frontier:
        at, depth = frontier.pop(int(rng.integers(len(frontier))))
        if depth < 7 and rng.random() < 0.75:
            left[at], right[at] = nodes, nodes + 1
            left += [-1, -1]
            right += [-1, -1]
            frontier += [(nodes, depth + 1), (nodes + 1, depth + 1)]
            nodes += 2
    orphans = int(rng.integers(0, 3))
    left += [5 * nodes] * orphans  # out of range: harmless where nothing reaches them
    right += [-1] * orphans
    size = nodes + orphans
    new = np.concatenate([[0], 1 + rng.permutation(size - 1)])  # node i is stored at new[i]
    inverse = np.argsort(new)
    relabel = np.vectorize(lambda c: c if c < 0 or c >= size else int(new[c]))
    return {
        "left_children": relabel(np.array(left)[inverse]).tolist(),
        "right_children": relabel(np.array(right)[inverse]).tolist(),
        "split_indices": rng.integers(0, num_features, size).tolist(),
        "split_conditions": rng.normal(size=size).astype(np.float32).tolist(),
        "default_left": rng.integers(0, 2, size).tolist(),
    }


def _assert_same_forest(trees: list[dict], num_features: int) -> None:
    fast, reference = _renumber_forest(trees, num_features), _renumber_trees(trees, num_features)
    assert fast is not None
    assert fast[1:] == reference[1:]  # roots and depth
    for key, array in reference[0].items():
        assert fast[0][key].dtype == array.dtype, key
        np.testing.assert_array_equal(fast[0][key], array, err_msg=key)


def test_renumbering_all_trees_at_once_gives_the_tree_by_tree_arrays(artifact: Path) -> None:
    rng = np.random.default_rng(0)
    _assert_same_forest([_random_tree(rng, 5) for _ in range(60)], 5)
    model = ubjson.loads((artifact / "model.ubj").read_bytes())
    _assert_same_forest(model["learner"]["gradient_booster"]["model"]["trees"], len(FEATURE_NAMES))


def test_a_malformed_tree_among_many_is_named_by_its_index() -> None:
    rng = np.random.default_rng(1)
    trees = [_random_tree(rng, 4) for _ in range(6)]
    trees[4]["right_children"][0] = 10**6
    model = _tiny_model()
    model["learner"]["learner_model_param"]["num_feature"] = "4"
    model["learner"]["gradient_booster"]["model"]["trees"] = trees

    assert _renumber_forest(trees, 4) is None
    with pytest.raises(ArtifactError, match="tree 4: node 0 has an invalid child 1000000"):
        TreeEnsemble.from_json(json.dumps(model))


def _tiny_model(base_score: str = "[5E-1]", **tree_overrides: object) -> dict:
    """One tree: x0 < 2 ? (x1 < 10 ? 1.0 : 2.0) : 3.0, missing x0 goes right (default_left 0)."""
    tree = {
        "left_children": [1, 3, -1, -1, -1],
        "right_children": [2, 4, -1, -1, -1],
        "split_indices": [0, 1, 0, 0, 0],
        "split_conditions": [2.0, 10.0, 3.0, 1.0, 2.0],
        "default_left": [0, 1, 0, 0, 0],
        "split_type": [0, 0, 0, 0, 0],
        "categories_nodes": [],
        "tree_param": {"num_nodes": "5", "size_leaf_vector": "1", "num_feature": "2"},
        **tree_overrides,
    }
    return {
        "learner": {
            "learner_model_param": {"base_score": base_score, "num_feature": "2", "num_target": "1", "num_class": "0"},
            "objective": {"name": "reg:squarederror"},
            "feature_names": [],
            "gradient_booster": {"name": "gbtree", "model": {"trees": [tree]}},
        },
        "version": [3, 2, 0],
    }


@pytest.mark.parametrize("base_score", ["[5E-1]", "5E-1"])  # XGBoost >= 3 writes a vector, older a number
def test_hand_built_tree_and_both_base_score_spellings(base_score: str) -> None:
    ensemble = TreeEnsemble.from_json(json.dumps(_tiny_model(base_score)))
    rows = np.array([[1.0, 5.0], [1.0, 10.0], [2.0, 0.0], [np.nan, 0.0], [1.0, np.nan]])

    # 0.5 + leaf: x0=1<2, x1=5<10 -> 1.0; x1=10 is not < 10 -> 2.0; x0=2 is not < 2 -> 3.0;
    # x0 missing -> right (default_left 0) -> 3.0; x1 missing -> left (default_left 1) -> 1.0.
    np.testing.assert_allclose(ensemble.predict(rows), [1.5, 2.5, 3.5, 3.5, 1.5])
    assert (ensemble.num_trees, ensemble.depth) == (1, 2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m["learner"]["gradient_booster"].update(name="dart"), "'dart' is not supported"),
        (lambda m: m["learner"]["objective"].update(name="reg:gamma"), "objective 'reg:gamma'"),
        (lambda m: m["learner"]["learner_model_param"].update(num_target="2"), "multi-target"),
        (
            lambda m: m["learner"]["gradient_booster"]["model"]["trees"][0].update(split_type=[0, 1, 0, 0, 0]),
            "categorical",
        ),
        (
            lambda m: m["learner"]["gradient_booster"]["model"]["trees"][0].update(split_indices=[7, 1, 0, 0, 0]),
            "feature 7",
        ),
        (
            lambda m: m["learner"]["gradient_booster"]["model"]["trees"][0].update(right_children=[2, 1, -1, -1, -1]),
            "invalid child",
        ),
        (lambda m: m["learner"]["learner_model_param"].update(base_score="[1, 2]"), "not one number"),
        (lambda m: m.pop("learner"), "not an XGBoost JSON model"),
    ],
)
def test_refuses_what_it_cannot_evaluate_with_a_message(change: object, message: str) -> None:
    model = _tiny_model()
    change(model)  # type: ignore[operator]

    with pytest.raises(ArtifactError, match=message):
        TreeEnsemble.from_json(json.dumps(model))


def test_refuses_a_feature_list_other_than_the_sidecars() -> None:
    with pytest.raises(ArtifactError, match="2 features, metadata.json lists 3"):
        TreeEnsemble.from_json(json.dumps(_tiny_model()), ("a", "b", "c"))


def test_refuses_rows_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match=r"shape \(rows, 2\)"):
        TreeEnsemble.from_json(json.dumps(_tiny_model())).predict(np.zeros((3, 5)))


def test_an_empty_booster_or_one_of_another_format_names_the_file_read() -> None:
    model = json.dumps(_tiny_model()).encode()

    with pytest.raises(ArtifactError, match=r"^model.ubj is empty \(0 bytes\), not an XGBoost booster$"):
        TreeEnsemble.from_model(b"", name="model.ubj")
    with pytest.raises(ArtifactError, match=r"^the booster is empty"):
        TreeEnsemble.from_model(b"")
    with pytest.raises(ArtifactError, match="model.ubj does not hold an XGBoost UBJSON booster: it opens like JSON"):
        TreeEnsemble.from_model(model, name="model.ubj")
    with pytest.raises(ArtifactError, match="opens like neither a UBJSON nor a JSON object"):
        TreeEnsemble.from_model(b"\x00" + model)
    assert TreeEnsemble.from_model(model, name="model.json").num_trees == 1


def _set(path: tuple[object, ...], value: object) -> object:
    def change(model: dict) -> None:
        node = model["learner"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        _set(("gradient_booster",), []),
        _set(("learner_model_param",), None),
        _set(("learner_model_param", "num_feature"), "two"),
        _set(("learner_model_param", "num_target"), "x"),
        lambda m: m["learner"]["learner_model_param"].pop("base_score"),
        lambda m: m["learner"]["gradient_booster"].pop("model"),
        _set(("gradient_booster", "model", "trees"), 5),
        _set(("gradient_booster", "model", "trees"), [None]),
        _set(("gradient_booster", "model", "trees", 0, "tree_param"), 5),
        _set(("gradient_booster", "model", "trees", 0, "left_children"), ["a", "b", "c", "d", "e"]),
    ],
)
def test_a_model_document_of_another_structure_is_refused_naming_the_file(change: object) -> None:
    """Parsed, but not shaped like a booster: an ArtifactError, never a KeyError or an AttributeError."""
    model = _tiny_model()
    change(model)  # type: ignore[operator]
    as_json = json.dumps(model).encode()

    with pytest.raises(ArtifactError, match="^model.json is not an XGBoost JSON model: "):
        TreeEnsemble.from_model(as_json, name="model.json")


def test_nesting_past_the_parsers_recursion_limit_is_refused_naming_the_file() -> None:
    with pytest.raises(ArtifactError, match="^model.json is not an XGBoost JSON model: RecursionError"):
        TreeEnsemble.from_model(b'{"learner": ' + b"[" * 100_000)
    with pytest.raises(ArtifactError, match="^model.ubj is not an XGBoost UBJSON model: maximum recursion depth"):
        TreeEnsemble.from_model(b"{i\x07learner" + b"[" * 100_000)


def test_what_a_model_cannot_hold_is_refused_naming_the_file() -> None:
    model = _tiny_model()
    model["learner"]["objective"]["name"] = "reg:gamma"

    with pytest.raises(ArtifactError, match="^model.json: objective 'reg:gamma' is not supported"):
        TreeEnsemble.from_model(json.dumps(model).encode())
