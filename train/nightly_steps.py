"""The steps of a night that measure: plan, sentinels, collect; the report; and the run's context.

Each step function takes the :class:`NightContext` (settings, the night's files, the progress
stream) and returns a :class:`StepOutcome` whose line is printed and goes into ``report.md``; each
writes its record into the night's state when it finishes (:mod:`tilecost.train.nightly_state`), and
finds it there the next time, which is what makes a second run the same night resume. Training and
export are in :mod:`tilecost.train.nightly_train`.
"""

from __future__ import annotations

import enum
import hashlib
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tilecost.collect.plans import PlanEntry
from tilecost.problem import Problem

from .drift import DriftReport, DriftStatus, SentinelRows, compare_sentinels, sentinel_plan
from .nightly_plan import (
    flagged_problems,
    model_top_entries,
    plan_json,
    plan_line,
    plan_night,
    read_plan,
)
from .nightly_settings import NightlyError, NightlySettings, Step
from .nightly_state import NightDir

__all__ = [
    "NightContext",
    "Outcome",
    "StepOutcome",
    "check_dataset_kind",
    "dataset_state",
    "drift_blocks",
    "shards_complete",
    "step_collect",
    "step_plan",
    "step_report",
    "step_sentinels",
]

SENTINEL_SEED = 0  # the sentinels' configuration sample and input data, the same every night
SENTINEL_SAMPLE_FRACTION = 1e-6  # so that min_sample sets the count: exactly `sentinel_configs` each


class Outcome(enum.Enum):
    DONE = "done"  # ran tonight, in this process
    REUSED = "reused"  # its record from an earlier run tonight stands
    SKIPPED = "skipped"  # nothing to do (not asked for, not this shard, nothing promoted)
    BLOCKED = "blocked"  # refused to run (drift not accepted)
    INCOMPLETE = "incomplete"  # stopped at its time budget; run again to resume
    FAILED = "failed"  # ran and failed (an export past its time limit)


@dataclass(frozen=True)
class StepOutcome:
    step: Step
    outcome: Outcome
    line: str
    record: Mapping[str, Any] = field(default_factory=dict)


