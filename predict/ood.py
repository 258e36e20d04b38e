"""Out-of-distribution verdicts: when a prediction should not be trusted, and why.

A verdict is a tuple of :class:`OODReason` members (empty: in distribution; truthy when flagged), the
way PyTorch's AutoHeuristic answers "unsure" so that its caller autotunes instead. Reasons:

* ``DIM_OUTSIDE_TRAINING_RANGE``: log2 M, N or K lies outside the range of all training problems,
  or more than ``range_margin_log2`` octaves outside the range of those of the same dtype and layout
  (calibrated with the distance threshold by :func:`calibrate_ood`; 0 when none is stored): a group
  with 8-18 training problems spans a narrow range, and its distance rule already measures how far
  a problem lies from them;
* ``SPARSE_NEIGHBOURHOOD``: the Euclidean distance in (log2 M, log2 N, log2 K) from the problem to
  its ``neighbours``-th nearest training problem of the same dtype and layout exceeds a threshold
  (infinite, so always flagged, for a dtype and layout pair no training problem had, even where
  each was seen in another pair); since the fortieth session (``neighbourhood: "pattern"`` in
  ``metadata.ood``; artifacts without it keep ``"dtype-layout"``) the nearest training problems of the same
  dtype, layout *and pattern*, whether N and K are multiples of 16 (the collector's pointer patterns, which change
  which kernels and configurations are fast: a bf16 nt shape with N a multiple of 16 and K not had 11-24 training
  neighbours of its pattern among ~2,000 of its dtype and layout, and 8 of the twelfth held-out set's 20 such
  answers fell below 0.90 of the best, none flagged, BENCHMARKS §5),
  calibrated on held-out problems by :func:`calibrate_ood` (since the twenty-seventh session a threshold that
  catches bad answers is kept only when it does so leave one out beyond chance; otherwise the farthest held-out
  distance) and stored in ``metadata.ood`` (:data:`DEFAULT_SPARSE_DISTANCE_LOG2` when none is stored);
* ``UNSEEN_DTYPE``, ``UNSEEN_LAYOUT``: no training problem had that dtype or layout;
* ``DEVICE_MISMATCH``, ``TRITON_VERSION_MISMATCH``: the predictor was asked about another device
  class, or runs next to another Triton release, than the artifact's measurements came from;
* ``OPERAND_TOO_LARGE``: A, B or C holds more than :data:`~tilecost.space.MAX_OPERAND_ELEMENTS`
  (2**31 - 1) elements, which tilecost's kernels (int32 offsets) refuse to run: the answer is what the
  model would pick for a kernel that could, never measured;
* ``MODEL_UNCERTAIN``: a model-side rule (:class:`FlagRule`) fired. A rule compares one *signal* of
  the answer with a threshold; the signals (:data:`SIGNALS`) are computed from the scores the
  predictor has already made (no extra model evaluation):

  - ``log2_predicted_us``: log2 of the chosen configuration's predicted time;
  - ``log2_top2_gap``: log2 of the second-best predicted time over the best (small: a near tie,
    whose order the model's ~0.3 log-RMSE cannot settle; large: one configuration stands out);
  - ``log2_flop_per_byte``: the problem's arithmetic intensity (compute-bound shapes above ~8);
  - ``neighbour_distance_log2``: as above (a rule on it, flagging far shapes only, lowers the
    sparse-neighbourhood threshold instead and is reported as ``SPARSE_NEIGHBOURHOOD``).

  The rules are fitted at export by :func:`fit_flag_rules` on the held-out problems: a held-out
  problem is *bad* when the measured time of the model's choice (the choice of scoring every
  candidate, as training evaluates it) is more than 1/0.90 of the best measured (``calibrate_ood``
  stores each one's fraction; export computes its signals through the predictor's own shortlist),
  and rules are added greedily, each catching the most bad problems not yet flagged, while all flags
  together, the shape-side ones included, stay within ``max_good_flagged`` of the good problems: the
  bar a caller relies on is how often a good answer is flagged, whatever the reason (until the ninth
  session the rules had a budget of their own over the good problems the shape-side rules left
  unflagged, and on 155 held-out problems the two together flagged 19% of the good ones). Since the
  sixteenth session the rules so found are kept only when they also hold leave one out (each
  problem judged by the rules fitted on the others; a one-sided Fisher exact test at
  :data:`DEFAULT_RULE_P_VALUE`); the shipped export kept none. They travel in ``predictor.json``
  (``"ood": {"rules": [...], "calibration": {...}}``, checksummed in ``metadata.json`` like every
  artifact file); the distance threshold stays in ``metadata.ood``.

The training domain travels in ``metadata.domain`` in the form :func:`training_domain` writes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tilecost.errors import ArtifactError
from tilecost.problem import DType, Layout, Problem, nk_pattern
from tilecost.space import MAX_OPERAND_ELEMENTS

__all__ = [
    "DEFAULT_NEIGHBOURHOOD",
    "DEFAULT_NEIGHBOURS",
    "DEFAULT_RULE_P_VALUE",
    "DEFAULT_SPARSE_DISTANCE_LOG2",
    "NEIGHBOURHOODS",
    "RANGE_MARGINS_LOG2",
    "SIGNALS",
    "FlagRule",
    "OODChecker",
    "OODReason",
    "OODVerdict",
    "answer_signals",
    "calibrate_ood",
    "fit_flag_rules",
    "training_domain",
]

# With no calibrated threshold: flag a problem more than 1.5 octaves (Euclidean, in log2 M, N, K)
# from its nearest training problem. On the first H200 dataset (92 training problems) the 19 held-out
# problems lie 0.26-2.58 octaves from their nearest training problem, 16 of them within 1.5.
DEFAULT_SPARSE_DISTANCE_LOG2 = 1.5
DEFAULT_NEIGHBOURS = 1
# Which training problems are a problem's neighbours: those of its dtype and layout ("dtype-layout", every artifact
# exported before the fortieth session, and any whose metadata.ood does not say), or of its dtype, layout and
# pattern of N and K modulo 16 ("pattern", what calibrate_ood fits since).
NEIGHBOURHOODS = ("dtype-layout", "pattern")
DEFAULT_NEIGHBOURHOOD = "pattern"
# fit_flag_rules adopts model-side rules only when, judged leave one out, they catch bad answers more
# often than flagging at random would, at this significance (one-sided Fisher exact test). On 100 sets
# of 165 random signals with no relation to the labels, 0.05 adopted rules 3 times (a lift of 2 would
# have 17 times); with bad problems one standard deviation apart on one signal, 42 times.
DEFAULT_RULE_P_VALUE = 0.05


class OODReason(enum.Enum):
    """Why a prediction is flagged as out of distribution."""

    DIM_OUTSIDE_TRAINING_RANGE = "dim_outside_training_range"
    SPARSE_NEIGHBOURHOOD = "sparse_neighbourhood"
    UNSEEN_DTYPE = "unseen_dtype"
    UNSEEN_LAYOUT = "unseen_layout"
    DEVICE_MISMATCH = "device_mismatch"
    TRITON_VERSION_MISMATCH = "triton_version_mismatch"
    MODEL_UNCERTAIN = "model_uncertain"
    OPERAND_TOO_LARGE = "operand_too_large"


SIGNALS = ("log2_predicted_us", "log2_top2_gap", "log2_flop_per_byte", "neighbour_distance_log2")
_DISTANCE_SIGNAL = "neighbour_distance_log2"  # flagged when far only, never when near
# log2_top2_gap where a problem has a single candidate: nothing to confuse it with.
_SINGLE_CANDIDATE_GAP_LOG2 = 10.0


def answer_signals(problem: Problem, best_us: float, second_us: float | None, distance_log2: float) -> dict[str, float]:
    """The :data:`SIGNALS` of one answer: its best and second-best predicted µs (None: only one
    candidate) and the problem's distance to its nearest training problems."""
    intensity = problem.flops / problem.min_bytes
    gap = _SINGLE_CANDIDATE_GAP_LOG2 if second_us is None else math.log2(second_us / best_us)
    return {
        "log2_predicted_us": math.log2(best_us),
        "log2_top2_gap": gap,
        "log2_flop_per_byte": math.log2(intensity),
        "neighbour_distance_log2": distance_log2,
    }


