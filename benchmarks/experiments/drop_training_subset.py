"""Experiment helper (forty-first session, not part of the product): a copy of the dataset without a random share of
its training problems, for refits whose differences are the data's own noise (``per_group_promotion.py``).

    .venv/bin/python benchmarks/experiments/drop_training_subset.py SEED OUT [SHARE]   (~30 s; SHARE default 0.1)

Every Parquet file of ``datasets/measurements`` is written to the same relative path under OUT with the rows of the
dropped problems left out (``random.Random(SEED).sample`` of the sorted training problem keys); held-out problems are
all kept. Train on it with ``tilecost train --dataset OUT``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    seed, out = int(sys.argv[1]), Path(sys.argv[2])
    share = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    src = REPO / "datasets/measurements"
    files = sorted(src.rglob("*.parquet"))
    keys: set[str] = set()
    for f in files:
        t = pq.read_table(f, columns=["problem_key", "role"])
        roles = t.column("role").to_pylist()
        keys |= {k for k, r in zip(t.column("problem_key").to_pylist(), roles, strict=True) if r == "train"}
    drop = pa.array(sorted(random.Random(seed).sample(sorted(keys), int(share * len(keys)))))
    for f in files:
        t = pq.read_table(f)
        target = out / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t.filter(pc.invert(pc.is_in(t.column("problem_key"), value_set=drop))), target)
    print(f"{len(keys)} training problems, {len(drop)} dropped; {len(files)} files written under {out}")


if __name__ == "__main__":
    main()
