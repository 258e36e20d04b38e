"""The steps of a night that train: train (MLflow, champion only when better, tonight's gain on the
flagged problems) and export (the champion's predictor artifact, in a child process under a time limit).

:func:`prepare_store` keeps simulated and real runs apart in MLflow: the nightly loop tags the
experiments it creates ``tilecost.simulated``, and a run refuses a store whose experiment is of the
other kind (one without the tag was made by ``tilecost train``, so it is real).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilecost.collect.plans import PlanEntry
from tilecost.errors import TilecostError
from tilecost.predict.artifact import METADATA_FILE, swap_in

from .answer_gate import AnswerGate
from .nightly_plan import FLAGGED_FAMILY
from .nightly_settings import ExportMode, NightlyError, Step
from .nightly_steps import NightContext, Outcome, StepOutcome, check_dataset_kind, dataset_state, drift_blocks
from .progress import Heartbeat

__all__ = ["SIMULATED_TAG", "flagged_gain", "prepare_store", "step_export", "step_train"]


def _previous_champion(uri: str, name: str) -> tuple[str | None, Any]:
    from mlflow.exceptions import MlflowException

    from .loading import load_registered_model
    from .tracking import champion_version

    version = champion_version(uri, name)
    if version is None:
        return None, None
    try:
        model, _ = load_registered_model(f"models:/{name}/{version}", uri)
    except (MlflowException, TilecostError, ValueError):
        return version, None
    return version, model


SIMULATED_TAG = "tilecost.simulated"


def prepare_store(uri: str, name: str, simulated: bool) -> None:
    """Check that the store's experiment ``name`` is of this run's kind, creating it if missing.

    The experiment is tagged ``tilecost.simulated`` (``true``/``false``) when the nightly loop creates
    it; one without the tag was made by ``tilecost train`` and is real. A simulated run refuses a
    real experiment (its champion is the real one) and a real run a simulated one. A new sqlite
    store keeps its run artifacts next to the database file, not in whatever directory the job
    started in (MLflow's default is ./mlruns of the working directory).
    """
    import mlflow

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = None
        if uri.startswith("sqlite:///"):
            location = (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlruns").as_uri()
        client.create_experiment(name, artifact_location=location, tags={SIMULATED_TAG: str(simulated).lower()})
        return
    holds_simulated = (experiment.tags or {}).get(SIMULATED_TAG) == "true"
    if simulated and not holds_simulated:
        raise NightlyError(
            f"{uri}: experiment {name} holds real training runs (and the real champion); a simulated run "
            "logs to a store of its own (leave --tracking-uri out for the default in the state directory)"
        )
    if not simulated and holds_simulated:
        raise NightlyError(f"{uri}: experiment {name} holds SIMULATED runs; a real run may not log there")


def flagged_gain(frame: Any, keys: set[str], new_model: Any, old_model: Any, device: Any) -> dict[str, Any] | None:
    """Top-1 (best measured / measured time of the model's pick) on ``keys``' rows, before (the previous
    champion) and after (tonight's model); ``None`` without rows."""
    from .evaluate import geomean
    from .pipeline import evaluate_model

    rows = frame[frame["problem_key"].isin(sorted(keys))]
    if rows.empty:
        return None
    after = evaluate_model(new_model, rows, device)
    roles = dict(zip(rows["problem_key"], rows["role"], strict=False))
    out: dict[str, Any] = {
        "problems": {r.problem.key: {"after": r.top1, "role": roles[r.problem.key]} for r in after.problems},
        "after_geomean": geomean([r.top1 for r in after.problems]),
        "before_geomean": None,
    }
    if old_model is not None:
        before = evaluate_model(old_model, rows, device)
        for r in before.problems:
            out["problems"][r.problem.key]["before"] = r.top1
        out["before_geomean"] = geomean([r.top1 for r in before.problems])
    return out


def step_train(night: NightContext, entries: Sequence[PlanEntry]) -> StepOutcome:
    from tilecost.collect.store import DatasetStore
    from tilecost.device import load_device

    from .pipeline import train_device_class
    from .tracking import describe, experiment_name

    s, d = night.s, night.dir
    blocked = drift_blocks(night)
    if blocked:
        return StepOutcome(Step.TRAIN, Outcome.BLOCKED, f"train: {blocked}")
    store = DatasetStore(s.dataset)
    check_dataset_kind(store, s.device_class, s.simulated)
    state = dataset_state(store.files(s.device_class), store.root)
    record = d.read_record("train")
    if record is not None and record.get("dataset_state") == state:
        return StepOutcome(Step.TRAIN, Outcome.REUSED, f"train: done earlier tonight on the same data "
                           f"({record['decision']})", record)  # fmt: skip
    uri = s.resolved_tracking_uri
    name = experiment_name(s.device_class)
    prepare_store(uri, name, s.simulated)
    previous_version, previous_model = _previous_champion(uri, name)
    params = dict(s.model_params)
    with Heartbeat(f"[nightly {s.night}{' SIMULATED' if s.simulated else ''}] train", night.stream) as beat:
        result = train_device_class(s.dataset, s.device_class, model_params=params, tracking_uri=uri,
                                    export_dir=None, log=night.say)  # fmt: skip
    assert result.run is not None and result.evaluation is not None
    d.write_text("evaluation.txt", result.report() + "\n")
    flagged = {e.problem.key for e in entries if e.family == FLAGGED_FAMILY}
    gain = flagged_gain(result.measurements.frame, flagged, result.model, previous_model, load_device(s.device_class))
    summary = result.evaluation.summary()
    record = {
        "dataset_state": state, "dataset_digest": result.measurements.digest, "tracking_uri": uri,
        "mlflow_run_id": result.run.run_id, "model_name": result.run.model_name,
        "model_version": result.run.model_version, "promoted": result.run.promoted, "decision": result.run.reason,
        "previous_champion": previous_version, "champion_score": result.run.champion_score,
        "heldout": {k: summary[k] for k in ("problems", "top1_geomean", "top1_worst", "top5_geomean")},
        "train_problems": result.params["train_problems"], "seconds": result.seconds, "wall_s": beat.seconds,
        "flagged_gain": gain, "simulated": s.simulated,
    }  # fmt: skip
    d.write_record("train", record)
    line = (
        f"train: held-out top-1 {summary['top1_geomean']:.3f} (worst {summary['top1_worst']:.3f}) on "
        f"{int(summary['problems'])} problems in {beat.seconds:.0f} s; {describe(result.run)}"
    )
    return StepOutcome(Step.TRAIN, Outcome.DONE, line, record)


def _export_job(
    dataset: str,
    device_class: str,
    tracking_uri: str,
    version: str,
    run_id: str,
    directory: str,
    samples: int | None = None,
) -> None:
    """The export, in a child process: the registered version's booster, the dataset's rows, the
    pipeline's own artifact writer (``samples``: the shortlists' sample shapes, None for the default)."""
    import mlflow

    from tilecost.device import load_device

    from .dataset import load_measurements
    from .loading import load_registered_model
    from .pipeline import TrainResult, _export, evaluate_model, split_by_role
    from .tracking import experiment_name

    model, _ = load_registered_model(f"models:/{experiment_name(device_class)}/{version}", tracking_uri)
    measurements = load_measurements(dataset, device_class)
    train, heldout = split_by_role(measurements)
    evaluation = evaluate_model(model, heldout, load_device(device_class)) if not heldout.empty else None
    run = mlflow.MlflowClient(tracking_uri).get_run(run_id)
    metrics = {k: float(v) for k, v in run.data.metrics.items()}
    params: dict[str, Any] = {**run.data.params, "mlflow_run_id": run_id, "mlflow_model_version": version}
    result = TrainResult(measurements, model, evaluation, None, metrics, params, {})
    _export(result, train, Path(directory), samples=samples)


def _refresh_measured(night: NightContext, train: dict[str, Any]) -> StepOutcome:
    """The champion is unchanged, so its artifact stays, with its tuning database rebuilt from tonight's dataset
    (:func:`~tilecost.train.refresh.refresh_every_table`): the shapes measured tonight are answered from their
    measurements from now on, not by the model until the next promotion. Other device classes' tables are
    refreshed too (fifty-sixth session); one the dataset cannot refresh stays as it was, and the outcome says so."""
    from .refresh import refresh_every_table

    target = night.s.resolved_export_dir
    unchanged = f"export: champion unchanged ({train['decision']}); its artifact stays"
    if not (target / METADATA_FILE).is_file():
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, f"{unchanged} (none in {target} yet)")
    try:
        results, not_refreshed = refresh_every_table(target, night.s.dataset)
    except (TilecostError, ValueError) as exc:  # another Triton version or device, an older dataset
        return StepOutcome(Step.EXPORT, Outcome.FAILED, f"{unchanged}; its measured.json NOT refreshed: {exc}")
    done = "; ".join(result.summary() for result in results)
    return StepOutcome(Step.EXPORT, Outcome.DONE, "; ".join([unchanged, done, *not_refreshed]))


def step_export(night: NightContext) -> StepOutcome:
    import shutil

    import mlflow

    s, d = night.s, night.dir
    if s.export is ExportMode.SKIP:
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, "export: skipped (--export skip)")
    train = d.read_record("train")
    if train is None:
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, "export: nothing trained tonight")
    if not train["promoted"]:
        return _refresh_measured(night, train)
    record = d.read_record("export")
    if record is not None and record.get("model_version") == train["model_version"] and record.get("ok"):
        return StepOutcome(Step.EXPORT, Outcome.REUSED, f"export: {record['directory']} (done earlier tonight)", record)
    if record is not None and record.get("model_version") == train["model_version"] and record.get("withheld"):
        return StepOutcome(Step.EXPORT, Outcome.REUSED, f"export: v{train['model_version']} {record['error']} "
                           "(earlier tonight)", record)  # fmt: skip
    target = s.resolved_export_dir
    staging = target.with_name(f".{target.name}.new")
    if staging.exists():
        shutil.rmtree(staging)
    args = (s.dataset, s.device_class, train["tracking_uri"], train["model_version"], train["mlflow_run_id"],
            str(staging), s.export_samples)  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_export_job, args=args, daemon=True)
    limit = s.export_timeout_s
    with Heartbeat(f"[nightly {s.night}{' SIMULATED' if s.simulated else ''}] export", night.stream) as beat:
        child.start()
        child.join(limit)
        timed_out = child.is_alive()
        if timed_out:
            child.terminate()
            child.join(10)
            if child.is_alive():
                child.kill()
                child.join()
    record = {"model_version": train["model_version"], "directory": str(target), "seconds": beat.seconds,
              "ok": False, "timeout_s": limit}  # fmt: skip
    if timed_out or child.exitcode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        why = f"took longer than {limit:.0f} s" if timed_out else f"failed (exit code {child.exitcode})"
        record["error"] = why
        d.write_record("export", record)
        return StepOutcome(Step.EXPORT, Outcome.FAILED, f"export: {why}; the previous artifact in {target} stays "
                           "(the MLflow registry holds the new champion)", record)  # fmt: skip
    try:
        gate = _answer_gate(night, staging, target)
    except TilecostError as exc:  # the new artifact does not load: nothing to swap in
        shutil.rmtree(staging, ignore_errors=True)
        record["error"] = f"the new artifact does not load: {exc}"
        d.write_record("export", record)
        return StepOutcome(Step.EXPORT, Outcome.FAILED, f"export: {record['error']}; the previous artifact in "
                           f"{target} stays", record)  # fmt: skip
    if gate is not None:
        record["answer_gate"] = gate.to_dict()
        if not gate.passed:
            return _withhold(night, train, staging, record, gate.describe())
    swap_in(staging, target)
    mlflow.MlflowClient(train["tracking_uri"]).log_artifacts(train["mlflow_run_id"], str(target), "predictor_artifact")
    record["ok"] = True
    d.write_record("export", record)
    line = (
        f"export: v{train['model_version']} -> {target} in {beat.seconds:.0f} s "
        f"(also logged to MLflow run {train['mlflow_run_id']})"
    )
    if gate is not None:
        line += f"; {gate.describe()}"
    return StepOutcome(Step.EXPORT, Outcome.DONE, line, record)