@dataclass(frozen=True)
class FlagRule:
    """Flag an answer when ``signal`` is above (``above``) or below ``threshold``."""

    signal: str
    above: bool
    threshold: float

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise ValueError(f"signal={self.signal!r} is not one of {SIGNALS}")
        if not math.isfinite(self.threshold):
            raise ValueError(f"threshold={self.threshold!r} must be finite")

    def fires(self, signals: Mapping[str, float]) -> bool:
        value = signals[self.signal]
        return value > self.threshold if self.above else value < self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "above": self.above, "threshold": self.threshold}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlagRule:
        return cls(str(data["signal"]), bool(data["above"]), float(data["threshold"]))

    def describe(self) -> str:
        return f"{self.signal} {'>' if self.above else '<'} {self.threshold:.4g}"


@dataclass(frozen=True, slots=True)
class OODVerdict:
    """The reasons a problem is out of distribution (none: in distribution) and its distance in
    octaves to the nearest training problems of its neighbourhood (its dtype and layout, and with the
    ``"pattern"`` neighbourhood its pattern of N and K modulo 16; inf when there are none)."""

    reasons: tuple[OODReason, ...] = ()
    neighbour_distance_log2: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.reasons)

    def with_reason(self, reason: OODReason) -> OODVerdict:
        """This verdict with one more reason (in the enum's order)."""
        if reason in self.reasons:
            return self
        reasons = tuple(sorted({*self.reasons, reason}, key=_REASON_ORDER.index))
        return OODVerdict(reasons, self.neighbour_distance_log2)


