"""The sweep end to end on CPU with the simulated backend: Parquet rows, resume, crashes, kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tilecost import DType, Layout, Problem
from tilecost.collect.plans import PlanEntry, Role, build_plan
from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.store import SCHEMA_VERSION, DatasetStore
from tilecost.collect.sweep import SweepSettings, choose_candidates, measure_cost, run_sweep, shard
from tilecost.errors import DatasetError

SIM = "tilecost.collect.simulated:simulated_backend"


def _entries():
    return [
        PlanEntry(Problem(64, 256, 512, DType.BF16, Layout.NT), "random", Role.TRAIN),
        PlanEntry(Problem(16, 4096, 1024, DType.BF16, Layout.NT), "decode", Role.HELDOUT),
        PlanEntry(Problem(100, 200, 300, DType.FP16, Layout.NN), "unaligned", Role.TRAIN),
    ]


def _settings(**kw):
    return SweepSettings(backend=SIM, sample_fraction=0.1, min_sample=8, protocol=MeasureProtocol(rounds=1), **kw)


def test_sweep_writes_one_file_per_problem_with_every_row(tmp_path):
    store = DatasetStore(tmp_path)
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None)
    assert summary.problems_done == 3 and summary.problems_skipped == 0
    files = store.files("h200")
    assert len(files) == 3
    assert all("/device_class=h200/dtype=" in f and "/layout=" in f for f in files)
    table = store.read("h200")
    assert table.num_rows == summary.rows
    expected = sum(len(choose_candidates(e, _settings())[0]) for e in _entries())
    assert table.num_rows == expected
    meta = pq.read_schema(files[0]).metadata
    assert int(meta[b"tilecost.schema_version"]) == SCHEMA_VERSION
    df = table.to_pandas()
    held = df[df.role == "heldout"]
    assert (held.sample_fraction == 1.0).all(), "held-out problems are measured over all their candidates"
    assert set(df.status) <= {"ok", "hopeless"}
    assert df.gpu_name.str.startswith("SIMULATED").all()


def test_rerun_resumes_and_duplicates_nothing(tmp_path):
    store = DatasetStore(tmp_path)
    run_sweep(_entries()[:2], store, _settings(), progress_stream=None)
    again = run_sweep(_entries(), store, _settings(), progress_stream=None)
    assert again.problems_skipped == 2 and again.problems_done == 1
    df = store.read("h200").to_pandas()
    assert not df.duplicated(["problem_key", "config_id", "run_id"]).any()
    assert df.problem_key.nunique() == 3


def test_a_crashing_config_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    entry = _entries()[0]
    configs, _ = choose_candidates(entry, _settings())
    victim = configs[3].key
    monkeypatch.setenv("TILECOST_SIMULATED_CRASH", victim)
    store = DatasetStore(tmp_path)
    summary = run_sweep([entry], store, _settings(), progress_stream=None)
    df = store.read("h200").to_pandas().set_index("config_id")
    assert df.loc[victim, "status"] == "crashed"
    assert "exited with code 13" in df.loc[victim, "error"]
    assert (df.drop(index=victim).status.isin(["ok", "hopeless"])).all()
    assert summary.status_counts["crashed"] == 1


def _collect_until(dataset: Path, problems: int, delay_s: float, files: int) -> tuple[list[str], subprocess.Popen]:
    """``tilecost collect`` of ``problems`` random bf16 nt problems on the simulated timer (``delay_s`` per
    problem) in a child process, returned once it has written ``files`` Parquet files."""
    cmd = [
        sys.executable, "-m", "tilecost.cli", "collect", "--dataset", str(dataset), "--backend", SIM,
        "--family", f"random={problems}", "--dtypes", "bf16", "--layouts", "nt", "--sample-fraction", "0.05",
        "--rounds", "1",
    ]  # fmt: skip
    env = dict(os.environ, TILECOST_SIMULATED_DELAY_S=str(delay_s))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(dataset.rglob("*.parquet"))) < files:
        time.sleep(0.05)
    return cmd, proc


def test_kill_minus_9_then_rerun_loses_and_duplicates_nothing(tmp_path):
    dataset = tmp_path / "ds"
    cmd, proc = _collect_until(dataset, problems=6, delay_s=0.4, files=2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(list(dataset.rglob("*.parquet")))
    assert 2 <= partial < 6, "the kill must land mid-sweep"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{partial} already in the dataset" in done.stdout + done.stderr
    df = DatasetStore(dataset).read("h200").to_pandas()
    assert df.problem_key.nunique() == 6
    assert not df.duplicated(["problem_key", "config_id"]).any()
    assert not list(dataset.rglob("*.tmp"))


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 on this platform")
def test_sigusr1_prints_every_threads_stack_and_the_collect_goes_on(tmp_path):
    """How to see where a long collect is without stopping it (``kill -USR1 <pid>``, tilecost.cli)."""
    _, proc = _collect_until(tmp_path / "ds", problems=3, delay_s=1.0, files=1)
    proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "most recent call first" in err and "run_sweep" in err
    assert "3 problems measured" in out + err


@pytest.mark.parametrize("stderr", [None, "captured"])
def test_the_stack_dump_handler_is_skipped_where_stderr_has_no_file_descriptor(monkeypatch, stderr):
    """In-process callers (pytest's capture, a GUI without a console) still run the CLI."""
    import io

    from tilecost.cli import _dump_stacks_on_sigusr1

    monkeypatch.setattr(sys, "stderr", None if stderr is None else io.StringIO())
    _dump_stacks_on_sigusr1()  # raises nothing


def test_shards_partition_the_plan():
    plan = build_plan({"random": 30}, [DType.BF16], [Layout.NT])
    parts = [shard(plan, i, 4) for i in range(4)]
    keys = [e.problem.key for p in parts for e in p]
    assert sorted(keys) == sorted(e.problem.key for e in plan)
    assert sorted(len(p) for p in parts) == [7, 7, 8, 8], "dealt in turn: sizes differ by one at most"
    reversed_parts = [shard(plan[::-1], i, 4) for i in range(4)]
    assert [{e.problem.key for e in p} for p in reversed_parts] == [{e.problem.key for e in p} for p in parts]
    with pytest.raises(ValueError, match="shard"):
        shard(plan, 4, 4)


def test_reading_a_file_of_another_schema_version_is_refused(tmp_path):
    import pyarrow as pa

    store = DatasetStore(tmp_path)
    run_sweep(_entries()[:1], store, _settings(), progress_stream=None)
    path = store.files()[0]
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"tilecost.schema_version": b"99"}), path)
    with pytest.raises(DatasetError, match="schema version 99"):
        store.read("h200")
    with pytest.raises(DatasetError, match="no measurement files"):
        DatasetStore(tmp_path / "empty").read("h200")
    assert pa is not None


