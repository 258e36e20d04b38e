"""Experiment (thirty-eighth session): would more per-dimension geometry help the cost model? Fits the shipped model's
settings twice on the same training rows, once with the feature schema as it is and once with extra columns appended,
and compares the two on every held-out problem (top-1, worst, top-5, the paired top-1 ratio with its 90% bootstrap
interval, per dtype). Nothing here changes the feature schema: the extra columns exist only in this process (the
model's and the pipeline's feature list are swapped for the second fit), so no artifact can be exported from it.

Why: the shipped predictor's answers below 0.90 of the best (BENCHMARKS §5) lie mostly on skinny shapes (M up to ~200)
and often differ from the best in the tile along one dimension or in the split-K count. The schema has one padding
column for the three dimensions together (``padding_waste``) and no split's share of K; the extra columns are

* ``m_tile_use``, ``n_tile_use``: M / (ceil(M / BLOCK_M) * BLOCK_M), the same for N (the share of the tile edge used);
* ``k_split_use``: K / (ceil(K / (BLOCK_K * SPLIT_K)) * BLOCK_K * SPLIT_K);
* ``log2_k_per_split``: log2(K / SPLIT_K);
* ``log2_output_tiles``: log2(ceil(M / BLOCK_M) * ceil(N / BLOCK_N)), the tiles before split-K multiplies them.

    .venv/bin/python benchmarks/experiments/extra_features.py [--dataset datasets/measurements]   (~7 min, 2 cores)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

EXTRA = ("m_tile_use", "n_tile_use", "k_split_use", "log2_k_per_split", "log2_output_tiles")


def extra_columns(frame) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The :data:`EXTRA` columns of dataset rows (module docstring)."""
    m, n, k = (frame[c].to_numpy(dtype=np.float64) for c in ("m", "n", "k"))
    bm, bn, bk, sk = (frame[c].to_numpy(dtype=np.float64) for c in ("block_m", "block_n", "block_k", "split_k"))
    grid_m, grid_n = np.ceil(m / bm), np.ceil(n / bn)
    return np.column_stack([
        m / (grid_m * bm), n / (grid_n * bn), k / (np.ceil(k / (bk * sk)) * bk * sk), np.log2(k / sk),
        np.log2(grid_m * grid_n),
    ])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--device-class", default="h200")
    args = parser.parse_args()

    import tilecost.train.model as model_module
    import tilecost.train.pipeline as pipeline
    from tilecost.device import load_device
    from tilecost.features import FEATURE_NAMES
    from tilecost.train.dataset import load_measurements
    from tilecost.train.model import CostModel

    device = load_device(args.device_class)
    train, heldout = pipeline.split_by_role(load_measurements(args.dataset, args.device_class))
    base_features = pipeline.build_features
    evaluations = {}
    for name, extra in (("schema as it is", False), ("with the extra columns", True)):
        started = time.perf_counter()
        if extra:
            model_module.FEATURE_NAMES = (*FEATURE_NAMES, *EXTRA)
            pipeline.build_features = lambda frame, dev: np.hstack([base_features(frame, dev), extra_columns(frame)])
        model = CostModel()
        pipeline.fit_rows(model, train, device, X=pipeline.build_features(train, device))
        evaluations[name] = pipeline.evaluate_model(model, heldout, device)
        print(f"{name}: fitted and evaluated in {time.perf_counter() - started:.0f} s", flush=True)
    base, ours = evaluations.values()
    print("group           problems | top-1 / worst / top-5: as it is | with the extra columns")
    for slug, label in base.groups():
        a, b = base.summary(slug), ours.summary(slug)
        print(
            f"{label:18s} {int(a['problems']):4d} | {a['top1_geomean']:.4f} / {a['top1_worst']:.3f} / "
            f"{a['top5_geomean']:.4f} | {b['top1_geomean']:.4f} / {b['top1_worst']:.3f} / {b['top5_geomean']:.4f}"
        )
    ratio, low, high = ours.paired_top1_gain(base)
    print(f"paired top-1 ratio, extra over as it is, all held-out: x{ratio:.4f} (90% x{low:.4f}-x{high:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