def _group(dtype: DType, layout: Layout) -> str:
    return f"{dtype.value}-{layout.value}"


def _neighbourhood_key(neighbourhood: str, dtype: DType, layout: Layout, n: int, k: int) -> str:
    """The key of :attr:`OODChecker.points` a problem's neighbours are found under."""
    group = _group(dtype, layout)
    return group if neighbourhood == "dtype-layout" else f"{group}-{nk_pattern(n, k)}"


def _log2_points(problems: Sequence[Problem]) -> NDArray[np.float64]:
    return np.log2(np.array([[p.m, p.n, p.k] for p in problems], dtype=np.float64).reshape(-1, 3))


def training_domain(problems: Sequence[Problem]) -> dict[str, Any]:
    """The ``metadata.domain`` of a model trained on ``problems``: dtypes, layouts, problem keys.

    Training calls this with its training problems (not the held-out ones). The ranges and
    neighbourhoods the predictor checks are derived from the problem keys when it loads.
    """
    if not problems:
        raise ValueError("problems is empty; a model is trained on at least one problem")
    points = _log2_points(problems)
    return {
        "dtypes": sorted({p.dtype.value for p in problems}),
        "layouts": sorted({p.layout.value for p in problems}),
        "log2_min": dict(zip("mnk", points.min(axis=0).round(6).tolist(), strict=True)),
        "log2_max": dict(zip("mnk", points.max(axis=0).round(6).tolist(), strict=True)),
        "problems": sorted(p.key for p in problems),
    }


def _kth_distance(points: NDArray[np.float64], query: NDArray[np.float64], neighbours: int) -> float:
    if not len(points):
        return math.inf
    squared = ((points - query) ** 2).sum(axis=1)
    if neighbours == 1:
        return float(np.sqrt(squared.min()))
    kth = min(neighbours, len(squared)) - 1
    return float(np.sqrt(np.partition(squared, kth)[kth]))


