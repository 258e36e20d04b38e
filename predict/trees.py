"""Evaluate an exported XGBoost booster with numpy alone, from XGBoost's own UBJSON or JSON model format.

Importing xgboost costs 0.26-1.25 s (FACTS.md), more than a compiler can spend, so the predictor
reads what ``Booster.save_model`` writes, ``model.ubj`` (UBJSON, :mod:`tilecost.predict.ubjson`; what an
export stores) or ``model.json``, and walks the trees itself. The two formats hold the same document; the parts
of it used here (``learner.gradient_booster.model.trees[i]``):

* ``split_indices``, ``split_conditions``: the feature a node tests and its threshold; a row goes
  left when ``x < threshold`` (compared in float32, as XGBoost casts its input), right otherwise;
* ``left_children``, ``right_children``: child node ids, ``-1`` at a leaf;
* ``default_left``: where a missing value (NaN) goes;
* at a leaf, ``split_conditions`` holds the leaf value (``base_weights`` is the node's weight before
  the learning rate, and is not used);
* ``learner.learner_model_param.base_score``: the global bias, written ``"5.2E0"`` or, since
  XGBoost 3.0, ``"[5.2E0]"``; for the identity-link objectives accepted here it is added as is.

The prediction is ``base_score + sum over trees of the reached leaf's value``. Checked against
``xgboost.Booster.inplace_predict`` on real feature rows, NaNs included (tests/test_predict_trees.py).

Evaluation is level-wise over every (row, tree) pair at once: at each of ``depth`` steps every pair
moves one node down (leaves point to themselves), so a step is a handful of whole-array numpy
operations whatever the number of trees. Each node's child and feature are packed into one integer
(``left << 6 | feature``), so a step costs two table gathers (the packed word and the threshold)
and one gather of the row's feature value, plus cheap arithmetic; the first step reads the roots'
features as whole columns. numpy's gathers cost ~0.6 ns per element on this 2-core CPU, so 300
trees of depth 8 take ~40 µs for one row and ~7.5 µs per further row (xgboost's own C++
predictor: ~4 µs per row on one thread); rows with NaN take the slower path that honours
``default_left``.

Where numba is installed, :meth:`TreeEnsemble.predict` hands the rows to the compiled walk of
:mod:`tilecost.predict.jit` instead (57 µs for 20 rows of that model, the same bits);
:meth:`TreeEnsemble.predict_numpy` is this module's walk, the reference it is tested against.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tilecost.errors import ArtifactError

from . import ubjson
from .artifact import MODEL_FILES, check_booster

if TYPE_CHECKING:
    from .jit import CompiledTrees

__all__ = ["IDENTITY_OBJECTIVES", "TreeEnsemble"]

# Objectives whose prediction is the raw margin (no link function), so that base_score is a margin.
IDENTITY_OBJECTIVES = (
    "reg:squarederror",
    "reg:squaredlogerror",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "reg:quantileerror",
)
# Rows per block in bulk evaluation: 512 rows × 300 trees of intp node ids is 1.2 MB, cache-sized.
_BLOCK_ROWS = 512
# Bits of a packed node word that hold the feature index (features 0..63).
_FEATURE_BITS = 6
_FEATURE_MASK = (1 << _FEATURE_BITS) - 1


@dataclass(frozen=True, eq=False)
class TreeEnsemble:
    """A tree ensemble as flat arrays over the nodes of all trees (node ids are global).

    ``left[i]`` is node i's left child (its right child is ``left[i] + 1``: nodes are renumbered so
    that siblings are adjacent); a leaf is its own left child and has threshold +inf, so that a finite
    value never moves a row off it. ``value`` holds leaf values (0 elsewhere).
    """

    num_features: int
    base_score: float
    feature: NDArray[np.intp]
    threshold: NDArray[np.float32]
    left: NDArray[np.intp]
    default_left: NDArray[np.bool_]
    is_leaf: NDArray[np.bool_]
    value: NDArray[np.float32]
    roots: NDArray[np.intp]
    depth: int

    @property
    def num_trees(self) -> int:
        return len(self.roots)

    @classmethod
    def from_model(
        cls, model: bytes, feature_names: tuple[str, ...] | None = None, name: str | None = None
    ) -> TreeEnsemble:
        """Parse a booster as ``Booster.save_model`` writes it, UBJSON (``model.ubj``) or JSON (``model.json``),
        told apart by its first bytes (:func:`~tilecost.predict.artifact.check_booster`). ``name``: the file the
        bytes were read from, which messages name (default: ``model.ubj`` or ``model.json`` by the bytes); bytes
        that are empty, or of another format than ``name`` says, raise ``ArtifactError`` naming it."""
        kind = check_booster(model, name)
        name = name or MODEL_FILES[kind]
        if kind == "ubj":
            return cls.from_ubjson(model, feature_names, name)
        return cls.from_json(model, feature_names, name)

    @classmethod
    def from_json(
        cls, model_json: bytes | str, feature_names: tuple[str, ...] | None = None, name: str = "model.json"
    ) -> TreeEnsemble:
        """Parse ``Booster.save_model`` JSON. Raises ``ArtifactError`` naming ``name`` and what is unsupported."""
        try:
            model = json.loads(model_json)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError; nesting past the limit
            raise ArtifactError(f"{name} is not an XGBoost JSON model: {exc!r}") from exc
        return cls._from_model(model, feature_names, name, "JSON")

    @classmethod
    def from_ubjson(
        cls, model_ubj: bytes, feature_names: tuple[str, ...] | None = None, name: str = "model.ubj"
    ) -> TreeEnsemble:
        """Parse ``Booster.save_model`` UBJSON (:mod:`tilecost.predict.ubjson`). Raises ``ArtifactError`` naming
        ``name``."""
        try:
            model = ubjson.loads(model_ubj)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ArtifactError(f"{name} is not an XGBoost UBJSON model: {exc}") from exc
        return cls._from_model(model, feature_names, name, "UBJSON")

    @classmethod
    def _from_model(cls, model: Any, feature_names: tuple[str, ...] | None, name: str, kind: str) -> TreeEnsemble:
        """The ensemble of a decoded model document. Every refusal names ``name``: what is unsupported, or a
        document of another structure (a missing key, a list where an object belongs, a count that is not a
        number), which would otherwise escape as a ``KeyError`` or ``AttributeError``."""
        try:
            return cls._from_document(model, feature_names)
        except ArtifactError as exc:
            raise ArtifactError(f"{name}: {exc}") from None
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise ArtifactError(f"{name} is not an XGBoost {kind} model: {exc!r}") from exc

    @classmethod
    def _from_document(cls, model: Any, feature_names: tuple[str, ...] | None) -> TreeEnsemble:
        learner = model["learner"]
        booster = learner["gradient_booster"]
        param = learner["learner_model_param"]
        objective = learner["objective"]["name"]
        if booster.get("name") != "gbtree":
            raise ArtifactError(f"booster {booster.get('name')!r} is not supported; export a 'gbtree' booster")
        if objective not in IDENTITY_OBJECTIVES:
            raise ArtifactError(f"objective {objective!r} is not supported; use one of {IDENTITY_OBJECTIVES}")
        if int(param.get("num_target", 1)) != 1 or int(param.get("num_class", 0)) > 1:
            raise ArtifactError("multi-target and multi-class boosters are not supported (num_target must be 1)")
        num_features = int(param["num_feature"])
        if feature_names is not None:
            names = learner.get("feature_names") or []
            if len(names) and tuple(names) != tuple(feature_names):
                raise ArtifactError("its feature_names differ from metadata.json's feature list")
            if num_features != len(feature_names):
                raise ArtifactError(f"{num_features} features, metadata.json lists {len(feature_names)}")
        base_score = float(np.float32(_parse_base_score(param["base_score"])))
        trees = booster["model"]["trees"]
        if not len(trees):
            raise ArtifactError("no trees")
        return cls._from_trees(trees, num_features, base_score)

    @classmethod
    def _from_trees(cls, trees: list[dict[str, Any]], num_features: int, base_score: float) -> TreeEnsemble:
        for index, tree in enumerate(trees):
            if np.any(tree.get("split_type", [])) or len(tree.get("categories_nodes", [])):
                raise ArtifactError(f"tree {index} has categorical splits, which are not supported")
            if int(tree.get("tree_param", {}).get("size_leaf_vector", "1")) > 1:
                raise ArtifactError(f"tree {index} has vector leaves (multi-target), which are not supported")
        forest = _renumber_forest(trees, num_features)
        if forest is None:  # a malformed tree: the tree-by-tree path finds it and names it
            forest = _renumber_trees(trees, num_features)
        joined, roots, depth = forest
        for array in joined.values():
            array.flags.writeable = False
        return cls(
            num_features=num_features,
            base_score=base_score,
            feature=joined["feature"].astype(np.intp),
            threshold=joined["threshold"].astype(np.float32),
            left=joined["left"].astype(np.intp),
            default_left=joined["default"].astype(bool),
            is_leaf=joined["leaf"].astype(bool),
            value=joined["value"].astype(np.float32),
            roots=np.array(roots, dtype=np.intp),
            depth=depth,
        )

    def first_trees(self, count: int) -> TreeEnsemble:
        """The ensemble of the first ``count`` trees in boosting order (all of them if fewer): a
        coarser, cheaper model whose ranking of a problem's candidates is close to the full one's
        (export uses it to pick which candidates of a sample shape the full model ranks). It shares
        this ensemble's node arrays and walks only the first roots."""
        if isinstance(count, bool) or count < 1:
            raise ValueError(f"count={count!r} is not allowed; use an int >= 1")
        return dataclasses.replace(self, roots=self.roots[:count])

    def last_trees(self, count: int) -> TreeEnsemble:
        """The ensemble of the last ``count`` trees, without the base score (which belongs to the first
        trees): a booster's appended part, such as the per-problem level trees of a model fitted with
        ``center_problems`` (``ArtifactMetadata.level_trees``)."""
        if isinstance(count, bool) or not 1 <= count <= self.num_trees:
            raise ValueError(f"count={count!r} is not allowed; use an int in 1..{self.num_trees}")
        return dataclasses.replace(self, roots=self.roots[-count:], base_score=0.0)

    @functools.cached_property
    def _packed(self) -> NDArray[np.intp] | None:
        """``left << 6 | feature`` per node (None beyond 64 features: the unpacked walk is used)."""
        if self.num_features > 1 << _FEATURE_BITS:
            return None
        packed = (self.left << _FEATURE_BITS) | self.feature
        packed.flags.writeable = False
        return packed

    @functools.cached_property
    def _roots(self) -> tuple[NDArray[np.intp], NDArray[np.float32], NDArray[np.intp]]:
        """The roots' features, thresholds and left children, for the first step."""
        return self.feature[self.roots], self.threshold[self.roots], self.left[self.roots]

    @functools.cached_property
    def compiled(self) -> CompiledTrees | None:
        """The compiled evaluator (:mod:`tilecost.predict.jit`), or None without numba or with
        ``TILECOST_JIT=0``; decided, and compiled, on first use."""
        from .jit import CompiledTrees

        return CompiledTrees.from_ensemble(self)

    def predict(self, features: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
        """Predictions for the rows of ``features`` (rows × num_features), float64 of float32 sums:
        compiled where :attr:`compiled` is available, else :meth:`predict_numpy`."""
        x = self._rows(features)
        compiled = self.compiled
        if compiled is not None:
            return compiled.predict(x)
        return self._walk(x)

    def _rows(self, features: NDArray[np.floating[Any]]) -> NDArray[Any]:
        x = np.asarray(features)
        if x.ndim != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"features must have shape (rows, {self.num_features}), got {x.shape}")
        return x

    def predict_numpy(self, features: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
        """:meth:`predict` by the numpy level-wise walk (the reference of the compiled one)."""
        return self._walk(self._rows(features))

    def _walk(self, rows: NDArray[Any]) -> NDArray[np.float64]:
        x = np.ascontiguousarray(rows, dtype=np.float32)
        if len(x) <= _BLOCK_ROWS:
            return self._predict_block(x)
        return np.concatenate([self._predict_block(x[i : i + _BLOCK_ROWS]) for i in range(0, len(x), _BLOCK_ROWS)])

    def _predict_block(self, x: NDArray[np.float32]) -> NDArray[np.float64]:
        rows, columns = x.shape
        flat = x.ravel()
        packed = self._packed
        if packed is None or not np.isfinite(flat).all():
            return self._predict_block_nan(x)
        if self.depth == 0:
            node = np.repeat(self.roots[None, :], rows, axis=0)
        else:  # first step: the roots' features are whole columns of x
            root_feature, root_threshold, root_left = self._roots
            node = root_left + (x[:, root_feature] >= root_threshold)
        threshold = self.threshold
        # the flat offset of each (row, tree) pair's row, laid out like ``node`` so that adds are contiguous
        offset = np.repeat(np.arange(0, rows * columns, columns, dtype=np.intp), self.num_trees).reshape(node.shape)
        for _ in range(self.depth - 1):
            word = packed.take(node)
            index = word & _FEATURE_MASK
            index += offset
            right = flat.take(index) >= threshold.take(node)
            word >>= _FEATURE_BITS
            word += right  # a leaf's threshold is +inf, so a finite value keeps it where it is
            node = word
        return self.value.take(node).sum(axis=1, dtype=np.float64) + self.base_score

    def _predict_block_nan(self, x: NDArray[np.float32]) -> NDArray[np.float64]:
        """The walk with NaN: NaN goes where ``default_left`` says; +inf goes right (it is >= any
        threshold) except at leaves."""
        rows, columns = x.shape
        flat = x.ravel()
        row_offset = np.arange(0, rows * columns, columns, dtype=np.intp)[:, None]
        node = np.repeat(self.roots[None, :], rows, axis=0)
        for _ in range(self.depth):
            value = flat[self.feature[node] + row_offset]
            right = np.where(np.isnan(value), ~self.default_left[node], value >= self.threshold[node])
            node = self.left[node] + (right & ~self.is_leaf[node])
        return self.value[node].sum(axis=1, dtype=np.float64) + self.base_score


def _parse_base_score(text: object) -> float:
    """``"5.2E0"`` (XGBoost < 3) or ``"[5.2E0]"`` (XGBoost >= 3, a vector of one per target)."""
    try:
        values = json.loads(text) if isinstance(text, str) and text.startswith("[") else [text]
        (value,) = values
        return float(value)  # type: ignore[arg-type]  # a str or number; anything else raises below
    except (ValueError, TypeError) as exc:
        raise ArtifactError(f"base_score {text!r} is not one number: {exc}") from exc


_Forest = tuple[dict[str, NDArray[Any]], list[int], int]
_INPUTS = (("left_children", np.int64), ("right_children", np.int64), ("split_indices", np.int64),
           ("split_conditions", np.float32), ("default_left", np.int64))  # fmt: skip


def _renumber_trees(trees: list[dict[str, Any]], num_features: int) -> _Forest:
    """Every tree by :func:`_renumber`, concatenated (global node ids), with the roots and the depth. Raises
    ``ArtifactError`` naming the first malformed tree; the reference of :func:`_renumber_forest`."""
    parts: dict[str, list[NDArray[Any]]] = {k: [] for k in ("feature", "threshold", "left", "default", "leaf", "value")}
    roots, offset, depth = [], 0, 0
    for index, tree in enumerate(trees):
        arrays, tree_depth = _renumber(tree, index, num_features)
        arrays["left"] = arrays["left"] + offset
        for key, array in arrays.items():
            parts[key].append(array)
        roots.append(offset)
        offset += len(arrays["left"])
        depth = max(depth, tree_depth)
    return {key: np.concatenate(arrays) for key, arrays in parts.items()}, roots, depth


def _renumber_forest(trees: list[dict[str, Any]], num_features: int) -> _Forest | None:
    """What :func:`_renumber_trees` returns, with every tree's breadth-first walk done at once: one pass of whole-
    array operations per level instead of one per level and tree (500 trees of depth 12: ~0.3 s of a predictor's
    load). None where any tree is malformed, so that the tree-by-tree path raises the error naming it.

    Level by level over the forest, each level's nodes are in tree order and, within a tree, in the order its own
    walk gives them; a stable sort by tree then yields each tree's breadth-first order, trees one after another."""
    try:
        columns = [[np.asarray(tree[key], dtype=kind) for tree in trees] for key, kind in _INPUTS]
    except (KeyError, TypeError, ValueError):
        return None
    counts = np.array([len(array) for array in columns[0]], dtype=np.int64)
    if not counts.all() or any(len(a) != c for arrays in columns for a, c in zip(arrays, counts, strict=True)):
        return None
    lefts, rights, splits, defaults = (np.concatenate(columns[i]) for i in (0, 1, 2, 4))
    conditions = np.concatenate(columns[3])
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    tree_of = np.repeat(np.arange(len(counts)), counts)
    seen = np.zeros(len(lefts), dtype=bool)
    seen[starts] = True
    levels = [starts]
    while True:
        parents = levels[-1][lefts[levels[-1]] != -1]
        if not len(parents):
            break
        local = np.stack([lefts[parents], rights[parents]], axis=1).ravel()
        owner = np.repeat(tree_of[parents], 2)  # each child's tree
        if ((local < 0) | (local >= counts[owner])).any():
            return None
        children = local + starts[owner]
        if seen[children].any() or _repeated(children).any():
            return None
        seen[children] = True
        levels.append(children)
    reached = np.concatenate(levels)
    order = reached[np.argsort(tree_of[reached], kind="stable")]
    size = len(order)
    position = np.empty(len(lefts), dtype=np.int64)
    position[order] = np.arange(size)
    leaf = lefts[order] == -1
    feature = np.where(leaf, 0, splits[order])
    if ((feature < 0) | (feature >= num_features)).any():
        return None
    starts_of = starts[tree_of[order]]
    left = np.where(leaf, np.arange(size), position[np.where(leaf, order, lefts[order] + starts_of)])
    joined = {
        "feature": feature.astype(np.intp),
        "threshold": np.where(leaf, np.float32(np.inf), conditions[order]).astype(np.float32),
        "left": left.astype(np.intp),
        "default": np.where(leaf, True, defaults[order].astype(bool)),
        "leaf": leaf,
        "value": np.where(leaf, conditions[order], np.float32(0)).astype(np.float32),
    }
    return joined, position[starts].tolist(), len(levels) - 1


def _renumber(tree: dict[str, Any], index: int, num_features: int) -> tuple[dict[str, NDArray[Any]], int]:
    """One tree's arrays in breadth-first order with siblings adjacent; returns them and the depth.

    Level by level over whole arrays (a depth-10 booster has ~470,000 nodes; a Python loop over them took most
    of the predictor's load time). Nodes no path from the root reaches are left out."""
    try:
        lefts, rights = (np.asarray(tree[k], dtype=np.int64) for k in ("left_children", "right_children"))
        splits = np.asarray(tree["split_indices"], dtype=np.int64)
        conditions = np.asarray(tree["split_conditions"], dtype=np.float32)
        defaults = np.asarray(tree["default_left"]).astype(bool)
    except KeyError as exc:
        raise ArtifactError(f"tree {index} lacks {exc.args[0]}") from None
    count = len(lefts)
    if not count or any(len(a) != count for a in (rights, splits, conditions, defaults)):
        raise ArtifactError(f"tree {index}: node arrays are empty or of different lengths")
    seen = np.zeros(count, dtype=bool)
    seen[0] = True
    levels = [np.zeros(1, dtype=np.int64)]
    while True:
        parents = levels[-1][lefts[levels[-1]] != -1]
        if not len(parents):
            break
        children = np.stack([lefts[parents], rights[parents]], axis=1).ravel()
        bad = (children < 0) | (children >= count)
        if not bad.any():
            bad = seen[children] | _repeated(children)
        if bad.any():
            at = int(np.argmax(bad))
            raise ArtifactError(f"tree {index}: node {parents[at // 2]} has an invalid child {children[at]}")
        seen[children] = True
        levels.append(children)
    order = np.concatenate(levels)
    size = len(order)
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(size)
    leaf = lefts[order] == -1
    inner = ~leaf
    feature = np.where(leaf, 0, splits[order])
    outside = (feature[inner] < 0) | (feature[inner] >= num_features)
    if outside.any():
        at = order[inner][np.argmax(outside)]
        raise ArtifactError(f"tree {index}: node {at} splits on feature {splits[at]} of {num_features}")
    threshold = np.where(leaf, np.float32(np.inf), conditions[order]).astype(np.float32)
    left = np.where(leaf, np.arange(size), position[np.where(leaf, 0, lefts[order])])
    default = np.where(leaf, True, defaults[order])
    value = np.where(leaf, conditions[order], np.float32(0)).astype(np.float32)
    return {"feature": feature.astype(np.intp), "threshold": threshold, "left": left.astype(np.intp),
            "default": default, "leaf": leaf, "value": value}, len(levels) - 1  # fmt: skip


def _repeated(ids: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Whether each id occurs earlier in ``ids``."""
    _, first = np.unique(ids, return_index=True)
    out = np.ones(len(ids), dtype=bool)
    out[first] = False
    return out
