"""Predictor benchmark: latency, agreement with full scoring, OOD calibration, dispatch, top-k.

    python benchmarks/predict_latency.py                          # the shipped h200 model if present,
                                                                   # else a fixture trained here
    python benchmarks/predict_latency.py --artifact DIR           # any exported artifact
    python benchmarks/predict_latency.py --trees 300 --depth 8    # fixture of that size
    python benchmarks/predict_latency.py --stop-after startup     # the timed sections alone (~1 min)

One thread (OMP/OpenBLAS/MKL pinned to 1 before numpy loads). Reports, for never-queried shapes
drawn log-uniformly over the training domain (none of them measured, so none is answered from
measurements): p50/p90/p99 of ``Predictor.predict_best`` at the artifact's default shortlist width,
and the same with how often the answer equals scoring every candidate with the full model
(held-out problems and random shapes; also within 1% of its predicted time) and the measured speed of
the answer on the held-out problems for a sweep of widths;
where a query's time goes; p50 for a repeated shape; import time and first-call time in fresh
interpreters; the out-of-distribution flags on the held-out problems (the rules the artifact stores,
and a leave-one-out estimate of how they generalise); the run-time dispatch rule's speed and the
model's top-5 against measured times. Writes JSON to ``--out`` after each section (``sections_done``
names them), so a run cut short keeps what it finished; ``--stop-after SECTION`` ends the run after that section
(its JSON then closes with the machine reference at the end): the latency alone on a machine that must be quiet
for it, without the hour of leave-one-out recalibration the OOD section takes on 735 held-out problems (the
sixty-third session stopped two runs by hand for this).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _percentiles(values_us: list[float]) -> dict[str, float]:
    array = np.array(values_us)
    return {f"p{q}": round(float(np.percentile(array, q)), 2) for q in (50, 90, 99)} | {
        "max": round(float(array.max()), 1)
    }


def _python_steps_ms(steps: int) -> float:
    """Milliseconds of a ``steps``-step Python loop: the machine's speed on work no change to tilecost touches."""
    started = time.perf_counter()
    total = 0
    for i in range(steps):
        total += i
    return (time.perf_counter() - started) * 1e3


def machine_reference() -> dict[str, float]:
    """This machine's speed now: five runs of a 3,000,000-step Python loop (s) and of 2,000,000 random gathers
    from a 64 MB numpy array (ms), their fastest and median, and the load average. Its speed swings by ±25% on
    most days and, on the twenty-first session's, by 4-5× within minutes (the loop took 0.115-0.54 s), with no
    steal time or clock change visible from inside, so the report records these at the start and at the end and
    samples the loop during the latency measurement too: a run's latency is read against its own reference."""
    loop, gather = [], []
    table = np.arange(8_000_000, dtype=np.float64)
    index = np.random.default_rng(0).integers(0, len(table), 2_000_000)
    for _ in range(5):
        loop.append(_python_steps_ms(3_000_000) / 1e3)
        started = time.perf_counter()
        table[index].sum()
        gather.append((time.perf_counter() - started) * 1e3)
    return {"python_loop_3m_s_min": round(min(loop), 3), "python_loop_3m_s_median": round(statistics.median(loop), 3),
            "numpy_gather_2m_ms_min": round(min(gather), 2),
            "numpy_gather_2m_ms_median": round(statistics.median(gather), 2),
            "load_average_1min": round(os.getloadavg()[0], 2)}  # fmt: skip


def _fresh(code: str, runs: int) -> list[dict[str, float]]:
    """Run ``code`` in fresh interpreters; each prints one JSON object of timings."""
    out = []
    for _ in range(runs):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
        out.append(json.loads(result.stdout.strip().splitlines()[-1]))
    return out


def import_and_first_call(artifact: Path, shape: tuple[int, int, int], runs: int) -> dict[str, Any]:
    code = f"""
import time, json, sys
t0 = time.perf_counter()
from tilecost import Predictor
t1 = time.perf_counter()
p = Predictor.load({str(artifact)!r})
t2 = time.perf_counter()
p.predict_best({shape!r}, measured=False)
t3 = time.perf_counter()
heavy = [m for m in ("torch", "triton", "mlflow", "pandas", "xgboost", "pyarrow") if m in sys.modules]
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "first_query_s": t3 - t2, "heavy": heavy}}))
"""
    rows = _fresh(code, runs)
    summary: dict[str, Any] = {
        key: round(statistics.median(r[key] for r in rows), 4) for key in ("import_s", "load_s", "first_query_s")
    }
    summary["first_call_total_s"] = round(summary["load_s"] + summary["first_query_s"], 4)
    summary["heavy_modules_imported"] = sorted({m for r in rows for m in r["heavy"]})
    return summary


