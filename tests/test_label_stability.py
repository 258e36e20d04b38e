"""benchmarks/label_stability.py: one run's best judged by another run's times, on real Parquet files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("pyarrow")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "label_stability.py"


def _module():
    spec = importlib.util.spec_from_file_location("label_stability", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(run: str, stamp: str, times: dict[str, float], problem: str = "64x64x64-bf16-nt") -> list[dict]:
    return [
        {"run_id": run, "problem_key": problem, "config_id": c, "status": "ok", "time_us": t,
         "timestamp": pd.Timestamp(stamp, tz="UTC"), "device_class": "h200"}
        for c, t in times.items()
    ]  # fmt: skip


def test_each_runs_best_is_judged_by_the_other_runs_times(tmp_path, capsys):
    configs = [f"c{i}" for i in range(24)]
    old = {c: 10.0 + i for i, c in enumerate(configs)}  # c0 best in the old run
    new = dict(old, c0=12.5, c1=10.0)  # the new run: c1 best, c0 at 12.5
    frame = pd.DataFrame(
        _rows("r_old", "2026-11-29 10:00", old)
        + _rows("r_new", "2026-11-29 12:00", new)
        + _rows("r_one", "2026-11-29 12:00", old, problem="8x8x8-bf16-nt")  # one run only: no pair
    )
    folder = tmp_path / "measurements" / "device_class=h200"
    folder.mkdir(parents=True)
    frame.drop(columns="device_class").to_parquet(folder / "part.parquet")

    module = _module()
    got = module.pairs(frame)
    assert len(got) == 1
    row = got.iloc[0]
    assert (row.old_run, row.new_run, row.common) == ("r_old", "r_new", 24)
    assert row.old_best_in_new == pytest.approx(10.0 / 12.5)  # old best c0, at 12.5 in the new run
    assert row.new_best_in_old == pytest.approx(10.0 / 11.0)  # new best c1, at 11.0 in the old run

    assert module.main(["--dataset", str(tmp_path / "measurements")]) == 0
    assert "1 run pairs over 1 problems" in capsys.readouterr().out
    assert module.main(["--dataset", str(tmp_path / "measurements"), "--exclude-run", "r_old"]) == 1


def test_pairs_with_few_common_configs_are_left_out():
    few = {f"c{i}": 1.0 + i for i in range(5)}
    frame = pd.DataFrame(_rows("a", "2026-11-29 10:00", few) + _rows("b", "2026-11-29 11:00", few))
    assert _module().pairs(frame).empty