def test_reading_some_columns_filters_on_others_and_refuses_unknown_names(tmp_path):
    import pyarrow.compute as pc

    store = DatasetStore(tmp_path)
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None)
    table = store.read("h200", filters=[pc.field("role") == "train"], columns=["problem_key", "config_id"])
    assert table.column_names == ["problem_key", "config_id"]
    whole = store.read("h200").to_pandas()
    assert table.num_rows == (whole.role == "train").sum() < summary.rows
    with pytest.raises(DatasetError, match=r"columns=\['time'\] are not dataset columns"):
        store.read("h200", columns=["problem_key", "time"])


def test_bad_status_is_refused_before_anything_is_written(tmp_path):
    store = DatasetStore(tmp_path)
    with pytest.raises(DatasetError, match="status"):
        store.write_problem("h200", Problem(8, 8, 8), "r1", [{"status": "great"}])
    assert store.files() == []


def test_stale_tmp_files_are_cleaned(tmp_path):
    d = Path(tmp_path) / "device_class=h200" / "dtype=bf16" / "layout=nt"
    d.mkdir(parents=True)
    (d / "x.parquet.abc.tmp").write_bytes(b"partial")
    assert DatasetStore(tmp_path).clean_partial() == 1


def test_a_problem_still_measuring_past_the_budget_is_given_up_and_measured_by_the_next_run(tmp_path, monkeypatch):
    """The second problem takes 60 s to measure; with an 8 s budget and 0.5 s of grace it is given up at
    ~8.5 s: its measuring process ended, nothing of it written, the third problem not started. The first
    problem of a run is never given up, so a rerun (without the delay) measures the rest."""
    import tilecost.collect.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "MEASURE_GRACE_S", 0.5)
    slow = _entries()[1].problem.key  # measured second: the bf16-nt-16-16 group (two problems) goes first
    monkeypatch.setenv("TILECOST_SIMULATED_DELAY_S", f"{slow}=60")
    store = DatasetStore(tmp_path)
    t0 = time.monotonic()
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None, time_budget_s=8.0)
    took = time.monotonic() - t0
    assert summary.stopped_early and summary.problems_done == 1 and summary.abandoned == slow
    assert len(store.files("h200")) == 1 and not list(Path(tmp_path).rglob("*.tmp"))
    assert slow in summary.line()
    assert took < 8.0 + 0.5 + 10, f"the sweep ran {took:.1f} s, past its budget and grace"
    monkeypatch.delenv("TILECOST_SIMULATED_DELAY_S")
    again = run_sweep(_entries(), store, _settings(), progress_stream=None, time_budget_s=8.0)
    assert again.problems_done == 2 and again.problems_skipped == 1 and len(store.files("h200")) == 3


