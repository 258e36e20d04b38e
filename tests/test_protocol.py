"""The measurement protocol's logic, with an injected fake timer (no GPU needed)."""

from __future__ import annotations

import math

import pytest

from tilecost.collect.protocol import MeasureProtocol, Telemetry, measure


class FakeTimer:
    """Returns a fixed time per key (optionally drifting with every launch, like a heating card)
    and records the order in which keys were timed."""

    def __init__(self, times_us, drift_per_launch=0.0, throttle_reasons=0, power_w=400.0):
        self.times_us = times_us
        self.drift = drift_per_launch
        self.launches = 0
        self.rounds: list[list[tuple[str, int]]] = []
        self.paused = 0.0
        self.throttle_reasons = throttle_reasons
        self.calls: dict[str, int] = {}
        self.power_w = power_w

    def run_round(self, items):
        self.rounds.append([(k, reps) for k, _, reps in items])
        out = {}
        for key, launch, reps in items:
            samples = []
            for _ in range(reps):
                launch()
                self.calls[key] = self.calls.get(key, 0) + 1
                samples.append(self.times_us[key] * (1 + self.drift * self.launches))
                self.launches += 1
            out[key] = samples
        return out

    def pause(self, seconds):
        self.paused += seconds

    def telemetry(self):
        return Telemetry(1980.0 - 100 * len(self.rounds), self.power_w, 60.0, self.throttle_reasons)


def _launchers(keys):
    return {k: (lambda: None) for k in keys}


def test_every_candidate_gets_its_own_time_and_the_best_is_found():
    times = {"a": 10.0, "b": 12.0, "c": 25.0, "d": 11.0}
    result = measure(_launchers(times), FakeTimer(times), MeasureProtocol(rounds=3, hopeless_factor=2.0))
    assert {k: r.median_us for k, r in result.items() if not r.hopeless} == {"a": 10.0, "b": 12.0, "d": 11.0}
    assert min(result, key=lambda k: result[k].median_us) == "a"


def test_hopeless_candidates_stop_after_screening_with_their_bound():
    times = {"fast": 10.0, "slow": 31.0, "ok": 29.0}
    timer = FakeTimer(times)
    result = measure(_launchers(times), timer, MeasureProtocol(rounds=3, hopeless_factor=3.0))
    # 31 > 3 × 10 on both screening launches (the second confirms): recorded as hopeless, bound 31.
    assert result["slow"].hopeless and result["slow"].reps == 2 and result["slow"].median_us == 31.0
    assert timer.calls["slow"] == 2
    # 29 <= 30: timed over every round.
    assert not result["ok"].hopeless and timer.calls["ok"] > 1


def test_exempt_baseline_never_sets_the_best_nor_is_hopeless():
    times = {"cublas": 1.0, "cfg": 10.0, "cfg2": 12.0}
    result = measure(
        _launchers(times), FakeTimer(times), MeasureProtocol(hopeless_factor=2.0), exempt=frozenset({"cublas"})
    )
    assert not result["cfg"].hopeless and not result["cfg2"].hopeless and not result["cublas"].hopeless


def test_rounds_are_interleaved_in_fresh_seeded_orders_with_pauses():
    times = {f"k{i}": 10.0 + i * 0.01 for i in range(12)}
    timer = FakeTimer(times)
    measure(_launchers(times), timer, MeasureProtocol(rounds=3, pause_s=0.15, seed=7))
    orders = [[k for k, _ in r] for r in timer.rounds]
    assert len(orders) == 4  # screening + 3 rounds
    assert all(sorted(o) == sorted(times) for o in orders)
    assert len({tuple(o) for o in orders}) == 4, "each round must use a new order"
    assert timer.paused == pytest.approx(0.45)
    timer2 = FakeTimer(times)
    measure(_launchers(times), timer2, MeasureProtocol(rounds=3, seed=7))
    assert timer2.rounds == timer.rounds, "same seed, same orders"


def test_interleaving_spreads_drift_evenly():
    # Identical kernels on a card that slows 0.1% per launch: timed back to back, the last would
    # look ~40% slower than the first; interleaved, all medians stay within a few percent.
    times = {f"k{i}": 100.0 for i in range(40)}
    result = measure(_launchers(times), FakeTimer(times, drift_per_launch=0.001), MeasureProtocol(rounds=5, max_reps=2))
    medians = [r.median_us for r in result.values()]
    assert max(medians) / min(medians) < 1.1