def breakdown(predictor: Any, problems: list[Any]) -> dict[str, float]:
    """Median µs of each step of a new-shape query at the predictor's width (``Predictor._answer``).

    With the compiled path (numba), mask, features and trees are one kernel call, timed as
    ``compiled_score``; the numpy steps are then timed too, for comparison (``numpy_*``)."""
    from tilecost.features import feature_matrix
    from tilecost.predict.feasibility import feasible_mask

    group = predictor._group(problems[0].dtype, problems[0].layout)
    compiled = group.scorer.compiled
    names = ("ood_verdict", "shortlist", "feasible_mask", "features", "trees", "compiled_score")
    steps: dict[str, list[float]] = {k: [] for k in names}
    rows = []
    for problem in problems:
        clock = time.perf_counter_ns
        t0 = clock()
        predictor.ood.verdict(problem)
        t1 = clock()
        candidates = group.cut(problem).head
        t2 = clock()
        mask = feasible_mask(problem, candidates.columns, predictor.device)
        t3 = clock()
        x = feature_matrix(problem, candidates.features.take(mask), predictor.device)
        t4 = clock()
        predictor.ensemble.predict_numpy(x)
        t5 = clock()
        if compiled is not None:
            compiled.score(problem, candidates.indices)
        t6 = clock()
        for key, (a, b) in zip(steps, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5), (t5, t6)), strict=True):
            steps[key].append((b - a) / 1e3)
        rows.append(len(x))
    out = {key: round(statistics.median(values), 1) for key, values in steps.items()}
    if compiled is None:
        del out["compiled_score"]
    else:
        out = {("numpy_" + k if k in names[2:5] else k): v for k, v in out.items()}
    out["rows_scored_mean"] = round(float(np.mean(rows)), 1)
    return out


def ood_report(predictor: Any, heldout: list[Any], fractions: list[float], stored: dict[str, Any]) -> dict[str, Any]:
    """The predictor's flags on the held-out problems against their measured top-1 fractions, and a
    leave-one-out estimate: each problem judged by thresholds fitted on the others as training and
    export fit them (``calibrate_ood``'s distance threshold and range margin, then ``fit_flag_rules``),
    so that no problem is judged by thresholds it helped to fit; the rules-only variant keeps the
    artifact's shape-side thresholds (fitted on every held-out problem) and refits the rules alone."""
    import dataclasses

    from tilecost import Problem
    from tilecost.predict.ood import OODChecker, answer_signals, calibrate_ood, fit_flag_rules

    bad = [f < 0.90 for f in fractions]
    flagged = [bool(predictor.predict_best(p, measured=False).ood) for p in heldout]
    signals, already = [], []
    for problem in heldout:
        ranking = predictor.rank(problem, 2, measured=False)
        shape = predictor.ood.verdict(problem)
        second = ranking[1].time_us if len(ranking) > 1 else None
        signals.append(answer_signals(problem, ranking[0].time_us, second, shape.neighbour_distance_log2))
        already.append(bool(shape))
    training = [Problem.from_key(k) for k in predictor.metadata.domain.get("problems", ())]
    loo, loo_rules_only = [], []
    for i in range(len(heldout)):
        rest = [j for j in range(len(heldout)) if j != i]
        rules, _ = fit_flag_rules([signals[j] for j in rest], [bad[j] for j in rest], [already[j] for j in rest])
        loo_rules_only.append(already[i] or any(rule.fires(signals[i]) for rule in rules))
        fitted = calibrate_ood([heldout[j] for j in rest], [min(1.0, fractions[j]) for j in rest], training)
        checker = dataclasses.replace(OODChecker.from_metadata(predictor.metadata.domain, fitted),
                                      static_reasons=predictor.ood.static_reasons)  # fmt: skip
        shape_flags = [bool(checker.verdict(p)) for p in heldout]
        rules, _ = fit_flag_rules([signals[j] for j in rest], [bad[j] for j in rest], [shape_flags[j] for j in rest])
        loo.append(shape_flags[i] or any(rule.fires(signals[i]) for rule in rules))

    def counts(flags: list[bool]) -> dict[str, int]:
        return {"bad_problems": sum(bad), "bad_caught": sum(f and b for f, b in zip(flags, bad, strict=True)),
                "good_problems": len(bad) - sum(bad),
                "good_flagged": sum(f and not b for f, b in zip(flags, bad, strict=True))}  # fmt: skip

    return {
        "rules": stored.get("rules", []),
        "export_calibration": stored.get("calibration"),
        "in_sample": counts(flagged),
        "leave_one_out": counts(loo),
        "leave_one_out_rules_only": counts(loo_rules_only),
        "per_problem": [
            {"problem": p.key, "top1_fraction": round(f, 3), "flagged": fl, **{k: round(v, 3) for k, v in s.items()}}
            for p, f, fl, s in zip(heldout, fractions, flagged, signals, strict=True)
        ],  # fmt: skip
    }


