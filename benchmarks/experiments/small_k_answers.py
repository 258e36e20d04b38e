"""How many of the predictor's answers the split-K rule of the twenty-eighth session changes (BENCHMARKS §5).

    .venv/bin/python benchmarks/experiments/small_k_answers.py [COUNT [SEED]] > new.jsonl
    TILECOST_JIT=0 .venv/bin/python benchmarks/experiments/small_k_answers.py --without-rule [COUNT [SEED]] > old.jsonl
    .venv/bin/python benchmarks/experiments/small_k_answers.py --compare old.jsonl new.jsonl

COUNT random shapes (default 300, seed 0) with K log-uniform in 16..256 and M, N log-uniform in 1..16384, every dtype
and layout drawn uniformly; each answered by ``predict_best(..., measured=False)`` of the shipped artifact. Prints
one JSON object per shape: its key, the answer's configuration key and predicted µs. ``--without-rule`` answers as
before the rule (the predictor's numpy mask with ``SPLIT_K_MIN_K`` 0: hence ``TILECOST_JIT=0``, the compiled mask
holds the constant it was compiled with). ``--compare`` counts the shapes whose answer differs and how many of the old
answers were split-K.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def shapes(count: int, seed: int) -> list[tuple[int, int, int, str, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        m, n = (int(2 ** rng.uniform(0, 14)) for _ in range(2))
        k = int(2 ** rng.uniform(4, 8))
        dtype = ("bf16", "fp16", "fp32", "fp8e4m3")[rng.integers(4)]
        layout = ("nt", "nn")[rng.integers(2)]
        out.append((m, n, k, dtype, layout))
    return out


def answer(count: int, seed: int) -> None:
    from tilecost import predict_best

    for m, n, k, dtype, layout in shapes(count, seed):
        p = predict_best((m, n, k), dtype=dtype, layout=layout, measured=False)
        print(json.dumps({"key": p.problem.key, "config": p.config.key, "time_us": p.time_us}))


def compare(old_path: str, new_path: str) -> None:
    old = [json.loads(line) for line in Path(old_path).read_text().splitlines()]
    new = [json.loads(line) for line in Path(new_path).read_text().splitlines()]
    changed = [(o, n) for o, n in zip(old, new, strict=True) if o["config"] != n["config"]]
    split = sum("-s1-" not in o["config"] for o, _ in changed)
    old_split = sum("-s1-" not in o["config"] for o in old)
    print(
        f"{len(old)} shapes: {len(changed)} answers changed ({split} of them split-K before); "
        f"{old_split} split-K answers before, {sum('-s1-' not in n['config'] for n in new)} after"
    )
    ratios = [n["time_us"] / o["time_us"] for o, n in changed]
    if ratios:
        print(
            f"predicted time of the new answer / the old one: median {np.median(ratios):.3f}, "
            f"range {min(ratios):.3f}-{max(ratios):.3f}"
        )
    for o, n in changed[:10]:
        print(f"  {o['key']}: {o['config']} ({o['time_us']:.2f} µs) -> {n['config']} ({n['time_us']:.2f} µs)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--compare"]:
        compare(args[1], args[2])
        sys.exit()
    if args[:1] == ["--without-rule"]:
        import tilecost.predict.feasibility as feasibility
        from tilecost.predict.jit import jit_enabled

        if jit_enabled():
            sys.exit("--without-rule needs TILECOST_JIT=0")
        feasibility.SPLIT_K_MIN_K = 0
        args = args[1:]
    answer(int(args[0]) if args else 300, int(args[1]) if len(args) > 1 else 0)