def test_reps_scale_with_kernel_time():
    p = MeasureProtocol(target_us_per_round=200.0, min_reps=2, max_reps=10)
    assert p.reps_for(5.0) == 10  # 200 / 5 = 40, capped at 10
    assert p.reps_for(50.0) == 4  # 200 / 50 = 4
    assert p.reps_for(5000.0) == 2  # at least min_reps


def test_throttled_rounds_are_counted():
    times = {"a": 10.0, "b": 11.0}
    result = measure(_launchers(times), FakeTimer(times, throttle_reasons=0x4), MeasureProtocol(rounds=2))
    assert result["a"].throttled_rounds == 2
    assert result["a"].min_sm_clock_mhz == pytest.approx(1980.0 - 300)
    idle = measure(_launchers(times), FakeTimer(times, throttle_reasons=0x1), MeasureProtocol(rounds=2))
    assert idle["a"].throttled_rounds == 0  # 0x1 is 'GPU idle', not throttling


@pytest.mark.parametrize(
    "kwargs",
    [dict(rounds=0), dict(min_reps=0), dict(min_reps=5, max_reps=4), dict(hopeless_factor=1.0), dict(pause_s=-1)],
)
def test_bad_protocol_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        MeasureProtocol(**kwargs)


def test_spread_is_interquartile_over_median():
    class Noisy(FakeTimer):
        def run_round(self, items):
            return {k: [8.0, 10.0, 10.0, 12.0] for k, _, _ in items}

    r = measure(_launchers({"a": 1}), Noisy({"a": 1}), MeasureProtocol(rounds=1))["a"]
    # screening excluded; samples 8,10,10,12: quartiles (n=4, exclusive) 8.5 and 11.5 → IQR 3 / median 10
    assert r.median_us == 10.0 and r.spread == pytest.approx(0.3)


def test_the_pause_is_taken_only_after_a_round_near_the_power_cap():
    times = {"a": 10.0, "b": 11.0}
    cool = FakeTimer(times, power_w=200.0)
    measure(_launchers(times), cool, MeasureProtocol(rounds=3, pause_s=0.15, pause_above_w=400.0))
    assert cool.paused == 0.0
    hot = FakeTimer(times, power_w=450.0)
    measure(_launchers(times), hot, MeasureProtocol(rounds=3, pause_s=0.15, pause_above_w=400.0))
    assert hot.paused == pytest.approx(0.45)
    capped = FakeTimer(times, power_w=200.0, throttle_reasons=0x4)
    measure(_launchers(times), capped, MeasureProtocol(rounds=3, pause_s=0.15, pause_above_w=400.0))
    assert capped.paused == pytest.approx(0.45)

    class NoTelemetry(FakeTimer):
        def telemetry(self):
            return None

    blind = NoTelemetry(times)
    measure(_launchers(times), blind, MeasureProtocol(rounds=2, pause_s=0.15))
    assert blind.paused == pytest.approx(0.3), "without telemetry the protocol pauses, as before"


def test_a_suspect_screening_time_never_makes_a_candidate_hopeless():
    """A launch that may have waited for the host (the timer says so) proves nothing: its candidate
    goes on to the timed rounds instead of stopping as hopeless on an inflated screening time."""

    class HostBoundScreening(FakeTimer):
        def run_round(self, items):
            out = super().run_round(items)
            if len(self.rounds) == 1:  # the screening round: "b" waited for the host
                out["b"] = [100.0]
                self.last_round_suspects = {"b"}
            else:
                self.last_round_suspects = set()
            return out

    times = {"a": 10.0, "b": 11.0, "c": 100.0}
    result = measure(_launchers(times), HostBoundScreening(times), MeasureProtocol(rounds=3, hopeless_factor=3.0))
    assert not result["b"].hopeless and result["b"].median_us == 11.0
    assert result["c"].hopeless, "a slow time that is not suspect still stops after screening"


def test_one_slow_screening_launch_does_not_make_a_candidate_hopeless():
    """A candidate over the bar is timed once more after the screening round; the faster launch decides."""

    class SlowFirstLaunch(FakeTimer):
        def run_round(self, items):
            out = super().run_round(items)
            if len(self.rounds) == 1:
                out["b"] = [40.0]  # b's screening launch ran 3.6x slow (an idle device's low clock)
                out["c"] = [150.0]
            return out

    times = {"a": 10.0, "b": 11.0, "c": 100.0}
    timer = SlowFirstLaunch(times)
    everyone = MeasureProtocol(rounds=3, hopeless_factor=3.0, confirm_below=math.inf)
    result = measure(_launchers(times), timer, everyone)
    assert sorted(k for k, _ in timer.rounds[1]) == ["b", "c"], "the confirmation round times only those over the bar"
    assert not result["b"].hopeless and result["b"].median_us == 11.0
    assert result["c"].hopeless and result["c"].median_us == 100.0, "the bound is the faster screening launch"
    # Off: the old protocol, one screening launch decides.
    result = measure(_launchers(times), SlowFirstLaunch(times), MeasureProtocol(rounds=3, confirm_hopeless=False))
    assert result["b"].hopeless and result["b"].median_us == 40.0 and result["b"].reps == 1


