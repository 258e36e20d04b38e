"""The device queue: the next plan of each device class from real Parquet files written by the dataset store,
and the call's shell command run by bash with a stand-in nvidia-smi and round script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_train_fixtures import problem_rows
from tilecost import DType, Layout, Problem
from tilecost.collect.queue import (
    QueueEntry,
    add_entry,
    device_command,
    keep_runs,
    load_queue,
    next_entries,
    next_entry,
    planned_keys,
    progress,
)
from tilecost.collect.store import DatasetStore

REPO = Path(__file__).resolve().parents[1]
P1 = [Problem(64, 256, 512), Problem(100, 200, 300), Problem(48, 512, 256)]
P2 = [Problem(32, 128, 256, DType.FP16, Layout.NN), Problem(16, 64, 128, DType.FP16, Layout.NN)]


def _plan(root: Path, name: str, problems: list[Problem]) -> str:
    items = [{"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype.value, "layout": p.layout.value} for p in problems]
    (root / "plans").mkdir(exist_ok=True)
    (root / "plans" / name).write_text(json.dumps(items))
    return f"plans/{name}"


def _queue(root: Path) -> Path:
    p1, p2 = _plan(root, "p1.json", P1), _plan(root, "p2.json", P2)
    queue = {
        "device_classes": [
            {"device_class": "h200", "gpu_name": "H200", "entries": [{"plan": p2, "run_id": "rc", "sample": 0.25}]},
            {"device_class": "h100_sxm", "gpu_name": "H100", "entries": [
                {"plan": p1, "run_id": "ra", "sample": 1.0}, {"plan": p2, "run_id": "rb", "sample": 0.25}]},
        ]
    }  # fmt: skip
    path = root / "queue.json"
    path.write_text(json.dumps(queue))
    return path


def _sweep(store: DatasetStore, problems: list[Problem], run_id: str, device_class: str = "h100_sxm") -> None:
    """``run_id``'s files of ``problems``, one per problem as a sweep writes them (an H100's rows as the
    refresh tests write them: the simulated backend is an H200's)."""
    gpu = {"h200": "NVIDIA H200", "h100_sxm": "NVIDIA H100 80GB HBM3"}[device_class]
    for problem in problems:
        rows = problem_rows(problem, "heldout", keep=0.02, run_id=run_id, device_class=device_class, gpu_name=gpu)
        store.write_problem(device_class, problem, run_id, rows)


def _heads(root: Path, store: DatasetStore) -> dict:
    return {q.device_class: next_entry(progress(q, store, root)) for q in load_queue(root / "queue.json")}


def _pending(root: Path, store: DatasetStore, plans: int = 3) -> dict:
    return {q.device_class: next_entries(progress(q, store, root), plans) for q in load_queue(root / "queue.json")}


def test_the_next_plan_is_the_first_its_run_has_not_finished_and_compaction_keeps_it_so(tmp_path) -> None:
    _queue(tmp_path)
    store = DatasetStore(tmp_path / "data")
    _sweep(store, P1[:2], "ra")
    _sweep(store, P2, "rx")  # another run's rows of rb's problems: rb still lacks them (the sweep's own test)
    _sweep(store, P2[:1], "rb", "h200")  # and so do another device class's

    heads = _heads(tmp_path, store)
    assert (heads["h100_sxm"].entry.run_id, heads["h100_sxm"].measured, heads["h100_sxm"].left) == ("ra", 2, 1)
    assert (heads["h200"].entry.run_id, heads["h200"].left) == ("rc", 2)
    assert keep_runs(_pending(tmp_path, store)) == ["rc", "ra", "rb"]  # every run a call may take
    assert keep_runs(_pending(tmp_path, store, plans=1)) == ["rc", "ra"]

    _sweep(store, P1[2:], "ra")
    store.compact_run("h100_sxm", "ra")  # a compacted run's problems stay measured
    heads = _heads(tmp_path, store)
    assert (heads["h100_sxm"].entry.run_id, heads["h100_sxm"].left) == ("rb", 2)

    _sweep(store, P2, "rb")
    heads = _heads(tmp_path, store)
    assert heads["h100_sxm"] is None and keep_runs(_pending(tmp_path, store)) == ["rc"]
    assert 'H100*) echo "the h100_sxm queue is done"; exit 4;;' in device_command(
        load_queue(tmp_path / "queue.json"), _pending(tmp_path, store)
    )


