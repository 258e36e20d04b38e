"""The opt-in log of flagged queries: what it records, its bound, and that it never raises into a caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilecost import DType, Layout, OODReason, OODVerdict, Predictor, Problem
from tilecost.predict import QueryLog

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules

FLAGGED = OODVerdict((OODReason.SPARSE_NEIGHBOURHOOD,), 2.5)


def test_only_flagged_verdicts_are_appended_as_json_lines(tmp_path: Path) -> None:
    log = QueryLog(tmp_path / "logs" / "queries.jsonl")  # the directory is created on the first record

    assert log.record(Problem(1, 2, 3), OODVerdict()) is False
    assert not (tmp_path / "logs").exists()
    assert log.record(Problem(4, 5, 6), FLAGGED) is True

    (line,) = (tmp_path / "logs" / "queries.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["problem"] == "4x5x6-bf16-nt" and entry["reasons"] == ["sparse_neighbourhood"]
    assert entry["distance_log2"] == 2.5 and entry["time"] > 0


def test_flagged_lists_distinct_problems_newest_first_and_skips_bad_lines(tmp_path: Path) -> None:
    log = QueryLog(tmp_path / "q.jsonl")
    for problem in (Problem(1, 1, 1), Problem(2, 2, 2), Problem(1, 1, 1), Problem(3, 3, 3, "fp16", "nn")):
        log.record(problem, FLAGGED)
    with open(tmp_path / "q.jsonl", "a") as handle:
        handle.write("not json\n" + json.dumps({"problem": "0x1x1-bf16-nt"}) + '\n{"no": 1}\n')

    assert log.flagged() == [Problem(3, 3, 3, "fp16", "nn"), Problem(1, 1, 1), Problem(2, 2, 2)]
    assert QueryLog(tmp_path / "missing.jsonl").flagged() == []


def test_the_file_never_holds_more_than_max_entries_lines(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    log = QueryLog(path, max_entries=10)

    for m in range(1, 36):
        log.record(Problem(m, 8, 8), FLAGGED)
        assert len(path.read_text().splitlines()) <= 10

    # Past 10 lines the newest 5 are kept, so the newest problems survive, the oldest are gone.
    flagged = log.flagged()
    assert flagged[0] == Problem(35, 8, 8) and Problem(1, 8, 8) not in flagged
    # A second writer (another process) counts the existing lines before appending.
    other = QueryLog(path, max_entries=10)
    for m in range(100, 120):
        other.record(Problem(m, 8, 8), FLAGGED)
    assert len(path.read_text().splitlines()) <= 10
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_io_errors_are_counted_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    log = QueryLog(blocker / "queries.jsonl")  # its parent is a file: every write fails

    assert log.record(Problem(1, 1, 1), FLAGGED) is False
    assert log.errors == 1 and log.flagged() == []
    with pytest.raises(ValueError, match="max_entries"):
        QueryLog(tmp_path / "q.jsonl", max_entries=1)


def test_the_predictor_logs_flagged_model_answers_only(artifact: Path, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    predictor = Predictor.load(artifact, triton_version=None, query_log=path)
    far, measured_problem = (1, 4096, 262144), next(iter(predictor.measured))

    assert predictor.predict_best(far).ood  # out of the training range: flagged
    predictor.predict_best(far)  # a cache hit is not logged again
    predictor.predict_best(Problem.from_key(measured_problem))  # measured: nothing to learn

    assert predictor.query_log is not None and predictor.query_log.flagged() == [Problem(*far)]
    assert len(path.read_text().splitlines()) == 1


def test_the_environment_variable_enables_the_log(
    artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECOST_QUERY_LOG", str(tmp_path / "env.jsonl"))
    predictor = Predictor.load(artifact, triton_version=None)
    monkeypatch.delenv("TILECOST_QUERY_LOG")

    predictor.predict_best((65536, 65536, 65536))

    assert isinstance(predictor.query_log, QueryLog)
    assert QueryLog(tmp_path / "env.jsonl").flagged() == [Problem(65536, 65536, 65536)]
    assert Predictor.load(artifact, triton_version=None).query_log is None


def test_flagged_skips_and_counts_every_malformed_line(tmp_path: Path) -> None:
    """A log another tool or a torn write left malformed: the good lines are read, every other one skipped."""
    path = tmp_path / "q.jsonl"
    good = [
        json.dumps({"problem": key, "reasons": ["sparse_neighbourhood"]}) for key in ("1x2x3-bf16-nt", "4x5x6-fp16-nn")
    ]
    bad = [
        '{"problem": 5}',
        '{"problem": null}',
        '{"problem": ["1x2x3-bf16-nt"]}',
        '{"problem": {"m": 1}}',
        '{"problem": "1x2x3-bf16-tn"}',  # an unknown layout
        '["1x2x3-bf16-nt"]',
        '"1x2x3-bf16-nt"',
        "42",
        "null",
        '{"problem": "7x8x9-bf16-nt"',  # torn
        "[" * 100_000,  # deeper than the json module recurses
    ]
    path.write_bytes("\n".join([good[0], *bad[:6], good[1], *bad[6:]]).encode() + b"\n\xff\xfe not utf-8\n")
    log = QueryLog(path)

    assert log.flagged() == [Problem(4, 5, 6, DType.FP16, Layout.NN), Problem(1, 2, 3)]
    assert log.skipped == len(bad) + 1
    assert log.record(Problem(1, 2, 3), FLAGGED) and log.flagged()[0] == Problem(1, 2, 3)
