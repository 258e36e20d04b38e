"""Collector throughput and fidelity on the GPU (issue 3, item 4).

On the fixed reference plan (``benchmarks/reference_plan.json``: 24 problems from 64×64×64 to 8192³) and a
seeded sample of ``--configs`` candidates per problem, it measures:

1. **Throughput.** The collector as ``tilecost collect`` runs it (``run_sweep``: the parallel compile on one
   pool of workers, each problem measured with the interleaved protocol as soon as its kernels are compiled,
   in the measuring child process, rows written to a Parquet dataset in a temporary directory), timed from
   start to end, against Triton's default loop over the same pairs: ``triton.testing.do_bench(fn)`` with
   its defaults (25 ms warm-up, 100 ms of repetitions) for each config in turn. The default loop compiles
   each distinct kernel serially on its first call (Triton's in-process cache serves pairs of one
   specialisation pattern: 725 kernels for the 768 pairs); that cost is timed on a seeded sample of
   ``--serial-compile-sample`` distinct kernels, in a separate process with its own empty cache, and
   extrapolated; its measuring is timed with every kernel already in the cache.
2. **Fidelity.** On the first ``--fidelity-problems`` problems, a careful reference: do_bench(25 ms, 100 ms)
   for every config, three rounds, configs in a fresh random order each round, median of the three. Spearman
   rank correlation per problem between the collector's times and the reference's, and the reference time
   of the collector's best over the reference best. On kernels of a few µs that reference times the host's
   launch gaps too (a Triton launch from Python costs the host 20-70 µs, more than do_bench's flush takes on
   the device), so a second one is the same do_bench(25 ms, 100 ms), three interleaved rounds, of the same
   kernel launched by replaying a CUDA graph that holds its one launch (:func:`graph_launch`, a few µs of
   host time). Until the seventh session the second reference was ``do_bench_cudagraph``, which replays
   many launches with no flush between them, a warm L2 unlike every other method here. A third keeps
   do_bench's loop (256 MiB flush, start event, launch, end event; ``--host-ahead-launches`` launches,
   median) and enqueues a spin kernel before it, so that the host is ahead of the device and no
   launch waits for it (:func:`timed_loop`); three interleaved rounds. The seventh session measured that
   on 512³ do_bench's rounds agree at 0.42 and this loop's at 0.994 (``benchmarks/fidelity_host_gap.py``).

Goals (issue 3): ≥ 10× faster than the default loop, Spearman ≥ 0.95 per problem, collector's best within 2%.

Run on the GPU:  python benchmarks/collector_fidelity.py --out fidelity.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tilecost import Problem, TileConfig
from tilecost.space import problem_candidates

PLAN = Path(__file__).with_name("reference_plan.json")


def reference_problems() -> list[Problem]:
    return [Problem(**item) for item in json.loads(PLAN.read_text())]


def sample(problem: Problem, count: int, seed: int = 0) -> list[TileConfig]:
    cands = list(problem_candidates(problem, "h200"))
    rng = random.Random(f"{seed}:{problem.key}")
    return sorted(rng.sample(cands, min(count, len(cands))), key=lambda c: c.key)


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else 1.0


def serial_compile_seconds(kernels: list[tuple[Problem, TileConfig]]) -> float:
    """Seconds to compile ``kernels`` one after another in a fresh process with an empty Triton cache,
    as the default loop does on each config's first call (the process's start and imports excluded)."""
    listing = Path(tempfile.mkdtemp(prefix="tilecost-serial-")) / "kernels.json"
    listing.write_text(json.dumps([[p.key, c.key] for p, c in kernels]))
    env = {**os.environ, "TRITON_CACHE_DIR": str(listing.parent / "triton-cache")}
    done = subprocess.run([sys.executable, __file__, "--serial-compile-of", str(listing)], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def _serial_compile_child(listing: str) -> int:
    from tilecost.collect.launch import bind
    from tilecost.collect.runner import make_operands

    kernels = [(Problem.from_key(p), TileConfig.from_key(c)) for p, c in json.loads(Path(listing).read_text())]
    t0 = time.perf_counter()
    for p, c in kernels:
        a, b = make_operands(p)
        bind(a, b, c).compile()
    print(time.perf_counter() - t0)
    return 0


def timed_loop(fn: Callable[[], object], flush: object, ahead: bool, launches: int = 200) -> float:
    """Median µs of ``launches`` launches of ``fn``, each timed between two events after ``flush.zero_()``
    (do_bench's loop); with ``ahead``, a spin kernel of 150 µs per launch is enqueued first, so that the
    host enqueues every launch before the device reaches it and no timed interval holds a host gap."""
    import torch

    Event = torch.cuda.Event
    events = [(Event(enable_timing=True), Event(enable_timing=True)) for _ in range(launches)]
    torch.cuda.synchronize()
    if ahead:
        clock_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1_980_000
        torch.cuda._sleep(int(launches * 150.0 * clock_khz / 1000))
    for start, end in events:
        flush.zero_()  # type: ignore[attr-defined]
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events) * 1000.0


def graph_launch(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn``'s one launch (already run once, so compiled and loaded) captured in a CUDA graph; the graph's
    replay launches the same kernel on the same tensors for a few µs of host time."""
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def against(name: str, compared: dict[str, dict[str, float]], times: dict[str, float], self_agreement: float) -> dict:
    """Fields comparing each of ``compared`` (prefix -> config times: the collector's under "", the default
    loop's, the do_bench reference's) with another reference's ``times`` over the same configs."""
    ks = sorted(times)
    best = min(ks, key=times.__getitem__)
    us = [times[k] for k in ks]
    collector_best = min(ks, key=compared[""].__getitem__)
    return {
        **{f"spearman_{prefix}vs_{name}": spearman([c[k] for k in ks], us) for prefix, c in compared.items()},
        f"{name}_round_agreement": self_agreement,
        f"{name}_best": best,
        f"collector_best_over_{name}_best": times[collector_best] / times[best],
        f"{name}_us": {k: round(times[k], 3) for k in ks},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="fidelity.json")
    parser.add_argument("--configs", type=int, default=40)
    parser.add_argument("--fidelity-problems", type=int, default=6)
    parser.add_argument("--serial-compile-sample", type=int, default=32)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--no-graph-launch", action="store_true",
                        help="leave out the reference of do_bench over graph-launched kernels")  # fmt: skip
    parser.add_argument("--host-ahead-launches", type=int, default=200,
                        help="launches of the host-ahead reference (timed_loop); 0 leaves it out")  # fmt: skip
    parser.add_argument("--serial-compile-of", help=argparse.SUPPRESS)  # the serial-compile child
    args = parser.parse_args()
    if args.serial_compile_of:
        return _serial_compile_child(args.serial_compile_of)

    # A private Triton cache, so that the compile timings start cold.
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="tilecost-triton-"))
    import torch
    import triton
    from triton.testing import do_bench

    from tilecost.collect.compile import specialisation_key
    from tilecost.collect.launch import bind
    from tilecost.collect.plans import PlanEntry, Role
    from tilecost.collect.protocol import MeasureProtocol
    from tilecost.collect.runner import make_operands, run_problem
    from tilecost.collect.store import DatasetStore
    from tilecost.collect.sweep import SweepSettings, run_sweep
    from tilecost.collect.timing import CudaEventTimer

    plan = reference_problems()
    pairs = [(p, c) for p in plan for c in sample(p, args.configs)]
    out: dict = {"env": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                         "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                 "problems": [p.key for p in plan], "pairs": len(pairs)}  # fmt: skip

    # Serial compile cost of the default loop: a seeded sample of the distinct kernels, compiled one after
    # another in a separate process with its own empty Triton cache (so that neither run finds the
    # other's kernels). Until the fifth session the sample was the first 16 pairs, all of 4096³, and the
    # estimate moved between 0.33 and 0.52 s a kernel from run to run (docs/BENCHMARKS.md §3b); until the
    # sixth it was multiplied by the pairs (768), not by the distinct kernels the loop compiles (725).
    kernels: dict[tuple[object, ...], tuple[Problem, TileConfig]] = {}
    for p, c in pairs:
        kernels.setdefault((*specialisation_key(p, c), c.key), (p, c))
    serial_sample = random.Random(0).sample(sorted(kernels.values(), key=lambda pc: (pc[0].key, pc[1].key)),
                                            min(args.serial_compile_sample, len(kernels)))  # fmt: skip
    out["distinct_kernels"] = len(kernels)
    out["serial_compile_sample"] = [f"{p.key}/{c.key}" for p, c in serial_sample]
    serial_per_kernel = serial_compile_seconds(serial_sample) / len(serial_sample)
    out["serial_compile_s_per_kernel"] = serial_per_kernel

    # 1. The collector, as `tilecost collect` runs it, on exactly the benchmark's pairs.
    entries = [
        PlanEntry(p, "reference", Role.TRAIN, only=(("config_id", tuple(c.key for c in sample(p, args.configs))),))
        for p in plan
    ]
    settings = SweepSettings(sample_fraction=1.0, workers=args.workers, run_id="rfidelity")
    store = DatasetStore(tempfile.mkdtemp(prefix="tilecost-fidelity-"))
    t0 = time.perf_counter()
    summary = run_sweep(entries, store, settings, progress_stream=None)
    collector_s = time.perf_counter() - t0
    rows = store.read("h200").to_pandas()
    timed = rows[rows.time_us.notna()]
    collector: dict[str, dict[str, float]] = {p.key: {} for p in plan}
    for key, config_id, median in zip(timed.problem_key, timed.config_id, timed.time_us, strict=True):
        collector[key][config_id] = float(median)
    out["collector"] = {
        "total_s": collector_s,
        "waited_for_compile_s": summary.compile_seconds,
        "measure_s": summary.measure_seconds,
        "rows": summary.rows,
        "status_counts": summary.status_counts,
        "workers": args.workers,
    }

    # The collector's timer in this process once more, without the spin that keeps the host ahead (the
    # timer of the first real runs), to show what that spin changes (every kernel is in the cache now).
    def collect_in_process(timer: CudaEventTimer) -> tuple[dict[str, dict[str, float]], float]:
        results: dict[str, dict[str, float]] = {}
        t0 = time.perf_counter()
        for p in plan:
            configs = [TileConfig.from_key(k) for k in sorted(collector[p.key])]
            res = run_problem(p, configs, timer, MeasureProtocol())
            results[p.key] = {o.config.key: o.timing.median_us for o in res.outcomes if o.timing is not None}
        return results, time.perf_counter() - t0

    nospin_timer = CudaEventTimer(host_lead_us_per_launch=0.0)
    nospin, nospin_s = collect_in_process(nospin_timer)
    out["collector_without_spin"] = {
        "measure_s": nospin_s,
        "launches": nospin_timer.launches,
        "launches_that_waited_for_the_host": nospin_timer.host_bound,
    }
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["collector"]), json.dumps(out["collector_without_spin"]), flush=True)

    # 2. Triton's default loop over the same pairs (kernels already cached: measuring only).
    t0 = time.perf_counter()
    default: dict[str, dict[str, float]] = {}
    for p in plan:
        a, b = make_operands(p)
        default[p.key] = {}
        for c in sample(p, args.configs):
            if c.key in collector[p.key]:
                default[p.key][c.key] = do_bench(bind(a, b, c), return_mode="median") * 1000
    default_measure_s = time.perf_counter() - t0
    default_compile = serial_per_kernel * len(kernels)
    default_total = default_measure_s + default_compile
    out["default_loop"] = {"measure_s": default_measure_s, "compile_s_estimated": default_compile,
                           "total_s_estimated": default_total}  # fmt: skip
    out["speedup_total"] = default_total / collector_s
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["default_loop"]), flush=True)

    # 3. Fidelity against the careful reference.
    rng = random.Random(0)

    def interleaved_us(
        keys: list[str], launchers: dict[str, Callable[[], object]], bench: Callable[[Callable[[], object]], float]
    ) -> tuple[dict[str, float], float]:
        """Median µs of three rounds of ``bench(launcher)`` (ms), ``keys`` shuffled afresh each round, and the
        lowest Spearman between two of the rounds: how well the reference agrees with itself, the ceiling
        of any method's agreement with it (the fourth session saw a do_bench reference agree with its own
        previous session at 0.67 on 512³)."""
        rounds: dict[str, list[float]] = {k: [] for k in keys}
        for _ in range(3):
            rng.shuffle(keys)
            for k in keys:
                rounds[k].append(bench(launchers[k]) * 1000)
        ks = sorted(rounds)
        self_agreement = min(
            spearman([rounds[k][i] for k in ks], [rounds[k][j] for k in ks]) for i, j in ((0, 1), (0, 2), (1, 2))
        )
        return {k: statistics.median(v) for k, v in rounds.items()}, self_agreement

    fidelity = []
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for p in plan[: args.fidelity_problems]:
        a, b = make_operands(p)
        keys = [k for k in collector[p.key]]
        bound = {k: bind(a, b, TileConfig.from_key(k)) for k in keys}
        ref, ref_self = interleaved_us(keys, bound, lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median"))
        ks = sorted(ref)
        coll_best = min(ks, key=lambda k: collector[p.key][k])
        ref_best = min(ks, key=ref.__getitem__)
        nospin_ks = [k for k in ks if k in nospin[p.key]]

        compared = {"": collector[p.key], "default_loop_": default[p.key], "reference_": ref}
        graph_fields: dict = {}
        if not args.no_graph_launch:
            # The same careful reference with the host out of the timed interval: do_bench(25, 100), three
            # interleaved rounds, of each kernel launched by replaying a graph of its one launch.
            replays = {k: graph_launch(fn) for k, fn in bound.items()}
            graph_fields = against(
                "graph_launch_reference",
                compared,
                *interleaved_us(keys, replays, lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median")),
            )
            del replays
        if args.host_ahead_launches > 0:
            # A third: do_bench's loop (flushed L2, events) with the host ahead of the device.
            graph_fields |= against(
                "host_ahead_reference",
                compared,
                *interleaved_us(
                    keys, bound, lambda fn: timed_loop(fn, flush, ahead=True, launches=args.host_ahead_launches) / 1000
                ),
            )
        fidelity.append(
            {
                "problem": p.key,
                "configs": len(ks),
                "spearman": spearman([collector[p.key][k] for k in ks], [ref[k] for k in ks]),
                "spearman_without_spin": spearman([nospin[p.key][k] for k in nospin_ks], [ref[k] for k in nospin_ks]),
                "spearman_default_loop": spearman([default[p.key][k] for k in ks], [ref[k] for k in ks]),
                "reference_round_agreement": ref_self,
                "collector_best": coll_best,
                "reference_best": ref_best,
                "collector_best_over_reference_best": ref[coll_best] / ref[ref_best],
                "reference_us": {k: round(ref[k], 3) for k in ks},
                "collector_us": {k: round(collector[p.key][k], 3) for k in ks},
                **graph_fields,
            }
        )
        Path(args.out).write_text(json.dumps({**out, "fidelity": fidelity}, indent=1))
        print(json.dumps({k: v for k, v in fidelity[-1].items() if not k.endswith("_us")}), flush=True)
    out["fidelity"] = fidelity
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k not in ("fidelity", "problems")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
