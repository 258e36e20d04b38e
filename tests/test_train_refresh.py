"""``tilecost refresh-measured``: an artifact's tuning database rebuilt from a newer dataset, the booster and the
predictor's files kept byte for byte, the sidecar's checksums and ``measured_from`` updated; a dataset that does not
fit the artifact is refused and nothing is written, in place or elsewhere."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, TRAIN_PROBLEMS, problem_rows, write_dataset
from tilecost.cli import main
from tilecost.collect.store import DatasetStore
from tilecost.errors import ArtifactError, DatasetError
from tilecost.predict.artifact import METADATA_FILE, MODEL_FILE, load_artifact
from tilecost.problem import Problem
from tilecost.train import refresh as refresh_module
from tilecost.train.dataset import load_measurements
from tilecost.train.export import MEASURED_FILE
from tilecost.train.pipeline import train_device_class
from tilecost.train.refresh import refresh_every_table, refresh_measured

PARAMS = {"n_estimators": 10, "max_depth": 3, "n_jobs": 1}
NEW_PROBLEMS = (Problem(96, 3000, 640, "bf16", "nt"), Problem(4096, 64, 512, "bf16", "nt"))
LATER = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)


def _prepare(model: bytes, metadata: object, **_: object) -> dict[str, bytes]:
    return {"predictor.json": b'{"format": 1}'}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The dataset an artifact was exported from, and the artifact."""
    base = tmp_path_factory.mktemp("refresh")
    root = write_dataset(base / "ds")
    monkey = pytest.MonkeyPatch()
    monkey.setattr("tilecost.predict.prepare_artifact_files", _prepare)
    try:
        train_device_class(root, "h200", model_params=PARAMS, export_dir=base / "artifact")
    finally:
        monkey.undo()
    return root, base / "artifact"


def _newer(root: Path, target: Path) -> Path:
    """``root`` plus two new problems and a newer run of one held-out problem (every config 7 µs, so its best is
    the config with the smallest key)."""
    shutil.copytree(root, target)
    store = DatasetStore(target)
    for problem in NEW_PROBLEMS:
        store.write_problem("h200", problem, "rnew", problem_rows(problem, "train", run_id="rnew", timestamp=LATER))
    again = HELDOUT_PROBLEMS[0]
    rows = problem_rows(again, "heldout", run_id="rnew", timestamp=LATER, time_us=7.0, status="ok")
    store.write_problem("h200", again, "rnew", rows)
    return target


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_the_table_grows_to_the_newer_dataset_and_nothing_else_changes(exported, tmp_path: Path) -> None:
    root, artifact = exported
    newer = _newer(root, tmp_path / "newer")
    before_meta, before = load_artifact(artifact)

    result = refresh_measured(artifact, newer, out=tmp_path / "out")
    after_meta, after = load_artifact(tmp_path / "out")  # checksums verified
    old, new = json.loads(before[MEASURED_FILE]), json.loads(after[MEASURED_FILE])

    again = HELDOUT_PROBLEMS[0].key
    assert set(new) == set(old) | {p.key for p in NEW_PROBLEMS}
    assert result.added == tuple(sorted(p.key for p in NEW_PROBLEMS)) and result.changed == (again,)
    assert (result.before, result.after) == (len(old), len(old) + 2)
    assert new[again]["time_us"] == 7.0 and new[again]["config_id"] == min(r["config_id"] for r in problem_rows(
        HELDOUT_PROBLEMS[0], "heldout"))  # fmt: skip
    assert all(new[key] == old[key] for key in old if key != again)
    assert after[MODEL_FILE] == before[MODEL_FILE] and after["predictor.json"] == before["predictor.json"]
    assert after_meta.domain == before_meta.domain and after_meta.training == before_meta.training
    assert after_meta.measured_from["dataset_digest"] == load_measurements(newer, "h200").digest
    assert after_meta.measured_from["problems"] == len(new)
    assert before_meta.measured_from["dataset_digest"] == load_measurements(root, "h200").digest  # the export's
    assert _snapshot(artifact) == {**before, METADATA_FILE: (artifact / METADATA_FILE).read_bytes()}  # untouched