def test_the_planned_keys_are_every_plan_of_the_class_measured_or_not(tmp_path) -> None:
    queues = load_queue(_queue(tmp_path))  # the plans alone decide: a measured problem stays planned
    assert planned_keys(queues, "h100_sxm", tmp_path) == {p.key for p in P1 + P2}
    assert planned_keys(queues, "h200", tmp_path) == {p.key for p in P2}
    assert planned_keys(queues, "a100", tmp_path) == frozenset()  # a class the queue does not list


def test_the_runs_kept_are_the_calls_plans_then_every_other_started_run(tmp_path) -> None:
    _queue(tmp_path)
    store = DatasetStore(tmp_path / "data")
    _sweep(store, P1[:2], "ra")
    _sweep(store, P2[:1], "rb")  # rb started too, beyond a one-plan call
    states = {q.device_class: progress(q, store, tmp_path) for q in load_queue(tmp_path / "queue.json")}

    assert keep_runs(_pending(tmp_path, store, plans=1), states) == ["rc", "ra", "rb"]
    assert keep_runs(_pending(tmp_path, store), states) == ["rc", "ra", "rb"]  # each once
    _sweep(store, P2[1:], "rb")  # a finished run has nothing to resume
    states = {q.device_class: progress(q, store, tmp_path) for q in load_queue(tmp_path / "queue.json")}
    assert keep_runs(_pending(tmp_path, store, plans=1), states) == ["rc", "ra"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_slimmed_tree_names_the_runs_it_leaves_behind_and_the_round_script_refuses_to_resume_them(tmp_path) -> None:
    repo = tmp_path / "repo"

    def sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=repo, env={**os.environ, **env}, capture_output=True, text=True, check=False)

    for script in ("scripts/device_tree.sh", "benchmarks/h200_round.sh"):
        (repo / script).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / script, repo / script)
    part = repo / "datasets/measurements/device_class=h100_sxm/dtype=bf16/layout=nt"
    part.mkdir(parents=True)
    for name in ("64x64x64-bf16-nt--ra.parquet", "rb.parquet", "32x32x32-bf16-nt--rx.parquet"):
        (part / name).write_bytes(b"PAR1")
    sh("git", "init", "-q")
    sh("git", "add", "-A")
    sh("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree")

    slim = sh("bash", "scripts/device_tree.sh", "slim", SLIM_PATHS="datasets/measurements", SLIM_KEEP_RUNS="ra")

    assert slim.returncode == 0, slim.stderr
    assert (repo / ".device-slim").read_text() == "rb\nrx\n"
    tracked = sh("git", "ls-files").stdout.split()
    assert any(f.endswith("--ra.parquet") for f in tracked) and not any("rb" in f or "rx" in f for f in tracked)
    assert ".device-slim" in sh("git", "ls-files", "-o", "--exclude-standard").stdout  # it travels
    refused = sh("bash", "benchmarks/h200_round.sh", "collect", RUN_ID="rb", OUT=str(tmp_path / "out"))
    assert refused.returncode == 5 and "refused: run rb's files were left out" in refused.stdout
    kept = sh("bash", "benchmarks/h200_round.sh", "collect", RUN_ID="ra", OUT=str(tmp_path / "o2"), PATH="/bin")
    assert kept.returncode != 5 and "refused" not in kept.stdout  # past the guard (then no install here: exit 1)

    restored = sh("bash", "scripts/device_tree.sh", "restore")
    assert restored.returncode == 0 and not (repo / ".device-slim").exists()
    assert len(sh("git", "ls-files").stdout.split()) == 5 and sh("git", "status", "--short").stdout == ""


def _run(command: str, root: Path, gpu: str, round_script: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command as the device machine runs it: bash in the repo root, $OUT set, a stand-in nvidia-smi and
    round script that print what they were given (or ``round_script``)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho '{gpu}'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    (root / "benchmarks").mkdir(exist_ok=True)
    (root / "benchmarks" / "h200_round.sh").write_text(round_script or 'echo "step=$1 OUT=$OUT TOTAL_S=$TOTAL_S '
                                                       'RUN_ID=$RUN_ID SAMPLE=$SAMPLE ARGS=$ARGS"\n')  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(root / "out")}
    return subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, check=False)


