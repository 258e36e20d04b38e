"""The sentinels' drift test: a shift beyond the measured noise is drift, one within it is not, and what
counts as noise grows with the spreads of the launches and with the history of previous nights."""

from __future__ import annotations

import math

import pytest

from tilecost.train.drift import (
    DRIFT_FLOOR,
    SENTINEL_PROBLEMS,
    DriftReport,
    DriftStatus,
    SentinelRows,
    compare_sentinels,
    sentinel_plan,
)

KEY = "4096x4096x4096-bf16-nt"
CONFIGS = [f"tma-128x128x64-g8-s1-w4-p{s}" for s in (2, 3, 4, 5)] + ["ptr-64x64x64-g1-s1-w4-p3"]
FINGERPRINT = {"gpu_name": "NVIDIA H200", "driver_version": "580.159.04", "triton_version": "3.6.0"}


def _night(night: str, scale: float = 1.0, spread: float = 0.01, fingerprint=FINGERPRINT, **per_config) -> SentinelRows:
    base = {c: 100.0 + 10 * i for i, c in enumerate(CONFIGS)}
    base.update(per_config)
    return SentinelRows(night, {KEY: {c: (t * scale, spread) for c, t in base.items()}}, dict(fingerprint))


def test_the_first_night_becomes_the_reference() -> None:
    report = compare_sentinels(None, _night("2026-11-29"))

    assert report.status is DriftStatus.REFERENCE and not report.drifted
    assert report.reference_night == "2026-11-29"
    assert [s.configs_compared for s in report.sentinels] == [len(CONFIGS)]


def test_a_uniform_slowdown_beyond_the_noise_is_drift() -> None:
    # spreads of 1 %: noise sqrt(2)·0.01/1.349 = 1.05 %, threshold max(3 × 1.05 %, 3 %) = 3.2 %; shift 10 %.
    report = compare_sentinels(_night("2026-11-29"), _night("2026-11-30", scale=1.10))

    (s,) = report.sentinels
    assert report.drifted and s.status is DriftStatus.DRIFT
    assert s.shift_ratio == pytest.approx(1.10)
    assert s.noise_ratio == pytest.approx(math.exp(math.sqrt(2) * 0.01 / 1.349))
    assert s.threshold_ratio == pytest.approx(math.exp(3 * math.sqrt(2) * 0.01 / 1.349))
    assert "DRIFT" in report.lines()[0] and "+10.0 %" in s.line()


def test_the_same_slowdown_within_noisy_launches_is_not() -> None:
    # spreads of 10 %: noise sqrt(2)·0.10/1.349 = 10.5 %, threshold 31 % > the 10 % shift.
    report = compare_sentinels(_night("2026-11-29", spread=0.1), _night("2026-11-30", scale=1.10, spread=0.1))

    assert report.status is DriftStatus.STABLE


def test_small_shifts_stay_under_the_floor_even_with_tiny_noise() -> None:
    report = compare_sentinels(_night("2026-11-29", spread=0.0), _night("2026-11-30", scale=1.02, spread=0.0))

    (s,) = report.sentinels
    assert s.status is DriftStatus.STABLE and s.threshold_ratio == pytest.approx(math.exp(DRIFT_FLOOR))


def test_previous_nights_shifts_raise_the_noise() -> None:
    reference = _night("2026-11-29")
    history = [compare_sentinels(reference, _night(n, scale=x)) for n, x in
               (("2026-11-30", 1.06), ("2026-12-01", 0.95), ("2026-12-02", 1.07))]  # fmt: skip
    tonight = _night("2026-12-03", scale=1.10)

    without = compare_sentinels(reference, tonight)
    with_history = compare_sentinels(reference, tonight, history)

    assert without.drifted
    # shifts ln(1.06), ln(0.95), ln(1.07): standard deviation 6.6 %, threshold ~20 % > 10 %
    assert with_history.status is DriftStatus.STABLE
    assert with_history.sentinels[0].noise_ratio == pytest.approx(math.exp(0.0657), rel=0.01)


def test_a_changed_ranking_and_changed_software_are_reported() -> None:
    faster = {CONFIGS[4]: 50.0}
    report = compare_sentinels(
        _night("2026-11-29"), _night("2026-11-30", fingerprint={**FINGERPRINT, "driver_version": "590.1"}, **faster)
    )

    (s,) = report.sentinels
    assert s.best_changed and s.tonight_best == CONFIGS[4] and s.reference_best == CONFIGS[0]
    assert s.best_slowdown == pytest.approx(100 / 50)
    assert report.software_changes == {"driver_version": ("580.159.04", "590.1")}
    assert "driver_version changed: 580.159.04 -> 590.1" in "\n".join(report.lines())


def test_too_few_common_configs_is_insufficient() -> None:
    tonight = SentinelRows("2026-11-30", {KEY: {CONFIGS[0]: (100.0, 0.01), CONFIGS[1]: (110.0, 0.01)}}, FINGERPRINT)

    report = compare_sentinels(_night("2026-11-29"), tonight)

    assert report.status is DriftStatus.INSUFFICIENT and not report.drifted


def test_reports_and_rows_round_trip_through_json(tmp_path) -> None:
    reference = _night("2026-11-29")
    report = compare_sentinels(reference, _night("2026-11-30", scale=1.2))

    assert DriftReport.from_dict(report.to_dict()) == report
    reference.save(tmp_path / "ref.json")
    assert SentinelRows.load(tmp_path / "ref.json") == reference


def test_rows_from_the_store_keep_only_ok_times_and_the_fingerprint() -> None:
    rows = [
        {"problem_key": KEY, "config_id": CONFIGS[0], "status": "ok", "time_us": 100.0, "spread": 0.02, **FINGERPRINT},
        {"problem_key": KEY, "config_id": CONFIGS[1], "status": "hopeless", "time_us": 900.0, "spread": None},
        {"problem_key": KEY, "config_id": CONFIGS[2], "status": "ok", "time_us": 120.0, "spread": None},
    ]

    parsed = SentinelRows.from_rows("2026-11-29", rows)

    assert parsed.times == {KEY: {CONFIGS[0]: (100.0, 0.02), CONFIGS[2]: (120.0, 0.0)}}
    assert parsed.fingerprint == FINGERPRINT


def test_the_sentinel_plan_is_fixed_and_bounded() -> None:
    assert [e.problem for e in sentinel_plan(3)] == list(SENTINEL_PROBLEMS[:3])
    assert {e.family for e in sentinel_plan()} == {"sentinel"}
    with pytest.raises(ValueError, match="sentinels=9 is not allowed; use 1..5"):
        sentinel_plan(9)