def _answer_gate(night: NightContext, staging: Path, target: Path) -> AnswerGate | None:
    """:func:`.answer_gate.gate_artifacts` on the staged artifact against the one in ``target``, over the night's
    dataset's held-out problems (read only when ``target`` holds an artifact)."""
    from .answer_gate import gate_artifacts
    from .dataset import load_measurements
    from .pipeline import split_by_role

    if not (target / METADATA_FILE).is_file():
        return None
    s = night.s
    with Heartbeat(f"[nightly {s.night}{' SIMULATED' if s.simulated else ''}] answer gate", night.stream):
        _, heldout = split_by_role(load_measurements(s.dataset, s.device_class))
        return gate_artifacts(staging, target, heldout)


def _withhold(
    night: NightContext, train: dict[str, Any], staging: Path, record: dict[str, Any], why: str
) -> StepOutcome:
    """The promoted model's artifact answers worse than the one in place: drop it, keep the old one (its tuning
    database refreshed), and move the registry's champion alias back to the previous champion (the version the
    artifact in place came from, unless an earlier night's export of it failed), so that the registry does not name
    a champion whose artifact was refused."""
    import shutil

    from .tracking import withhold_champion

    shutil.rmtree(staging, ignore_errors=True)
    name, version, previous = train["model_name"], train["model_version"], train.get("previous_champion")
    withhold_champion(train["tracking_uri"], name, version, previous, why)
    record.update(withheld=True, error=f"withheld: {why}", champion=previous)
    night.dir.write_record("export", record)
    kept = _refresh_measured(night, {"decision": f"v{version} withheld by the answer gate"})
    alias = f"the champion alias back on v{previous}" if previous is not None else "no earlier champion"
    line = f"export: v{version} NOT swapped in, {why}; {kept.line.removeprefix('export: ')}; {alias}"
    return StepOutcome(Step.EXPORT, Outcome.DONE, line, record)