@dataclass(frozen=True, eq=False)
class OODChecker:
    """Checks problems against a training domain; build with :meth:`from_metadata`."""

    # Training problems' log2 (m, n, k) per neighbourhood: "dtype-layout" or "dtype-layout-pattern" (_neighbourhood_key)
    points: Mapping[str, NDArray[np.float64]]
    log2_min: Mapping[str, NDArray[np.float64]]
    log2_max: Mapping[str, NDArray[np.float64]]
    dtypes: frozenset[DType]
    layouts: frozenset[Layout]
    sparse_distance_log2: float
    neighbours: int
    static_reasons: tuple[OODReason, ...] = ()  # device or Triton mismatch, the same for every query
    rules: tuple[FlagRule, ...] = ()  # model-side rules (predictor.json's "ood")
    range_margin_log2: float = 0.0  # a group's own range, widened by this (within the all-groups range)
    neighbourhood: str = "dtype-layout"  # one of NEIGHBOURHOODS
    distance_kernel: Any = field(default=None, repr=False)  # the compiled _kth_distance, if any
    _bounds: dict[str, tuple[tuple[float, ...], ...]] = field(init=False, repr=False, default_factory=dict)
    # Per (dtype, layout, N and K multiples of 16 or not) what verdict checks every problem of it against
    # (_group_checks), on first use.
    _groups: dict[tuple[DType, Layout, bool, bool], Any] = field(
        init=False, repr=False, default_factory=dict, compare=False
    )

    def __post_init__(self) -> None:
        # The range check's bounds as Python floats, per group, once (not per query): the group's
        # range widened by the margin, never beyond the range of all training problems ("*").
        low_all, high_all = self.log2_min["*"], self.log2_max["*"]
        margin = self.range_margin_log2
        bounds = {
            g: (tuple(np.maximum(self.log2_min[g] - margin, low_all).tolist()),
                tuple(np.minimum(self.log2_max[g] + margin, high_all).tolist()))
            for g in self.log2_min
        }  # fmt: skip
        object.__setattr__(self, "_bounds", bounds)

    def with_compiled_distance(self) -> OODChecker:
        """This checker with the neighbour distance computed by the compiled path's kernel
        (:func:`tilecost.predict.jit.compiled_distance`, the same bits); unchanged without numba."""
        from .jit import compiled_distance

        kernel = compiled_distance()
        return self if kernel is None else dataclasses.replace(self, distance_kernel=kernel)

    def with_rules(self, rules: Sequence[FlagRule]) -> OODChecker:
        """This checker with the rules export fitted. A rule on ``neighbour_distance_log2`` is a
        sparse-neighbourhood threshold (the lower of it and the stored one applies, to every answer,
        under ``SPARSE_NEIGHBOURHOOD``); the others judge model answers under ``MODEL_UNCERTAIN``."""
        distance = [r.threshold for r in rules if r.signal == _DISTANCE_SIGNAL and r.above]
        threshold = min([self.sparse_distance_log2, *distance])
        model = tuple(r for r in rules if r.signal != _DISTANCE_SIGNAL)
        return dataclasses.replace(self, rules=model, sparse_distance_log2=threshold)

    def judge(self, problem: Problem, verdict: OODVerdict, best_us: float, second_us: float | None) -> OODVerdict:
        """``verdict`` (from :meth:`verdict`), with ``MODEL_UNCERTAIN`` added if a rule fires on the
        answer's signals (:func:`answer_signals`)."""
        if not self.rules:
            return verdict
        signals = answer_signals(problem, best_us, second_us, verdict.neighbour_distance_log2)
        if any(rule.fires(signals) for rule in self.rules):
            return verdict.with_reason(OODReason.MODEL_UNCERTAIN)
        return verdict

    @classmethod
    def from_metadata(
        cls, domain: Mapping[str, Any], ood: Mapping[str, Any], static_reasons: tuple[OODReason, ...] = ()
    ) -> OODChecker:
        """Read ``metadata.domain`` (as :func:`training_domain` writes it) and ``metadata.ood``."""
        try:
            problems = [Problem.from_key(key) for key in domain.get("problems", ())]
            dtypes = {DType.parse(d) for d in domain.get("dtypes", ())} | {p.dtype for p in problems}
            layouts = {Layout.parse(x) for x in domain.get("layouts", ())} | {p.layout for p in problems}
            threshold = float(ood.get("sparse_distance_log2", DEFAULT_SPARSE_DISTANCE_LOG2))
            neighbours = int(ood.get("neighbours", DEFAULT_NEIGHBOURS))
            margin = float(ood.get("range_margin_log2", 0.0))
        except (ValueError, TypeError, AttributeError) as exc:
            raise ArtifactError(f"metadata.json: domain or ood is malformed: {exc}") from exc
        if not threshold > 0 or neighbours < 1 or not margin >= 0:
            raise ArtifactError(f"metadata.json: ood thresholds {dict(ood)} must be positive")
        neighbourhood = ood.get("neighbourhood", "dtype-layout")
        if neighbourhood not in NEIGHBOURHOODS:
            raise ArtifactError(
                f"metadata.json: ood.neighbourhood={neighbourhood!r} is not one of {', '.join(NEIGHBOURHOODS)}"
            )
        groups: dict[str, list[Problem]] = {}
        neighbours_of: dict[str, list[Problem]] = {}
        for problem in problems:
            groups.setdefault(_group(problem.dtype, problem.layout), []).append(problem)
            key = _neighbourhood_key(neighbourhood, problem.dtype, problem.layout, problem.n, problem.k)
            neighbours_of.setdefault(key, []).append(problem)
        points = {key: _log2_points(members) for key, members in neighbours_of.items()}
        if problems:
            everything = _log2_points(problems)
            lows, highs = {"*": everything.min(axis=0)}, {"*": everything.max(axis=0)}
        elif "log2_min" in domain and "log2_max" in domain:  # ranges without problem keys
            lows = {"*": np.array([float(domain["log2_min"][d]) for d in "mnk"])}
            highs = {"*": np.array([float(domain["log2_max"][d]) for d in "mnk"])}
        else:
            raise ArtifactError("metadata.json: domain has neither training problems nor log2 ranges")
        for group, members in groups.items():
            array = _log2_points(members)
            lows[group], highs[group] = array.min(axis=0), array.max(axis=0)
        return cls(points, lows, highs, frozenset(dtypes), frozenset(layouts), threshold, neighbours, static_reasons,
                   range_margin_log2=margin, neighbourhood=neighbourhood)  # fmt: skip

    def verdict(self, problem: Problem) -> OODVerdict:
        """The verdict for one problem (a few microseconds: one distance per training problem)."""
        cell = (problem.dtype, problem.layout, problem.n % 16 == 0, problem.k % 16 == 0)
        found = self._groups.get(cell)
        if found is None:
            found = self._groups[cell] = self._group_checks(problem.dtype, problem.layout, problem.n, problem.k)
        reasons, (m_low, n_low, k_low), (m_high, n_high, k_high), points = found
        q0, q1, q2 = math.log2(problem.m), math.log2(problem.n), math.log2(problem.k)
        if not (m_low <= q0 <= m_high and n_low <= q1 <= n_high and k_low <= q2 <= k_high):
            reasons = (*reasons, OODReason.DIM_OUTSIDE_TRAINING_RANGE)
        # No training problem of this dtype and layout (fp16 seen with nt only, asked with nn): no
        # neighbour at all, an infinite distance, flagged like any sparse neighbourhood.
        if points is None:
            distance = math.inf
        elif self.distance_kernel is not None:
            distance = float(self.distance_kernel(points, q0, q1, q2, self.neighbours))
        else:
            distance = _kth_distance(points, np.array((q0, q1, q2)), self.neighbours)
        if distance > self.sparse_distance_log2:
            reasons = (*reasons, OODReason.SPARSE_NEIGHBOURHOOD)
        m, n, k = problem.m, problem.n, problem.k
        if m * k > MAX_OPERAND_ELEMENTS or k * n > MAX_OPERAND_ELEMENTS or m * n > MAX_OPERAND_ELEMENTS:
            reasons = (*reasons, OODReason.OPERAND_TOO_LARGE)
        if len(reasons) > 1:
            reasons = tuple(sorted(set(reasons), key=_REASON_ORDER.index))
        return OODVerdict(reasons, distance)

    def _group_checks(
        self, dtype: DType, layout: Layout, n: int, k: int
    ) -> tuple[tuple[OODReason, ...], tuple[float, ...], tuple[float, ...], NDArray[np.float64] | None]:
        """What :meth:`verdict` checks for every problem of a dtype, layout and pattern of ``n`` and ``k`` modulo
        16, worked out once: the reasons that hold for all of them (static ones, an unseen dtype or layout), the
        range bounds (of the dtype and layout) and the training points of the problem's neighbourhood."""
        reasons = list(self.static_reasons)
        if dtype not in self.dtypes:
            reasons.append(OODReason.UNSEEN_DTYPE)
        if layout not in self.layouts:
            reasons.append(OODReason.UNSEEN_LAYOUT)
        low, high = self._bounds.get(_group(dtype, layout)) or self._bounds["*"]
        return tuple(reasons), low, high, self.points.get(_neighbourhood_key(self.neighbourhood, dtype, layout, n, k))


