"""Per-GPU scaling of ``tilecost collect --gpus all`` on one host (issue 3, item 6).

The same plan (the 24 reference problems of ``benchmarks/reference_plan.json`` × a seeded sample of
``--configs`` candidates each, written as a plan file with ``only: {config_id: [...]}``) is collected four
times into fresh dataset directories, each run a ``tilecost collect`` command timed from start to end:

1. two GPUs (``--gpus all``), cold: an empty Triton cache, so both shards compile;
2. one GPU, warm: that cache, so only measuring and start-up are left;
3. two GPUs, warm;
4. one GPU, cold: a second empty cache.

Measuring scales with the GPUs (warm: 2 against 3); compiling shares the host's cores (cold: 4 against
1), each shard with ``--workers`` processes. The shards split the plan by a hash of the problem key, so
they need not be even: each shard's problems and rows are reported. Needs a host with two or more GPUs.

Run on the GPU host:  python benchmarks/gpu_scaling.py --out scaling.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from collector_fidelity import reference_problems, sample  # noqa: E402


def collect(plan: Path, dataset: Path, cache: Path, gpus: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "tilecost.cli", "collect", "--plan", str(plan), "--dataset", str(dataset),
           "--sample-fraction", "1.0", "--workers", str(args.workers), "--run-id", "rscaling",
           "--backend", args.backend]  # fmt: skip
    if gpus != "1":
        cmd += ["--gpus", gpus]
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    if gpus == "1":
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summaries = [line for line in done.stdout.splitlines() if line.startswith("run rscaling:")]
    if done.returncode != 0 or not summaries:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    import pyarrow.dataset as ds

    rows = ds.dataset(str(dataset), format="parquet", partitioning="hive").to_table(columns=["problem_key"])
    return {"gpus": gpus, "wall_s": wall, "rows": rows.num_rows,
            "problems": len(set(rows.column("problem_key").to_pylist())), "shards": summaries}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="scaling.json")
    parser.add_argument("--configs", type=int, default=96)
    parser.add_argument("--workers", type=int, default=15, help="compile processes per GPU's sweep")
    parser.add_argument("--gpus", default="all", help="the several-GPU runs' --gpus (all, or a count)")
    parser.add_argument(
        "--backend", default="tilecost.collect.backend:cuda_backend", help="(a dry run on CPU: the simulated one)"
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="tilecost-scaling-"))
    plan = root / "plan.json"
    plan.write_text(json.dumps([
        {"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype.value, "layout": p.layout.value, "family": "reference",
         "only": {"config_id": [c.key for c in sample(p, args.configs)]}}
        for p in reference_problems()
    ]))  # fmt: skip
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "configs": args.configs,
                 "workers_per_gpu": args.workers, "runs": {}}  # fmt: skip
    steps = (("two_gpus_cold", args.gpus, "cache-a"), ("one_gpu_warm", "1", "cache-a"),
             ("two_gpus_warm", args.gpus, "cache-a"), ("one_gpu_cold", "1", "cache-b"))  # fmt: skip
    for name, gpus, cache in steps:
        out["runs"][name] = collect(plan, root / name, root / cache, gpus, args)
        print(name, json.dumps(out["runs"][name]), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    runs = out["runs"]
    out["speedup_warm"] = runs["one_gpu_warm"]["wall_s"] / runs["two_gpus_warm"]["wall_s"]
    out["speedup_cold"] = runs["one_gpu_cold"]["wall_s"] / runs["two_gpus_cold"]["wall_s"]
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