def test_time_budget_stops_between_problems_and_a_rerun_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECOST_SIMULATED_DELAY_S", "0.3")
    store = DatasetStore(tmp_path)
    first = run_sweep(_entries(), store, _settings(), progress_stream=None, time_budget_s=0.1)
    assert first.stopped_early and 1 <= first.problems_done < 3
    assert "run again to resume" in first.line()
    assert "compile wait " in first.line()  # the time measuring waited for kernels, not the time spent compiling
    second = run_sweep(_entries(), store, _settings(), progress_stream=None)
    assert second.problems_skipped == first.problems_done and not second.stopped_early


def test_gpus_fan_out_one_shard_per_gpu_into_one_dataset(tmp_path):
    dataset = tmp_path / "ds"
    cmd = [
        sys.executable, "-m", "tilecost.cli", "collect", "--dataset", str(dataset), "--backend", SIM,
        "--family", "random=5", "--dtypes", "bf16", "--layouts", "nt", "--sample-fraction", "0.05", "--rounds", "1",
        "--gpus", "2",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 GPU workers finished with exit codes [0, 0]" in done.stdout
    df = DatasetStore(dataset).read("h200").to_pandas()
    assert df.problem_key.nunique() == 5
    assert not df.duplicated(["problem_key", "config_id"]).any()


@pytest.mark.parametrize(("visible", "count"), [("0,1", 2), ("3", 1), ("", 0), ("1,-1,0", 1), ("-1", 0)])
def test_gpus_all_counts_the_visible_gpus_without_torch(monkeypatch, visible, count):
    from tilecost.cli import visible_gpu_count

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch would raise: the count must not need it
    assert visible_gpu_count() == count


def test_gpus_all_with_no_gpu_is_refused_and_writes_nothing(tmp_path):
    dataset = tmp_path / "ds"
    cmd = [
        sys.executable, "-m", "tilecost.cli", "collect", "--dataset", str(dataset), "--backend", SIM,
        "--family", "random=2", "--dtypes", "bf16", "--layouts", "nt", "--gpus", "all",
    ]  # fmt: skip
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    )
    assert done.returncode == 2
    assert "--gpus all found no GPU" in done.stderr
    assert not dataset.exists()


def test_training_problems_of_a_dtype_and_layout_share_their_sample():
    # The sample is ranked per config, not per problem: two training problems with the same candidates
    # measure the same configs, so their specialisation pattern is compiled once for both.
    settings = SweepSettings(backend=SIM, sample_fraction=0.2, min_sample=8)
    a = PlanEntry(Problem(4096, 4096, 4096, DType.BF16, Layout.NT), "random", Role.TRAIN)
    b = PlanEntry(Problem(3000, 5000, 8192, DType.BF16, Layout.NT), "random", Role.TRAIN)
    ca, fa = choose_candidates(a, settings)
    cb, _ = choose_candidates(b, settings)
    assert 0.19 < fa < 0.21
    overlap = len(set(ca) & set(cb)) / len(ca)
    assert overlap > 0.8, overlap
    # Another seed (another night) ranks the configs afresh.
    other, _ = choose_candidates(a, SweepSettings(backend=SIM, sample_fraction=0.2, min_sample=8, seed=1))
    assert len(set(other) & set(ca)) / len(ca) < 0.4