def test_the_command_takes_the_branch_of_the_gpu_it_finds_and_its_plans_in_order(tmp_path) -> None:
    queues = load_queue(_queue(tmp_path))
    store = DatasetStore(tmp_path / "data")
    _sweep(store, P1[:1], "ra")
    command = device_command(queues, _pending(tmp_path, store), total_s=300)
    out = tmp_path / "out"

    h100 = _run(command, tmp_path, "NVIDIA H100 80GB HBM3")
    assert h100.returncode == 0, h100.stderr
    lines = h100.stdout.splitlines()
    assert lines[0] == "GPU: NVIDIA H100 80GB HBM3"
    ra, rb = (line.split(" ", 3) for line in lines[-2:])  # step, OUT, TOTAL_S, the rest
    flags = "--device-class h100_sxm"
    assert ra[1] == f"OUT={out}/ra" and ra[3] == f"RUN_ID=ra SAMPLE=1.0 ARGS=--plan plans/p1.json {flags}"
    assert rb[1] == f"OUT={out}/rb" and rb[3] == f"RUN_ID=rb SAMPLE=0.25 ARGS=--plan plans/p2.json {flags}"
    assert 290 <= int(ra[2].removeprefix("TOTAL_S=")) <= 300 and int(rb[2].removeprefix("TOTAL_S=")) <= 300
    h200 = _run(command, tmp_path, "NVIDIA H200")
    assert h200.stdout.splitlines()[-1].endswith("RUN_ID=rc SAMPLE=0.25 ARGS=--plan plans/p2.json --device-class h200")
    assert _run(command, tmp_path, "NVIDIA A100-SXM4-80GB").returncode == 3
    one = device_command(queues, _pending(tmp_path, store, plans=1), total_s=300)
    assert "RUN_ID=ra" in _run(one, tmp_path, "NVIDIA H100 80GB HBM3").stdout.splitlines()[-1]
    assert "rb" not in one


def test_a_plan_starts_only_with_time_left_and_only_the_newest_archive_comes_back(tmp_path) -> None:
    queues = load_queue(_queue(tmp_path))
    pending = _pending(tmp_path, DatasetStore(tmp_path / "data"))
    command = device_command(queues, pending, total_s=15, plan_start_s=10)  # 150 s and more, scaled down
    # each plan writes its logs and the machine's cumulative archive, and takes 6 s
    slow = 'mkdir -p "$OUT"; echo "$RUN_ID" > "$OUT/run.log"; sleep 6; echo "$RUN_ID" > "$OUT/measurements.tgz"\n'

    result = _run(command, tmp_path, "NVIDIA H100 80GB HBM3", slow)

    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert (out / "ra" / "run.log").exists() and not (out / "rb").exists()  # 9 s left after ra: rb not started
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.tgz")) == ["ra/measurements.tgz"]

    two = device_command(queues, pending, total_s=30, plan_start_s=10)
    shutil.rmtree(out)
    result = _run(two, tmp_path, "NVIDIA H100 80GB HBM3", slow)
    assert (out / "ra" / "run.log").exists() and (out / "rb" / "run.log").exists()
    assert [p.relative_to(out).as_posix() for p in out.rglob("*.tgz")] == ["rb/measurements.tgz"]  # the newest


def test_a_round_script_that_fails_stops_the_call_with_its_exit_status(tmp_path) -> None:
    queues = load_queue(_queue(tmp_path))
    command = device_command(queues, _pending(tmp_path, DatasetStore(tmp_path / "data")), total_s=300)
    failing = 'echo "ran $RUN_ID"; exit 7\n'

    result = _run(command, tmp_path, "NVIDIA H100 80GB HBM3", failing)

    assert result.returncode == 7 and result.stdout.splitlines()[-1] == "ran ra"  # rb never started


def _cls(queue: dict, i: int) -> dict:
    return queue["device_classes"][i]


