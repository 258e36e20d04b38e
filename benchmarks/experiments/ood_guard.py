"""What the shape-side OOD calibration's significance guard does to a model fitted on today's data.

    .venv/bin/python benchmarks/experiments/ood_guard.py [--dataset datasets/measurements] [--shapes 300]

Fits the model exactly as ``tilecost train`` does (every training problem, the shipped settings), evaluates it on
every held-out problem, and calibrates ``metadata.ood`` from the held-out top-1 fractions as the export does
(``train.export.ood_calibration``), once without the test (``max_p_value=1``, the calibration before the
twenty-seventh session) and once with it (the default). For each, and for the shipped artifact's stored calibration
and its stored held-out fractions calibrated again with the test, prints the threshold, the margin, the held-out
counts in sample and leave one out, and how many of ``--shapes`` random bf16 nt shapes (log-uniform over the training
range, ``benchmarks/predict_latency.py``'s draw, seed 0) the shape-side rules flag.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--shapes", type=int, default=300)
    args = parser.parse_args()

    from benchmarks.predict_latency import random_shapes
    from tilecost import Problem
    from tilecost.device import load_device
    from tilecost.predict.ood import OODChecker, calibrate_ood, training_domain
    from tilecost.train.dataset import load_measurements
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import evaluate_model, fit_rows, split_by_role

    device = load_device("h200")
    train, heldout = split_by_role(load_measurements(args.dataset, "h200"))
    model = fit_rows(CostModel(), train, device)
    evaluation = evaluate_model(model, heldout, device)
    problems = [r.problem for r in evaluation.problems]
    fractions = [min(1.0, r.top1) for r in evaluation.problems]
    training = [Problem.from_key(k) for k in sorted(set(train["problem_key"]))]
    domain = training_domain(training)
    points = np.log2(np.array([[p.m, p.n, p.k] for p in training], dtype=float))
    shapes = random_shapes(np.random.default_rng(0), points.min(axis=0), points.max(axis=0), args.shapes, set())
    shipped = json.loads((REPO / "tilecost/models/h200/metadata.json").read_text())

    def report(name: str, domain: dict, ood: dict) -> None:
        checker = OODChecker.from_metadata(domain, ood)
        flagged = sum(bool(checker.verdict(Problem(*s))) for s in shapes)
        c = ood["calibration"]
        print(f"{name}: threshold {ood['sparse_distance_log2']:.3f} octaves, margin {ood['range_margin_log2']}; "
              f"held-out {c['heldout_problems']}: bad caught {c['bad_caught']} of {c['bad_problems']}, good flagged "
              f"{c['good_flagged_rate']:.3f}; leave one out {c.get('leave_one_out') or '-'}; adopted "
              f"{c.get('adopted', '-')}; random shapes flagged {flagged} of {len(shapes)}")  # fmt: skip

    mean = float(np.exp(np.mean(np.log(np.maximum(fractions, 1e-9)))))
    print(f"refit on {len(training)} training problems; {len(problems)} held-out problems, top-1 {mean:.4f}, "
          f"{sum(f < 0.9 for f in fractions)} below 0.90")  # fmt: skip
    report("shipped artifact (stored)", shipped["domain"], shipped["ood"])
    stored = shipped["ood"]["heldout_top1"]
    shipped_training = [Problem.from_key(k) for k in shipped["domain"]["problems"]]
    again = calibrate_ood([Problem.from_key(k) for k in stored], list(stored.values()), shipped_training)
    report("shipped artifact, its held-out fractions calibrated with the test", shipped["domain"], again)
    report("refit, no test", domain, calibrate_ood(problems, fractions, training, max_p_value=1))
    report("refit, guarded", domain, calibrate_ood(problems, fractions, training))
    return 0


if __name__ == "__main__":
    sys.exit(main())