def test_only_restricts_a_plan_file_entry_and_refuses_bad_fields(tmp_path):
    import json

    from tilecost.collect.plans import load_plan_file

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"m": 8192, "n": 8192, "k": 8192, "only": {"block_k": [64]}}]))
    (entry,) = load_plan_file(plan)
    assert entry.role is Role.TRAIN
    configs, fraction = choose_candidates(entry, SweepSettings(backend=SIM, sample_fraction=1.0))
    assert configs and {c.block_k for c in configs} == {64}
    assert 0.2 < fraction < 0.5  # BLOCK_K=64 of the 32/64/128 candidates
    # config_id picks exactly the configs listed (the collector benchmark's seeded sample).
    picked = sorted(c.key for c in configs[:3])
    plan.write_text(json.dumps([{"m": 8192, "n": 8192, "k": 8192, "only": {"config_id": picked}}]))
    (entry,) = load_plan_file(plan)
    configs, _ = choose_candidates(entry, SweepSettings(backend=SIM, sample_fraction=1.0))
    assert sorted(c.key for c in configs) == picked

    plan.write_text(json.dumps([{"m": 64, "n": 64, "k": 64, "only": {"block_q": [64]}}]))
    with pytest.raises(ValueError, match="entry 0.*block_q.*block_k"):
        load_plan_file(plan)
    plan.write_text(json.dumps([{"m": 64, "n": 64, "k": 64, "role": "heldout", "only": {"block_k": [64]}}]))
    with pytest.raises(ValueError, match="held-out problem is measured over every candidate"):
        load_plan_file(plan)


def test_a_dataset_behind_a_pyarrow_filesystem_uri_is_written_read_and_resumed(tmp_path):
    # Object stores come in through pyarrow's filesystems: Arrow's in-memory mock filesystem takes the
    # non-local branch (no rename: one write per file, which object stores make visible whole).
    store = DatasetStore("mock:///bucket/measurements")
    assert not store._local
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None)
    assert summary.problems_done == 3
    assert all(f.startswith("bucket/measurements/device_class=h200/") for f in store.files("h200"))
    assert store.read("h200").num_rows == summary.rows
    again = run_sweep(_entries(), store, _settings(), progress_stream=None)
    assert again.problems_skipped == 3 and again.problems_done == 0
    # A local path spelled as a file:// URI is the local filesystem, with atomic renames.
    uri_store = DatasetStore(f"file://{tmp_path}/ds")
    assert uri_store._local
    run_sweep(_entries()[:1], uri_store, _settings(), progress_stream=None)
    assert DatasetStore(tmp_path / "ds").files("h200") == uri_store.files("h200")


# ----------------------------------------------------------------- compiling beside measuring
def _recording_precompile(store, calls, block_after=None):
    """A stand-in for the parallel compiler: records which pattern it was asked for and how many
    problems the dataset held at that moment; marks one config of each pair list as a compile error."""
    from tilecost.collect.compile import CompileResult, problem_pattern
    from tilecost.measurement import Status

    def precompile(pairs, workers=None, stop=None, on_problem=None):
        patterns = sorted({problem_pattern(p) for p, _ in pairs})
        calls.append({"patterns": patterns, "files_then": len(store.files("h200")), "stop": stop})
        if block_after is not None and len(calls) > block_after:
            stop.wait(timeout=30)  # the sweep must set it when it will not measure these pairs
            return {}
        problem, config = pairs[0]
        failed = CompileResult(problem.key, config.key, Status.COMPILE_ERROR, error="stand-in")
        return {(problem.key, config.key): failed}

    return precompile


def test_the_next_group_compiles_while_this_one_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECOST_SIMULATED_DELAY_S", "0.3")
    store = DatasetStore(tmp_path)
    calls: list[dict] = []
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None,
                        precompile_fn=_recording_precompile(store, calls))  # fmt: skip
    assert summary.problems_done == 3
    # two patterns: bf16-nt-16-16 (two problems, first) and fp16-nn-x-x
    assert [c["patterns"] for c in calls] == [["bf16-nt-16-16"], ["fp16-nn-x-x"]]
    assert calls[1]["files_then"] < 2, "the second group was compiled only after the first was measured"
    df = store.read("h200").to_pandas()
    errors = df[df.status == "compile_error"]
    assert len(errors) == 2 and set(errors.error) == {"stand-in"}, "each group's compile results reach its rows"


