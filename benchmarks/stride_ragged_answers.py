"""The predictor's answers on shapes whose strides suit tensor descriptors while N or K is off multiples of 16,
against H200 measurements of them (BENCHMARKS §5, twenty-fourth session).

    .venv/bin/python benchmarks/stride_ragged_answers.py [--runs r24sr,r24sr2] [--artifact DIR]

Such shapes (bf16 N = 3000, K = 1000: 16-byte row strides, not multiples of 16) took their shortlist from a variant
whose sample shapes could seldom use ``tma`` configurations; since this session they also score the aligned
variant's list head (``ShortlistTable.stride_list_id``). Each problem of the given collection runs was timed on the
union of the full model's 32 fastest, both lists' first 8 and both predictors' answers (the plans
``datasets/plans/2026-12-02-s24-stride-ragged*.json``, ``scripts/stride_ragged_plan.py``), so every answer compared
here was measured. Per problem: the best time measured, and best / measured time of

* ``own``: the predictor with its own variant's list alone (until the twenty-fourth session);
* ``both``: the predictor with the aligned variant's head added (the twenty-fourth session's artifacts); for an
  artifact whose lists were built for the class at export (16 variants, since the twenty-fifth session) ``own`` and
  ``both`` are the same predictor, its own list being the class's;
* ``full``: the full model scoring every candidate.

The twenty-fifth session's held-out set (run r25srh) was measured over every candidate, so its best is the best.

A ``hopeless`` row (screened out as far slower than the problem's best) counts with its screening time. Prints one
line per problem and the geometric means.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tilecost import Predictor, Problem  # noqa: E402
from tilecost.predict.shortlist import stride_ragged  # noqa: E402

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "measurements"


def own_list_predictor(artifact: str | Path) -> Predictor:
    """The predictor as it was before this session: no shape reads the stride variant's list."""
    predictor = Predictor.load(artifact, cache_size=0)
    for name in predictor._shortlists:
        object.__setattr__(predictor._shortlists[name], "stride_list_id", lambda problem: None)
    return predictor


def stride_ragged_shapes(count: int, seed: int, low_log2: float = 4.0) -> list[Problem]:
    """``count`` random shapes of bf16, fp16 and fp32, nt and nn, whose row strides suit tensor descriptors while N or
    K is not a multiple of 16: each extent log-uniform in 2**low_log2..2**14, N and K rounded down to a multiple of the
    element's 16-byte step (8, or 4 for fp32), kept when the strides suit and N or K is off multiples of 16."""
    rng = np.random.default_rng(seed)
    out: list[Problem] = []
    while len(out) < count:
        dtype = ("bf16", "fp16", "fp32")[rng.integers(3)]
        layout = ("nt", "nn")[rng.integers(2)]
        m, n, k = (int(x) for x in np.rint(np.exp2(rng.uniform(low_log2, 14, 3))))
        step = 4 if dtype == "fp32" else 8
        n, k = max(step, n - n % step), max(step, k - k % step)
        problem = Problem(m, n, k, dtype, layout)
        if stride_ragged(problem):
            out.append(problem)
    return out


def measured(runs: list[str]) -> dict[Problem, dict[str, float]]:
    table = ds.dataset(DATASET, format="parquet", partitioning="hive").to_table(
        filter=pc.field("run_id").isin(runs) & pc.field("status").isin(["ok", "hopeless"]),
        columns=["problem_key", "config_id", "time_us"],
    )
    out: dict[Problem, dict[str, float]] = {}
    for key, config, time_us in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
        out.setdefault(Problem.from_key(key), {})[config] = time_us
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="r24sr", help="comma-separated collection run ids")
    parser.add_argument("--artifact", default="h200")
    args = parser.parse_args()
    times = measured(args.runs.split(","))
    if not times:
        raise SystemExit(f"no rows of runs {args.runs} in {DATASET}")
    new = Predictor.load(args.artifact if args.artifact == "h200" else Path(args.artifact), cache_size=0)
    old = own_list_predictor(args.artifact if args.artifact == "h200" else Path(args.artifact))
    logs: dict[str, list[float]] = {"own": [], "both": [], "full": []}
    missing = 0
    print(f"{'problem':<28} {'best us':>9}  {'own':>6} {'both':>6} {'full':>6}  own answer -> both answer")
    for problem in sorted(times, key=lambda p: p.key):
        timed = times[problem]
        best = min(timed.values())
        answers = {
            "own": old.predict_best(problem, measured=False).config.key,
            "both": new.predict_best(problem, measured=False).config.key,
            "full": new.rank(problem, 1, exhaustive=True, measured=False)[0].config.key,
        }
        if any(a not in timed for a in answers.values()):
            missing += 1
            continue
        fractions = {name: best / timed[a] for name, a in answers.items()}
        for name, f in fractions.items():
            logs[name].append(math.log(f))
        mark = "" if answers["own"] == answers["both"] else f"  {answers['own']} -> {answers['both']}"
        print(
            f"{problem.key:<28} {best:>9.1f}  {fractions['own']:>6.3f} {fractions['both']:>6.3f} "
            f"{fractions['full']:>6.3f}{mark}"
        )
    count = len(logs["own"])
    summary = ", ".join(
        f"{name} {math.exp(sum(v) / count):.3f} (worst {math.exp(min(v)):.3f}, "
        f"below 0.90: {sum(x < math.log(0.9) for x in v)})"
        for name, v in logs.items()
    )
    print(f"{count} problems ({missing} with an answer not timed, left out); best / answer, geometric mean: {summary}")


if __name__ == "__main__":
    main()
