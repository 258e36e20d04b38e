"""The answer gate: whether a new predictor artifact answers as well as the artifact it would replace.

The promotion rule (:func:`~tilecost.train.tracking.beats`) judges the full model's choice over every candidate.
Callers get something else: the predictor's answer, scored over a shortlist at the artifact's default width, with
its out-of-distribution flags. The two can disagree: the thirty-sixth session's refit beat the shipped model by the
rule (held-out top-1 ×1.0042, interval ×1.0008-×1.0077) while its predictor answered fp16 problems worse (×0.974) and
gave 33 answers below 0.90 of the best against 30, none flagged, its worst 0.367 (BENCHMARKS §4/§5). So the nightly
loop exports a promoted model into a staging directory first and swaps it in only when this gate passes.

Each artifact answers every held-out problem of the dataset, never from its tuning database (the held-out
problems are in it); an answer's *fraction* is the problem's best measured time over the answer's measured time (0
for a configuration never timed; a hopeless one at its lower bound), as training's evaluation scores the full
model's choice. The challenger passes when

* its answers are not worse beyond chance: the upper end of a paired bootstrap interval (90%) of the ratio of the
  two geometric means is at least 1, and
* it gives no more bad answers (below ``good_fraction``) than the champion, flagged or not. Not "no more bad answers
  left unflagged", the gate's first form: that passes an artifact that flags everything, and both artifacts' flags
  were calibrated on these same held-out problems (the shipped one's on 285 of today's 475), so their catches here
  are in sample. The flags' own figures are reported beside the verdict (:meth:`Answers.summary`).

With no held-out problem in common the gate passes (there is nothing to judge by) and says so.

A champion that no longer loads because this tilecost computes another feature schema (the forty-fourth session's
schema 2 made the shipped schema-1 artifact unloadable) is judged by the answers its export stored
(``metadata.ood.heldout_top1`` of an artifact whose flags were fitted on its answers, ``labels: "answers"``): the
fractions it gave those problems, measured then, and which of them it flagged (``metadata.ood.heldout_flagged``,
stored since the forty-sixth session; an older sidecar's count as unflagged and the gate says so). The verdict does
not depend on the flags. A champion of another device class or Triton version, a damaged one, or
one whose stored fractions are the full model's choices, not answers, is not judged: the gate passes and says why.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from tilecost.predict import Predictor
    from tilecost.predict.artifact import ArtifactMetadata

__all__ = [
    "AnswerGate",
    "Answers",
    "artifact_answers",
    "champion_answers",
    "gate_artifacts",
    "judge_answers",
    "stored_answers",
]


@dataclass(frozen=True)
class Answers:
    """One artifact's answers on held-out problems: per problem key, the fraction and whether it was flagged
    (``flags_known`` false: the flags were not recorded, and ``flagged`` counts every answer as unflagged)."""

    fractions: Mapping[str, float]
    flagged: Mapping[str, bool]
    flags_known: bool = True

    def __post_init__(self) -> None:
        if set(self.fractions) != set(self.flagged):
            raise ValueError("fractions and flagged must name the same problems")
        bad = {k: f for k, f in self.fractions.items() if not (isinstance(f, float) and 0.0 <= f <= 1.0 + 1e-9)}
        if bad:
            key = next(iter(bad))
            raise ValueError(f"fraction of {key} is {bad[key]!r}; a fraction is a float in [0, 1]")

    def summary(self, keys: list[str], good_fraction: float) -> dict[str, Any]:
        """Geometric mean (fractions of 0 counted as 1e-9), worst, how many below ``good_fraction`` and how many
        of those flagged, how many flagged in all, and the worst unflagged answer (1.0 when all are flagged)."""
        f = np.array([self.fractions[k] for k in keys], dtype=np.float64)
        flagged = np.array([self.flagged[k] for k in keys], dtype=bool)
        bad = f < good_fraction
        return {
            "geomean": round(float(np.exp(np.log(np.maximum(f, 1e-9)).mean())), 4),
            "worst": round(float(f.min()), 4),
            "bad": int(bad.sum()),
            "bad_flagged": int((bad & flagged).sum()),
            "bad_unflagged": int((bad & ~flagged).sum()),
            "flagged": int(flagged.sum()),
            "worst_unflagged": round(float(f[~flagged].min()) if (~flagged).any() else 1.0, 4),
        }


@dataclass(frozen=True)
class AnswerGate:
    """The gate's verdict and the figures it rests on."""

    passed: bool
    problems: int
    challenger: Mapping[str, Any]
    champion: Mapping[str, Any]
    ratio: float  # challenger's geometric mean over the champion's, on the same problems
    interval: tuple[float, float]
    reason: str

    def describe(self) -> str:
        if not self.problems:
            return f"answer gate passed: {self.reason}"

        def words(s: Mapping[str, Any]) -> str:
            return (f"{s['geomean']:.4f} of the best (worst {s['worst']:.3f}), {s['bad']} below 0.90 of which "
                    f"{s['bad_flagged']} flagged, {s['flagged']} flagged in all")  # fmt: skip

        return (
            f"answer gate {'passed' if self.passed else 'FAILED'} on {self.problems} held-out problems: "
            f"challenger {words(self.challenger)}; champion {words(self.champion)}; "
            f"ratio x{self.ratio:.4f} (90% x{self.interval[0]:.4f}-x{self.interval[1]:.4f}); {self.reason}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "problems": self.problems, "challenger": dict(self.challenger),
                "champion": dict(self.champion), "ratio": round(self.ratio, 5),
                "interval": [round(x, 5) for x in self.interval], "reason": self.reason}  # fmt: skip