def _sweep_beside_a_blocking_compile(tmp_path, monkeypatch, delay_s, budget_s):
    """A sweep with a time budget whose second group's compile blocks until the sweep stops it;
    returns the summary, the stand-in's calls, the store and the seconds the sweep took."""
    monkeypatch.setenv("TILECOST_SIMULATED_DELAY_S", str(delay_s))
    store = DatasetStore(tmp_path)
    calls: list[dict] = []
    t0 = time.monotonic()
    summary = run_sweep(_entries(), store, _settings(), progress_stream=None, time_budget_s=budget_s,
                        precompile_fn=_recording_precompile(store, calls, block_after=1))  # fmt: skip
    return summary, calls, store, time.monotonic() - t0


def test_a_sweep_that_stops_early_stops_the_compile_it_started_ahead(tmp_path, monkeypatch):
    summary, calls, _, took = _sweep_beside_a_blocking_compile(tmp_path, monkeypatch, 0.3, 0.1)
    assert summary.stopped_early and summary.problems_done >= 1
    assert len(calls) == 2 and calls[1]["stop"].is_set()
    assert took < 20, "the sweep waited for a compile it did not need"


def test_waiting_for_a_compile_stops_at_the_time_budget(tmp_path, monkeypatch):
    """The next group's compile outlasts the budget: the sweep stops at the budget instead of waiting
    for it (the stand-in blocks for 30 s unless told to stop), and what it measured is kept."""
    summary, calls, store, took = _sweep_beside_a_blocking_compile(tmp_path, monkeypatch, 0.05, 2.0)
    assert summary.stopped_early
    assert summary.problems_done == 2 and len(store.files("h200")) == 2, "the first group was measured and kept"
    assert calls[1]["stop"].is_set()
    assert took < 10, f"the sweep waited {took:.1f} s for a compile past its 2 s budget"


def test_a_shard_index_rotates_the_group_order(tmp_path):
    for first_group, expected in ((0, "bf16-nt-16-16"), (1, "fp16-nn-x-x"), (2, "bf16-nt-16-16")):
        store = DatasetStore(tmp_path / str(first_group))
        calls: list[dict] = []
        run_sweep(_entries(), store, _settings(), progress_stream=None, first_group=first_group,
                  precompile_fn=_recording_precompile(store, calls))  # fmt: skip
        assert calls[0]["patterns"] == [expected]
        assert sorted(c["patterns"][0] for c in calls) == ["bf16-nt-16-16", "fp16-nn-x-x"]


def test_within_a_group_the_cheapest_problems_are_measured_first(tmp_path):
    """A large problem listed first in its group is measured after the small one: a run's first problem,
    never given up, must not be one that outlasts a device call (the tenth session's 1.4e12-flop held-out
    problem was first and never finished)."""
    import io

    big = PlanEntry(Problem(4096, 4096, 4096, DType.BF16, Layout.NT), "layers", Role.TRAIN)
    small = PlanEntry(Problem(64, 256, 512, DType.BF16, Layout.NT), "random", Role.TRAIN)
    stream = io.StringIO()
    run_sweep([big, small], DatasetStore(tmp_path), _settings(), progress_stream=stream)
    text = stream.getvalue()
    assert text.index(small.problem.key) < text.index(big.problem.key)
    cfgs = choose_candidates(big, _settings())[0]
    assert measure_cost(big.problem, cfgs) > measure_cost(small.problem, cfgs)


def test_a_measuring_process_that_never_starts_is_given_up_and_nothing_is_written(tmp_path, monkeypatch):
    """The eleventh session's H200 call 2: a collect printed nothing for 9 minutes, until its hard timeout.
    Whatever hung there, a measuring process that never says it is ready no longer can: the sweep gives up
    on it after ``CHILD_START_TIMEOUT_S`` with an error naming the backend, ends it and writes nothing."""
    import multiprocessing

    import tilecost.collect.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "CHILD_START_TIMEOUT_S", 3.0)
    store = DatasetStore(tmp_path)
    settings = SweepSettings(backend="tests.stuck_backend:stuck_backend", sample_fraction=0.1, min_sample=8)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"sent nothing within 3 s of its start \(tests.stuck_backend"):
        run_sweep(_entries(), store, settings, progress_stream=None)
    assert time.monotonic() - t0 < 20
    assert store.files("h200") == []
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
