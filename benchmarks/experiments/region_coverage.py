"""Experiment (sixty-sixth session, not part of the product): in one region of shape space, how many training problems
each dtype, layout and pointer pattern holds, against how the shipped predictor answers the held-out problems there.

The pointer pattern is the N-K class of ``tilecost.collect.compile.problem_pattern`` (``16`` where the extent is a
multiple of 16, ``1`` where it is 1, else ``x``), as ``scripts/train_plan.py`` draws it. Each held-out answer is the
predictor's pick with ``measured=False`` (the model's, not the artifact's measurement), judged over every candidate
the problem timed: the best time over the pick's (a ``hopeless`` pick at its screening bound, docs/PROTOCOL.md).

    .venv/bin/python benchmarks/experiments/region_coverage.py [--max-m 128] [--min-n 4096] [--artifact DIR]
        [--dataset datasets/measurements]   (~20 s, 2 cores)

Prints one line per dtype and layout (training problems in the region by pattern; held-out problems, answers below
0.90 of the best and their geometric mean), then those lines per pattern for the held-out problems, then the answers
below 0.90 in the region. The sixty-sixth session ran it with the defaults to plan r66snn (docs/COLLECTING.md).
"""

from __future__ import annotations

import argparse
from collections import Counter


def pattern(n: int, k: int) -> str:
    """The N-K class of a problem's pointer kernels, e.g. ``16-x`` (N a multiple of 16, K not)."""
    from tilecost.collect.compile import problem_pattern
    from tilecost.problem import Problem

    return problem_pattern(Problem(1, int(n), int(k))).split("-", 2)[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-m", type=int, default=128)
    parser.add_argument("--min-n", type=int, default=4096)
    parser.add_argument("--artifact", default="h200", help="an artifact directory or a shipped device (default h200)")
    parser.add_argument("--dataset", default="datasets/measurements")
    args = parser.parse_args()

    from tilecost.predict.predictor import Predictor
    from tilecost.problem import Problem
    from tilecost.train.answer_gate import artifact_answers
    from tilecost.train.dataset import load_measurements
    from tilecost.train.evaluate import geomean

    rows = load_measurements(args.dataset, "h200").frame
    rows = rows[(rows.m <= args.max_m) & (rows.n >= args.min_n)]
    training = rows[rows.role == "train"].drop_duplicates("problem_key")
    columns = (training.dtype, training.layout, training.n, training.k)
    trained: Counter[tuple[str, str, str]] = Counter(
        (d, lay, pattern(n, k)) for d, lay, n, k in zip(*columns, strict=True)
    )
    heldout = rows[(rows.role == "heldout") & rows.status.isin(["ok", "hopeless"])]  # hopeless: its screening bound
    fractions = artifact_answers(Predictor.load(args.artifact), heldout).fractions
    answers = []  # (dtype, layout, pattern, key, fraction)
    for key, fraction in fractions.items():
        problem = Problem.from_key(key)
        pair = (problem.dtype.value, problem.layout.value)
        answers.append((*pair, pattern(problem.n, problem.k), key, fraction))

    def summary(chosen: list[float]) -> str:
        if not chosen:
            return "held out 0"
        below = sum(f < 0.90 for f in chosen)
        return f"held out {len(chosen)}, below 0.90 {below}, geometric mean {geomean(chosen):.3f}"

    region = f"M <= {args.max_m}, N >= {args.min_n}"
    print(f"region: {region}; {len(training)} training and {len(answers)} held-out problems")
    for dtype, layout in sorted({(d, lay) for d, lay, _ in trained} | {(a[0], a[1]) for a in answers}):
        counts = {p: c for (d, lay, p), c in sorted(trained.items()) if (d, lay) == (dtype, layout)}
        print(f"{dtype} {layout}: trained {counts}; {summary([a[4] for a in answers if a[:2] == (dtype, layout)])}")
    print("held out, per pattern:")
    for group in sorted({a[:3] for a in answers}):
        print(f"  {' '.join(group)}: trained {trained[group]}; {summary([a[4] for a in answers if a[:3] == group])}")
    print("answers below 0.90:")
    for a in sorted((a for a in answers if a[4] < 0.90), key=lambda a: a[4]):
        print(f"  {a[3]} ({a[2]}): {a[4]:.3f}")


if __name__ == "__main__":
    main()