def _latency_line(report: dict[str, Any]) -> str:
    """The latency section's figures in one line, as the run's last message prints them."""
    lat = report["latency_us"]
    return (f"new shape p50 {lat['new_shape']['p50']} us, p99 {lat['new_shape']['p99']} us; repeated p50 "
            f"{lat['repeated_shape']['p50']} us")  # fmt: skip


# The sections --stop-after may name, in the order they run (the width sweep's are named by their widths).
STOP_AFTER = ("latency", "startup", "agreement", "heldout_measured")


def random_shapes(
    rng: np.random.Generator, low: np.ndarray, high: np.ndarray, count: int, exclude: set[str]
) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    seen = set(exclude)
    while len(out) < count:
        m, n, k = (max(1, int(round(2.0 ** rng.uniform(lo, hi)))) for lo, hi in zip(low, high, strict=True))
        key = f"{m}x{n}x{k}-bf16-nt"
        if key not in seen:
            seen.add(key)
            out.append((m, n, k))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, default=None)
    parser.add_argument("--fixture-dir", type=Path, default=Path("/tmp/tilecost-predict-fixture"))
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--samples", type=int, default=48_000, help="fixture export: sample shapes")
    parser.add_argument("--new-shapes", type=int, default=2000)
    parser.add_argument("--agreement-shapes", type=int, default=300)
    parser.add_argument("--widths", default="8,16,24,32,48,64", help="shortlist widths to sweep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--stop-after", choices=STOP_AFTER, default=None,
                        help="end the run after this section (default: run every section)")  # fmt: skip
    args = parser.parse_args()

    from tests.test_predict_fixture import build_fixture_artifact, load_dataset
    from tilecost import Predictor, Problem
    from tilecost.predict import dispatch_speed, shipped_devices
    from tilecost.predict.shortlist import EXTEND_FROM

    data = load_dataset(groups=None, until=None)  # every measurement, not the test fixture's
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "machine_reference": {"start": machine_reference()},
    }
    out = args.out or REPO / "benchmarks" / "results" / f"{report['date']}-predict-latency.json"

    def save(section: str) -> None:
        """Write the report as it stands, so a run cut short keeps the sections it finished; after
        ``--stop-after``'s section, close it with the machine reference at the end and exit."""
        report["sections_done"] = [*report.get("sections_done", []), section]
        if section == args.stop_after:
            report["machine_reference"]["end"] = machine_reference()
        out.write_text(json.dumps(report, indent=1) + "\n")
        if section == args.stop_after:
            print(f"{_latency_line(report)}; stopped after {section}; written to {out}", file=sys.stderr)
            sys.exit(0)

    artifact = args.artifact
    if artifact is None and "h200" in shipped_devices():
        artifact = REPO / "tilecost" / "models" / "h200"
    if artifact is None:
        started = time.perf_counter()
        export = {"samples": args.samples, "validation": 2000, "list_width": 64, "default_width": 24}
        artifact = build_fixture_artifact(args.fixture_dir, data, trees=args.trees, depth=args.depth, export=export)
        report["fixture"] = {"trees": args.trees, "depth": args.depth, **export,
                             "build_s": round(time.perf_counter() - started, 1)}  # fmt: skip
    report["artifact"] = str(artifact)
    predictor = Predictor.load(artifact)
    report["model"] = {"trees": predictor.ensemble.num_trees, "depth": predictor.ensemble.depth}
    report["compiled_path"] = predictor.ensemble.compiled is not None  # numba installed and TILECOST_JIT not 0
    # Only the (dtype, layout) groups the artifact was trained on: held-out problems of other groups (the
    # dataset grows ahead of the shipped model) are reported apart, as counts of flagged answers.
    groups = set(predictor._group_specs) or {"bf16-nt"}
    in_artifact = [p for p in data.problems("heldout") if f"{p.dtype.value}-{p.layout.value}" in groups]
    others = [p for p in data.problems("heldout") if p not in in_artifact]
    training = [p for p in data.problems("train") if f"{p.dtype.value}-{p.layout.value}" in groups]
    heldout = in_artifact
    report["heldout_of_other_groups"] = {
        "problems": len(others),
        "flagged": sum(bool(predictor.predict_best(p, measured=False).ood) for p in others),
    }
    points = np.log2(np.array([[p.m, p.n, p.k] for p in training], dtype=float))
    rng = np.random.default_rng(args.seed)
    measured_keys = set(predictor.measured) | {p.key for p in training + heldout}
    shapes = random_shapes(rng, points.min(axis=0), points.max(axis=0), 200 + args.new_shapes, measured_keys)

    # Latency. The group (candidate space, feature columns) is built by the warm-up shapes.
    for shape in shapes[:200]:
        predictor.predict_best(shape)
    latencies, in_distribution, reference_ms = [], [], []
    for i, shape in enumerate(shapes[200:]):
        if i % 50 == 0:  # the machine's speed while the latencies are taken (machine_reference)
            reference_ms.append(_python_steps_ms(100_000))
        started = time.perf_counter_ns()
        answer = predictor.predict_best(shape)
        latencies.append((time.perf_counter_ns() - started) / 1e3)
        if not answer.ood:
            in_distribution.append(latencies[-1])
    repeated = []
    for _ in range(20000):
        started = time.perf_counter_ns()
        predictor.predict_best(shapes[-1])
        repeated.append((time.perf_counter_ns() - started) / 1e3)
    group = next(iter(predictor._groups.values()))
    extended = 0
    for shape in shapes[200:]:
        extended += group.choose(Problem(*shape))[2]
    report["latency_us"] = {
        "shortlist_width": group.width,
        "extend_from": group.extend_from,
        "extended_fraction": round(extended / len(shapes[200:]), 4),
        "new_shape": _percentiles(latencies),
        "new_shape_not_flagged": _percentiles(in_distribution) | {"shapes": len(in_distribution)},
        "repeated_shape": _percentiles(repeated),
    }
    report["machine_reference"]["during_new_shapes_python_100k_ms"] = {
        "median": round(statistics.median(reference_ms), 2), "min": round(min(reference_ms), 2),
        "max": round(max(reference_ms), 2), "samples": len(reference_ms)}  # fmt: skip
    report["breakdown_us"] = breakdown(predictor, [Problem(*s) for s in shapes[200:700]])
    save("latency")
    report["startup"] = import_and_first_call(artifact, shapes[0], runs=5)
    save("startup")

    # Agreement of the shortlist's choice with scoring every candidate, and OOD / top-k on held-out.
    exhaustive: dict[Problem, Any] = {}

    def agreement(scored: Any, problems: list[Problem]) -> dict[str, Any]:
        same, close, ratios = 0, 0, []
        for problem in problems:
            pick = scored.predict_best(problem, measured=False)
            if problem not in exhaustive:
                exhaustive[problem] = predictor.rank(problem, 1, exhaustive=True, measured=False)[0]
            full = exhaustive[problem]
            same += pick.config == full.config
            ratios.append(pick.time_us / full.time_us)
            close += ratios[-1] <= 1.01
        worse = [r for r in ratios if r > 1] or [1.0]
        return {
            "problems": len(problems),
            "agree": same,
            "agreement": round(same / len(problems), 4),
            "within_1pct": round(close / len(problems), 4),
            "predicted_slowdown_when_different_mean": round(float(np.mean(worse)), 4),
            "predicted_slowdown_worst": [round(r, 4) for r in sorted(ratios)[-3:]],
        }

    def measured_fraction(problem: Problem, config_keys: list[str]) -> float:
        """The problem's best measured time over the measured time of the fastest of ``config_keys`` (one never
        timed counts 0; a hopeless one at its lower-bound time)."""
        times = data.times(problem, ("ok", "hopeless"))
        return min(data.times(problem).values()) / min(times.get(key, math.inf) for key in config_keys)

    def measured_top1(scored: Any) -> dict[str, Any]:
        """:func:`measured_fraction` of ``scored``'s answer (never from the measured database) over the held-out
        problems."""
        f = np.array([measured_fraction(p, [scored.predict_best(p, measured=False).config.key]) for p in heldout])
        return {"mean": round(float(f.mean()), 4), "geomean": round(float(np.exp(np.log(f).mean())), 4),
                "worst": round(float(f.min()), 4), "below_0.90": int((f < 0.9).sum())}  # fmt: skip

    random_problems = [Problem(*s) for s in shapes[200 : 200 + args.agreement_shapes]]
    unflagged = [p for p in random_problems if not predictor.predict_best(p).ood]
    report["agreement"] = {
        "heldout": agreement(predictor, heldout),
        "random": agreement(predictor, random_problems),
        "random_not_flagged": agreement(predictor, unflagged),
    }
    save("agreement")
    sweep = []
    plain_width = int(group.width or 0)  # the default width without extending past it
    settings = [(int(w), EXTEND_FROM) for w in args.widths.split(",")] + [(plain_width, None)]
    for width, extend_from in settings:
        narrow = Predictor.load(artifact, shortlist_width=width, extend_from=extend_from)
        for shape in shapes[:100]:
            narrow.predict_best(shape)
        times = []
        for shape in shapes[200 : 200 + args.new_shapes // 2]:
            started = time.perf_counter_ns()
            narrow.predict_best(shape)
            times.append((time.perf_counter_ns() - started) / 1e3)
        sweep.append({"width": width, "extend_from": extend_from, "new_shape": _percentiles(times),
                      "heldout": agreement(narrow, heldout), "random": agreement(narrow, random_problems),
                      "heldout_measured_top1": measured_top1(narrow)})  # fmt: skip
        report["width_sweep"] = sweep
        save(f"width {width}" + ("" if extend_from else " without extending"))
    header = json.loads((Path(artifact) / "predictor.json").read_text())
    report["export_validation"] = {name: g.get("validation") for name, g in header["groups"].items()}

    fractions, top5, exhaustive_fractions = [], [], []
    for problem in heldout:
        full = [p.config.key for p in predictor.rank(problem, 5, exhaustive=True, measured=False)]
        fractions.append(measured_fraction(problem, [predictor.predict_best(problem, measured=False).config.key]))
        exhaustive_fractions.append(measured_fraction(problem, full[:1]))
        top5.append(measured_fraction(problem, full))
    report["heldout_measured"] = {
        "top1_fraction_mean": round(float(np.mean(fractions)), 4),
        "top1_fraction_min": round(float(np.min(fractions)), 4),
        "exhaustive_top1_fraction_mean": round(float(np.mean(exhaustive_fractions)), 4),
        "top5_measured_fraction_mean": round(float(np.mean(top5)), 4),
        "below_0.90": int(sum(f < 0.9 for f in fractions)),
    }
    save("heldout_measured")
    report["ood"] = ood_report(predictor, heldout, fractions, header.get("ood", {}))
    far = [Problem(1, 4096, 262144), Problem(65536, 65536, 65536)]
    report["far_shapes_flagged"] = {p.key: [r.value for r in predictor.predict_best(p).ood.reasons] for p in far}
    rule = predictor.dispatch_rule("bf16", "nt")
    report["dispatch"] = {"rule": rule.describe().splitlines(),
                          "heldout": dispatch_speed(rule, {p: data.times(p) for p in heldout}),
                          "training": dispatch_speed(rule, {p: data.times(p) for p in training})}  # fmt: skip

    report["machine_reference"]["end"] = machine_reference()
    save("end")
    print(json.dumps(report, indent=1))
    print(f"{_latency_line(report)}; agreement {report['agreement']['heldout']['agreement']} (held-out), "
          f"{report['agreement']['random']['agreement']} (random); OOD catches "
          f"{report['ood']['in_sample']['bad_caught']}/{report['ood']['in_sample']['bad_problems']}, flags "
          f"{report['ood']['in_sample']['good_flagged']}/{report['ood']['in_sample']['good_problems']} good; "
          f"written to {out}", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
