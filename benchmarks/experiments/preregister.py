"""Experiment (thirty-fourth session, not part of the product): write down an artifact's answers to a plan's problems
before they are measured, so that the measurement can later judge them, the out-of-distribution verdicts included,
on problems that could not have shaped them.

The OOD rules' thresholds were fitted on the held-out sets the artifact was exported with (docs/BENCHMARKS.md §5), so
those sets judge them in sample. A held-out plan that is written but not measured yet is a chance to judge them out of
sample: this records, for each of its problems, the model's answer (``measured=False``), its predicted time and its
verdict, with the artifact's checksum; once the plan is measured, ``--judge`` reads the dataset and reports each
answer's measured speed (best time / answer's time) and how the verdicts split the answers below 0.90 from the rest.

    .venv/bin/python benchmarks/experiments/preregister.py PLAN OUT.json [--artifact DIR]
    .venv/bin/python benchmarks/experiments/preregister.py --judge OUT.json [--dataset datasets/measurements]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

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


def judge(recorded: Path, dataset: str) -> None:
    import numpy as np

    from tilecost.train.dataset import load_measurements

    document = json.loads(recorded.read_text())
    frame = load_measurements(dataset, "h200").frame
    ok = frame[frame.status.astype(str) == "ok"]
    times = ok.groupby(["problem_key", "config_id"], observed=True).time_us.min()
    best = ok.groupby("problem_key", observed=True).time_us.min()
    speed, flagged, missing = [], [], 0
    for row in document["answers"]:
        key = row["problem_key"]
        if key not in best.index:
            missing += 1
            continue
        chosen = times.get((key, row["config_id"]))
        # an answer the sweep found hopeless or failed is as bad as it gets here
        speed.append(float(best[key] / chosen) if chosen is not None else 0.0)
        flagged.append(row["flagged"])
    speed, flagged = np.array(speed), np.array(flagged, dtype=bool)
    bad = speed < BAD
    print(f"recorded {document['written_at']} from artifact {document['artifact_dataset'][:12]}; {len(speed)} measured")
    if missing:
        print(f"{missing} problems not measured yet")
    if len(speed):
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
    parser.add_argument("--judge", type=Path, help="a recorded file to judge against the dataset")
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    args = parser.parse_args()
    if args.judge is not None:
        judge(args.judge, args.dataset)
    elif len(args.paths) == 2:
        record(Path(args.paths[0]), Path(args.paths[1]), args.artifact)
    else:
        parser.error("give PLAN OUT.json, or --judge OUT.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
