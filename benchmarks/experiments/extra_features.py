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

``--columns loads`` (forty-fourth session) appends instead what the pointer kernel's loads cost where an operand's
row stride is off a multiple of 16. Triton specialises an integer argument divisible by 16, so it proves 16-byte
alignment of a row only then (collect/kernels.py): A (M×K, K contiguous) and B stored N×K (nt) load 16-byte vectors
when K % 16 == 0, B stored K×N (nn) when N % 16 == 0, C is stored in vectors when N % 16 == 0; otherwise one element
a load. The schema holds the three flags (``k_multiple_of_16``, ``n_multiple_of_16``, ``layout_nt``), but the cost is
their product with the tile and the warps, which the trees reach only through a four-way interaction; the half-aligned
nn groups stay at 0.90-0.92 of the best after 33-62 training problems each (§5, forty-third session). The columns:

* ``log2_a_loads``, ``log2_b_loads``: log2 of one K step's load instructions a thread issues for the A and B tiles,
  ``BLOCK_M·BLOCK_K / (vector · 32 · warps)`` with ``vector`` = 16 / element bytes when aligned, else 1;
* ``log2_c_stores``: the same for the output tile, once per program.

The forty-fourth session shipped these columns (feature schema 2: ``log2_{a,b}_loads_per_thread``,
``log2_c_stores_per_thread``), so ``--columns loads`` now appends copies of columns the matrix already holds; its
figures in BENCHMARKS §4 came from the schema-1 matrix (commit d9080e1).

``--columns prior`` (forty-seventh session) appends one column, what the row's configuration costs for its dtype and
layout's training problems in general (:func:`prior_columns`, out of fold for the training rows): the held-out sets'
worst answer (6672×68×11440 fp32 nn, BENCHMARKS §4) is a configuration the data calls poor for fp32 nn everywhere
(0.375 of the best, median over 760 rows), ranked first for a shape of a thin N region.

    .venv/bin/python benchmarks/experiments/extra_features.py [--dataset DIR] [--columns geometry|loads|prior]
    (DIR defaults to datasets/measurements; ~7 min on 7,612 training problems, ~15 min on 9,394; 2 cores)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

EXTRA = ("m_tile_use", "n_tile_use", "k_split_use", "log2_k_per_split", "log2_output_tiles")
LOADS = ("log2_a_loads", "log2_b_loads", "log2_c_stores")


def extra_columns(frame) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The :data:`EXTRA` columns of dataset rows (module docstring)."""
    m, n, k = (frame[c].to_numpy(dtype=np.float64) for c in ("m", "n", "k"))
    bm, bn, bk, sk = (frame[c].to_numpy(dtype=np.float64) for c in ("block_m", "block_n", "block_k", "split_k"))
    grid_m, grid_n = np.ceil(m / bm), np.ceil(n / bn)
    return np.column_stack([
        m / (grid_m * bm), n / (grid_n * bn), k / (np.ceil(k / (bk * sk)) * bk * sk), np.log2(k / sk),
        np.log2(grid_m * grid_n),
    ])  # fmt: skip


def load_columns(frame) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The :data:`LOADS` columns of dataset rows (module docstring): the product's ``features.operand_rows_aligned``
    and ``features.memory_instructions_per_thread`` (since the forty-fourth session), with the feature matrix's
    floor."""
    from tilecost.features import memory_instructions_per_thread, operand_rows_aligned
    from tilecost.problem import DType

    n, k = (frame[c].to_numpy(dtype=np.float64) for c in ("n", "k"))
    bm, bn, bk, warps = (frame[c].to_numpy(dtype=np.float64) for c in ("block_m", "block_n", "block_k", "num_warps"))
    in_bytes = frame["dtype"].astype(str).map({d.value: d.in_bytes for d in DType}).to_numpy(dtype=np.float64)
    out_bytes = frame["dtype"].astype(str).map({d.value: d.out_bytes for d in DType}).to_numpy(dtype=np.float64)
    a_aligned, b_aligned, c_aligned = operand_rows_aligned(n, k, frame["layout"].astype(str).to_numpy() == "nt")
    per_thread = [
        memory_instructions_per_thread(rows, cols, aligned, element_bytes, warps)
        for rows, cols, aligned, element_bytes in (
            (bm, bk, a_aligned, in_bytes), (bk, bn, b_aligned, in_bytes), (bm, bn, c_aligned, out_bytes)
        )
    ]  # fmt: skip
    return np.log2(np.maximum(np.column_stack(per_thread), 1.0 / 64))


