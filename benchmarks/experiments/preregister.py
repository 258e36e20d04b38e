"""Experiment (thirty-fourth session, not part of the product): write down an artifact's answers to a plan's problems
before they are measured, so that the measurement can later judge them, the out-of-distribution verdicts included,
on problems that could not have shaped them.

The OOD rules' thresholds were fitted on the held-out sets the artifact was exported with (docs/BENCHMARKS.md §5), so
those sets judge them in sample. A held-out plan that is written but not measured yet is a chance to judge them out of
sample: this records, for each of its problems, the model's answer (``measured=False``), its predicted time and its
verdict, with the digest of the dataset the artifact was trained on; once the plan is measured, ``--judge`` reads
the dataset and reports each answer's measured speed (best time / answer's time, as benchmarks/predict_latency.py
judges answers) and how the verdicts split the answers below 0.90 from the rest.

    .venv/bin/python benchmarks/experiments/preregister.py PLAN OUT.json [--artifact DIR]
    .venv/bin/python benchmarks/experiments/preregister.py --judge OUT.json [OUT.json ...]   (reads the dataset)

Given several recorded files, ``--judge`` judges each and then all of them pooled (forty-sixth session): the flags'
out-of-sample figure over every set measured after its answers were written down. Pool one file per set, or a
problem judged twice counts twice.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

BAD = 0.90  # an answer below this fraction of the best is one the OOD flags should catch (issue 5)


def record(plan: Path, out: Path, artifact: str) -> None:
    from tilecost.predict import Predictor
    from tilecost.problem import Problem

    predictor = Predictor.load(artifact)
    rows = []
    for entry in json.loads(plan.read_text()):
        problem = Problem(entry["m"], entry["n"], entry["k"], entry["dtype"], entry["layout"])
        answer = predictor.predict_best(problem, measured=False)
        rows.append(
            {
                "problem_key": problem.key,
                "family": entry.get("family"),
                "config_id": answer.config.key,
                "predicted_us": answer.time_us,
                "flagged": bool(answer.ood),
                "reasons": [r.value for r in answer.ood.reasons],
                "distance_log2": answer.ood.neighbour_distance_log2,
            }
        )
    meta = predictor.metadata
    document = {
        "written_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "plan": str(plan),
        "artifact": artifact,
        "artifact_dataset": meta.training["dataset_digest"],
        "answers": rows,
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    flagged = sum(r["flagged"] for r in rows)
    print(f"{out}: {len(rows)} answers recorded, {flagged} flagged")


def judge(recorded: Path, data: Any, per_problem: bool = False) -> tuple[Any, Any]:
    """Print the recorded answers' measured speeds and flags against ``data`` (every measurement,
    ``tests.test_predict_fixture.load_dataset(groups=None, until=None)``, as benchmarks/predict_latency.py reads
    them); returns (speeds, flagged) of the measured ones."""
    import math

    import numpy as np

    from tilecost.problem import Problem

    document = json.loads(recorded.read_text())
    speed, flagged, missing, lines = [], [], 0, []
    for row in document["answers"]:
        problem = Problem.from_key(row["problem_key"])
        timed = data.times(problem)
        if not timed:
            missing += 1
            continue
        # as predict_latency.py's measured_fraction: a hopeless answer at its lower-bound time, one never timed 0
        answer = data.times(problem, ("ok", "hopeless")).get(row["config_id"], math.inf)
        speed.append(min(timed.values()) / answer)
        flagged.append(row["flagged"])
        lines.append((speed[-1], row["problem_key"], row["config_id"], min(timed, key=timed.get), row["reasons"]))
    speed, flagged = np.array(speed), np.array(flagged, dtype=bool)
    print(f"recorded {document['written_at']} from artifact {document['artifact_dataset'][:12]}; {len(speed)} measured")
    if missing:
        print(f"{missing} problems not measured yet")
    if len(speed):
        summarise(speed, flagged)
        if per_problem:
            print(f"{'problem':<24} {'best/answer':>11}  {'answer / best config':<58} reasons")
            for fraction, key, answer_id, best_id, reasons in sorted(lines):
                print(f"{key:<24} {fraction:>11.3f}  {answer_id + ' / ' + best_id:<58} {','.join(reasons) or '-'}")

    return speed, flagged


def summarise(speed: Any, flagged: Any) -> None:
    """The answers' geometric mean and worst, and how the flags split those below ``BAD`` from the rest."""
    import numpy as np

    bad = speed < BAD
    geo = float(np.exp(np.log(np.clip(speed, 1e-9, None)).mean()))
    print(f"answers: best / answer {geo:.3f} (geometric mean), worst {speed.min():.3f}, below {BAD}: {bad.sum()}")
    print(
        f"flags: {int((bad & flagged).sum())} of {int(bad.sum())} bad answers caught, "
        f"{int((~bad & flagged).sum())} of {int((~bad).sum())} good ones flagged"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="PLAN OUT.json (record) or nothing with --judge")
    parser.add_argument("--artifact", default=str(REPO / "tilecost/models/h200"))
    parser.add_argument("--judge", type=Path, nargs="+", help="recorded files to judge against the dataset")
    parser.add_argument("--per-problem", action="store_true", help="with --judge: one line per answer, worst first")
    args = parser.parse_args()
    if args.judge is not None:
        import numpy as np

        from tests.test_predict_fixture import load_dataset

        data = load_dataset(groups=None, until=None)
        judged = []
        for path in args.judge:
            if len(args.judge) > 1:
                print(f"== {path}")
            judged.append(judge(path, data, args.per_problem))
        if len(judged) > 1:
            speeds = np.concatenate([speed for speed, _ in judged])
            print(f"== all {len(args.judge)} files pooled: {len(speeds)} measured answers")
            if len(speeds):
                summarise(speeds, np.concatenate([flagged for _, flagged in judged]))
    elif len(args.paths) == 2:
        record(Path(args.paths[0]), Path(args.paths[1]), args.artifact)
    else:
        parser.error("give PLAN OUT.json, or --judge OUT.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
