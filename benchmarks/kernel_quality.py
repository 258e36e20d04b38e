"""Kernel quality on the GPU: the best configuration of (a sample of) the space against the vendor library.

For each problem below it takes a fixed, documented subset of the problem's candidates (below),
compiles them in parallel, checks each against a float64 product, and times them together with
``torch.matmul`` (cuBLAS; TF32 allowed for fp32) or ``torch._scaled_mm`` (fp8) in the same
interleaved rounds of the collector's protocol. It reports best-config speed / vendor speed.

The subset (so that one run fits the 10-minute device window): BLOCK_K of 64 and 128 (32 and 64
for fp32, 128 and 256 for fp8), 3 and 4 pipeline stages, GROUP_M=8 wherever the grid allows it,
every tile shape, warp count, split-K and both kernel variants. The best of a subset is a lower
bound on the best of the space.

Run on the H200:  python benchmarks/kernel_quality.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from tilecost import DType, Layout, Problem, TileConfig
from tilecost.space import problem_candidates

SHAPES = [
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (2048, 2048, 2048),
    (1000, 1000, 8192),
    (4000, 3000, 1000),
    (16, 7168, 8192),
    (128, 4096, 4096),
    (1, 4096, 4096),
    (64, 14336, 4096),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (512, 32000, 4096),
]
EXTRA = [Problem(8192, 8192, 8192, DType.FP32, Layout.NT), Problem(8192, 8192, 8192, DType.FP8, Layout.NT)]

SUBSET_BLOCK_K = {DType.FP32: (32, 64), DType.FP8: (128, 256), DType.FP16: (64, 128), DType.BF16: (64, 128)}


def subset(problem: Problem) -> list[TileConfig]:
    cands = problem_candidates(problem, "h200")
    keys = {c.key for c in cands}
    out = []
    for c in cands:
        if c.block_k not in SUBSET_BLOCK_K[problem.dtype] or c.num_stages not in (3, 4):
            continue
        grouped = c.key.replace("-g1-", "-g8-")
        if c.group_m == 1 and grouped != c.key and grouped in keys:
            continue
        out.append(c)
    return out


def problems() -> list[Problem]:
    ps = [Problem(m, n, k, dt, Layout.NT) for dt in (DType.BF16, DType.FP16) for (m, n, k) in SHAPES]
    return ps + EXTRA


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="kernel_quality.json")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems (smoke test)")
    args = parser.parse_args()

    import torch

    from tilecost.collect.compile import precompile
    from tilecost.collect.protocol import MeasureProtocol
    from tilecost.collect.runner import run_problem
    from tilecost.collect.timing import CudaEventTimer

    plan = problems()[: args.limit]
    pairs = [(p, c) for p in plan for c in subset(p)]
    t0 = time.time()
    print(f"{len(plan)} problems, {len(pairs)} (problem, config) pairs; compiling...", flush=True)
    compiled = precompile(pairs, workers=args.workers)
    bad = {k: v for k, v in compiled.items() if v.status.value != "ok"}
    print(f"compiled in {time.time() - t0:.0f} s; {len(bad)} failed to compile", flush=True)

    timer = CudaEventTimer()
    protocol = MeasureProtocol(rounds=3)
    rows = []
    for p in plan:
        configs = [c for c in subset(p) if compiled[(p.key, c.key)].status.value == "ok"]
        res = run_problem(p, configs, timer, protocol, with_baseline=True)
        timed = [o for o in res.outcomes if o.timing is not None and o.status.value == "ok"]
        if not timed or res.baseline is None:
            print(
                json.dumps(
                    {"problem": p.key, "error": "no config timed", "statuses": [o.status.value for o in res.outcomes]}
                )
            )
            continue
        best = min(timed, key=lambda o: o.timing.median_us)
        fixed = next((o for o in timed if o.config.key == "ptr-128x128x64-g8-s1-w4-p3"), None)
        statuses: dict[str, int] = {}
        for o in res.outcomes:
            statuses[o.status.value] = statuses.get(o.status.value, 0) + 1
        row = {
            "problem": p.key,
            "configs": len(configs),
            "statuses": statuses,
            "vendor_us": res.baseline.median_us,
            "best_us": best.timing.median_us,
            "best_config": best.config.key,
            "speed_vs_vendor": res.baseline.median_us / best.timing.median_us,
            "fixed_128x128x64_us": fixed.timing.median_us if fixed else None,
            "tflops_best": p.flops / best.timing.median_us / 1e6,
            "seconds": res.seconds,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()

    env = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "wall_s": time.time() - t0,
    }
    with open(args.out, "w") as f:
        json.dump(
            {"env": env, "rows": rows, "compile_failures": {f"{k[0]} {k[1]}": v.error for k, v in bad.items()}},
            f,
            indent=1,
        )
    speeds = [r["speed_vs_vendor"] for r in rows]
    print("\n| problem | vendor µs | best µs | best config | best/vendor speed |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['problem']} | {r['vendor_us']:.1f} | {r['best_us']:.1f} | {r['best_config']} "
            f"| {r['speed_vs_vendor']:.2f} |"
        )
    gm = math.exp(sum(math.log(s) for s in speeds) / len(speeds))
    print(f"\ngeometric mean speed vs vendor {gm:.3f}, min {min(speeds):.3f}; {env}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
