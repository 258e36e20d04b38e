"""Tonight's plan (flagged first, then fresh family samples, never what is measured) and the night's state
files (records, the exclusive plan, the lock)."""

from __future__ import annotations

import json
import os
import socket

import pytest

from tilecost.collect.plans import Role, is_heldout, load_plan_file
from tilecost.problem import DType, Layout, Problem
from tilecost.space import problem_candidates
from tilecost.train.nightly_plan import (
    FLAGGED_FAMILY,
    MODEL_TOP_FAMILY,
    ensure_heldout,
    measurable,
    model_top_entries,
    plan_json,
    plan_night,
)
from tilecost.train.nightly_state import NightDir, NightLock, NightLocked, parse_night

BF16, NT = (DType.BF16,), (Layout.NT,)
FAMILIES = {"random": 3, "decode": 2}


def _plan(flagged=(), measured=frozenset(), max_flagged=16, seed=20261129, families=FAMILIES):
    return plan_night(flagged=list(flagged), families=families, dtypes=BF16, layouts=NT, seed=seed,
                      measured=set(measured), max_flagged=max_flagged)  # fmt: skip


def test_flagged_problems_come_first_without_repeats_or_measured_ones() -> None:
    a, b, c = Problem(24, 14336, 4096), Problem(100, 3000, 700), Problem(7, 4096, 4096)

    entries, counts = _plan([a, b, a, c], measured={c.key})

    assert [e.problem for e in entries[:2]] == [a, b]
    assert {e.family for e in entries[:2]} == {FLAGGED_FAMILY}
    assert counts["flagged_logged"] == 4 and counts["flagged"] == 2 and counts["flagged_measured"] == 1
    assert all(e.problem != c for e in entries)
    assert entries[0].role is (Role.HELDOUT if is_heldout(a) else Role.TRAIN)


def test_flagged_problems_are_bounded_and_unmeasurable_ones_set_aside() -> None:
    many = [Problem(8 + i, 4096, 4096) for i in range(5)]
    huge = Problem(65536, 65536, 65536)  # 5.6e14 flop, over the plans' MAX_FLOP

    entries, counts = _plan([huge, *many], max_flagged=3)

    assert not measurable(huge) and measurable(many[0])
    assert [e.problem for e in entries if e.family == FLAGGED_FAMILY] == many[:3]
    assert counts["flagged_too_large"] == 1 and counts["flagged_over_limit"] == 2


def test_fresh_samples_change_with_the_night_and_skip_measured_problems() -> None:
    tonight, _ = _plan()
    again, _ = _plan()
    tomorrow, _ = _plan(seed=20261130)
    measured = {tonight[0].problem.key}
    without, counts = _plan(measured=measured)

    assert [e.problem for e in tonight] == [e.problem for e in again]
    assert {e.problem for e in tonight} != {e.problem for e in tomorrow}
    assert tonight[0].problem not in {e.problem for e in without}
    assert counts["fresh_measured"] == 1


def test_a_dataset_without_held_out_problems_gets_one() -> None:
    entries, added = ensure_heldout([], set(), DType.BF16, Layout.NT, seed=3)

    assert added == len(entries) >= 1
    assert entries[-1].role is Role.HELDOUT and all(e.role is Role.TRAIN for e in entries[:-1])
    again, none_added = ensure_heldout(entries, set(), DType.BF16, Layout.NT, seed=3)
    assert none_added == 0 and again == entries


def test_the_plan_file_is_what_tilecost_collect_reads(tmp_path) -> None:
    entries, _ = _plan([Problem(24, 14336, 4096)])
    path = tmp_path / "plan.json"
    path.write_text(plan_json(entries))

    assert load_plan_file(path) == entries


def test_records_are_written_whole_and_the_plan_only_once(tmp_path) -> None:
    night = NightDir(tmp_path, "2026-11-29")
    night.write_record("train", {"promoted": True})

    assert night.read_record("train") == {"promoted": True}
    assert night.read_record("export") is None
    assert night.create_exclusive(night.plan_path, "[1]")
    assert not night.create_exclusive(night.plan_path, "[2]")  # a second shard keeps the first plan
    assert json.loads(night.plan_path.read_text()) == [1]
    assert not list(night.root.glob(".*.tmp"))
    assert night.compact == "20261129"


def test_previous_nights_records_are_found_oldest_first(tmp_path) -> None:
    for night in ("2026-11-27", "2026-11-28", "2026-11-30"):
        NightDir(tmp_path, night).write_record("sentinels", {"night": night})

    found = NightDir(tmp_path, "2026-11-29").previous_records("sentinels")

    assert [n for n, _ in found] == ["2026-11-27", "2026-11-28"]