def judge_answers(
    challenger: Answers,
    champion: Answers,
    *,
    good_fraction: float = 0.90,
    level: float = 0.90,
    draws: int = 2000,
    seed: int = 0,
) -> AnswerGate:
    """The gate (module docstring) on the problems both answered."""
    from .evaluate import geomean_interval

    keys = sorted(set(challenger.fractions) & set(champion.fractions))
    if not keys:
        return AnswerGate(True, 0, {}, {}, 1.0, (1.0, 1.0), "no held-out problem both artifacts answer")
    ours, theirs = challenger.summary(keys, good_fraction), champion.summary(keys, good_fraction)
    diff = np.log([max(challenger.fractions[k], 1e-9) for k in keys]) - np.log(
        [max(champion.fractions[k], 1e-9) for k in keys]
    )
    ratio = float(np.exp(diff.mean()))
    low, high = geomean_interval(diff, level, draws, seed)
    reasons = []
    if high < 1.0:
        reasons.append(f"its answers are worse beyond chance (the interval's upper end x{high:.4f} is below 1)")
    if ours["bad"] > theirs["bad"]:
        reasons.append(
            f"it gives {ours['bad']} answers below {good_fraction:.2f} of the best, the champion {theirs['bad']}"
        )
    passed = not reasons
    reason = "no worse, and no more bad answers" if passed else "; ".join(reasons)
    return AnswerGate(passed, len(keys), ours, theirs, ratio, (low, high), reason)


def artifact_answers(artifact: str | Path | Predictor, heldout: pd.DataFrame) -> Answers:
    """The answers of the artifact in ``artifact`` (a directory, loaded with its defaults, or a loaded
    :class:`~tilecost.predict.Predictor`, e.g. one with another shortlist width) on every held-out problem of
    ``heldout`` (timed rows: columns ``problem_key``, ``config_id``, ``time_us``;
    :func:`~tilecost.train.pipeline.split_by_role`'s second frame), each answered by the model, never from the tuning
    database (a group the artifact never saw is answered too, flagged, as a caller would get it)."""
    from tilecost.predict import Predictor
    from tilecost.problem import Problem

    predictor = artifact if isinstance(artifact, Predictor) else Predictor.load(artifact)
    fractions: dict[str, float] = {}
    flagged: dict[str, bool] = {}
    for key, rows in heldout.groupby("problem_key", sort=True):
        problem = Problem.from_key(str(key))
        times = dict(zip(rows["config_id"].astype(str), rows["time_us"].astype(float), strict=True))
        answer = predictor.predict_best(problem, measured=False)
        fractions[str(key)] = float(min(times.values()) / times.get(answer.config.key, math.inf))
        flagged[str(key)] = bool(answer.ood)
    return Answers(fractions, flagged)