_REASON_ORDER = list(OODReason)
# The range margins calibrate_ood tries, in octaves (inf: only the range of all training problems).
RANGE_MARGINS_LOG2 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf)


def calibrate_ood(
    heldout: Sequence[Problem],
    top1_fraction: Sequence[float],
    training: Sequence[Problem],
    *,
    good_fraction: float = 0.90,
    max_good_flagged: float = 0.10,
    neighbours: int = DEFAULT_NEIGHBOURS,
    max_p_value: float = DEFAULT_RULE_P_VALUE,
    neighbourhood: str = DEFAULT_NEIGHBOURHOOD,
) -> dict[str, Any]:
    """Thresholds for ``metadata.ood`` from held-out problems, and how well they separate them.

    ``top1_fraction[i]`` is the measured best time of ``heldout[i]`` over the measured time of the
    model's top-1 choice (1.0: the model chose the best; 0: its choice failed or was never timed).
    A problem is *bad* below ``good_fraction``. The sparse-neighbourhood threshold and the range
    margin (one of :data:`RANGE_MARGINS_LOG2`) are the pair that catches the most bad problems
    while flagging at most ``max_good_flagged`` of the good ones; among pairs catching as many, the
    one flagging fewest good problems, then the smallest margin, then the largest threshold; when that
    is no threshold at all, the distance of the farthest held-out problem (no evidence reaches beyond it). (On the
    61 held-out H200 problems of 2026-11-29 the unwidened range of the 8-18 training problems of a
    small group flagged 7 of the 39 good problems and 2 of the 22 bad ones, both also far from
    every training problem of their group.)

    A pair that catches bad problems is kept only when it also does so leave one out, beyond chance:
    each held-out problem judged by the pair chosen on the others, a one-sided Fisher exact test on the
    2×2 table (bad or good, flagged or not) at ``max_p_value``, as :func:`fit_flag_rules` judges its
    rules (1: no test). Otherwise the bad problems are taken as no evidence: the pair is the one that
    flags the fewest held-out problems, then the smallest margin, with the farthest held-out distance as
    the threshold. (Before the test, the twenty-fifth session's refit tightened the threshold from 2.0 to 1.29
    octaves, catching 3 of 17 bad held-out answers, 2 leave one out, while flagging 15 of 160 good ones and 139 of
    300 random shapes, where 2.0 flagged 88.)

    The distance is to the ``neighbours``-th nearest training problem of the ``neighbourhood`` (one of
    :data:`NEIGHBOURHOODS`: the problem's dtype and layout, or those and its pattern of N and K modulo 16).

    Returns ``{"sparse_distance_log2", "neighbours", "neighbourhood", "range_margin_log2", "good_top1_fraction",
    "max_good_flagged", "heldout_top1": {problem key: fraction}, "calibration": {...counts and rates,
    "leave_one_out", "max_p_value", "adopted"}}``; train stores it as ``metadata.ood`` (the predictor reads the first
    four keys; export fits the model-side rules on ``heldout_top1``). ``adopted`` is false when the test set the
    chosen pair aside.
    """
    if len(heldout) != len(top1_fraction):
        raise ValueError(f"{len(heldout)} held-out problems but {len(top1_fraction)} top-1 fractions")
    if not heldout or not training:
        raise ValueError("calibration needs at least one held-out and one training problem")
    if not 0 < max_p_value <= 1:
        raise ValueError(f"max_p_value={max_p_value!r} must lie in (0, 1]")
    if neighbourhood not in NEIGHBOURHOODS:
        raise ValueError(f"neighbourhood={neighbourhood!r} is not allowed; use one of {', '.join(NEIGHBOURHOODS)}")
    fractions = np.asarray(top1_fraction, dtype=np.float64)
    if not (np.isfinite(fractions) & (fractions >= 0) & (fractions <= 1.0 + 1e-9)).all():
        raise ValueError("top1_fraction values must lie in [0, 1] (0: the choice failed or was not timed)")
    domain = training_domain(training)
    bad = fractions < good_fraction
    # Per margin, which held-out problems a reason other than the distance flags; the distances (every
    # margin's checker gives the same ones: the margin widens the range check only).
    others = np.zeros((len(RANGE_MARGINS_LOG2), len(heldout)), dtype=bool)
    distances = np.zeros(len(heldout))
    for index, margin in enumerate(RANGE_MARGINS_LOG2):
        ood = {"sparse_distance_log2": math.inf, "neighbours": neighbours, "range_margin_log2": margin,
               "neighbourhood": neighbourhood}  # fmt: skip
        checker = OODChecker.from_metadata(domain, ood)
        verdicts = [checker.verdict(p) for p in heldout]
        distances = np.array([v.neighbour_distance_log2 for v in verdicts])
        others[index] = [any(r is not OODReason.SPARSE_NEIGHBOURHOOD for r in v.reasons) for v in verdicts]
    everyone = np.ones(len(heldout), dtype=bool)
    index, threshold = _shape_rules(distances, others, bad, everyone, max_good_flagged)
    flagged = others[index] | (distances > threshold)
    loo: dict[str, Any] = {}
    adopted = True
    if (flagged & bad).any() and max_p_value < 1:
        fires = np.zeros(len(heldout), dtype=bool)
        for i in range(len(heldout)):
            rest = everyone.copy()
            rest[i] = False
            index_i, threshold_i = _shape_rules(distances, others, bad, rest, max_good_flagged)
            fires[i] = others[index_i, i] or distances[i] > threshold_i
        caught, false, p_value = _beyond_chance(fires, bad, everyone)
        loo = {"bad_caught": caught, "good_flagged": false, "p_value": round(p_value, 6)}
        adopted = p_value < max_p_value
        if not adopted:
            index, threshold = _least_flagging(distances, others, everyone)
            flagged = others[index] | (distances > threshold)
    margin = RANGE_MARGINS_LOG2[index]
    caught = int((flagged & bad).sum())
    return {
        "sparse_distance_log2": threshold if math.isfinite(threshold) else 1e9,
        "neighbours": neighbours,
        "neighbourhood": neighbourhood,
        "range_margin_log2": margin if math.isfinite(margin) else 1e9,
        "good_top1_fraction": good_fraction,
        "max_good_flagged": max_good_flagged,
        # each held-out problem's fraction, for export to fit the model-side rules on (fit_flag_rules)
        "heldout_top1": {p.key: round(float(f), 6) for p, f in zip(heldout, fractions, strict=True)},
        "calibration": {
            "heldout_problems": len(heldout),
            "bad_problems": int(bad.sum()),
            "bad_caught": caught,
            "catch_rate": caught / int(bad.sum()) if bad.any() else 1.0,
            "good_flagged_rate": float(flagged[~bad].mean()) if (~bad).any() else 0.0,
            "leave_one_out": loo,
            "max_p_value": max_p_value,
            "adopted": adopted,
        },
    }


