"""Experiment (forty-ninth session, not part of the product): how far the H200's answers hold on another device class.

Issue 5 item 4 makes a predictor asked about another device than its artifact's flag every answer
(``OODReason.DEVICE_MISMATCH``); this measures what that flag protects against. For every problem that both device
classes measured over every candidate (held-out role), on the other device (default ``h100_sxm``) it prints the
measured best over the time of:

* ``h200 best``: the configuration fastest on the H200 (a tuning database copied from one device to the other);
* ``model``: the shipped H200 model's answer (``Predictor.load(artifact, device=OTHER)``, ``measured=False``: the
  model's pick, flagged);
* ``model for h200``: the model's answer for the H200 (its own device's features), judged on the other device:
  whether the other device's spec as features (``device=OTHER``) moves the model's picks for better or worse
  (fifty-fifth session);
* ``model on h200``: that answer judged on the H200, for comparison (``measured=False``);
* ``128x128``: the fixed pointer tile ``ptr-128x128x64-g8-s1-w4-p3`` where both measured it, else left out;

then what that predictor answers by default (since the fifty-third session, a problem the artifact measured gets
the artifact device's measured best, ``Source.MEASURED_ON_ARTIFACT_DEVICE``; since the fifty-fifth, one the other
device measured and the artifact holds in ``measured-<class>.json`` that device's own, ``Source.MEASURED``; the
others the model's pick), and
Kendall's tau between the two devices' times over the configurations both timed, then how the model's answers
fare on the two devices (Spearman's rank correlation of their fractions, the counts below 0.90 on each). Geometric
means over the problems, worst and the count below 0.90. A configuration the other device did not time (failed
there) counts as missing and the problem leaves that column; a ``hopeless`` one counts at its screening bound (the
faster of two launches over 3x the screening best, docs/PROTOCOL.md), so its fraction is an upper bound, below 1/3
either way.

    .venv/bin/python benchmarks/experiments/device_transfer.py [--other h100_sxm] [--per-problem]   (~1 min)
        [--role train] [--run-id RUN]

``--role train`` judges training problems instead (sixty-fifth session, for rhlay's layer shapes): each timed a 25%
sample of its candidates on each device, so every fraction is against the best of the configurations both devices
timed, and ``--run-id`` keeps only the other device's problems one run measured.

Then one line per dtype and layout (geometric means). The H100 rows are the fifty-first session's (146 held-out
problems of four held-out sets, every candidate, device class ``h100_sxm``; 203 of seven sets since the fifty-third;
380 of nine since the fifty-fifth; 506 since the fifty-sixth, adding the fifth and fourth sets and part of the
second). ``--other h200`` is the self-check: ``h200 best`` is 1.000, tau 1.000, and ``model``, ``model for h200``
and ``model on h200`` are the shipped model's held-out top-1 (0.964 of the best, worst 0.470, on 660 problems).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

FIXED = "ptr-128x128x64-g8-s1-w4-p3"


def _summary(name: str, fractions: list[float]) -> str:
    from tilecost.train.evaluate import geomean

    if not fractions:
        return f"{name:14s} no problems"
    f = np.asarray(fractions)
    return (f"{name:14s} {len(f):3d} problems  geomean {geomean(fractions):.3f}  worst {f.min():.3f}  "
            f"below 0.90: {int((f < 0.90).sum())}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--other", default="h100_sxm", help="the device class to judge on (default %(default)s)")
    parser.add_argument("--per-problem", action="store_true", help="one line per problem, worst model answer first")
    parser.add_argument(
        "--role",
        default="heldout",
        choices=("heldout", "train"),
        help="the problems to judge: held out (every candidate timed, the default) or training ones (a sample of "
        "the candidates: each fraction is against the best of what both devices timed)",
    )
    parser.add_argument("--run-id", default=None, help="only the other device's problems this run measured")
    args = parser.parse_args()

    from scipy.stats import kendalltau, spearmanr

    from tilecost import Predictor
    from tilecost.problem import Problem
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import geomean
    from tilecost.train.pipeline import candidate_rows

    def times_by_problem(device_class: str, run_id: str | None = None) -> dict[str, dict[str, float]]:
        # One role's rows (subset, not split_by_role: the other device class may have no training problems at all,
        # r49h1 measured 18 held-out layers on the H100 and nothing else, which split_by_role refuses).
        rows = candidate_rows(load_measurements(args.dataset, device_class).subset(args.role))
        if run_id is not None:
            rows = rows[rows["run_id"] == run_id]
        rows = rows[np.isfinite(rows["time_us"])]
        table = rows.pivot_table(index="problem_key", columns="config_id", values="time_us", aggfunc="min")
        return {key: {c: float(t) for c, t in row.dropna().items()} for key, row in table.iterrows()}

    home, other = times_by_problem("h200"), times_by_problem(args.other, args.run_id)
    if args.role == "train":
        # A training problem timed a sample of its candidates on each device: judge on the configurations both timed.
        for key in set(home) & set(other):
            both = set(home[key]) & set(other[key])
            home[key] = {c: t for c, t in home[key].items() if c in both}
            other[key] = {c: t for c, t in other[key].items() if c in both}
    common = sorted(key for key in set(home) & set(other) if home[key] and other[key])
    print(f"{len(other)} {args.role} problems measured on {args.other}"
          f"{f' by {args.run_id}' if args.run_id else ''}, {len(common)} of them also on the h200")  # fmt: skip
    on_other = Predictor.load(args.artifact, device=args.other)
    on_home = Predictor.load(args.artifact)
    columns: dict[str, list[float]] = {"h200 best": [], "model": [], "model for h200": [], "model on h200": [],
                                       "128x128": []}  # fmt: skip
    taus, lines, flagged, served = [], [], 0, []
    for key in common:
        problem, h, o = Problem.from_key(key), home[key], other[key]
        home_best = min(h, key=h.__getitem__)
        best_o, best_h = min(o.values()), h[home_best]
        answer = on_other.predict_best(problem, measured=False)
        flagged += bool(answer.ood)
        default = on_other.predict_best(problem)
        if default.config.key in o:
            served.append((default.source.value, best_o / o[default.config.key]))
        home_answer = on_home.predict_best(problem, measured=False).config.key
        row = {
            "h200 best": best_o / o[home_best] if home_best in o else None,
            "model": best_o / o[answer.config.key] if answer.config.key in o else None,
            # the answer the model gives for the h200 (its own device's features), timed on the other device
            "model for h200": best_o / o[home_answer] if home_answer in o else None,
            "model on h200": best_h / h[home_answer] if home_answer in h else None,
            "128x128": best_o / o[FIXED] if FIXED in o and FIXED in h else None,
        }
        for name, value in row.items():
            if value is not None:
                columns[name].append(value)
        both = sorted(set(h) & set(o))
        taus.append(kendalltau([h[c] for c in both], [o[c] for c in both]).statistic)
        lines.append((row["model"] if row["model"] is not None else -1.0, key, row, len(both), taus[-1], answer))
    print(f"the model's answers flagged out of distribution: {flagged} of {len(common)}")
    for name, fractions in columns.items():
        print(_summary(name, fractions))
    if served:
        counts = ", ".join(f"{n} {source}" for source, n in sorted(Counter(s for s, _ in served).items()))
        print(_summary("answered", [f for _, f in served]) + f"  (the predictor's default answers: {counts})")
    if taus:
        print(f"Kendall tau, h200 against {args.other} times over the configurations both timed: median "
              f"{np.median(taus):.3f} (range {min(taus):.3f}-{max(taus):.3f})")  # fmt: skip
    pairs = [(r["model"], r["model on h200"]) for _, _, r, *_ in lines if None not in (r["model"], r["model on h200"])]
    if pairs:
        there, home_ = np.asarray(pairs).T
        rho = spearmanr(there, home_).statistic
        print(f"the model's answers on both devices ({len(pairs)} problems): Spearman {rho:.2f}; "
              f"below 0.90 on {args.other} {int((there < 0.90).sum())}, on the h200 {int((home_ < 0.90).sum())}, "
              f"on both {int(((there < 0.90) & (home_ < 0.90)).sum())}")  # fmt: skip
    groups: dict[str, list[dict]] = {}
    for _, key, row, *_ in lines:
        groups.setdefault(key.split("-", 1)[1], []).append(row)
    for group, rows_ in sorted(groups.items()):
        names = ("h200 best", "model", "model for h200", "model on h200")
        per_column = {n: [r[n] for r in rows_ if r[n] is not None] for n in names}
        cells = "  ".join(f"{n} {geomean(v):.3f}" if v else f"{n} -" for n, v in per_column.items())
        print(f"{group:14s} {len(rows_):3d} problems  geomeans: {cells}")
    if args.per_problem:
        for _, key, row, n, tau, answer in sorted(lines, key=lambda line: line[0]):
            cells = "  ".join(f"{name} {'-' if v is None else f'{v:.3f}'}" for name, v in row.items())
            print(f"{key:34s} {cells}  tau {tau:.3f} over {n}  model: {answer.config.key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