def dataset_state(files: Sequence[str], root: str) -> str:
    """A digest of the dataset's file names and sizes: its files are written once and never changed,
    so a new digest means new measurements (much cheaper than hashing the bytes)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        size = Path(path).stat().st_size if "://" not in root else 0
        digest.update(f"{path[len(root) :]}\0{size}\0".encode())
    return digest.hexdigest()


def check_dataset_kind(store: Any, device_class: str, simulated: bool) -> None:
    """Refuse to mix simulated and real rows in one dataset (one file's ``gpu_name`` tells)."""
    import pyarrow.parquet as pq

    from tilecost.collect.simulated import SIMULATED_GPU_NAME

    files = store.files(device_class)
    if not files:
        return
    names = pq.read_table(files[0], columns=["gpu_name"], filesystem=store.fs).column("gpu_name").to_pylist()
    holds_simulated = bool(names) and names[0] == SIMULATED_GPU_NAME
    if simulated and not holds_simulated:
        raise NightlyError(f"{store.root} holds real measurements; a simulated run writes only to a scratch dataset")
    if not simulated and holds_simulated:
        raise NightlyError(f"{store.root} holds SIMULATED rows; a real run may not add measurements to it")


def _sweep_settings(s: NightlySettings, *, run_id: str, sample_fraction: float, min_sample: int, seed: int) -> Any:
    from tilecost.collect.protocol import MeasureProtocol
    from tilecost.collect.sweep import SweepSettings

    return SweepSettings(
        device_class=s.device_class, sample_fraction=sample_fraction, min_sample=min_sample, seed=seed,
        protocol=MeasureProtocol(rounds=s.rounds, seed=seed), backend=s.backend, workers=s.workers, run_id=run_id,
    )  # fmt: skip


class NightContext:
    """One run's context: settings, the night's files, and the progress stream."""

    def __init__(self, settings: NightlySettings, stream: TextIO | None) -> None:
        self.s = settings
        self.dir = NightDir(settings.resolved_state_dir, settings.night)
        self.stream = stream
        self.outcomes: list[StepOutcome] = []

    def say(self, text: str) -> None:
        if self.stream is not None:
            tag = " SIMULATED" if self.s.simulated else ""
            self.stream.write(f"[nightly {self.s.night}{tag}] {text}\n")
            self.stream.flush()

    @property
    def shard_name(self) -> str:
        return "collect" if self.s.shard is None else f"collect-{self.s.shard[0]}-of-{self.s.shard[1]}"

    @property
    def collect_run_id(self) -> str:
        return f"n{self.dir.compact}"

    @property
    def sentinel_run_id(self) -> str:
        return f"s{self.dir.compact}"


def step_plan(night: NightContext) -> tuple[list[PlanEntry], StepOutcome]:
    from tilecost.collect.store import DatasetStore

    s, d = night.s, night.dir
    if d.plan_path.is_file():
        entries = read_plan(d.plan_path)
        record = d.read_record("plan") or {}
        return entries, StepOutcome(
            Step.PLAN, Outcome.REUSED, f"plan: {len(entries)} problems from {d.plan_path}", record
        )
    store = DatasetStore(s.dataset)
    measured = store.problem_keys(store.files(s.device_class))
    flagged: list[Problem] = []
    query_log = s.query_log
    if query_log:
        flagged = flagged_problems(query_log) if Path(query_log).exists() else []
    model_top = _model_top(store, s, seed=int(night.dir.compact)) if s.model_top and measured else []
    entries, counts = plan_night(
        flagged=flagged, families=dict(s.families), dtypes=s.dtypes, layouts=s.layouts,
        seed=int(night.dir.compact), measured=measured, max_flagged=s.max_flagged, model_top=model_top,
    )  # fmt: skip
    if not d.create_exclusive(d.plan_path, plan_json(entries)):  # another shard planned first: use its plan
        entries = read_plan(d.plan_path)
        return entries, StepOutcome(Step.PLAN, Outcome.REUSED, f"plan: {len(entries)} problems from {d.plan_path}")
    record = {"problems": len(entries), "counts": counts, "query_log": query_log, "measured_before": len(measured),
              "plan": str(d.plan_path)}  # fmt: skip
    d.write_record("plan", record)
    source = f"query log {query_log}" if query_log else "no query log configured"
    line = plan_line(counts, source, s.model_top, s.model_top_k, d.plan_path)
    return entries, StepOutcome(Step.PLAN, Outcome.DONE, line, record)


def _model_top(store: Any, s: NightlySettings, seed: int) -> list[PlanEntry]:
    """:func:`model_top_entries` of the dataset's training problems, ranked by ``s.ranking_artifact`` (bounded to
    each problem's ``s.model_top_within`` fastest when set)."""
    import pyarrow.compute as pc

    from tilecost.predict import Predictor

    table = store.read(s.device_class, filters=[pc.field("role") == "train"], columns=["problem_key", "config_id"])
    timed: dict[str, set[str]] = {}
    for key, config_id in zip(*(table.column(c).to_pylist() for c in ("problem_key", "config_id")), strict=True):
        timed.setdefault(key, set()).add(config_id)
    predictor = Predictor.load(s.ranking_artifact)
    return model_top_entries(
        timed,
        predictor.predicted_times_us,
        problems=s.model_top,
        per_problem=s.model_top_k,
        seed=seed,
        within=s.model_top_within or None,
    )


def _sentinel_rows(night: NightContext) -> SentinelRows:
    import pyarrow.compute as pc

    from tilecost.collect.store import DatasetStore

    store = DatasetStore(night.dir.sentinel_store)
    table = store.read(night.s.device_class, filters=[pc.field("run_id") == night.sentinel_run_id])
    return SentinelRows.from_rows(night.s.night, table.to_pylist())


def step_sentinels(night: NightContext) -> StepOutcome:
    from tilecost.collect.simulated import SIMULATED_GPU_NAME
    from tilecost.collect.store import DatasetStore
    from tilecost.collect.sweep import run_sweep

    s, d = night.s, night.dir
    if s.sentinels == 0:
        return StepOutcome(Step.SENTINELS, Outcome.SKIPPED, "sentinels: none configured (--sentinels 0)")
    if s.shard is not None and s.shard[0] != 0:
        return StepOutcome(Step.SENTINELS, Outcome.SKIPPED, f"sentinels: measured by shard 0, not {s.shard[0]}")
    record = d.read_record("sentinels")
    if record is not None:
        report = DriftReport.from_dict(record["drift"])
        if report.drifted and not record.get("accepted") and s.accept_drift:
            _accept(night, record)
            record = d.read_record("sentinels") or record
        return StepOutcome(Step.SENTINELS, Outcome.REUSED, "\n".join(DriftReport.from_dict(record["drift"]).lines()),
                           record)  # fmt: skip
    settings = _sweep_settings(s, run_id=night.sentinel_run_id, sample_fraction=SENTINEL_SAMPLE_FRACTION,
                               min_sample=s.sentinel_configs, seed=SENTINEL_SEED)  # fmt: skip
    night.say(f"sentinels: measuring {s.sentinels} problems x {s.sentinel_configs} configs into {d.sentinel_store}")
    summary = run_sweep(sentinel_plan(s.sentinels), DatasetStore(d.sentinel_store), settings,
                        progress_stream=night.stream)  # fmt: skip
    tonight = _sentinel_rows(night)
    simulated_rows = tonight.fingerprint.get("gpu_name") == SIMULATED_GPU_NAME
    if simulated_rows != s.simulated:
        raise NightlyError(f"the sentinel rows say gpu_name={tonight.fingerprint.get('gpu_name')!r}, "
                           f"but the backend {s.backend!r} is {'simulated' if s.simulated else 'real'}")  # fmt: skip
    ref_path = d.sentinel_reference(s.device_class)
    reference = SentinelRows.load(ref_path) if ref_path.is_file() else None
    if reference is not None and (reference.fingerprint.get("gpu_name") == SIMULATED_GPU_NAME) != s.simulated:
        raise NightlyError(
            f"{ref_path} is a {'SIMULATED' if not s.simulated else 'real'} reference; keep simulated and real "
            "nightly runs in separate --state-dir folders"
        )
    history = [DriftReport.from_dict(r["drift"]) for _, r in d.previous_records("sentinels")]
    report = compare_sentinels(reference, tonight, history)
    if reference is None:
        tonight.save(ref_path)
    record = {"drift": report.to_dict(), "accepted": False, "rows": summary.rows, "run_id": night.sentinel_run_id,
              "reference": str(ref_path)}  # fmt: skip
    d.write_record("sentinels", record)
    if report.drifted and s.accept_drift:
        _accept(night, record)
    return StepOutcome(Step.SENTINELS, Outcome.DONE, "\n".join(report.lines()), record)


def _accept(night: NightContext, record: dict[str, Any]) -> None:
    """``accept_drift``: tonight's sentinel rows become the reference, and the record says so."""
    _sentinel_rows(night).save(night.dir.sentinel_reference(night.s.device_class))
    record = {**record, "accepted": True}
    night.dir.write_record("sentinels", record)
    night.say(f"sentinels: drift accepted; night {night.s.night} is the new reference")


def drift_blocks(night: NightContext) -> str | None:
    """Why training must not run tonight (unaccepted drift), or None."""
    record = night.dir.read_record("sentinels")
    if record is None or record.get("accepted"):
        return None
    report = DriftReport.from_dict(record["drift"])
    if not report.drifted:
        return None
    drifted = [x.problem_key for x in report.sentinels if x.status is DriftStatus.DRIFT]
    return (
        f"sentinels drifted beyond their noise ({', '.join(drifted)}); not training on it. Look at "
        f"{night.dir.record_path('sentinels')}, then run again with --accept-drift to make tonight the reference"
    )


def step_collect(night: NightContext, entries: list[PlanEntry]) -> StepOutcome:
    from tilecost.collect.store import DatasetStore
    from tilecost.collect.sweep import run_sweep, shard

    s, d = night.s, night.dir
    record = d.read_record(night.shard_name)
    if record is not None and record.get("complete"):
        return StepOutcome(Step.COLLECT, Outcome.REUSED, f"collect: done earlier tonight ({record['line']})", record)
    store = DatasetStore(s.dataset)
    check_dataset_kind(store, s.device_class, s.simulated)
    mine = shard(entries, *s.shard) if s.shard is not None else list(entries)
    # Tonight's seed ranks the configs afresh (the sweep's shared training sample), so that successive
    # nights measure different configurations of the same dtype and layout.
    settings = _sweep_settings(s, run_id=night.collect_run_id, sample_fraction=s.sample_fraction,
                               min_sample=s.min_sample, seed=int(d.compact))  # fmt: skip
    night.say(f"collect: {len(mine)} problems{f' (shard {s.shard[0]}/{s.shard[1]})' if s.shard else ''} "
              f"into {s.dataset}, run id {night.collect_run_id}")  # fmt: skip
    if s.gpus is not None and s.gpus != 1:
        line, complete = _collect_on_gpus(night, store, mine)
        record = {"line": line, "complete": complete, "problems": len(mine)}
    else:
        summary = run_sweep(mine, store, settings, progress_stream=night.stream, time_budget_s=s.time_budget_s,
                            first_group=s.shard[0] if s.shard is not None else 0)  # fmt: skip
        complete = not summary.stopped_early
        record = {"line": summary.line(), "complete": complete, "problems": len(mine), "done": summary.problems_done,
                  "skipped": summary.problems_skipped, "rows": summary.rows, "status_counts": summary.status_counts,
                  "compile_s": summary.compile_seconds, "measure_s": summary.measure_seconds}  # fmt: skip
        line = summary.line()
    d.write_record(night.shard_name, record)
    return StepOutcome(Step.COLLECT, Outcome.DONE if complete else Outcome.INCOMPLETE, f"collect: {line}", record)


def _collect_on_gpus(night: NightContext, store: Any, entries: list[PlanEntry]) -> tuple[str, bool]:
    """``gpus`` > 1: ``tilecost collect --plan ... --gpus N`` (one sweep process per GPU, the collector's
    own fan-out), then count the plan's problems that have a file for tonight's run id."""
    s = night.s
    command = [
        sys.executable, "-m", "tilecost.cli", "collect", "--plan", str(night.dir.plan_path), "--dataset", s.dataset,
        "--device-class", s.device_class, "--backend", s.backend, "--run-id", night.collect_run_id,
        "--sample-fraction", str(s.sample_fraction), "--min-sample", str(s.min_sample), "--rounds", str(s.rounds),
        "--seed", night.dir.compact,
        "--gpus", "all" if s.gpus == 0 else str(s.gpus),
    ]  # fmt: skip
    if s.workers is not None:
        command += ["--workers", str(s.workers)]
    if s.time_budget_s is not None:
        command += ["--time-budget-s", str(s.time_budget_s)]
    code = subprocess.call(command)
    have = sum(store.has(s.device_class, e.problem, night.collect_run_id) for e in entries)
    complete = code == 0 and have == len(entries)
    return (
        f"{have} of {len(entries)} problems on file for run {night.collect_run_id} (GPU workers exit {code})",
        complete,
    )


def shards_complete(night: NightContext) -> tuple[int, int]:
    assert night.s.shard is not None
    count = night.s.shard[1]
    done = 0
    for i in range(count):
        record = night.dir.read_record(f"collect-{i}-of-{count}")
        done += bool(record and record.get("complete"))
    return done, count


def step_report(night: NightContext, outcomes: Sequence[StepOutcome]) -> StepOutcome:
    from .nightly_report import champion_source, nightly_markdown

    s, d = night.s, night.dir
    text = nightly_markdown(s, d, outcomes)
    path = d.write_text("report.md", text)
    lines = [f"report: {path}"]
    record: dict[str, Any] = {"markdown": str(path)}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        lines.append("figures skipped: matplotlib is not installed (pip install -e '.[train]')")
    else:
        source = champion_source(s, d)
        if source is None:
            lines.append("figures skipped: no champion to describe yet")
        else:
            from .report import write_report

            written = write_report(
                s.dataset, s.device_class, d.root / "report", title=f"tilecost {s.label} nightly {s.night}",
                preamble=text, stream=night.stream, **source,
            )  # fmt: skip
            record["html"] = str(written.html)
            lines.append(f"figures and page: {written.html}")
    d.write_record("report", record)
    return StepOutcome(Step.REPORT, Outcome.DONE, "; ".join(lines), record)