def _beyond_chance(
    fires: NDArray[np.bool_], bad: NDArray[np.bool_], judged: NDArray[np.bool_]
) -> tuple[int, int, float]:
    """Leave-one-out flags ``fires`` against the labels ``bad``, over the ``judged`` problems: the bad ones caught, the
    good ones flagged, and the p-value of a one-sided Fisher exact test on the 2×2 table (bad or good, flagged or
    not) that the flags fall on bad problems more often than chance would put them there (scipy's
    ``fisher_exact``: train and export time only, the predictor itself stays numpy-only)."""
    from scipy.stats import fisher_exact

    bad_judged, good_judged = bad & judged, ~bad & judged
    caught, false = int((fires & bad_judged).sum()), int((fires & good_judged).sum())
    table = [[caught, int(bad_judged.sum()) - caught], [false, int(good_judged.sum()) - false]]
    return caught, false, float(fisher_exact(table, alternative="greater")[1])


def _shape_rules(
    distances: NDArray[np.float64], others: NDArray[np.bool_], bad: NDArray[np.bool_], mask: NDArray[np.bool_],
    max_good_flagged: float,
) -> tuple[int, float]:  # fmt: skip
    """:func:`calibrate_ood`'s choice on the held-out problems in ``mask``: the index of the range margin in
    :data:`RANGE_MARGINS_LOG2` and the distance threshold (``others[i]``: the problems a reason other than the
    distance flags at margin i)."""
    distance, bad = distances[mask], bad[mask]
    finite = distance[np.isfinite(distance)]
    best: tuple[int, float, int, float] | None = None  # (caught, -good flagged rate, -margin index, threshold)
    for index in range(len(others)):
        other = others[index][mask]
        for threshold in sorted({*finite.tolist(), math.inf}, reverse=True):
            flagged = other | (distance > threshold)
            good_rate = float(flagged[~bad].mean()) if (~bad).any() else 0.0
            if good_rate > max_good_flagged:
                break  # lower thresholds flag more, never fewer
            key = (int(flagged[bad].sum()), -good_rate, -index)
            if best is None or key > best[:3]:
                best = (*key, threshold)
    if best is None:  # the range rule alone, even at the widest margin, flags too many good problems
        return _least_flagging(distances, others, mask)
    threshold = best[3]
    if not math.isfinite(threshold):
        # No distance separated bad from good: the model was still only judged up to the farthest held-out
        # problem, so flag what lies farther (a held-out problem is never flagged by it: same counts).
        threshold = float(finite.max()) if len(finite) else math.inf
    return -best[2], threshold