def _entry(queue: dict, i: int, j: int) -> dict:
    return queue["device_classes"][i]["entries"][j]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda q: _entry(q, 1, 0).pop("run_id"), r"device_classes\[1\]\.entries\[0\]: lacks 'run_id'"),
        (lambda q: _entry(q, 1, 1).update(sample=0), r"entries\[1\]: sample=0 must be a number in \(0, 1\]"),
        (lambda q: _entry(q, 0, 0).update(sample=True), r"sample=True must be a number"),
        (lambda q: _cls(q, 0).update(device_class="a100"), r"device_class='a100'; use one of \['h100_sxm', 'h200'\]"),
        (lambda q: _entry(q, 0, 0).update(run_id="r--1"), r"run_id='r--1' is not allowed"),
        (lambda q: _entry(q, 0, 0).update(plan="plans/a b.json"), r"plan='plans/a b.json' is not allowed"),
        (lambda q: _cls(q, 1).update(device_class="h200"), r"a device class is listed twice"),
        (lambda q: _entry(q, 1, 1).update(run_id="rc"), r"run_id 'rc' is listed twice"),
        (lambda q: q.pop("device_classes"), r"needs a non-empty list 'device_classes'"),
        (lambda q: q["device_classes"].__setitem__(1, "h100"), r"device_classes\[1\] must be an object"),
        (lambda q: _cls(q, 0)["entries"].__setitem__(0, 3), r"device_classes\[0\]\.entries\[0\] must be an object"),
    ],
)  # fmt: skip
def test_a_malformed_queue_is_refused_naming_the_entry_and_the_field(tmp_path, change, message) -> None:
    path = _queue(tmp_path)
    queue = json.loads(path.read_text())
    change(queue)
    path.write_text(json.dumps(queue))
    with pytest.raises(ValueError, match=message):
        load_queue(path)


def test_an_added_plan_goes_before_the_run_named_or_last_and_the_next_call_takes_it(tmp_path) -> None:
    path = _queue(tmp_path)
    p3 = _plan(tmp_path, "p3.json", [Problem(256, 256, 256, DType.FP32, Layout.NT)])
    p4 = _plan(tmp_path, "p4.json", [Problem(128, 128, 128)])
    store = DatasetStore(tmp_path / "data")
    _sweep(store, P1, "ra")
    path.chmod(0o644)
    mode = path.stat().st_mode & 0o777

    assert add_entry(path, "h100_sxm", QueueEntry(p3, "rd", 1.0), before="rb", root=tmp_path) == 1
    assert add_entry(path, "h200", QueueEntry(p4, "re", 0.5), root=tmp_path) == 1

    queues = {q.device_class: q for q in load_queue(path)}
    assert [e.run_id for e in queues["h100_sxm"].entries] == ["ra", "rd", "rb"]
    assert queues["h100_sxm"].entries[1] == QueueEntry(p3, "rd", 1.0)
    assert [e.run_id for e in queues["h200"].entries] == ["rc", "re"]
    assert [p.entry.run_id for p in _pending(tmp_path, store)["h100_sxm"]] == ["rd", "rb"]
    assert path.stat().st_mode & 0o777 == mode
    written = json.loads(path.read_text())["device_classes"][1]["entries"][1]
    assert written == {"plan": p3, "run_id": "rd", "sample": 1.0}


@pytest.mark.parametrize(
    ("device_class", "entry", "before", "message"),
    [
        ("a100", ("plans/p1.json", "rz", 1.0), None, r"device_class='a100' is not in the queue; use one of \['h200'"),
        ("h100_sxm", ("plans/p2.json", "rc", 1.0), None, r"run_id='rc' is already in the queue"),
        ("h100_sxm", ("plans/none.json", "rz", 1.0), None, r"plan file .*none.json: .*No such file"),
        ("h100_sxm", ("plans/empty.json", "rz", 1.0), None, r"plan file plans/empty.json: holds no problem"),
        ("h100_sxm", ("plans/p1.json", "r z", 1.0), None, r"run_id='r z' is not allowed"),
        ("h100_sxm", ("plans/p1.json", "rz", 1.5), None, r"sample=1.5 must be a number in \(0, 1\]"),
        ("h100_sxm", ("plans/p1.json", "rz", 1.0), "rc", r"before='rc' is not a run of the h100_sxm queue; use one"),
    ],
)  # fmt: skip
def test_a_bad_addition_is_refused_naming_the_field_and_leaves_the_queue_as_it_was(
    tmp_path, device_class, entry, before, message
) -> None:
    path = _queue(tmp_path)
    _plan(tmp_path, "empty.json", [])
    before_text = path.read_text()
    with pytest.raises(ValueError, match=message):
        add_entry(path, device_class, QueueEntry(*entry), before=before, root=tmp_path)
    assert path.read_text() == before_text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plans", "queue.json"]


