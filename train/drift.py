"""Sentinels: a fixed set of problems re-measured every night, and the drift test on them.

Timings change when the driver, CUDA, torch or Triton change, when a card is replaced, or when a
machine starts throttling. A model trained on last month's rows then ranks tonight's kernels by
last month's speeds, and nothing in a training run says so. The nightly loop therefore measures the
same :data:`SENTINEL_PROBLEMS` over the same configurations every night (a seeded sample of each
problem's candidates, so the set only changes if the candidate space does) and compares them with a
*reference* night.

The test, per sentinel problem, over the configurations timed ``ok`` on both nights:

* **shift** = the median over configurations of ``ln(time tonight / time at the reference)``, a
  robust estimate of "everything got x % slower";
* **noise** = the larger of (a) the within-night noise, the median over configurations of
  ``sqrt(spread_ref² + spread_tonight²) / 1.349`` (``spread`` is the interquartile range over median of
  the timed launches, 1.349 σ for a normal distribution: launches of one config are correlated, so
  this is not divided by sqrt(launches)), and (b) the between-night noise, the standard deviation
  of this sentinel's shifts on the previous nights since the reference, once there are at least
  :data:`MIN_HISTORY` of them;
* **drift** when ``|shift| > max(DRIFT_SIGMAS × noise, DRIFT_FLOOR)``: beyond three times the
  measured noise, and never for less than 3 % (a smaller change does not move a ranking that the
  model gets right to within its own error).

Also reported, not part of the test: whether the fastest sentinel configuration changed, and how
much slower the reference's fastest is tonight than tonight's fastest; and every fingerprint column
(driver, CUDA, torch, Triton, GPU name, SM count) that differs from the reference. A drift is not
absorbed: the nightly loop stops before training (its exit status says so) until someone accepts it
with ``--accept-drift``, which makes that night the new reference.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilecost.collect.plans import PlanEntry, Role
from tilecost.problem import Problem

__all__ = [
    "DRIFT_FLOOR",
    "DRIFT_SIGMAS",
    "FINGERPRINT_FIELDS",
    "MIN_HISTORY",
    "SENTINEL_PROBLEMS",
    "DriftReport",
    "DriftStatus",
    "SentinelDrift",
    "SentinelRows",
    "compare_sentinels",
    "sentinel_plan",
]

# Five regimes, each a shape whose best tile the seed's reasoning predicts differently (bf16, x @ W.T).
SENTINEL_PROBLEMS: tuple[Problem, ...] = (
    Problem(4096, 4096, 4096),  # compute-bound square: big tiles, tensor-core rate
    Problem(16, 7168, 8192),  # 16-token decode: memory-bound, split-K territory
    Problem(1000, 1000, 8192),  # 64 tiles of 128x128 on 132 SMs: wave quantisation
    Problem(4000, 3000, 1000),  # N, K multiples of 8, not 16: pointer loads narrow, TMA wins
    Problem(1, 4096, 4096),  # one token: launch latency and the bandwidth floor
)
DRIFT_SIGMAS = 3.0
DRIFT_FLOOR = math.log(1.03)
MIN_HISTORY = 3
SPREAD_PER_SIGMA = 1.349  # interquartile range of a normal distribution, in standard deviations
FINGERPRINT_FIELDS = ("gpu_name", "sm_count", "driver_version", "cuda_version", "torch_version", "triton_version")


def sentinel_plan(count: int = len(SENTINEL_PROBLEMS)) -> list[PlanEntry]:
    """The first ``count`` sentinel problems as plan entries (role ``train``, so that the sweep measures
    a seeded sample of their candidates; they live in their own store, never in the training data)."""
    if not 0 < count <= len(SENTINEL_PROBLEMS):
        raise ValueError(f"sentinels={count} is not allowed; use 1..{len(SENTINEL_PROBLEMS)}")
    return [PlanEntry(p, "sentinel", Role.TRAIN) for p in SENTINEL_PROBLEMS[:count]]


class DriftStatus(enum.Enum):
    """The verdict on one sentinel, or on a night (the worst of its sentinels)."""

    REFERENCE = "reference"  # this night is the reference: nothing to compare with
    STABLE = "stable"  # within the measured noise
    DRIFT = "drift"  # beyond it
    INSUFFICIENT = "insufficient"  # fewer than MIN_COMMON configs timed ok on both nights


MIN_COMMON = 3


@dataclass(frozen=True)
class SentinelRows:
    """The timed ``ok`` rows of one night's sentinel sweep: ``{problem key: {config id: (time_us,
    spread)}}`` and the device fingerprint they were measured with."""

    night: str
    times: Mapping[str, Mapping[str, tuple[float, float]]]
    fingerprint: Mapping[str, str]

    @classmethod
    def from_rows(cls, night: str, rows: Sequence[Mapping[str, Any]]) -> SentinelRows:
        """From dataset rows (dicts with the store's columns); rows not ``ok`` are set aside."""
        times: dict[str, dict[str, tuple[float, float]]] = {}
        fingerprint: dict[str, str] = {}
        for row in rows:
            for name in FINGERPRINT_FIELDS:
                if row.get(name) is not None:
                    fingerprint.setdefault(name, str(row[name]))
            if row.get("status") != "ok" or not row.get("time_us"):
                continue
            spread = row.get("spread")
            spread = float(spread) if spread is not None and math.isfinite(float(spread)) else 0.0
            times.setdefault(str(row["problem_key"]), {})[str(row["config_id"])] = (float(row["time_us"]), spread)
        return cls(night, times, fingerprint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "night": self.night,
            "fingerprint": dict(self.fingerprint),
            "times": {p: {c: list(v) for c, v in cs.items()} for p, cs in self.times.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SentinelRows:
        times = {p: {c: (float(v[0]), float(v[1])) for c, v in cs.items()} for p, cs in data["times"].items()}
        return cls(str(data["night"]), times, dict(data["fingerprint"]))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> SentinelRows:
        return cls.from_dict(json.loads(path.read_text()))


@dataclass(frozen=True)
class SentinelDrift:
    """One sentinel's comparison with the reference; ratios are tonight / reference."""

    problem_key: str
    status: DriftStatus
    configs_compared: int
    shift_ratio: float = 1.0  # exp(shift): 1.10 = 10 % slower tonight
    noise_ratio: float = 1.0  # exp(noise)
    threshold_ratio: float = 1.0  # exp(threshold)
    best_changed: bool = False
    reference_best: str = ""
    tonight_best: str = ""
    best_slowdown: float = 1.0  # the reference's fastest config tonight / tonight's fastest
    shift_log: float = 0.0

    def line(self) -> str:
        if self.status is DriftStatus.REFERENCE:
            return f"{self.problem_key:<24} reference ({self.configs_compared} configs timed ok)"
        if self.status is DriftStatus.INSUFFICIENT:
            return f"{self.problem_key:<24} insufficient ({self.configs_compared} configs timed ok on both nights)"
        best = (
            f"best changed {self.reference_best} -> {self.tonight_best} ({self.best_slowdown:.3f}x)"
            if self.best_changed
            else f"best unchanged ({self.tonight_best})"
        )
        return (
            f"{self.problem_key:<24} {self.status.value.upper():<6} shift {100 * (self.shift_ratio - 1):+6.1f} % "
            f"(noise {100 * (self.noise_ratio - 1):.1f} %, threshold {100 * (self.threshold_ratio - 1):.1f} %, "
            f"{self.configs_compared} configs); {best}"
        )


@dataclass(frozen=True)
class DriftReport:
    """A night's sentinel comparison: per-sentinel results and fingerprint changes."""

    night: str
    reference_night: str
    sentinels: tuple[SentinelDrift, ...]
    software_changes: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def status(self) -> DriftStatus:
        statuses = {s.status for s in self.sentinels}
        for status in (DriftStatus.DRIFT, DriftStatus.REFERENCE, DriftStatus.INSUFFICIENT):
            if status in statuses:
                return status
        return DriftStatus.STABLE

    @property
    def drifted(self) -> bool:
        return self.status is DriftStatus.DRIFT

    def lines(self) -> list[str]:
        head = f"sentinels {self.status.value.upper()}: night {self.night} against reference {self.reference_night}"
        changes = [f"  {name} changed: {old} -> {new}" for name, (old, new) in sorted(self.software_changes.items())]
        return [head, *changes, *(f"  {s.line()}" for s in self.sentinels)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "night": self.night,
            "reference_night": self.reference_night,
            "status": self.status.value,
            "software_changes": {k: list(v) for k, v in self.software_changes.items()},
            "sentinels": [{**asdict(s), "status": s.status.value} for s in self.sentinels],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DriftReport:
        sentinels = tuple(SentinelDrift(**{**s, "status": DriftStatus(s["status"])}) for s in data["sentinels"])
        changes = {k: (str(v[0]), str(v[1])) for k, v in data.get("software_changes", {}).items()}
        return cls(str(data["night"]), str(data["reference_night"]), sentinels, changes)


def _compare_one(
    key: str,
    reference: Mapping[str, tuple[float, float]],
    tonight: Mapping[str, tuple[float, float]],
    history: Sequence[float],
) -> SentinelDrift:
    common = sorted(set(reference) & set(tonight))
    if len(common) < MIN_COMMON:
        return SentinelDrift(key, DriftStatus.INSUFFICIENT, len(common))
    ref_t = np.array([reference[c][0] for c in common])
    now_t = np.array([tonight[c][0] for c in common])
    ref_s = np.array([reference[c][1] for c in common])
    now_s = np.array([tonight[c][1] for c in common])
    shift = float(np.median(np.log(now_t / ref_t)))
    within = float(np.median(np.sqrt(ref_s**2 + now_s**2))) / SPREAD_PER_SIGMA
    between = float(np.std(history, ddof=1)) if len(history) >= MIN_HISTORY else 0.0
    noise = max(within, between)
    threshold = max(DRIFT_SIGMAS * noise, DRIFT_FLOOR)
    ref_best, now_best = common[int(np.argmin(ref_t))], common[int(np.argmin(now_t))]
    return SentinelDrift(
        problem_key=key,
        status=DriftStatus.DRIFT if abs(shift) > threshold else DriftStatus.STABLE,
        configs_compared=len(common),
        shift_ratio=math.exp(shift),
        noise_ratio=math.exp(noise),
        threshold_ratio=math.exp(threshold),
        best_changed=ref_best != now_best,
        reference_best=ref_best,
        tonight_best=now_best,
        best_slowdown=float(now_t[common.index(ref_best)] / now_t.min()),
        shift_log=shift,
    )


def compare_sentinels(
    reference: SentinelRows | None,
    tonight: SentinelRows,
    history: Sequence[DriftReport] = (),
) -> DriftReport:
    """Compare tonight's sentinel rows with the reference night's (module docstring).

    ``reference=None`` (no reference yet) makes tonight the reference: every sentinel is
    ``REFERENCE``. ``history``: the reports of previous nights against the same reference, whose
    shifts give the between-night noise.
    """
    if reference is None or reference.night == tonight.night:
        sentinels = tuple(
            SentinelDrift(key, DriftStatus.REFERENCE, len(configs)) for key, configs in sorted(tonight.times.items())
        )
        return DriftReport(tonight.night, tonight.night, sentinels)
    past: dict[str, list[float]] = {}
    for report in history:
        if report.reference_night != reference.night or report.night == tonight.night:
            continue
        for s in report.sentinels:
            if s.status in (DriftStatus.STABLE, DriftStatus.DRIFT):
                past.setdefault(s.problem_key, []).append(s.shift_log)
    keys = sorted(set(reference.times) | set(tonight.times))
    sentinels = tuple(
        _compare_one(key, reference.times.get(key, {}), tonight.times.get(key, {}), past.get(key, ())) for key in keys
    )
    changes = {
        name: (reference.fingerprint[name], tonight.fingerprint[name])
        for name in FINGERPRINT_FIELDS
        if name in reference.fingerprint
        and name in tonight.fingerprint
        and reference.fingerprint[name] != tonight.fingerprint[name]
    }
    return DriftReport(tonight.night, reference.night, sentinels, changes)
