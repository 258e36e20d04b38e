"""``tilecost nightly`` end to end on CPU: the simulated timer, real Parquet, a real sqlite MLflow store in a
temporary directory. A tiny plan (three problems, a few configs each) keeps a night to a few seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.test_train_fixtures import TRAIN_PROBLEMS, problem_rows, write_dataset
from tilecost.cli import main
from tilecost.collect.simulated import SIMULATED_GPU_NAME
from tilecost.collect.store import DatasetStore
from tilecost.train.nightly import EXIT_DRIFT, EXIT_OK, NightlyError, NightlySettings, Step, prepare_store
from tilecost.train.nightly_steps import check_dataset_kind

pytest.importorskip("mlflow")
pytest.importorskip("xgboost")

SIM = "tilecost.collect.simulated:simulated_backend"
SLOWER = "tests.nightly_backends:slower_simulated_backend"
TINY = [
    "--device-class", "h200", "--family", "random=2", "--family", "decode=1", "--sentinels", "2",
    "--sentinel-configs", "6", "--min-sample", "8", "--sample-fraction", "0.02", "--param", "n_estimators=20",
    "--param", "max_depth=4", "--param", "n_jobs=1", "--no-env-shard",
]  # fmt: skip


def _night(base: Path, night: str, *extra: str, backend: str = SIM) -> list[str]:
    return ["nightly", "--backend", backend, "--dataset", str(base / "measurements"), "--state-dir",
            str(base / "state"), "--night", night, *TINY, *extra]  # fmt: skip


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out.strip().splitlines()[-1]


def _versions(base: Path) -> list[int]:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{base / 'state' / 'mlflow-simulated.db'}")
    return sorted(int(v.version) for v in client.search_model_versions("name='tilecost-h200'"))


def _record(base: Path, night: str, step: str) -> dict:
    return json.loads((base / "state" / night / "steps" / f"{step}.json").read_text())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    """A scratch directory as the working directory (MLflow must not write into the repository)."""
    base = tmp_path_factory.mktemp("nightly")
    monkey = pytest.MonkeyPatch()
    monkey.chdir(base)
    monkey.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkey.delenv("TILECOST_QUERY_LOG", raising=False)
    yield base
    monkey.undo()


@pytest.fixture(scope="module")
def first_night(workdir: Path):
    # The export's smallest shortlist sampling (4,000 shapes, its per-group floor): 384,000 by default took 360 s
    # of the suite's time on the tiny model (2026-12-02); the export code run is the same.
    code = main(_night(workdir, "2026-11-29", "--export-timeout-s", "600", "--export-samples", "4000"))
    return workdir, code


def test_first_night_runs_every_step_promotes_and_exports(first_night, capsys) -> None:
    base, code = first_night
    assert code == EXIT_OK
    for step in ("plan", "sentinels", "collect", "train", "export", "report"):
        assert (base / "state" / "2026-11-29" / "steps" / f"{step}.json").is_file(), step
    train = _record(base, "2026-11-29", "train")
    assert train["promoted"] and train["decision"] == "no champion yet" and train["simulated"]
    assert train["tracking_uri"].endswith("state/mlflow-simulated.db")
    assert _versions(base) == [1]
    # Everything written is labelled simulated, under tonight's run id.
    files = DatasetStore(base / "measurements").files("h200")
    assert files and all(f.endswith("--n20261129.parquet") for f in files)
    assert {pq.read_table(f, columns=["gpu_name"]).column(0)[0].as_py() for f in files} == {SIMULATED_GPU_NAME}
    # The exported artifact is the champion's and loads.
    from tilecost.train.loading import load_artifact_model

    export = _record(base, "2026-11-29", "export")
    assert export["ok"] and export["model_version"] == "1"
    model, metadata = load_artifact_model(export["directory"])
    assert metadata.fingerprint["gpu_name"] == SIMULATED_GPU_NAME
    lists = json.loads((Path(export["directory"]) / "predictor.json").read_text())["groups"]["bf16-nt"]["grid"]
    assert lists["samples"] == 4000  # --export-samples reached the export
    assert metadata.ood["labels"] == "answers"  # its flags fitted on its own predictor's held-out answers
    report = (base / "state" / "2026-11-29" / "report.md").read_text()
    assert report.startswith("# tilecost nightly 2026-11-29: SIMULATED")
    assert "PROMOTED (no champion yet)" in report
    assert (base / "state" / "2026-11-29" / "report" / "index.html").is_file()


def test_the_same_night_again_resumes_and_repeats_nothing(first_night, capsys) -> None:
    base, _ = first_night
    files = DatasetStore(base / "measurements").files("h200")

    code, summary = _run(_night(base, "2026-11-29"), capsys)

    assert code == EXIT_OK
    assert summary.startswith("SIMULATED nightly 2026-11-29: plan reused, sentinels reused, collect reused, "
                              "train reused, export reused, report done; ok")  # fmt: skip
    assert DatasetStore(base / "measurements").files("h200") == files
    assert _versions(base) == [1]


def test_drift_on_the_sentinels_stops_training_until_accepted(first_night, capsys) -> None:
    base, _ = first_night

    code, summary = _run(_night(base, "2026-11-30", "--export", "skip", backend=SLOWER), capsys)

    assert code == EXIT_DRIFT
    assert "train blocked" in summary and "DRIFT" in summary
    drift = _record(base, "2026-11-30", "sentinels")["drift"]
    assert drift["status"] == "drift" and drift["reference_night"] == "2026-11-29"
    assert all(s["shift_ratio"] == pytest.approx(1.25, rel=0.01) for s in drift["sentinels"])
    assert _versions(base) == [1]  # nothing trained, nothing registered
    assert "not training on it" in (base / "state" / "2026-11-30" / "report.md").read_text()

    code, summary = _run(_night(base, "2026-11-30", "--export", "skip", "--accept-drift", backend=SLOWER), capsys)

    assert code == EXIT_OK and "train done" in summary
    assert _record(base, "2026-11-30", "sentinels")["accepted"]
    reference = json.loads((base / "state" / "sentinels" / "reference-h200.json").read_text())
    assert reference["night"] == "2026-11-30"
    assert _versions(base) == [1, 2]


def test_flagged_queries_are_planned_first_and_their_gain_reported(first_night, capsys) -> None:
    querylog = pytest.importorskip("tilecost.predict.querylog", reason="the predictor's query log is not there yet")
    from tilecost.predict.ood import OODReason, OODVerdict
    from tilecost.problem import Problem

    base, _ = first_night
    log_path = base / "queries.jsonl"
    log = querylog.QueryLog(log_path)
    flagged = [Problem(24, 14336, 4096), Problem(100, 3000, 700)]
    for problem in flagged:
        log.record(problem, OODVerdict((OODReason.SPARSE_NEIGHBOURHOOD,), 2.5))
    log.record(Problem(64, 64, 64), OODVerdict())  # in distribution: not planned

    # no sentinels tonight: this test does not depend on what the drift test left as the reference
    code, _ = _run(_night(base, "2026-12-01", "--export", "skip", "--sentinels", "0", "--query-log", str(log_path)),
                   capsys)  # fmt: skip

    assert code == EXIT_OK
    plan = json.loads((base / "state" / "2026-12-01" / "plan.json").read_text())
    # the log's order: the most recently flagged first
    assert [(e["m"], e["n"], e["k"]) for e in plan[:2]] == [(100, 3000, 700), (24, 14336, 4096)]
    assert {e["family"] for e in plan[:2]} == {"flagged"}
    gain = _record(base, "2026-12-01", "train")["flagged_gain"]
    assert set(gain["problems"]) == {p.key for p in flagged}
    assert gain["before_geomean"] is not None and 0 < gain["after_geomean"] <= 1


def test_an_unchanged_champion_gets_the_nights_measurements_in_its_tuning_database(first_night, capsys) -> None:
    from tilecost.predict.artifact import load_artifact
    from tilecost.train.dataset import load_measurements

    base, _ = first_night
    artifact = base / "state" / "artifact" / "h200"
    metadata, blobs = load_artifact(artifact)
    before = json.loads(blobs["measured.json"])
    dataset = load_measurements(base / "measurements", "h200")
    assert set(dataset.problem_keys()) > set(before)  # the nights since the first collected more
    # tonight's challenger did not beat the champion (its record as the train step writes it)
    steps = base / "state" / "2026-12-02" / "steps"
    steps.mkdir(parents=True)
    (steps / "train.json").write_text(json.dumps({"promoted": False, "decision": "does not beat champion v1",
                                                  "model_version": "9"}))  # fmt: skip

    code, summary = _run(_night(base, "2026-12-02", "--steps", "export"), capsys)

    assert code == EXIT_OK and "export done" in summary
    refreshed, files = load_artifact(artifact)
    assert set(json.loads(files["measured.json"])) == set(dataset.problem_keys())
    assert files["model.ubj"] == blobs["model.ubj"]  # the champion's booster, unchanged
    assert refreshed.measured_from["dataset_digest"] == dataset.digest != metadata.measured_from["dataset_digest"]


def test_shards_collect_their_share_and_the_last_one_trains(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    night = ["--export", "skip", "--steps", "all"]

    code0, summary0 = _run(_night(tmp_path, "2026-11-29", *night, "--shard", "0/2"), capsys)
    code1, summary1 = _run(_night(tmp_path, "2026-11-29", *night, "--shard", "1/2"), capsys)

    assert (code0, code1) == (EXIT_OK, EXIT_OK)
    assert "sentinels done" in summary0 and "train skipped" in summary0
    assert "sentinels skipped" in summary1 and "train done" in summary1
    plan = json.loads((tmp_path / "state" / "2026-11-29" / "plan.json").read_text())
    done = sum(_record(tmp_path, "2026-11-29", f"collect-{i}-of-2")["problems"] for i in range(2))
    assert done == len(plan)
    assert len(DatasetStore(tmp_path / "measurements").files("h200")) == len(plan)
    # a retried pod of a shard that had finished: all shards complete, it takes the finish lock, repeats nothing
    code, again = _run(_night(tmp_path, "2026-11-29", *night, "--shard", "0/2"), capsys)
    assert code == EXIT_OK and "collect reused, train reused" in again


def test_gpus_fan_out_through_the_collectors_own_processes(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)

    code, summary = _run(_night(tmp_path, "2026-11-29", "--sentinels", "0", "--steps", "plan,collect",
                                "--gpus", "2"), capsys)  # fmt: skip

    assert code == EXIT_OK and summary.startswith("SIMULATED nightly 2026-11-29: plan done, collect done; ok")
    plan = json.loads((tmp_path / "state" / "2026-11-29" / "plan.json").read_text())
    files = DatasetStore(tmp_path / "measurements").files("h200")
    assert len(files) == len(plan) and all(f.endswith("--n20261129.parquet") for f in files)
    assert _record(tmp_path, "2026-11-29", "collect")["complete"]


def test_an_export_past_its_time_limit_keeps_the_previous_artifact(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    code, summary = _run(_night(tmp_path, "2026-11-29", "--sentinels", "0", "--export-timeout-s", "0.01"), capsys)

    assert code == EXIT_OK and "export failed" in summary
    record = _record(tmp_path, "2026-11-29", "export")
    assert not record["ok"] and "longer than" in record["error"]
    assert not Path(record["directory"]).exists()


def test_simulated_runs_refuse_the_shipped_dataset_and_the_real_store(tmp_path, monkeypatch) -> None:
    import mlflow

    with pytest.raises(ValueError, match="may not write into the shipped dataset"):
        NightlySettings(backend=SIM, dataset="datasets/measurements")
    monkeypatch.chdir(tmp_path)
    settings = NightlySettings(backend=SIM, dataset=str(tmp_path / "m"), tracking_uri="sqlite:///mlflow.db")
    with pytest.raises(NightlyError, match="is the real MLflow store"):
        _ = settings.resolved_tracking_uri
    default = NightlySettings(backend=SIM, dataset=str(tmp_path / "m")).resolved_tracking_uri
    assert default == f"sqlite:///{(tmp_path / 'nightly-simulated' / 'mlflow-simulated.db').resolve()}"
    # Any store whose experiment `tilecost train` made (untagged: real) is refused, and the other way round.
    real = f"sqlite:///{tmp_path / 'real.db'}"
    mlflow.MlflowClient(real).create_experiment("tilecost-h200")
    with pytest.raises(NightlyError, match="holds real training runs"):
        prepare_store(real, "tilecost-h200", simulated=True)
    prepare_store(real, "tilecost-h200", simulated=False)
    simulated = f"sqlite:///{tmp_path / 'sim.db'}"
    prepare_store(simulated, "tilecost-h200", simulated=True)
    with pytest.raises(NightlyError, match="holds SIMULATED runs"):
        prepare_store(simulated, "tilecost-h200", simulated=False)
    location = mlflow.MlflowClient(simulated).get_experiment_by_name("tilecost-h200").artifact_location
    assert location == (tmp_path / "mlruns").as_uri()


def test_simulated_and_real_rows_never_mix_in_one_dataset(tmp_path) -> None:
    real = DatasetStore(write_dataset(tmp_path / "real"))
    with pytest.raises(NightlyError, match="holds real measurements"):
        check_dataset_kind(real, "h200", simulated=True)
    check_dataset_kind(real, "h200", simulated=False)
    simulated = DatasetStore(tmp_path / "sim")
    problem = TRAIN_PROBLEMS[0]
    simulated.write_problem("h200", problem, "r1", problem_rows(problem, "train", gpu_name=SIMULATED_GPU_NAME))
    with pytest.raises(NightlyError, match="holds SIMULATED rows"):
        check_dataset_kind(simulated, "h200", simulated=False)
    check_dataset_kind(simulated, "h200", simulated=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"night": "29/11/2026"}, "night='29/11/2026' is not allowed; use a date YYYY-MM-DD"),
        ({"families": (("everything", 3),)}, "plan family 'everything' is not known"),
        ({"families": (("random", -1),)}, "family random=-1: count must be >= 0"),
        ({"shard": (2, 2)}, "shard=(2, 2)"),
        ({"sample_fraction": 0.0}, "sample_fraction=0.0 must be in (0, 1]"),
        ({"export": "sometimes"}, "'sometimes' is not a valid ExportMode"),
        ({"export_samples": 0}, "export_samples=0 must be >= 1"),
    ],
)
def test_settings_name_the_field_and_what_is_allowed(kwargs, message, tmp_path) -> None:
    with pytest.raises(ValueError) as caught:
        NightlySettings(dataset=str(tmp_path / "m"), **kwargs)
    assert message in str(caught.value)


def test_steps_parse_by_name() -> None:
    assert Step.parse_list("all") == frozenset(Step)
    assert Step.parse_list("plan, collect") == {Step.PLAN, Step.COLLECT}
    with pytest.raises(ValueError, match="step 'fit' is not allowed"):
        Step.parse_list("plan,fit")


def test_model_top_re_times_training_problems_on_the_champions_untimed_favourites(first_night, capsys) -> None:
    import pyarrow.compute as pc

    from tilecost.predict import Predictor
    from tilecost.problem import Problem

    base, _ = first_night
    store = DatasetStore(base / "measurements")
    table = store.read("h200", filters=[pc.field("role") == "train"])
    timed: dict[str, set[str]] = {}
    keys, config_ids = table.column("problem_key").to_pylist(), table.column("config_id").to_pylist()
    for key, config_id in zip(keys, config_ids, strict=True):
        timed.setdefault(key, set()).add(config_id)

    code, _ = _run(_night(base, "2026-12-05", "--steps", "plan,collect", "--model-top", "2", "--model-top-k", "8",
                          "--model-top-within", "12"), capsys)  # fmt: skip

    assert code == EXIT_OK
    plan = json.loads((base / "state" / "2026-12-05" / "plan.json").read_text())
    top = [e for e in plan if e["family"] == "model-top"]
    assert len(top) == 2 and all(e["role"] == "train" for e in top)
    assert _record(base, "2026-12-05", "plan")["counts"]["model_top"] == 2
    champion = Predictor.load(base / "state" / "artifact" / "h200")  # the first night's export ranks them
    for entry in top:
        problem = Problem(entry["m"], entry["n"], entry["k"], entry["dtype"], entry["layout"])
        chosen = entry["only"]["config_id"]
        times = champion.predicted_times_us(problem)
        ranked = sorted((t, c.key) for c, t in times.items())[:12]  # --model-top-within 12
        untimed = [k for _, k in ranked if k not in timed[problem.key]]
        assert chosen and sorted(chosen) == sorted(untimed[:8])
        tonight = pq.read_table(store.file_path("h200", problem, "n20261205"), columns=["config_id"])
        assert sorted(tonight.column(0).to_pylist()) == sorted(chosen)  # every one timed, nothing else


def test_model_top_k_above_min_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="model_top_k=65 must be <= min_sample=64"):
        NightlySettings(model_top=1, model_top_k=65, min_sample=64)
    with pytest.raises(ValueError, match="model_top_within=-1 must be >= 0"):
        NightlySettings(model_top=1, model_top_within=-1)


def _promoted_tonight(base: Path, night: str, version: str, previous: str | None) -> None:
    """Tonight's train record as the train step writes it when ``version`` beat the champion ``previous``, with the
    registry's alias moved to it (the first night's run and store)."""
    from mlflow import MlflowClient

    record = _record(base, "2026-11-29", "train") | {"model_version": version, "previous_champion": previous}
    client = MlflowClient(record["tracking_uri"])
    record["mlflow_run_id"] = client.get_model_version(record["model_name"], version).run_id
    client.set_registered_model_alias(record["model_name"], "champion", version)
    steps = base / "state" / night / "steps"
    steps.mkdir(parents=True)
    (steps / "train.json").write_text(json.dumps(record))


def test_a_promoted_model_is_swapped_in_only_through_the_answer_gate(first_night, capsys, monkeypatch) -> None:
    import dataclasses

    import tilecost.train.answer_gate as answer_gate
    from tilecost.predict.artifact import load_artifact

    base, _ = first_night
    target = base / "state" / "artifact" / "h200"
    _, before = load_artifact(target)
    # The champion's own booster, exported again from tonight's dataset: its lists and calibration follow the data the
    # earlier tests in this module added (after them they change; run alone the artifact comes back the same).
    _promoted_tonight(base, "2026-12-06", "1", None)
    judged = []
    real = answer_gate.judge_answers

    def lenient(ours, theirs, **kwargs):  # the real gate on the real answers, its verdict turned to a pass
        gate = real(ours, theirs, **kwargs)  # (whether the simulated answers pass depends on the fixture's fit)
        judged.append(gate)
        return dataclasses.replace(gate, passed=True)

    monkeypatch.setattr(answer_gate, "judge_answers", lenient)

    code, summary = _run(_night(base, "2026-12-06", "--steps", "export,report", "--export-samples", "4000"), capsys)

    assert code == EXIT_OK and "export done" in summary
    assert "Answer gate (passed" in (base / "state" / "2026-12-06" / "report.md").read_text()
    record = _record(base, "2026-12-06", "export")
    gate = record["answer_gate"]
    assert record["ok"] and gate["passed"] and judged and gate["problems"] == judged[0].problems > 0
    _, after = load_artifact(target)
    assert after["model.ubj"] == before["model.ubj"]  # the champion's booster, with the lists exported tonight
    assert not (base / "state" / "artifact" / ".h200.new").exists()


def test_an_artifact_that_fails_the_answer_gate_is_withheld(first_night, capsys, monkeypatch) -> None:
    import dataclasses

    from mlflow import MlflowClient

    import tilecost.train.answer_gate as answer_gate
    from tilecost.predict.artifact import load_artifact

    base, _ = first_night
    target = base / "state" / "artifact" / "h200"
    _, before = load_artifact(target)
    name = _record(base, "2026-11-29", "train")["model_name"]
    latest = str(_versions(base)[-1])
    assert latest != "1"  # the later nights registered models of their own
    _promoted_tonight(base, "2026-12-07", latest, "1")
    judged = []
    real = answer_gate.judge_answers

    def strict(ours, theirs, **kwargs):  # the real gate on the real answers, its verdict turned to a failure
        gate = real(ours, theirs, **kwargs)
        judged.append(gate)
        return dataclasses.replace(gate, passed=False, reason="test: withheld")

    monkeypatch.setattr(answer_gate, "judge_answers", strict)

    code, summary = _run(_night(base, "2026-12-07", "--steps", "export,report", "--export-samples", "4000"), capsys)

    assert code == EXIT_OK and "export done" in summary
    record = _record(base, "2026-12-07", "export")
    assert record["withheld"] and not record["ok"] and "test: withheld" in record["error"]
    assert judged and judged[0].problems > 0 and record["answer_gate"]["problems"] == judged[0].problems
    _, after = load_artifact(target)
    assert after["model.ubj"] == before["model.ubj"]  # the previous artifact stays
    assert not (base / "state" / "artifact" / ".h200.new").exists()
    client = MlflowClient(_record(base, "2026-12-07", "train")["tracking_uri"])
    assert str(client.get_model_version_by_alias(name, "champion").version) == "1"  # back from the latest
    assert "test: withheld" in client.get_model_version(name, latest).tags["answer_gate"]
    report = (base / "state" / "2026-12-07" / "report.md").read_text()
    assert "NOT written (withheld" in report and "Answer gate (FAILED: test: withheld)" in report
    # the same night again: the decision stands, nothing is exported twice
    code, summary = _run(_night(base, "2026-12-07", "--steps", "export", "--export-samples", "4000"), capsys)
    assert code == EXIT_OK and "export reused" in summary
