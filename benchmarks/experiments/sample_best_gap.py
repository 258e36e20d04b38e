"""Experiment (sixty-seventh session, not part of the product): how far is a training problem's measured best (the best
of its shared sample, docs/COLLECTING.md) from the best of its whole space, and how does that compare with the model?

A training problem is timed over a seeded share of its candidates (``tilecost.collect.sweep.choose_candidates``), and
the predictor answers such a problem from its measurements: the best of that sample, marked as such
(``configs_measured``, ``measured_all`` false). The held-out problems were timed over every candidate, so replaying the
sampler on them (the same seed, fraction and minimum as a training run) says what the sample's best gives up against
the space's best. Beside it, the predictor's own answer with ``measured=False`` on the same problems, judged the same
way (the best time over the pick's; a ``hopeless`` time is its screening bound, docs/PROTOCOL.md), and the best of the
sample together with the model's top K by full scoring (``rank(..., exhaustive=True, measured=False)``): what a
model-top round (``scripts/model_top_plan.py``) would make of the sample's best, had it timed those K too. Last, with
nothing more timed: the model's first choice in place of the sample's best wherever it is untimed and the model ranks
it faster than the sample's best by more than a margin (the same model's two predictions, so its bias cancels).

    .venv/bin/python benchmarks/experiments/sample_best_gap.py [--device-class h200|h100_sxm] [--fraction 0.25]
        [--seed 0] [--min-sample 64] [--artifact h200] [--dataset datasets/measurements]   (~1 min, 2 cores)
"""

from __future__ import annotations

import argparse
from collections import defaultdict

TOPS = (1, 4, 8)  # the model's top K timed beside the sample
MARGINS = (0.0, 0.05, 0.10, 0.20)  # how much faster the model must rank its untimed first choice to answer with it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--fraction", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-sample", type=int, default=64)
    parser.add_argument("--artifact", default="h200", help="an artifact directory or a shipped device (default h200)")
    parser.add_argument("--dataset", default="datasets/measurements")
    args = parser.parse_args()

    from tilecost.collect.plans import PlanEntry, Role
    from tilecost.collect.sweep import SweepSettings, choose_candidates
    from tilecost.predict.predictor import Predictor
    from tilecost.problem import Problem
    from tilecost.train.answer_gate import artifact_answers
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import geomean

    settings = SweepSettings(
        device_class=args.device_class, sample_fraction=args.fraction, min_sample=args.min_sample, seed=args.seed
    )
    predictor = Predictor.load(args.artifact, device=args.device_class)
    rows = load_measurements(args.dataset, args.device_class).frame
    heldout = rows[(rows.role == "heldout") & rows.status.isin(["ok", "hopeless"])]
    answered = artifact_answers(predictor, heldout).fractions  # the model's answers, as the answer gate judges them
    by_group: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    for key, timed in heldout.groupby("problem_key"):
        first = timed.iloc[0]
        problem = Problem(int(first.m), int(first.n), int(first.k), first["dtype"], first["layout"])
        times = timed.groupby("config_id").time_us.min()
        sample, _ = choose_candidates(PlanEntry(problem, "replay", Role.TRAIN), settings)
        sampled = times.reindex([c.key for c in sample]).dropna()
        top = [p.config.key for p in predictor.rank(problem, max(TOPS), exhaustive=True, measured=False)]
        predicted = {c.key: t for c, t in predictor.predicted_times_us(problem).items()}
        best, sampled_best = times.min(), sampled.idxmin()
        with_top = [min(sampled.min(), times.reindex(top[:k]).min()) for k in TOPS]
        # Without timing anything: the model's first choice instead of the sample's best where the model ranks it
        # faster than that best by more than the margin (the same model's two predictions, so its bias cancels).
        switched = [
            times[top[0]]
            if top[0] not in sampled.index and predicted[top[0]] < predicted[sampled_best] * (1 - m)
            else sampled.min()
            for m in MARGINS
        ]
        by_group[f"{problem.dtype.value}-{problem.layout.value}"].append(
            (len(sampled), best / sampled.min(), answered[key], *(best / t for t in (*with_top, *switched)))
        )

    labels = (
        "sample's best",
        "model",
        *(f"sample + model's top {k}" for k in TOPS),
        *(f"the model's untimed first where ranked > {m:.0%} faster than the sample's best" for m in MARGINS),
    )

    def line(name: str, answers: list[tuple[float, ...]]) -> str:
        parts = [f"{name:<11}{len(answers):>4}"]
        for column in range(1, len(labels) + 1):
            values = [a[column] for a in answers]
            parts.append(f"{geomean(values):.3f} {min(values):.3f} {sum(v < 0.90 for v in values):>3}")
        return " | ".join(parts)

    everything = [a for group in by_group.values() for a in group]
    timed_share = sum(a[0] for a in everything) / len(everything)
    print(
        f"{args.device_class}: {len(everything)} held-out problems timed over every candidate; the training sampler "
        f"replayed (fraction {args.fraction}, at least {args.min_sample}, seed {args.seed}): {timed_share:.0f} "
        f"configurations timed a problem on average; the model: {args.artifact} with measured=False"
    )
    print("each column: geometric mean of best / answer, worst, answers below 0.90; columns: " + "; ".join(labels))
    print(line("all", everything))
    for name in sorted(by_group):
        print(line(name, by_group[name]))


if __name__ == "__main__":
    main()
