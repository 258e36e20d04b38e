"""How much one nightly round of flagged problems improves the model on them, on real measurements.

The nightly loop measures the problems the predictor flagged out of distribution and retrains. This
replays one such round on the real dataset, without a GPU: **tonight's collection is made of rows
that were already measured** (the held-out problems, measured over their whole candidate space), so
the replay is exact about which configurations the sweep would have timed, and silent about the
re-measurement noise a real night adds.

One round, for each seed:

1. *yesterday's model*: the cost model (default settings) fitted on a seeded ``--yesterday-fraction``
   of the training problems;
2. *queries*: the held-out problems, shapes users asked about that nobody trained on; the *flagged*
   ones are those the out-of-distribution check of yesterday's training domain flags (the
   predictor's own :class:`~tilecost.predict.ood.OODChecker`, default threshold: its calibration
   on held-out problems would use the answer);
3. *tonight's collection*: for each flagged problem, the configurations the sweep would measure for a
   training problem (``choose_candidates``: a seeded 35 % sample, at least 64) and their measured rows;
4. *tonight's model*: refitted on yesterday's problems plus those rows; *control*: refitted on
   yesterday's problems plus as many other training problems (what a night of fresh family samples
   of the same size would add).

Reported per round and over rounds (geometric means of top-1 = best measured / measured time of the
pick, over the whole candidate space): on the flagged problems, yesterday's model, tonight's, the
control, and the measured best of tonight's sample (what the predictor answers for a shape its
artifact measured); on the held-out problems not flagged (trained on by neither), yesterday's,
tonight's and the control. "Tonight" on a flagged problem is partly in-sample: 35 % of its
candidates were trained on, the rest not, and the best may be among either.

    python benchmarks/nightly_gain.py --dataset datasets/measurements --seeds 0 1 2 3 4 \
        --out benchmarks/results/2026-11-29-nightly-gain.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from tilecost.collect.plans import PlanEntry, Role
from tilecost.collect.sweep import SweepSettings, choose_candidates
from tilecost.device import load_device
from tilecost.predict.ood import OODChecker, training_domain
from tilecost.problem import Problem
from tilecost.train.dataset import load_measurements
from tilecost.train.evaluate import geomean
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, evaluate_model, split_by_role


def _fit(frame, device, seed: int, n_jobs: int | None) -> CostModel:
    return CostModel(seed=seed, n_jobs=n_jobs).fit(
        build_features(frame, device), frame["time_us"].to_numpy(), groups=frame["problem_key"].to_numpy(),
        hopeless=(frame["status"] == "hopeless").to_numpy(),
    )  # fmt: skip


def _top1(model: CostModel, rows, device) -> dict[str, float]:
    if rows.empty:
        return {}
    return {r.problem.key: r.top1 for r in evaluate_model(model, rows, device).problems}


def one_round(train, heldout, device, *, seed: int, fraction: float, sample: float, n_jobs: int | None) -> dict:
    rng = np.random.default_rng(seed)
    problems = sorted(train["problem_key"].unique())
    yesterday = set(rng.choice(problems, size=max(1, round(fraction * len(problems))), replace=False).tolist())
    others = [p for p in problems if p not in yesterday]
    base = train[train["problem_key"].isin(yesterday)]
    checker = OODChecker.from_metadata(training_domain([Problem.from_key(k) for k in sorted(yesterday)]), {})
    queries = sorted(heldout["problem_key"].unique())
    verdicts = {k: checker.verdict(Problem.from_key(k)) for k in queries}
    flagged = [k for k in queries if verdicts[k]]
    unflagged = [k for k in queries if not verdicts[k]]
    out: dict = {"seed": seed, "yesterday_problems": len(yesterday), "queries": len(queries), "flagged": flagged,
                 "reasons": {k: [r.value for r in verdicts[k].reasons] for k in flagged}}  # fmt: skip
    if not flagged:
        return out
    settings = SweepSettings(sample_fraction=sample, seed=seed)
    collected = []
    sample_best: dict[str, float] = {}
    for key in flagged:
        configs, _ = choose_candidates(PlanEntry(Problem.from_key(key), "flagged", Role.TRAIN), settings)
        rows = heldout[(heldout["problem_key"] == key) & heldout["config_id"].isin({c.key for c in configs})]
        collected.append(rows.assign(role="train"))
        everything = heldout[heldout["problem_key"] == key]
        sample_best[key] = float(everything["time_us"].min() / rows["time_us"].min())
    control_keys = rng.choice(others, size=min(len(flagged), len(others)), replace=False).tolist()
    started = time.perf_counter()
    models = {
        "yesterday": _fit(base, device, seed, n_jobs),
        "tonight": _fit(_concat([base, *collected]), device, seed, n_jobs),
        "control": _fit(_concat([base, train[train["problem_key"].isin(control_keys)]]), device, seed, n_jobs),
    }
    out["fit_seconds"] = time.perf_counter() - started
    flagged_rows = heldout[heldout["problem_key"].isin(flagged)]
    unflagged_rows = heldout[heldout["problem_key"].isin(unflagged)]
    out["flagged_top1"] = {name: _top1(m, flagged_rows, device) for name, m in models.items()}
    out["flagged_top1"]["measured_sample"] = sample_best
    out["unflagged_top1"] = {name: _top1(m, unflagged_rows, device) for name, m in models.items()}
    out["rows_collected"] = int(sum(len(c) for c in collected))
    return out


def _concat(frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def summarise(rounds: list[dict]) -> dict:
    def pooled(part: str, name: str) -> float:
        return geomean([v for r in rounds if part in r for v in r[part].get(name, {}).values()])

    out = {"rounds": len(rounds), "rounds_with_flags": sum(bool(r["flagged"]) for r in rounds),
           "flagged_problem_instances": sum(len(r["flagged"]) for r in rounds)}  # fmt: skip
    for name in ("yesterday", "tonight", "control", "measured_sample"):
        out[f"flagged_{name}"] = pooled("flagged_top1", name)
    for name in ("yesterday", "tonight", "control"):
        out[f"unflagged_{name}"] = pooled("unflagged_top1", name)

    def per_round(part: str, name: str) -> list[float]:
        return [geomean(list(r[part][name].values())) for r in rounds if part in r and r[part].get(name)]

    for part in ("flagged", "unflagged"):
        before, after, control = (per_round(f"{part}_top1", n) for n in ("yesterday", "tonight", "control"))
        gains = np.log(np.array(after) / np.array(before))
        out[f"{part}_rounds_tonight_better"] = int((gains > 0).sum())
        out[f"{part}_rounds_tonight_beats_control"] = int((np.array(after) > np.array(control)).sum())
        # spread of the per-round gain: its mean and the standard error of that mean, as ratios
        out[f"{part}_gain_ratio_mean"] = float(np.exp(gains.mean())) if len(gains) else math.nan
        out[f"{part}_gain_ratio_stderr"] = (
            float(np.exp(gains.std(ddof=1) / np.sqrt(len(gains)))) if len(gains) > 1 else math.nan
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="datasets/measurements")
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--yesterday-fraction", type=float, default=0.5, help="of the training problems")
    parser.add_argument("--sample-fraction", type=float, default=0.35, help="the nightly sweep's sample")
    parser.add_argument("--n-jobs", type=int, default=None, help="XGBoost threads")
    parser.add_argument("--out", default=None, help="JSON file for the raw results")
    args = parser.parse_args(argv)

    device = load_device(args.device_class)
    measurements = load_measurements(args.dataset, args.device_class)
    train, heldout = split_by_role(measurements)
    print(measurements.summary(), file=sys.stderr)
    rounds = []
    for seed in args.seeds:
        result = one_round(train, heldout, device, seed=seed, fraction=args.yesterday_fraction,
                           sample=args.sample_fraction, n_jobs=args.n_jobs)  # fmt: skip
        rounds.append(result)
        if not result["flagged"]:
            print(f"seed {seed}: no held-out problem flagged; nothing to collect", file=sys.stderr)
            continue
        f, u = result["flagged_top1"], result["unflagged_top1"]
        print(
            f"seed {seed}: {len(result['flagged'])} of {result['queries']} queries flagged "
            f"({result['rows_collected']} rows collected); flagged top-1 yesterday "
            f"{geomean(list(f['yesterday'].values())):.3f} -> tonight {geomean(list(f['tonight'].values())):.3f} "
            f"(control {geomean(list(f['control'].values())):.3f}, measured sample "
            f"{geomean(list(f['measured_sample'].values())):.3f}); unflagged "
            f"{geomean(list(u['yesterday'].values())):.3f} -> {geomean(list(u['tonight'].values())):.3f} "
            f"(control {geomean(list(u['control'].values())):.3f}); fits {result['fit_seconds']:.0f} s",
            file=sys.stderr,
        )
    summary = summarise(rounds)
    print(json.dumps(summary, indent=1))
    if args.out:
        record = {"command": " ".join(sys.argv), "machine": platform.node(), "python": platform.python_version(),
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dataset_digest": measurements.digest,
                  "summary": summary, "rounds": rounds}  # fmt: skip
        Path(args.out).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