def test_the_script_adds_a_plan_and_lists_the_queue_with_it(tmp_path) -> None:
    path = _queue(tmp_path)
    p3 = _plan(tmp_path, "p3.json", [Problem(256, 256, 256, DType.FP32, Layout.NT)])

    added = _script(tmp_path, "--add", p3, "rd", "1", "--device-class", "h100_sxm", "--before", "rb")
    refused = _script(tmp_path, "--add", p3, "rf", "most", "--device-class", "h100_sxm")
    unpaired = _script(tmp_path, "--add", p3, "rf", "1")

    assert added.returncode == 0, added.stderr
    assert "added rd (plans/p3.json, sample 1) to the h100_sxm queue at 2" in added.stderr
    assert "  then  rd          0 of 1    plans/p3.json (sample 1)" in added.stdout
    assert [e.run_id for e in load_queue(path)[1].entries] == ["ra", "rd", "rb"]
    assert refused.returncode == 2 and "sample='most' must be a number in (0, 1]" in refused.stderr
    assert unpaired.returncode == 2 and "--add and --device-class go together" in unpaired.stderr
    assert [e.run_id for e in load_queue(path)[1].entries] == ["ra", "rd", "rb"]


def test_a_call_longer_than_the_device_tool_allows_is_refused(tmp_path) -> None:
    queues = load_queue(_queue(tmp_path))
    pending = _pending(tmp_path, DatasetStore(tmp_path / "data"))
    with pytest.raises(ValueError, match="total_s=600 must be 155-590"):
        device_command(queues, pending, total_s=600)
    with pytest.raises(ValueError, match="total_s=100 must be 155-590 .* a plan starts only with 150 s left"):
        device_command(queues, pending, total_s=100)
    with pytest.raises(ValueError, match="plans=4 must be 1-3"):
        next_entries(progress(queues[1], DatasetStore(tmp_path / "data"), tmp_path), 4)


def _script(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``scripts/device_queue.py`` as a session runs it, on the test's queue, plans and dataset."""
    script = REPO / "scripts" / "device_queue.py"
    args = ["--queue", str(tmp_path / "queue.json"), "--dataset", str(tmp_path / "data"), "--root", str(tmp_path)]
    return subprocess.run([sys.executable, str(script), *args, *flags], capture_output=True, text=True, check=False)


def test_the_script_lists_each_plan_and_prints_the_runs_to_keep_and_the_command(tmp_path) -> None:
    _queue(tmp_path)
    _sweep(DatasetStore(tmp_path / "data"), P1[:2], "ra")

    listing = _script(tmp_path)
    keep = _script(tmp_path, "--keep-runs", "--plans", "1")
    command = _script(tmp_path, "--command", "--total-s", "200")

    assert listing.returncode == 0, listing.stderr
    assert "  next  ra          2 of 3    plans/p1.json (sample 1)" in listing.stdout
    assert "  then  rb          0 of 2    plans/p2.json (sample 0.25)" in listing.stdout
    assert 'SLIM_KEEP_RUNS="rc ra rb"' in listing.stdout
    assert keep.stdout.strip() == "rc ra"
    assert command.stdout.strip() == device_command(
        load_queue(tmp_path / "queue.json"), _pending(tmp_path, DatasetStore(tmp_path / "data")), total_s=200
    )


def test_the_script_refuses_a_bad_queue_or_call_with_exit_status_2(tmp_path) -> None:
    path = _queue(tmp_path)
    assert "total_s=20 must be 155-590" in _script(tmp_path, "--total-s", "20").stderr
    assert _script(tmp_path, "--plans", "0").returncode == 2
    path.write_text(json.dumps({"device_classes": []}))
    refused = _script(tmp_path)
    assert refused.returncode == 2 and refused.stderr.startswith("device_queue: queue file")