def _least_flagging(
    distances: NDArray[np.float64], others: NDArray[np.bool_], mask: NDArray[np.bool_]
) -> tuple[int, float]:
    """The margin index flagging the fewest problems in ``mask`` (the smallest of the ties) and the farthest
    finite distance among them as the threshold: the shape-side rules when held-out answers say nothing."""
    index = int(np.argmin(others[:, mask].sum(axis=1)))
    finite = distances[mask][np.isfinite(distances[mask])]
    return index, float(finite.max()) if len(finite) else math.inf


def fit_flag_rules(
    signals: Sequence[Mapping[str, float]],
    bad: Sequence[bool],
    already: Sequence[bool],
    *,
    max_good_flagged: float = 0.10,
    max_rules: int = 2,
    max_p_value: float = DEFAULT_RULE_P_VALUE,
) -> tuple[tuple[FlagRule, ...], dict[str, Any]]:
    """Model-side rules for a calibration set, and how they separate it (module docstring).

    ``signals[i]`` holds problem i's :data:`SIGNALS`; ``bad[i]`` whether its choice was bad;
    ``already[i]`` whether the distance and range rules flag it anyway. Greedy: each round adds the
    (signal, direction, threshold) that newly catches the most bad problems while every flag
    together (``already`` ones included) falls on at most ``max_good_flagged`` of the good problems;
    thresholds lie halfway between neighbouring observed values. Stops after ``max_rules`` rules or
    when no rule catches more (no rule at all when the ``already`` flags use the budget up).

    The rules are then judged leave one out: each problem the shape-side rules leave alone is
    judged by the rules fitted greedily on the others. They are adopted only when, so judged, they
    flag bad problems more often than good ones beyond chance: a one-sided Fisher exact test on the
    2×2 table (bad or good, flagged or not) at ``max_p_value`` (scipy's ``fisher_exact``; scipy comes
    with the ``train`` extra). Otherwise no rule is (1 adopts whatever the greedy search found). In the
    fifteenth session the greedy rule fitted on 165 held-out problems, ``log2_flop_per_byte > 9.707``,
    caught 1 of the predictor's 15 bad answers and flagged 10.7% of the good ones: worse than no rule.

    Returns the rules and ``{"problems", "bad_problems", "bad_caught", "catch_rate", "good_flagged_rate",
    "good_flagged_by_rules_rate", "rules": [text], "fitted": [text], "leave_one_out": {...}, "max_p_value",
    "adopted"}`` (the rates over all good problems, and over those the shape-side rules left unflagged;
    ``fitted`` the greedy rules before the adoption test).
    """
    bad_array, already_array = np.asarray(bad, dtype=bool), np.asarray(already, dtype=bool)
    if not (len(signals) == len(bad_array) == len(already_array)):
        raise ValueError(f"{len(signals)} signal rows, {len(bad_array)} bad flags, {len(already_array)} already flags")
    if not 0 < max_p_value <= 1:
        raise ValueError(f"max_p_value={max_p_value!r} must lie in (0, 1]")
    values = np.array([[row[name] for name in SIGNALS] for row in signals], dtype=np.float64).reshape(-1, len(SIGNALS))
    fitted, flagged = _greedy_rules(values, bad_array, already_array, max_good_flagged, max_rules)
    open_good, open_bad = ~bad_array & ~already_array, bad_array & ~already_array
    loo: dict[str, Any] = {"bad_open": int(open_bad.sum()), "good_open": int(open_good.sum())}
    adopted = True
    if fitted and max_p_value < 1:
        fires = np.zeros(len(bad_array), dtype=bool)
        everyone = np.arange(len(bad_array))
        for i in np.flatnonzero(~already_array):
            rest = everyone != i
            rules_i, _ = _greedy_rules(values[rest], bad_array[rest], already_array[rest], max_good_flagged, max_rules)
            fires[i] = any(rule.fires(signals[i]) for rule in rules_i)
        caught, false, p_value = _beyond_chance(fires, bad_array, ~already_array)
        loo |= {"bad_caught": caught, "good_flagged": false, "p_value": round(p_value, 6)}
        adopted = p_value < max_p_value
    rules = fitted
    if not adopted:
        rules, flagged = (), already_array.copy()
    bad_count = int(bad_array.sum())
    good_count = int((~bad_array).sum())
    stats = {
        "problems": len(bad_array),
        "bad_problems": bad_count,
        "bad_caught": int((flagged & bad_array).sum()),
        "catch_rate": float((flagged & bad_array).sum() / bad_count) if bad_count else 1.0,
        "good_flagged_rate": float((flagged & ~bad_array).sum() / good_count) if good_count else 0.0,
        "good_flagged_by_rules_rate": float((flagged & open_good).sum() / open_good.sum()) if open_good.any() else 0.0,
        "rules": [rule.describe() for rule in rules],
        "fitted": [rule.describe() for rule in fitted],
        "leave_one_out": loo,
        "max_p_value": max_p_value,
        "adopted": adopted,
    }
    return tuple(rules), stats