def gate_artifacts(challenger: str | Path, champion: str | Path, heldout: pd.DataFrame) -> AnswerGate | None:
    """The gate on the artifact in ``challenger`` against the one in ``champion`` (directories), over ``heldout``
    (:func:`artifact_answers`); None when ``champion`` holds no artifact. A champion that no longer loads is judged
    by its stored answers where it has them (:func:`stored_answers`: another feature schema); otherwise (another
    device class or Triton version, a damaged file) it is no reason to keep it: the gate passes and says why. A
    challenger that does not load raises :class:`~tilecost.errors.TilecostError` (nothing to swap in)."""
    from tilecost.predict import Predictor
    from tilecost.predict.artifact import METADATA_FILE

    if not (Path(champion) / METADATA_FILE).is_file():
        return None
    predictor = Predictor.load(challenger)  # once: its answers, and its sidecar should the champion not load
    ours = artifact_answers(predictor, heldout)
    theirs, note = champion_answers(champion, predictor, heldout)
    if theirs is None:
        return AnswerGate(True, 0, {}, {}, 1.0, (1.0, 1.0), note)
    gate = judge_answers(ours, theirs)
    return dataclasses.replace(gate, reason=f"{gate.reason}; {note}") if note else gate


def champion_answers(champion: str | Path, challenger: Predictor, heldout: pd.DataFrame) -> tuple[Answers | None, str]:
    """The answers of the artifact in ``champion`` to ``heldout`` (:func:`artifact_answers`), and a note when they are
    not its predictor's: a champion that does not load gives its stored answers (:func:`stored_answers`, read against
    the ``challenger``'s sidecar), or None where it stores none; the note then says why."""
    from tilecost.errors import TilecostError

    try:
        return artifact_answers(champion, heldout), ""
    except TilecostError as exc:
        stored = stored_answers(champion, challenger.metadata)
        if stored is None:
            return None, f"the previous artifact does not load ({exc})"
        flags = "and flags" if stored.flags_known else "(its flags not stored: counted as unflagged)"
        return stored, f"the champion judged by the answers {flags} its export stored: it does not load ({exc})"


def stored_answers(champion: str | Path, challenger: ArtifactMetadata) -> Answers | None:
    """The answers the artifact in ``champion`` gave the held-out problems at its export, from its sidecar
    (``metadata.ood.heldout_top1`` where ``labels`` is ``"answers"``), flagged as ``metadata.ood.heldout_flagged``
    says (without it, each counted as unflagged and ``flags_known`` false); None when the
    artifact is damaged (a checksum, a missing file), of another device class or Triton version than the
    ``challenger``'s sidecar (its answers were measured under other conditions), or stores no answers (its fractions
    are the full model's choices, or absent). Read without the predictor, so an artifact of another feature schema
    qualifies."""
    from tilecost.errors import TilecostError
    from tilecost.predict.answer_calibration import ANSWER_LABELS, FLAGGED_KEY
    from tilecost.predict.artifact import load_artifact

    try:
        metadata, _ = load_artifact(champion)
    except TilecostError:
        return None
    fractions = metadata.ood.get("heldout_top1") or {}
    same_conditions = (metadata.device_class, metadata.triton_version) == (
        challenger.device_class,
        challenger.triton_version,
    )
    if not same_conditions or metadata.ood.get("labels") != ANSWER_LABELS or not fractions:
        return None
    flagged = metadata.ood.get(FLAGGED_KEY)
    marked = set(flagged or ())
    return Answers(
        {str(k): float(v) for k, v in fractions.items()},
        {str(k): k in marked for k in fractions},
        flags_known=flagged is not None,
    )