def test_a_problem_timed_again_without_a_faster_configuration_keeps_its_best(exported, tmp_path: Path) -> None:
    """A newer run that times more configurations of a problem, none faster, changes how much of its space was
    timed but not its best: the refresh counts it apart from the problems with a new best (the seventieth session's
    H100 model-top round re-timed 1,427 problems and 860 of them got a faster configuration)."""
    root, artifact = exported
    newer = shutil.copytree(root, tmp_path / "newer")
    problem = HELDOUT_PROBLEMS[1]
    timed = {row["config_id"] for row in problem_rows(problem, "heldout")}
    more = [
        row
        for row in problem_rows(problem, "heldout", keep=1.0, run_id="rnew", timestamp=LATER, time_us=1e6)
        if row["config_id"] not in timed
    ]
    assert more
    DatasetStore(newer).write_problem("h200", problem, "rnew", more)

    result = refresh_measured(artifact, newer, out=tmp_path / "out")
    old = json.loads(load_artifact(artifact)[1][MEASURED_FILE])[problem.key]
    new = json.loads(load_artifact(tmp_path / "out")[1][MEASURED_FILE])[problem.key]

    assert (new["config_id"], new["time_us"]) == (old["config_id"], old["time_us"])
    assert new["configs_measured"] == old["configs_measured"] + len(more)
    assert result.changed == () and result.kept == (problem.key,)
    assert "(0 added, 0 with a new best, 1 timed again with the same best)" in result.summary()


def test_in_place_swaps_the_directory_and_leaves_nothing_beside_it(exported, tmp_path: Path) -> None:
    root, artifact = exported
    newer = _newer(root, tmp_path / "newer")
    home = tmp_path / "models"
    shutil.copytree(artifact, home / "h200")

    result = refresh_measured(home / "h200", newer)

    assert result.artifact == home / "h200"
    assert [p.name for p in home.iterdir()] == ["h200"]  # no staging or old directory left
    _, blobs = load_artifact(home / "h200")
    assert set(json.loads(blobs[MEASURED_FILE])) >= {p.key for p in NEW_PROBLEMS}


def test_a_dataset_lacking_problems_of_the_table_is_refused(exported, tmp_path: Path) -> None:
    _, artifact = exported
    smaller = write_dataset(tmp_path / "smaller", train=TRAIN_PROBLEMS[1:])
    before = _snapshot(artifact)

    with pytest.raises(DatasetError, match=rf"lacks 1 of the 11 problems .*{TRAIN_PROBLEMS[0].key}"):
        refresh_measured(artifact, smaller)

    assert _snapshot(artifact) == before


def test_rows_of_another_device_or_triton_version_are_refused(exported, tmp_path: Path) -> None:
    _, artifact = exported
    other = DatasetStore(tmp_path / "other")
    for problem in TRAIN_PROBLEMS + HELDOUT_PROBLEMS:
        other.write_problem("h200", problem, "rx", problem_rows(problem, "train", run_id="rx", sm_count=114))
    newer_triton = DatasetStore(tmp_path / "triton")
    for problem in TRAIN_PROBLEMS + HELDOUT_PROBLEMS:
        newer_triton.write_problem("h200", problem, "ry", problem_rows(problem, "train", triton_version="3.7.0"))
    before = _snapshot(artifact)

    with pytest.raises(DatasetError, match="sm_count=114, the artifact's is 132"):
        refresh_measured(artifact, tmp_path / "other")
    with pytest.raises(DatasetError, match="no rows match .*'triton_version': '3.6.0'"):
        refresh_measured(artifact, tmp_path / "triton")

    assert _snapshot(artifact) == before


def test_out_must_be_a_new_or_empty_directory(exported, tmp_path: Path) -> None:
    root, artifact = exported
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")

    with pytest.raises(ValueError, match="out='.*taken' exists and is not an empty directory"):
        refresh_measured(artifact, root, out=taken)

    assert [p.name for p in taken.iterdir()] == ["notes.txt"]