def test_candidates_far_over_the_bar_are_hopeless_on_one_launch():
    """Only candidates screened within ``confirm_below`` of the best get the confirming launch: the largest fp8
    held-out problems spent 91-96% of their kernel time on hopeless candidates' two launches."""
    times = {"a": 10.0, "near": 50.0, "far": 150.0, "edge": 100.0}
    timer = FakeTimer(times)
    result = measure(_launchers(times), timer, MeasureProtocol(rounds=3, hopeless_factor=3.0, confirm_below=10.0))
    assert sorted(k for k, _ in timer.rounds[1]) == ["edge", "near"], "10x the best exactly is still confirmed"
    assert timer.calls["far"] == 1 and result["far"].hopeless and result["far"].reps == 1
    assert result["far"].median_us == 150.0
    assert result["near"].hopeless and result["near"].reps == 2 and timer.calls["near"] == 2
    assert not result["a"].hopeless
    # A suspect screening launch (it may hold a wait for the host) is never hopeless, however slow.

    class Waited(FakeTimer):
        def run_round(self, items):
            out = super().run_round(items)
            self.last_round_suspects = {"far"} if len(self.rounds) == 1 else set()
            return out

    result = measure(_launchers(times), Waited(times), MeasureProtocol(rounds=3, hopeless_factor=3.0))
    assert not result["far"].hopeless and result["far"].median_us == 150.0


@pytest.mark.parametrize("confirm_below", [2.9, 0.0, float("nan")])
def test_confirm_below_must_not_undercut_the_bar(confirm_below):
    with pytest.raises(ValueError, match="confirm_below"):
        MeasureProtocol(hopeless_factor=3.0, confirm_below=confirm_below)


class _HostBoundIn(FakeTimer):
    """A fake timer whose rounds listed in ``bad`` (round index: keys) wait for the host: those keys'
    times in that round are inflated 5x and reported as suspects."""

    def __init__(self, times, bad):
        super().__init__(times)
        self.bad = bad

    def run_round(self, items):
        out = super().run_round(items)
        hit = self.bad.get(len(self.rounds) - 1, set()) & set(out)
        for k in hit:
            out[k] = [t * 5 for t in out[k]]
        self.last_round_suspects = hit
        return out


def test_a_timed_round_that_waited_for_the_host_is_made_up():
    times = {"a": 10.0, "b": 12.0}
    # Round 0 is screening; rounds 1-3 are timed: "a" waits for the host in round 2.
    timer = _HostBoundIn(times, {2: {"a"}})
    result = measure(_launchers(times), timer, MeasureProtocol(rounds=3))
    assert result["a"].median_us == 10.0 and max(result["a"].samples_us) == 10.0, "the inflated round is dropped"
    assert len(timer.rounds) == 5, "screening, three rounds and one make-up round"
    assert [k for k, _ in timer.rounds[-1]] == ["a"], "the make-up round times only the candidate that lost a round"
    assert result["a"].reps == result["b"].reps, "the make-up round gives back the repetitions lost"


def test_a_candidate_with_no_clean_round_keeps_what_it_has_and_makeups_can_be_off():
    times = {"a": 10.0, "b": 12.0}
    always = {r: {"a"} for r in range(1, 10)}
    timer = _HostBoundIn(times, always)
    result = measure(_launchers(times), timer, MeasureProtocol(rounds=3, makeup_rounds=2))
    assert len(timer.rounds) == 6, "two make-up rounds at most"
    assert result["a"].median_us == 50.0, "never clean: its held samples are all there is"
    timer = _HostBoundIn(times, {2: {"a"}})
    result = measure(_launchers(times), timer, MeasureProtocol(rounds=3, makeup_rounds=0))
    assert len(timer.rounds) == 4 and max(result["a"].samples_us) == 50.0, "makeup_rounds=0: the old protocol"
    with pytest.raises(ValueError, match="makeup_rounds"):
        MeasureProtocol(makeup_rounds=-1)
