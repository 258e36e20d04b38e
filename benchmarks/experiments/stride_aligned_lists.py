"""Which list a shape whose strides suit tensor descriptors but whose N or K is not a multiple of 16 should use.

    .venv/bin/python benchmarks/experiments/stride_aligned_lists.py [--random 300] [--seed 3]

An experiment of the twenty-fourth session (BENCHMARKS §5). A shape's list is chosen by its cell and by which of
M, N, K are multiples of 16 (the *variant*). Tensor-descriptor (``tma``) configurations need every row stride to
be a multiple of 16 bytes, N and K × the element size: for 16-bit types an N or K that is a multiple of 8 but not
of 16 (1000, 3000, 4104) qualifies. The export's ragged sample extents take a residue 1..15 modulo 16, so in a
ragged variant's samples ``tma`` is feasible for 1 of 15 ragged extents (1 of 225 with N and K both ragged): those
lists hold pointer configurations almost only, and such a shape is answered with one even where the full model
ranks a ``tma`` configuration first (4000 × 3000 × 1000 bf16 nt, measured best ``tma-128x256x64`` in 60 µs: the
shipped predictor answers ``ptr-128x128x64``, predicted 161 µs).

Compared here, on random shapes of bf16, fp16 and fp32 (nt and nn) whose strides suit ``tma`` and whose N or K is
not a multiple of 16, and on every held-out problem:

* ``own``: the list of the variant by multiples of 16 (as the artifact's lists were built), the predictor until
  this session;
* ``stride``: the list of the variant with N and K counted as aligned when the problem's strides suit ``tma``
  (the aligned variant's lists, built from shapes where ``tma`` configurations are feasible and often win);
* ``both``: the stride list with the own list's head added to its head (``ShortlistTable.problem_cut``, what
  the predictor does since).

For each: how often the answer is the full model's own best (scoring every candidate), and the full model's
predicted time of the answer over that of its best (a model-side estimate of the speed lost: 1 is none).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.stride_ragged_answers import stride_ragged_shapes  # noqa: E402
from tests.test_predict_fixture import load_dataset  # noqa: E402
from tilecost import Predictor, Problem  # noqa: E402
from tilecost.predict import shortlist  # noqa: E402


def random_shapes(count: int, seed: int) -> list[Problem]:
    """Such shapes, log-uniform 64..16384 per extent."""
    return stride_ragged_shapes(count, seed, low_log2=6.0)


def answers(predictor: Predictor, problems: list[Problem]) -> list[tuple[bool, float, str]]:
    """Per problem: agreement with scoring every candidate, the full model's time ratio, the answer's variant."""
    out = []
    for problem in problems:
        answer = predictor.predict_best(problem, measured=False)
        times = predictor.predicted_times_us(problem)
        best = min(times, key=times.__getitem__)
        out.append((answer.config == best, times[answer.config] / times[best], answer.config.variant.value))
    return out


def summary(name: str, found: list[tuple[bool, float, str]]) -> str:
    agree = sum(a for a, _, _ in found)
    ratio = np.array([r for _, r, _ in found])
    tma = sum(v == "tma" for _, _, v in found)
    return (
        f"{name:<8} agree {agree}/{len(found)}; full-model time of the answer / its best: geomean "
        f"{np.exp(np.log(ratio).mean()):.3f}, worst {ratio.max():.2f}, > 1.10 on {int((ratio > 1.10).sum())}; "
        f"tma answers {tma}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    shapes = random_shapes(args.random, args.seed)
    heldout = load_dataset(groups=None, until=None).problems("heldout")
    probe = Predictor.load("h200")
    changed = [
        p for p in heldout if probe._shortlists[f"{p.dtype.value}-{p.layout.value}"].stride_list_id(p) is not None
    ]
    print(f"{len(shapes)} random shapes; {len(heldout)} held-out problems, {len(changed)} of them with a stride list")
    for name in ("own", "stride", "both"):
        predictor = Predictor.load("h200", cache_size=0)
        for group_name in predictor._shortlists:
            table = predictor._shortlists[group_name]
            if name == "own":  # the list of the problem's own variant alone (the predictor until this session)
                object.__setattr__(table, "stride_list_id", lambda problem: None)
            elif name == "stride":  # the stride variant's list alone
                object.__setattr__(table, "problem_cut", _stride_only(table))
        print(summary(name, answers(predictor, shapes)), "(random)", flush=True)
        print(summary(name, answers(predictor, heldout)), "(held-out)", flush=True)


def _stride_only(table: shortlist.ShortlistTable):  # type: ignore[no-untyped-def]
    def cut(problem: Problem, width: int | None, extend_from: int | None = shortlist.EXTEND_FROM):  # type: ignore[no-untyped-def]
        strided = table.stride_list_id(problem)
        list_id = table.list_id(problem) if strided is None else strided
        return list_id, table.cut(list_id, width, extend_from)

    return cut


if __name__ == "__main__":
    main()