def test_a_crash_while_writing_leaves_the_old_artifact_whole(
    exported, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, artifact = exported
    newer = _newer(root, tmp_path / "newer")
    home = tmp_path / "models"
    shutil.copytree(artifact, home / "h200")
    before = _snapshot(home / "h200")
    real_save = refresh_module.save_artifact

    def crashing_save(directory: Path, model: bytes, metadata: object, extra: dict[str, bytes]) -> Path:
        real_save(directory, model, metadata, extra)
        (directory / MEASURED_FILE).write_bytes(b"{")  # half written
        raise OSError("disk full")

    monkeypatch.setattr(refresh_module, "save_artifact", crashing_save)
    with pytest.raises(ArtifactError, match=r"could not be written \(disk full\); it is unchanged"):
        refresh_measured(home / "h200", newer)

    assert _snapshot(home / "h200") == before
    assert [p.name for p in home.iterdir()] == ["h200"]
    load_artifact(home / "h200")


def test_cli_refreshes_and_reports_bad_input_in_one_line(
    exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, artifact = exported
    newer = _newer(root, tmp_path / "newer")

    out_dir = str(tmp_path / "o")
    code = main(["refresh-measured", "--artifact", str(artifact), "--dataset", str(newer), "--out", out_dir])
    out = capsys.readouterr().out

    assert code == 0
    assert "11 -> 13 measured problems (2 added, 1 with a new best)" in out
    assert main(["refresh-measured", "--artifact", str(tmp_path / "nowhere"), "--dataset", str(newer)]) == 2
    assert "error:" in capsys.readouterr().err
    assert main(["refresh-measured", "--device-class", "h100", "--dataset", str(newer)]) == 2
    assert "--device-class 'h100' has no shipped model (shipped: h200)" in capsys.readouterr().err
    with pytest.raises(ArtifactError, match="no metadata.json"):
        refresh_measured(tmp_path / "nowhere", newer)


def _with_h100(root: Path, target: Path, problems: tuple[Problem, ...]) -> Path:
    """``root`` plus ``problems`` measured on an H100 (device class ``h100_sxm``, its own partition)."""
    shutil.copytree(root, target)
    store = DatasetStore(target)
    for problem in problems:
        rows = problem_rows(problem, "heldout", run_id="rh", device_class="h100_sxm", gpu_name="NVIDIA H100 80GB HBM3")
        store.write_problem("h100_sxm", problem, "rh", rows)
    return target


def test_another_device_class_s_bests_go_beside_the_artifact_s_own(exported, tmp_path: Path) -> None:
    """``for_device``: the other class's table is written as its own file; the artifact's own table, its
    provenance and every other file stay byte for byte."""
    root, artifact = exported
    measured_there = (TRAIN_PROBLEMS[0], NEW_PROBLEMS[0])
    both = _with_h100(root, tmp_path / "both", measured_there)
    before_meta, before = load_artifact(artifact)

    result = refresh_measured(artifact, both, out=tmp_path / "out", for_device="h100_sxm")

    after_meta, after = load_artifact(tmp_path / "out")  # checksums verified, the new file's too
    assert result.file == "measured-h100_sxm.json" and (result.before, result.after) == (0, 2)
    assert result.added == tuple(sorted(p.key for p in measured_there))
    table = json.loads(after["measured-h100_sxm.json"])
    assert table["device_class"] == "h100_sxm" and set(table["problems"]) == set(result.added)
    assert table["measured_from"]["dataset_digest"] == load_measurements(both, "h100_sxm").digest
    assert {name: after[name] for name in before} == before  # measured.json, the booster, the rest
    assert after_meta.measured_from == before_meta.measured_from
    assert "refreshed measured-h100_sxm.json of " in result.summary()

    # Refreshed again, from a dataset lacking one of them: refused, nothing written.
    fewer = _with_h100(root, tmp_path / "fewer", measured_there[:1])
    written = _snapshot(tmp_path / "out")
    with pytest.raises(DatasetError, match=r"lacks 1 of the 2 problems .*measured-h100_sxm.json holds"):
        refresh_measured(tmp_path / "out", fewer, for_device="h100_sxm")
    with pytest.raises(DatasetError, match="h100_sxm"):  # no H100 rows at all
        refresh_measured(tmp_path / "out", root, for_device="h100_sxm")
    with pytest.raises(ValueError, match=r"for_device='H100' is not a device class key \(as 'h100_sxm'\)"):
        refresh_measured(tmp_path / "out", both, for_device="H100")
    assert _snapshot(tmp_path / "out") == written


def test_cli_for_another_device(exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, artifact = exported
    both = _with_h100(root, tmp_path / "both", (TRAIN_PROBLEMS[0],))
    argv = ["refresh-measured", "--artifact", str(artifact), "--dataset", str(both), "--out", str(tmp_path / "o")]

    assert main([*argv, "--for", "h100_sxm"]) == 0
    out = capsys.readouterr().out
    assert "refreshed measured-h100_sxm.json of " in out and "0 -> 1 measured problems (1 added" in out
    assert main([*argv[:-1], str(tmp_path / "o2"), "--for", "H100"]) == 2
    assert "for_device='H100' is not a device class key" in capsys.readouterr().err


def test_an_export_carries_the_other_device_classes_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tilecost train --export-dir``: the other device classes the dataset holds, of the same Triton release, go
    into the artifact as their own tables; a class of another release does not."""
    root = write_dataset(tmp_path / "ds")
    store = DatasetStore(root)
    h100 = TRAIN_PROBLEMS[0]
    store.write_problem("h100_sxm", h100, "rh", problem_rows(h100, "heldout", run_id="rh", device_class="h100_sxm"))
    older = problem_rows(h100, "heldout", run_id="rb", device_class="b200", triton_version="3.5.0")
    store.write_problem("b200", h100, "rb", older)
    monkeypatch.setattr("tilecost.predict.prepare_artifact_files", _prepare)

    result = train_device_class(root, "h200", model_params=PARAMS, export_dir=tmp_path / "artifact")

    _, files = load_artifact(tmp_path / "artifact")
    assert "measured-h100_sxm.json" in result.artifact_files and "measured-b200.json" not in files
    table = json.loads(files["measured-h100_sxm.json"])
    assert table["device_class"] == "h100_sxm" and list(table["problems"]) == [h100.key]
    assert table["measured_from"]["dataset_digest"] == load_measurements(root, "h100_sxm").digest


def test_every_table_is_refreshed_and_one_that_cannot_be_is_kept(exported, tmp_path: Path) -> None:
    """``refresh_every_table`` (the nightly's export step when the champion stays): the artifact's own table, then
    every other device class's the artifact holds or the dataset has rows of; a held table the dataset cannot refresh
    stays byte for byte, and a class of another Triton release gets no table; each is said."""
    root, artifact = exported
    work = tmp_path / "artifact"
    shutil.copytree(artifact, work)
    refresh_measured(work, _with_h100(root, tmp_path / "one", TRAIN_PROBLEMS[:1]), for_device="h100_sxm")
    newer = _with_h100(_newer(root, tmp_path / "newer"), tmp_path / "both", (TRAIN_PROBLEMS[0], NEW_PROBLEMS[0]))
    older = problem_rows(NEW_PROBLEMS[1], "heldout", run_id="rb", device_class="b200", triton_version="3.5.0")
    DatasetStore(newer).write_problem("b200", NEW_PROBLEMS[1], "rb", older)

    results, not_refreshed = refresh_every_table(work, newer)

    assert [r.file for r in results] == [MEASURED_FILE, "measured-h100_sxm.json"]
    assert results[0].added == tuple(sorted(p.key for p in NEW_PROBLEMS))
    assert (results[1].before, results[1].after, results[1].added) == (1, 2, (NEW_PROBLEMS[0].key,))
    _, files = load_artifact(work)
    assert set(json.loads(files["measured-h100_sxm.json"])["problems"]) == {TRAIN_PROBLEMS[0].key, NEW_PROBLEMS[0].key}
    assert "measured-b200.json" not in files
    assert len(not_refreshed) == 1 and not_refreshed[0].startswith("b200: no table added (")

    # A dataset without the H100's rows: the own table refreshed, the H100's kept as it was, and said.
    table = files["measured-h100_sxm.json"]
    results, not_refreshed = refresh_every_table(work, _newer(root, tmp_path / "h200-only"))
    _, files = load_artifact(work)
    assert [r.file for r in results] == [MEASURED_FILE] and files["measured-h100_sxm.json"] == table
    assert len(not_refreshed) == 1 and not_refreshed[0].startswith("measured-h100_sxm.json kept as it was (")
    assert "h100_sxm" in not_refreshed[0].split("(", 1)[1]


def test_cli_all_refreshes_every_table_in_place(exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, artifact = exported
    work = tmp_path / "artifact"
    shutil.copytree(artifact, work)
    both = _with_h100(root, tmp_path / "both", (TRAIN_PROBLEMS[0],))
    argv = ["refresh-measured", "--artifact", str(work), "--dataset", str(both)]

    assert main([*argv, "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("refreshed measured.json of ") and "0 -> 1 measured problems" in lines[1]
    assert lines[1].startswith("refreshed measured-h100_sxm.json of ") and len(lines) == 2
    _, files = load_artifact(work)
    assert list(json.loads(files["measured-h100_sxm.json"])["problems"]) == [TRAIN_PROBLEMS[0].key]
    written = _snapshot(work)
    assert main([*argv, "--all", "--out", str(tmp_path / "elsewhere")]) == 2
    assert "--all refreshes the artifact in place, every table" in capsys.readouterr().err
    assert main([*argv, "--all", "--for", "h100_sxm"]) == 2
    assert _snapshot(work) == written and not (tmp_path / "elsewhere").exists()