PRIOR = ("config_prior",)
FOLDS = 5
PRIOR_UNKNOWN = 10.0  # ln units: e^10 times the problem's mean time


def prior_columns(train: pd.DataFrame):  # type: ignore[no-untyped-def]
    """The function giving dataset rows their :data:`PRIOR` column (``--columns prior``, forty-seventh session), from
    the training rows ``train``: how fast the row's configuration runs for the problems of its dtype and layout in
    general, the median over the training problems that timed it of its centred log time (ln time minus the mean ln
    time of that problem's timed rows). For the training rows it is taken out of fold (the problems in five groups by
    a hash of their key, each row's value from the other four groups' problems), so that no row sees its own label;
    for other rows (held out) from every training problem. A configuration no other problem timed gets
    :data:`PRIOR_UNKNOWN` (the model refuses NaN; far above any median, so a tree can set it apart)."""
    import zlib

    from training_rows import centred_log_time, config_keys

    centred = centred_log_time(train)
    train_keys = config_keys(train).to_numpy()

    def columns(frame):  # type: ignore[no-untyped-def]
        if len(frame) == len(train) and (frame["role"].astype(str) == "train").all():
            fold = train["problem_key"].astype(str).map(lambda key: zlib.crc32(key.encode()) % FOLDS).to_numpy()
            values = np.full(len(train), np.nan)
            for f in range(FOLDS):
                others = fold != f
                medians = pd.Series(centred[others]).groupby(train_keys[others]).median()
                values[~others] = pd.Series(train_keys[~others]).map(medians).to_numpy(dtype=np.float64)
            return np.nan_to_num(values, nan=PRIOR_UNKNOWN)[:, None]
        medians = pd.Series(centred).groupby(train_keys).median()
        return np.nan_to_num(config_keys(frame).map(medians).to_numpy(dtype=np.float64), nan=PRIOR_UNKNOWN)[:, None]

    return columns


# Per --columns: the column names and a function of the training rows giving the function that computes them.
COLUMN_SETS = {
    "geometry": (EXTRA, lambda train: extra_columns),
    "loads": (LOADS, lambda train: load_columns),
    "prior": (PRIOR, prior_columns),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--columns", choices=sorted(COLUMN_SETS), default="geometry", help="which extra columns")
    parser.add_argument(
        "--placebo", type=int, default=None, metavar="SEED",
        help="shuffle the extra columns' rows (seeded) in training and evaluation alike: columns of the same values "
        "that say nothing, so the comparison shows how far merely widening the matrix moves the fit",
    )  # fmt: skip
    args = parser.parse_args()
    names, make_columns = COLUMN_SETS[args.columns]
    rng = np.random.default_rng(args.placebo)

    def columns(frame):  # type: ignore[no-untyped-def]
        values = chosen(frame)
        return values if args.placebo is None else values[rng.permutation(len(values))]

    import tilecost.train.model as model_module
    import tilecost.train.pipeline as pipeline
    from tilecost.device import load_device
    from tilecost.features import FEATURE_NAMES
    from tilecost.train.dataset import load_measurements
    from tilecost.train.model import CostModel

    device = load_device(args.device_class)
    train, heldout = pipeline.split_by_role(load_measurements(args.dataset, args.device_class))
    chosen = make_columns(train)
    base_features = pipeline.build_features
    evaluations = {}
    for name, extra in (("schema as it is", False), ("with the extra columns", True)):
        started = time.perf_counter()
        if extra:
            model_module.FEATURE_NAMES = (*FEATURE_NAMES, *names)
            pipeline.build_features = lambda frame, dev: np.hstack([base_features(frame, dev), columns(frame)])
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
    print("per alignment group (dtype, layout, N-K pattern modulo 16; >= 8 problems, joint 90%):")
    for gain in ours.paired_group_gains(base):
        print(f"  {gain} {gain.verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
