"""The model as ``triton.autotune``'s pruner against the full autotune, on the GPU (issue 5, item 5).

For each shape: the candidates the example kernel (``tilecost.predict.autotuned_matmul``: the
pointer kernel without split-K) can run for it are compiled ahead in parallel (so that both arms
below time only measuring; compiling is reported apart), then

* **full autotune**: ``triton.autotune`` over every one of those candidates (Triton's own
  ``do_bench``), wall time of the first call and the best config with its time;
* **pruned**: the same kernel with ``prune_configs_by`` from the shipped H200 model, ``top_k=5``:
  wall time of the first call, the config it chose, and that config's time in the full autotune's
  table (both arms judged by the same measurements).

Run on the GPU:  python benchmarks/autotune_h200.py --out autotune.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tilecost import Problem
from tilecost.config import KernelVariant
from tilecost.space import problem_candidates

DEFAULT_SHAPES = ("24x14336x4096", "16x4096x4096", "64x8192x1024")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="autotune.json")
    parser.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help="MxNxK,... (bf16, nt)")
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()

    import torch
    import triton

    from tilecost.collect.compile import precompile
    from tilecost.collect.runner import make_operands
    from tilecost.predict import Predictor
    from tilecost.predict.autotune import autotuned_matmul

    predictor = Predictor.load("h200")
    results = []
    out = {"env": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, "shapes": results}  # fmt: skip
    for text in args.shapes.split(","):
        m, n, k = (int(x) for x in text.split("x"))
        problem = Problem(m, n, k)
        configs = [c for c in problem_candidates(problem) if c.variant is KernelVariant.PTR and c.split_k == 1]
        t0 = time.perf_counter()
        compiled = precompile([(problem, c) for c in configs])
        configs = [c for c in configs if compiled[(problem.key, c.key)].status.value == "ok"]
        compile_s = time.perf_counter() - t0
        a, b = make_operands(problem)

        full = autotuned_matmul(predictor, top_k=len(configs), configs=configs)
        t0 = time.perf_counter()
        full(a, b)
        torch.cuda.synchronize()
        full_s = time.perf_counter() - t0
        timings = {str(cfg): float(t[0] if isinstance(t, list | tuple) else t)
                   for cfg, t in full.autotuner.configs_timings.items()}  # fmt: skip
        best_full = str(full.autotuner.best_config)

        pruned = autotuned_matmul(predictor, top_k=args.top_k, configs=configs)
        t0 = time.perf_counter()
        pruned(a, b)
        torch.cuda.synchronize()
        pruned_s = time.perf_counter() - t0
        chosen = str(pruned.autotuner.best_config)
        row = {
            "problem": problem.key,
            "candidates": len(configs),
            "compile_s_parallel": compile_s,
            "full_autotune_s": full_s,
            "pruned_autotune_s": pruned_s,
            "full_best": best_full,
            "full_best_ms": timings[best_full],
            "pruned_choice": chosen,
            "pruned_choice_ms": timings.get(chosen),
            "pruned_speed_of_full_best": timings[best_full] / timings[chosen] if chosen in timings else None,
        }
        results.append(row)
        print(json.dumps(row), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
