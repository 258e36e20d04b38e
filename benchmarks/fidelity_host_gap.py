"""Does the careful do_bench reference time the host's launch gaps on tiny problems? (issue 3, item 4)

On the two smallest fidelity problems (512³ and 16×4096×4096, bf16 nt, the fidelity benchmark's 32 seeded
configs each) every config is timed four ways, in three interleaved rounds each (median):

1. ``do_bench``: Triton's ``do_bench(fn, warmup=25, rep=100)``, the fidelity benchmark's reference;
2. ``loop``: the same loop written out (256 MiB flush, start event, launch, end event), 200 launches;
3. ``loop_ahead``: that loop with the host ahead: a spin kernel enqueued first keeps the device busy
   while the host enqueues all 200 launches, so no launch waits for the host (what the collector does);
4. ``host_us``: the host's own cost of one launch (Python, Triton's launcher, descriptors), enqueued
   behind a long spin so that it never waits for the device.

If ``do_bench`` and ``loop`` agree with each other but not with ``loop_ahead``, and the configs they
rank lower are those with the larger ``host_us``, then the reference includes host time the kernel does
not take, and its ranking of tiny problems is not the ranking of the kernels.

Run on the GPU host:  python benchmarks/fidelity_host_gap.py --out host_gap.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from collector_fidelity import sample, spearman, timed_loop  # noqa: E402

from tilecost import DType, Layout, Problem  # noqa: E402

PROBLEMS = (Problem(512, 512, 512, DType.BF16, Layout.NT), Problem(16, 4096, 4096, DType.BF16, Layout.NT))
LAUNCHES = 200


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="host_gap.json")
    parser.add_argument("--configs", type=int, default=32)
    parser.add_argument("--workers", type=int, default=15)
    args = parser.parse_args()

    import torch
    import triton
    from triton.testing import do_bench

    from tilecost.collect.compile import precompile
    from tilecost.collect.launch import bind
    from tilecost.collect.runner import make_operands

    pairs = [(p, c) for p in PROBLEMS for c in sample(p, args.configs)]
    t0 = time.perf_counter()
    precompile(pairs, workers=args.workers)
    print(f"compiled {len(pairs)} pairs in {time.perf_counter() - t0:.1f} s", flush=True)

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    clock_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1_980_000

    def spin(us: float) -> None:
        torch.cuda._sleep(int(us * clock_khz / 1000))

    def loop(fn, ahead: bool) -> float:
        # with ahead, a 30 ms spin first: far more than the host needs to enqueue 200 launches
        return timed_loop(fn, flush, ahead, LAUNCHES)

    def host_us(fn) -> float:
        torch.cuda.synchronize()
        spin(40_000.0)  # 40 ms of device work ahead: the host never waits for the device below
        t = time.perf_counter()
        for _ in range(LAUNCHES):
            fn()
        took = (time.perf_counter() - t) / LAUNCHES * 1e6
        torch.cuda.synchronize()
        return took

    methods = {
        "do_bench": lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median") * 1000.0,
        "loop": lambda fn: loop(fn, ahead=False),
        "loop_ahead": lambda fn: loop(fn, ahead=True),
        "host_us": host_us,
    }
    rng = random.Random(0)
    out: dict = {"env": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, "problems": []}  # fmt: skip
    for p in PROBLEMS:
        a, b = make_operands(p)
        fns = {c.key: bind(a, b, c) for c in sample(p, args.configs)}
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        rounds: dict[str, dict[str, list[float]]] = {m: {k: [] for k in fns} for m in methods}
        for _ in range(3):
            keys = list(fns)
            rng.shuffle(keys)
            for k in keys:
                for name, method in methods.items():
                    rounds[name][k].append(method(fns[k]))
        ks = sorted(fns)
        med = {m: {k: statistics.median(rounds[m][k]) for k in ks} for m in methods}
        result = {
            "problem": p.key,
            "configs": len(ks),
            "best": {m: min(ks, key=med[m].__getitem__) for m in ("do_bench", "loop", "loop_ahead")},
            "spearman": {
                f"{x}~{y}": spearman([med[x][k] for k in ks], [med[y][k] for k in ks])
                for x, y in (("do_bench", "loop"), ("do_bench", "loop_ahead"), ("loop", "loop_ahead"))
            },
            "self_agreement": {
                m: min(
                    spearman([rounds[m][k][i] for k in ks], [rounds[m][k][j] for k in ks])
                    for i, j in ((0, 1), (0, 2), (1, 2))
                )
                for m in ("do_bench", "loop", "loop_ahead")
            },
            # Does the reference's excess over the host-ahead time follow the host's cost per launch?
            "spearman_excess_vs_host_us": spearman(
                [med["do_bench"][k] - med["loop_ahead"][k] for k in ks], [med["host_us"][k] for k in ks]
            ),
            "us": {k: {m: round(med[m][k], 3) for m in methods} for k in ks},
        }
        out["problems"].append(result)
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(json.dumps({k: v for k, v in result.items() if k != "us"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