def _greedy_rules(
    values: NDArray[np.float64], bad: NDArray[np.bool_], already: NDArray[np.bool_], max_good_flagged: float,
    max_rules: int,
) -> tuple[tuple[FlagRule, ...], NDArray[np.bool_]]:  # fmt: skip
    """:func:`fit_flag_rules`' greedy search over ``values`` (one column per :data:`SIGNALS` entry): the
    rules and the flags they and ``already`` raise. Each round scores every (signal, threshold,
    direction) at once by counting through the sorted values; ties go to the first in the order
    signal, threshold ascending, above before below."""
    flagged = already.copy()
    open_good = ~bad & ~already  # good problems the shape-side rules leave alone
    good_budget = math.floor(max_good_flagged * int((~bad).sum()) + 1e-9)  # over every good problem
    rules: list[FlagRule] = []
    for _ in range(max_rules):
        flagged_good, flagged_open_good = int((flagged & ~bad).sum()), int((flagged & open_good).sum())
        best: tuple[int, int, FlagRule, NDArray[np.bool_]] | None = None  # (caught, -good, rule, fires)
        for column, name in enumerate(SIGNALS):
            v = values[:, column]
            distinct = np.unique(v[np.isfinite(v)])
            cuts = (distinct[1:] + distinct[:-1]) / 2
            if not len(cuts):
                continue
            directions = (True,) if name == _DISTANCE_SIGNAL else (True, False)
            unflagged = ~flagged & ~np.isnan(v)
            # candidates in the order threshold ascending, then the directions: (len(cuts), directions)
            caught, good, opened = (
                np.stack([_count_firing(v[mask & unflagged], cuts, above) for above in directions], axis=1)
                for mask in (bad, ~bad, open_good)
            )
            valid = (caught > 0) & (flagged_good + good <= good_budget)
            if not valid.any():
                continue
            most = np.where(valid, caught, -1).ravel()
            fewest_open = np.where(most == most.max(), -opened.ravel(), np.iinfo(np.int64).min)
            index = int(np.argmax(fewest_open))  # the first of the ties
            cut, direction = divmod(index, len(directions))
            key = (int(most[index]), -int(flagged_open_good + opened.ravel()[index]))
            if best is None or key > best[:2]:
                above = directions[direction]
                threshold = float(cuts[cut])
                fires = v > threshold if above else v < threshold
                best = (*key, FlagRule(name, above, round(threshold, 6)), fires)
        if best is None:
            break
        rules.append(best[2])
        flagged = flagged | best[3]
    return tuple(rules), flagged


def _count_firing(values: NDArray[np.float64], cuts: NDArray[np.float64], above: bool) -> NDArray[np.int64]:
    """How many of ``values`` lie above (``above``) or below each of ``cuts``."""
    ordered = np.sort(values)
    if above:
        return len(ordered) - np.searchsorted(ordered, cuts, side="right")
    return np.searchsorted(ordered, cuts, side="left")
