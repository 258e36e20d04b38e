"""Compacting a finished run's per-problem files: real sweeps (simulated timer) into real Parquet files."""

from __future__ import annotations

import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tilecost import DType, Layout, Problem
from tilecost.cli import main
from tilecost.collect.plans import PlanEntry, Role
from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.store import SCHEMA_VERSION, DatasetStore
from tilecost.collect.sweep import SweepSettings, run_sweep
from tilecost.errors import DatasetError
from tilecost.train.dataset import load_measurements

SIM = "tilecost.collect.simulated:simulated_backend"
A, B, C = Problem(64, 256, 512), Problem(100, 200, 300), Problem(48, 512, 256, DType.FP16, Layout.NN)


def _sweep(store: DatasetStore, problems: list[Problem], run_id: str) -> int:
    settings = SweepSettings(backend=SIM, sample_fraction=0.1, min_sample=8, protocol=MeasureProtocol(rounds=1),
                             run_id=run_id)  # fmt: skip
    entries = [PlanEntry(p, "random", Role.TRAIN) for p in problems]
    return run_sweep(entries, store, settings, progress_stream=None).problems_done


def _rows(store: DatasetStore) -> list[tuple]:
    frame = store.read("h200").to_pandas()
    return sorted(frame[["problem_key", "config_id", "run_id", "time_us"]].itertuples(index=False, name=None))


def test_compacting_a_run_leaves_one_file_per_partition_with_the_same_rows(tmp_path) -> None:
    store = DatasetStore(tmp_path)
    _sweep(store, [A, B, C], "r1")
    _sweep(store, [A], "r2")  # another run's file of a problem r1 measured stays as it is
    before, read_before = _rows(store), load_measurements(tmp_path, "h200").frame

    merged = store.compact_run("h200", "r1")

    assert merged == {"device_class=h200/dtype=bf16/layout=nt": 2, "device_class=h200/dtype=fp16/layout=nn": 1}
    names = sorted(p.rsplit("/", 1)[-1] for p in store.files("h200"))
    assert names == sorted(["r1.parquet", "r1.parquet", f"{A.key}--r2.parquet"])
    assert _rows(store) == before
    assert all(int(pq.read_schema(p).metadata[b"tilecost.schema_version"]) == SCHEMA_VERSION for p in store.files())
    after = load_measurements(tmp_path, "h200").frame
    # Training reads the same rows in the same order: a booster depends on its rows' order (train/dataset.py).
    pd.testing.assert_frame_equal(after, read_before)
    keys = list(zip(after["problem_key"], after["config_id"], strict=True))
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert store.problem_keys(store.files("h200")) == {A.key, B.key, C.key}


def test_a_compacted_run_resumes_with_only_what_it_lacks_and_compacts_again(tmp_path) -> None:
    store = DatasetStore(tmp_path)
    _sweep(store, [A, B], "r1")
    store.compact_run("h200", "r1")

    assert store.has("h200", A, "r1") and store.has("h200", B, "r1") and not store.has("h200", C, "r1")
    assert not store.has("h200", A, "r2")
    assert _sweep(store, [A, B, C], "r1") == 1  # only C, the problem the compacted run lacks
    rows = _rows(store)
    store.compact_run("h200", "r1")

    assert _rows(store) == rows and len(rows) == len(set(rows))
    assert all("--" not in p for p in store.files("h200"))


def test_a_compaction_stopped_before_deleting_is_finished_by_the_next_without_double_rows(tmp_path) -> None:
    store = DatasetStore(tmp_path)
    _sweep(store, [A, B], "r1")
    rows = _rows(store)
    kept = tmp_path / "kept"
    shutil.copytree(tmp_path / "device_class=h200", kept)
    store.compact_run("h200", "r1")
    # The problem files back beside the compacted one: as if the first compaction had stopped before deleting them.
    shutil.copytree(kept, tmp_path / "device_class=h200", dirs_exist_ok=True)
    shutil.rmtree(kept)
    assert len(_rows(store)) == 2 * len(rows)

    assert store.compact_run("h200", "r1") == {"device_class=h200/dtype=bf16/layout=nt": 2}
    assert _rows(store) == rows


def test_compacting_refuses_bad_run_ids_and_files_of_another_run(tmp_path) -> None:
    store = DatasetStore(tmp_path)
    _sweep(store, [A], "r1")
    with pytest.raises(DatasetError, match="run_id='a--b' is not allowed"):
        store.compact_run("h200", "a--b")
    # A file named for run r9 that holds r1's rows: compaction stops before writing or deleting anything.
    (path,) = store.files("h200")
    (tmp_path / path.replace("--r1.parquet", "--r9.parquet")).write_bytes((tmp_path / path).read_bytes())
    files = store.files("h200")
    with pytest.raises(DatasetError, match=r"rows of run\(s\) \['r1'\], not only 'r9'"):
        store.compact_run("h200", "r9")
    assert store.files("h200") == files
    assert store.compact_run("h200", "r7") == {}


def test_the_compact_command_says_what_it_merged_and_refuses_an_unknown_run(tmp_path, capsys) -> None:
    _sweep(DatasetStore(tmp_path), [A, B], "r1")

    assert main(["compact", "--dataset", str(tmp_path), "--run-id", "r1"]) == 0
    assert "compacted run r1: 2 problem files into 1 files" in capsys.readouterr().out
    assert main(["compact", "--dataset", str(tmp_path), "--run-id", "r1"]) == 2
    assert "run_id='r1': no per-problem files of this run" in capsys.readouterr().err
