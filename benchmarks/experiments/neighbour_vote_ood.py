"""Experiment (thirty-first session, not part of the product): does disagreeing with the measured neighbours flag
the predictor's bad answers?

For each held-out problem the shipped predictor answers (``measured=False``); its K nearest training problems of the
same dtype and layout (log2 M, N, K, the distance the OOD checker uses) have measured bests in the artifact's
``measured.json``. A rule flags the answer when its configuration (or its tile, BLOCK_M x BLOCK_N x BLOCK_K) is not
among the neighbours' bests. Reported per rule: bad answers caught (measured below 0.90 of the problem's best) and
good answers flagged, against issue 5's bar (>= 80% caught, <= 10% of the others flagged).

    .venv/bin/python benchmarks/experiments/neighbour_vote_ood.py [ARTIFACT]      (~1 min, 2 cores)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.test_predict_fixture import load_dataset  # noqa: E402
from tilecost import Predictor, Problem  # noqa: E402
from tilecost.config import TileConfig  # noqa: E402
from tilecost.predict.artifact import load_artifact  # noqa: E402


def tile(key: str) -> tuple[int, int, int]:
    config = TileConfig.from_key(key)
    return config.block_m, config.block_n, config.block_k


def main() -> int:
    artifact = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "tilecost" / "models" / "h200"
    metadata, files = load_artifact(artifact)
    measured = json.loads(files["measured.json"])
    trained = [Problem.from_key(k) for k in metadata.domain["problems"]]
    predictor = Predictor.load(artifact)
    data = load_dataset(groups=None, until=None)
    heldout = data.problems("heldout")

    def group(p: Problem) -> str:
        return f"{p.dtype.value}-{p.layout.value}"

    coords: dict[str, tuple[np.ndarray, list[str]]] = {}
    for g in {group(p) for p in trained}:
        members = [p for p in trained if group(p) == g]
        coords[g] = (np.log2([[p.m, p.n, p.k] for p in members]), [p.key for p in members])

    rows = []
    for p in heldout:
        answer = predictor.predict_best(p, measured=False)
        times = data.times(p, ("ok", "hopeless"))
        fraction = min(data.times(p).values()) / times.get(answer.config.key, math.inf)
        points, keys = coords[group(p)]
        distance = np.linalg.norm(points - np.log2([p.m, p.n, p.k]), axis=1)
        order = np.argsort(distance, kind="stable")
        neighbours = [measured[keys[i]]["config_id"] for i in order[:16]]
        rows.append((fraction, answer.config.key, neighbours, bool(answer.ood)))

    bad = [r for r in rows if r[0] < 0.9]
    good = [r for r in rows if r[0] >= 0.9]
    print(f"{artifact}: {len(rows)} held-out problems, {len(bad)} bad answers (< 0.90), shipped OOD flags catch "
          f"{sum(r[3] for r in bad)} and flag {sum(r[3] for r in good)} good")  # fmt: skip
    print(f"{'rule':<28} {'bad caught':>12} {'good flagged':>14}")
    for k in (1, 3, 5, 8, 16):
        for name, flagged in (
            ("config", lambda r, k=k: r[1] not in r[2][:k]),
            ("tile", lambda r, k=k: tile(r[1]) not in {tile(c) for c in r[2][:k]}),
        ):
            caught = sum(flagged(r) for r in bad)
            false = sum(flagged(r) for r in good)
            print(f"{name + ' not in K=' + str(k) + ' bests':<28} {caught:>5} of {len(bad):<4} "
                  f"{false:>5} of {len(good)} ({false / len(good):.0%})")  # fmt: skip
    # As a score: how many of the K nearest bests share the answer's tile; flag below a count. The best count for the
    # bar (<= 10% of the good answers flagged) is chosen on these same problems, so it flatters the rule.
    print(f"{'tile shared by < j of K':<28} {'bad caught':>12} {'good flagged':>14}")
    for k in (8, 16):
        for j in range(1, k + 1):
            shared = [sum(tile(c) == tile(r[1]) for c in r[2][:k]) for r in rows]
            caught = sum(s < j for s, r in zip(shared, rows, strict=True) if r[0] < 0.9)
            false = sum(s < j for s, r in zip(shared, rows, strict=True) if r[0] >= 0.9)
            if false / len(good) > 0.35:
                break
            print(f"{'j=' + str(j) + ' of K=' + str(k):<28} {caught:>5} of {len(bad):<4} "
                  f"{false:>5} of {len(good)} ({false / len(good):.0%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