def test_a_night_lock_excludes_a_live_holder_and_takes_over_a_dead_one(tmp_path) -> None:
    path = tmp_path / "lock"
    with NightLock(path), pytest.raises(NightLocked, match="is held by"), NightLock(path):
        pass
    assert not path.exists()
    path.write_text(json.dumps({"host": socket.gethostname(), "pid": 2**22 + 12345}))  # no such process
    with NightLock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_nights_are_dates() -> None:
    assert parse_night("2026-11-29") == "2026-11-29"
    with pytest.raises(ValueError, match="night='tonight' is not allowed; use a date YYYY-MM-DD"):
        parse_night("tonight")


def _fake_times(problem: Problem) -> dict:
    """A ranking by tile area, then key: any deterministic order serves the planning logic."""
    return {c: float(c.block_m * c.block_n) + i * 1e-6 for i, c in enumerate(problem_candidates(problem, "h200"))}


def test_model_top_takes_each_problems_fastest_untimed_configs() -> None:
    a, b = Problem(512, 1024, 4096), Problem(24, 14336, 4096)
    order_a = sorted(_fake_times(a), key=_fake_times(a).__getitem__)
    timed = {a.key: {c.key for c in order_a[:3]}, b.key: set()}

    entries = model_top_entries(timed, _fake_times, problems=2, per_problem=5, seed=1)

    by_problem = {e.problem: e for e in entries}
    assert set(by_problem) == {a, b}
    assert all(e.family == MODEL_TOP_FAMILY and e.role is Role.TRAIN for e in entries)
    assert dict(by_problem[a].only)["config_id"] == tuple(sorted(c.key for c in order_a[3:8]))  # the 3 timed skipped
    assert all(len(dict(e.only)["config_id"]) == 5 for e in entries)


def test_model_top_within_takes_only_the_untimed_part_of_the_models_own_top() -> None:
    a, b = Problem(512, 1024, 4096), Problem(24, 14336, 4096)
    order_a, order_b = (sorted(_fake_times(p), key=_fake_times(p).__getitem__) for p in (a, b))
    # a: 3 of its 8 fastest timed, so 5 are left within the top 8 (not per_problem's 6);
    # b: its whole top 8 timed, so it is passed over although most of its space is untimed.
    timed = {a.key: {order_a[i].key for i in (0, 2, 5)}, b.key: {c.key for c in order_b[:8]}}

    entries = model_top_entries(timed, _fake_times, problems=2, per_problem=6, seed=1, within=8)

    assert [e.problem for e in entries] == [a]
    assert dict(entries[0].only)["config_id"] == tuple(sorted(order_a[i].key for i in (1, 3, 4, 6, 7)))
    with pytest.raises(ValueError, match="within=0 is not allowed"):
        model_top_entries(timed, _fake_times, problems=1, per_problem=1, seed=0, within=0)


def test_model_top_draws_problems_by_the_night_and_passes_over_fully_timed_ones() -> None:
    problems = [Problem(64 * (i + 1), 4096, 4096) for i in range(6)]
    timed = {p.key: set() for p in problems}
    full = problems[0]
    timed[full.key] = {c.key for c in problem_candidates(full, "h200")}

    one = [e.problem for e in model_top_entries(timed, _fake_times, problems=5, per_problem=2, seed=20261129)]
    again = [e.problem for e in model_top_entries(timed, _fake_times, problems=5, per_problem=2, seed=20261129)]
    other = [e.problem for e in model_top_entries(timed, _fake_times, problems=5, per_problem=2, seed=20261130)]

    assert one == again and len(one) == 5 and full not in one and set(one) == set(other) and one != other
    with pytest.raises(ValueError, match="model_top_k=0"):
        model_top_entries(timed, _fake_times, problems=1, per_problem=0, seed=0)


def test_model_top_entries_come_last_and_survive_the_plan_file(tmp_path) -> None:
    measured = Problem(512, 1024, 4096)
    top = model_top_entries({measured.key: set()}, _fake_times, problems=1, per_problem=4, seed=0)

    entries, counts = plan_night(flagged=[], families=FAMILIES, dtypes=BF16, layouts=NT, seed=20261129,
                                 measured={measured.key}, max_flagged=0, model_top=top)  # fmt: skip
    path = tmp_path / "plan.json"
    path.write_text(plan_json(entries))

    assert entries[-1] == top[0] and counts["model_top"] == 1
    assert load_plan_file(path) == entries  # the `only` restriction included
