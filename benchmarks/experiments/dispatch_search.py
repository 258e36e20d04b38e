"""The run-time dispatch rule's search, compiled and in numpy, on the shipped artifact's training problems.

    .venv/bin/python benchmarks/experiments/dispatch_search.py [--group bf16-nt]

An experiment of the twenty-second session (BENCHMARKS §5). :func:`~tilecost.predict.dispatch.fit_dispatch` searches
every depth-two tree on log2 extents, ~18 · problems² · configurations additions; an export spends it once per
(dtype, layout). Since this session the stumps of that search run in a numba kernel where numba is
(:func:`~tilecost.predict.jit_kernels.dispatch_stump`), the numpy search's sums in its order. This rebuilds the
export's scorer for one group of the shipped artifact (its booster through xgboost's ``inplace_predict`` on the
main trees, the level trees once per problem, as ``prepare_artifact_files`` scores), works out the regret matrix
once, then times the search both ways and checks that both give the rule the artifact shipped with.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from tilecost import load_device
from tilecost.predict import DispatchRule, TreeEnsemble, load_artifact
from tilecost.predict.dispatch import _depth_two, _leaf, regret_matrix
from tilecost.predict.jit import compiled_stump
from tilecost.predict.scoring import GroupScorer
from tilecost.problem import DType, Layout, Problem
from tilecost.train.export import main_trees_scorer

ARTIFACT = Path("tilecost/models/h200")


def export_scorer(directory: Path) -> tuple[Any, Any, Any]:
    """(metadata, main-tree scorer, level-tree scorer) as the export scored the artifact's candidates."""
    import xgboost as xgb

    metadata, blobs = load_artifact(directory)
    model = blobs[metadata.model_file]
    scorer = main_trees_scorer(xgb.Booster(model_file=bytearray(model)), metadata.level_trees)
    ensemble = TreeEnsemble.from_model(model)
    level = ensemble.last_trees(metadata.level_trees).predict if metadata.level_trees else None
    return metadata, scorer, level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", default="bf16-nt", help="dtype-layout (default bf16-nt, the largest)")
    args = parser.parse_args()
    dtype, layout = (part for part in args.group.split("-", 1))
    metadata, scorer, level = export_scorer(ARTIFACT)
    problems = [p for p in map(Problem.from_key, metadata.domain["problems"])
                if (p.dtype.value, p.layout.value) == (dtype, layout)]  # fmt: skip
    group = GroupScorer.build(load_device(metadata.device_class), DType(dtype), Layout(layout), metadata.target,
                              scorer, level=level)  # fmt: skip
    start = time.perf_counter()
    pool, regret = regret_matrix(group, problems)
    print(f"{args.group}: {len(problems)} training problems x {regret.shape[1]} pointer configurations; "
          f"regret matrix in {time.perf_counter() - start:.1f} s")  # fmt: skip
    points = np.log2(np.array([[p.m, p.n, p.k] for p in problems], dtype=np.float64))
    min_leaf = max(1, math.ceil(0.1 * len(problems)))  # fit_dispatch's default min_leaf_fraction
    trees = {}
    for name, kernel in (("compiled", compiled_stump()), ("numpy", None)):
        start = time.perf_counter()
        trees[name] = _depth_two(regret, points, min_leaf, kernel) or _leaf(regret)[1]
        print(f"{name} search: {time.perf_counter() - start:.1f} s", flush=True)
    assert trees["compiled"] == trees["numpy"], "the two searches disagree"
    shipped = DispatchRule.from_dict(
        json.loads((ARTIFACT / "predictor.json").read_text())["groups"][args.group]["dispatch"]
    )

    def leaves(node: dict[str, Any]) -> list[str]:
        if "config" in node:
            return [group.space[pool[node["config"]]].key]
        return leaves(node["below"]) + leaves(node["above"])

    def shipped_leaves(node: Any) -> list[str]:
        if "config" in node:
            return [shipped.configs[node["config"]].key]
        return shipped_leaves(node["below"]) + shipped_leaves(node["above"])

    def thresholds(node: Any) -> list[tuple[str, float]]:
        if "config" in node:
            return []
        return [(node["axis"], node["threshold_log2"]), *thresholds(node["below"]), *thresholds(node["above"])]

    same = leaves(trees["numpy"]) == shipped_leaves(shipped.tree) and thresholds(trees["numpy"]) == thresholds(
        shipped.tree
    )
    print(f"the same tree both ways; {'the' if same else 'NOT the'} rule the artifact shipped with")


if __name__ == "__main__":
    main()
