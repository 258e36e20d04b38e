"""A model's held-out figures on each held-out set apart: the first 78 problems, the ninth session's second set (the
problems of ``datasets/plans/2026-11-30-heldout-b-*.json`` that the dataset holds), the twenty-fifth session's third,
stride-ragged shapes (``datasets/plans/2026-12-02-s25-stride-ragged-heldout.json``), the twenty-eighth session's
fourth, bf16 nt shapes with N and K off multiples of 16 (``datasets/plans/2026-12-03-s28-heldout-d.json``) and the
twenty-ninth session's fifth, fp16 and fp32 shapes of both layouts, the groups the earlier sets held least of
(``datasets/plans/2026-12-03-s29-heldout-e*.json``), and the thirty-second session's sixth, the linear layers of current
public models at token counts 1-8192, bf16 and fp8e4m3 nt (``datasets/plans/2026-12-03-s32-layers-heldout.json``,
written by ``scripts/layer_plan.py``), and the thirty-fourth session's seventh, decode-sized (M 1-16), short-K,
very wide layers (LM heads of small models, MLA up-projections) of models no earlier plan held
(``datasets/plans/2026-12-03-s34-decode-wide-heldout.json``, written by ``scripts/decode_wide_plan.py``), and the
thirty-fifth session's eighth, bf16 nt shapes with N and K off multiples of 16, the fourth set's kind
(``datasets/plans/2026-12-04-s35-heldout-h.json``, ``scripts/heldout_plan.py`` with seeds 35-37), and the thirty-sixth
session's ninth, bf16 and fp32 nn shapes with N and K off multiples of 16
(``datasets/plans/2026-12-04-s36-heldout-i.json``, seeds 36-38), and the thirty-eighth session's tenth, fp32 and fp16 nt
shapes with N and K off multiples of 16 (``datasets/plans/2026-12-04-s38-heldout-j.json``, seeds 42-44), and the
thirty-ninth session's eleventh, fp16 and fp8e4m3 nn shapes with N and K off multiples of 16
(``datasets/plans/2026-12-04-s39-heldout-k.json``, seeds 45-47), and the fortieth session's twelfth, bf16 nt shapes with
one of N and K a multiple of 16 and the other not (``datasets/plans/2026-12-04-s40-heldout-l.json``, seeds 40-79), and
the same session's thirteenth, fp16 nt shapes of that kind (``datasets/plans/2026-12-04-s40-heldout-m.json``, seeds
80-139; its second half measured in the forty-third session), and the forty-second session's fourteenth, bf16 and fp16
nn shapes of that kind (``datasets/plans/2026-12-05-s42-heldout-n-*.json``, seeds 140-199; measured in the forty-third),
and the forty-third session's fifteenth, fp32 and fp8e4m3 nt and nn shapes of that kind
(``datasets/plans/2026-12-05-s43-heldout-o-*.json``, seeds 200-319; fp32 and 5 of the 32 fp8e4m3 measured in the
forty-sixth), and the sixty-second session's sixteenth, fp32 nt and nn and bf16 and fp16 nn shapes of that kind, the
patterns its training plans r46f32 and r46hn aimed at (``datasets/plans/2026-12-06-s62-heldout-p.json``, seeds
320-379; measured in the sixty-third).

    .venv/bin/python benchmarks/heldout_sets.py [--dataset datasets/measurements] [--artifact DIR]   (~3 min, 2 cores)

The model is fitted exactly as ``tilecost train`` fits it (the shipped settings, every training problem), or with
``--artifact`` read from an exported artifact (the shipped one: ``tilecost/models/h200``); held-out problems are
never trained on, so adding a held-out set changes the figures' basis, not the model. Prints, per set, the summary
line of the evaluation table (top-1 geometric mean and worst problem, top-5, Kendall tau, the baselines) with its
bootstrap interval, and the same for each dtype over every set, then the second to sixteenth sets' tables per problem.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def plan_keys(pattern: str) -> set[str]:
    """The problem keys of the plans matching ``pattern`` (a glob relative to the repository)."""
    from tilecost.problem import Problem

    keys = set()
    for path in sorted(glob.glob(str(REPO / pattern))):
        for e in json.loads(Path(path).read_text()):
            keys.add(Problem(e["m"], e["n"], e["k"], e["dtype"], e["layout"]).key)
    return keys


def set_keys() -> dict[str, set[str]]:
    """The problem keys of every held-out set after the first, by name, in the order they were measured (a held-out
    problem in none of them is the first set's)."""
    return {
        "second set (s9)": plan_keys("datasets/plans/2026-11-30-heldout-b-*.json"),
        "third (s25)": plan_keys("datasets/plans/2026-12-02-s25-stride-ragged-heldout.json"),
        "fourth (s28)": plan_keys("datasets/plans/2026-12-03-s28-heldout-d.json"),
        "fifth (s29)": plan_keys("datasets/plans/2026-12-03-s29-heldout-e*.json"),
        "sixth (s32)": plan_keys("datasets/plans/2026-12-03-s32-layers-heldout.json"),
        "seventh (s34)": plan_keys("datasets/plans/2026-12-03-s34-decode-wide-heldout.json"),
        "eighth (s35)": plan_keys("datasets/plans/2026-12-04-s35-heldout-h.json"),
        "ninth (s36)": plan_keys("datasets/plans/2026-12-04-s36-heldout-i.json"),
        "tenth (s38)": plan_keys("datasets/plans/2026-12-04-s38-heldout-j.json"),
        "eleventh (s39)": plan_keys("datasets/plans/2026-12-04-s39-heldout-k.json"),
        "twelfth (s40)": plan_keys("datasets/plans/2026-12-04-s40-heldout-l.json"),
        "thirteenth (s40)": plan_keys("datasets/plans/2026-12-04-s40-heldout-m.json"),
        "fourteenth (s42)": plan_keys("datasets/plans/2026-12-05-s42-heldout-n-*.json"),
        "fifteenth (s43)": plan_keys("datasets/plans/2026-12-05-s43-heldout-o-*.json"),
        "sixteenth (s62)": plan_keys("datasets/plans/2026-12-06-s62-heldout-p.json"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--device-class", default="h200")
    parser.add_argument("--artifact", default=None, help="evaluate this artifact's model instead of a refit")
    args = parser.parse_args()

    from tilecost.device import load_device
    from tilecost.train.dataset import load_measurements
    from tilecost.train.loading import load_artifact_model
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

    device = load_device(args.device_class)
    train, heldout = split_by_role(load_measurements(args.dataset, args.device_class))
    model = load_artifact_model(args.artifact)[0] if args.artifact else fit_rows(CostModel(), train, device)
    later_sets = set_keys()
    names = list(later_sets)

    def since(name: str) -> set[str]:
        """The keys of set ``name`` and of every set measured after it."""
        return set().union(*(later_sets[n] for n in names[names.index(name) :]))

    later = since(names[0])
    sets = {
        "all held-out": heldout,
        "first set": heldout[~heldout.problem_key.isin(later)],
        **{name: heldout[heldout.problem_key.isin(keys)] for name, keys in later_sets.items()},
        "first + second": heldout[~heldout.problem_key.isin(later - later_sets["second set (s9)"])],
        "all but the fifth": heldout[~heldout.problem_key.isin(since("fifth (s29)"))],
        "all but the sixth": heldout[~heldout.problem_key.isin(since("sixth (s32)"))],
        "first six sets": heldout[~heldout.problem_key.isin(since("seventh (s34)"))],
        "first seven sets": heldout[~heldout.problem_key.isin(since("eighth (s35)"))],
        "first eight sets": heldout[~heldout.problem_key.isin(since("ninth (s36)"))],
        "first nine sets": heldout[~heldout.problem_key.isin(since("tenth (s38)"))],
        "first ten sets": heldout[~heldout.problem_key.isin(since("eleventh (s39)"))],
        "first eleven sets": heldout[~heldout.problem_key.isin(since("twelfth (s40)"))],
        "first thirteen sets": heldout[~heldout.problem_key.isin(since("fourteenth (s42)"))],
        "first fourteen sets": heldout[~heldout.problem_key.isin(since("fifteenth (s43)"))],
        "first fifteen sets": heldout[~heldout.problem_key.isin(since("sixteenth (s62)"))],
    }
    for dtype, frame in heldout.groupby(heldout.dtype.astype(str)):  # each dtype over every set (thirtieth session)
        sets[f"{dtype}, all sets"] = frame
    results = {}
    for name, frame in sets.items():
        if frame.problem_key.nunique() == 0:
            print(f"{name}: no problems")
            continue
        ev = evaluate_model(model, frame, device)
        s = ev.summary()
        low, high = ev.top1_interval()
        results[name] = ev
        print(
            f"{name:<19} {int(s['problems']):>4} problems | top-1 {s['top1_geomean']:.3f} (90% {low:.3f}-{high:.3f}),"
            f" worst {s['top1_worst']:.3f} | top-5 {s['top5_geomean']:.3f}, worst {s['top5_worst']:.3f} |"
            f" tau {s['kendall_tau']:.2f} | fixed {s['fixed_geomean']:.3f} tutorial {s['tutorial_geomean']:.3f}"
            f" roofline {s['roofline_geomean']:.3f}"
        )
    for name in names:
        if name in results:
            print(f"\n{name}:")
            print(results[name].table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
