"""The nightly loop: plan, measure the sentinels, collect, train, promote only when better, export, report.

``tilecost nightly --device-class h200`` runs, for one night (a UTC date, ``--night``):

1. **plan** (:mod:`tilecost.train.nightly_plan`): the problems the predictor flagged as out of
   distribution (its opt-in query log), then fresh samples of the plan families, minus what the
   dataset already holds; written once to ``<state>/<night>/plan.json``;
2. **sentinels** (:mod:`tilecost.train.drift`): the fixed sentinel problems re-measured into their
   own store and compared with the reference night; drift beyond their measured noise stops the
   loop before training (exit status 3) until accepted with ``accept_drift``;
3. **collect**: :func:`tilecost.collect.sweep.run_sweep` of the plan into the dataset (run id
   ``n<YYYYMMDD>``, so a second run the same night resumes where the first stopped), or one shard of
   it; ``gpus`` > 1 fans out through ``tilecost collect --gpus``;
4. **train**: :func:`tilecost.train.pipeline.train_device_class` logged to MLflow, which moves the
   ``champion`` alias only when the new model beats the champion on the same held-out problems;
   also measures tonight's gain on the flagged problems (previous champion against the new model);
5. **export**: the new champion's predictor artifact, in a child process under a time limit
   (the predictor's precomputation can be slow), swapped into ``export_dir`` whole;
6. **report**: ``<night>/report.md`` and, with matplotlib, the champion's figures and HTML page
   (:mod:`tilecost.train.report`).

Each step leaves a record (:mod:`tilecost.train.nightly_state`); a step whose record exists is not
repeated, training re-runs only when the dataset changed since its record. With ``shard=(i, N)``
(a Slurm array task or a Kubernetes Indexed Job pod) the sentinels run on shard 0, every shard
collects its share, and the shard that completes last trains, exports and reports.

**Simulated runs.** With the simulated backend (:mod:`tilecost.collect.simulated`) nothing here is
a measurement: every line says ``SIMULATED``, the dataset must be a scratch one (the shipped
dataset, and any dataset holding real rows, is refused), and the MLflow store defaults to
``<state>/mlflow-simulated.db``; the real store (``$MLFLOW_TRACKING_URI`` or ``sqlite:///mlflow.db``)
is refused, so a simulated model can never become the real champion.

Errors: :class:`NightlyError` (a :class:`~tilecost.errors.TilecostError`) for a state or data the
loop refuses to work on; ``ValueError`` for settings out of range.
"""

from __future__ import annotations

import enum
import hashlib
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tilecost.collect.plans import PlanEntry, plan_family
from tilecost.errors import TilecostError
from tilecost.problem import DType, Layout, Problem

from .drift import DriftReport, DriftStatus, SentinelRows, compare_sentinels, sentinel_plan
from .nightly_plan import FLAGGED_FAMILY, flagged_problems, measured_problem_keys, plan_json, plan_night, read_plan
from .nightly_state import NightDir, NightLock, NightLocked, parse_night, today
from .progress import Heartbeat

__all__ = [
    "CUDA_BACKEND",
    "EXIT_DRIFT",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "ExportMode",
    "NightlyError",
    "NightlyResult",
    "NightlySettings",
    "Step",
    "StepOutcome",
    "prepare_store",
    "run_nightly",
]

CUDA_BACKEND = "tilecost.collect.backend:cuda_backend"
SHIPPED_DATASET = Path("datasets/measurements")
EXIT_OK = 0
EXIT_DRIFT = 3  # sentinels drifted beyond their noise: stopped before training
EXIT_INCOMPLETE = 75  # EX_TEMPFAIL: collection stopped at its time budget; run again to resume
SENTINEL_SEED = 0  # the sentinels' configuration sample and input data, the same every night
SENTINEL_SAMPLE_FRACTION = 1e-6  # so that min_sample sets the count: exactly `sentinel_configs` each
DEFAULT_FAMILIES = (("random", 4), ("layers", 2), ("decode", 2), ("unaligned", 2))


class NightlyError(TilecostError):
    """The nightly loop refuses a state or dataset (simulated rows into real data, a real store for
    simulated models, a sentinel reference of the other kind)."""


class Step(enum.Enum):
    PLAN = "plan"
    SENTINELS = "sentinels"
    COLLECT = "collect"
    TRAIN = "train"
    EXPORT = "export"
    REPORT = "report"

    @classmethod
    def parse_list(cls, text: str) -> frozenset[Step]:
        """``plan,collect`` or ``all``."""
        if text.strip() == "all":
            return frozenset(cls)
        out = set()
        for name in (x.strip() for x in text.split(",") if x.strip()):
            try:
                out.add(cls(name))
            except ValueError:
                raise ValueError(
                    f"step {name!r} is not allowed; use 'all' or some of {[s.value for s in cls]}"
                ) from None
        return frozenset(out)


class ExportMode(enum.Enum):
    FULL = "full"  # export the predictor artifact (with the predictor's precomputation) when promoted
    SKIP = "skip"  # never export; the MLflow registry holds the booster


def is_simulated_backend(backend: str) -> bool:
    """Whether a backend path names a simulated timer (the collector's own test: the word in the path)."""
    return "simulated" in backend.lower()


@dataclass(frozen=True)
class NightlySettings:
    """What one nightly run does. Everything has a default but the device class."""

    device_class: str = "h200"
    dataset: str = str(SHIPPED_DATASET)
    state_dir: str | None = None  # default: ./nightly, or <dataset>/../nightly-simulated when simulated
    night: str = field(default_factory=today)
    backend: str = CUDA_BACKEND
    families: tuple[tuple[str, int], ...] = DEFAULT_FAMILIES
    dtypes: tuple[DType, ...] = (DType.BF16,)
    layouts: tuple[Layout, ...] = (Layout.NT,)
    query_log: str | None = None
    max_flagged: int = 16
    sentinels: int = 5
    sentinel_configs: int = 32
    sample_fraction: float = 0.35
    min_sample: int = 64
    rounds: int = 3
    workers: int | None = None
    gpus: int | None = None
    shard: tuple[int, int] | None = None
    time_budget_s: float | None = None
    steps: frozenset[Step] = frozenset(Step)
    tracking_uri: str | None = None
    model_params: tuple[tuple[str, Any], ...] = ()
    export: ExportMode = ExportMode.FULL
    export_dir: str | None = None
    export_timeout_s: float | None = 3600.0
    accept_drift: bool = False

    def __post_init__(self) -> None:
        from tilecost.device import load_device

        load_device(self.device_class)  # an unknown class raises SpecError naming the known ones
        object.__setattr__(self, "night", parse_night(self.night))
        object.__setattr__(self, "export", ExportMode(self.export))
        object.__setattr__(self, "dtypes", tuple(DType.parse(d) for d in self.dtypes))
        object.__setattr__(self, "layouts", tuple(Layout.parse(x) for x in self.layouts))
        if not self.dtypes or not self.layouts:
            raise ValueError("dtypes and layouts must each name at least one value")
        for name, count in self.families:
            plan_family(name, 0, DType.BF16, Layout.NT)  # raises ValueError naming the known families
            if count < 0:
                raise ValueError(f"family {name}={count}: count must be >= 0")
        for name, low in (("max_flagged", 0), ("sentinel_configs", 1), ("min_sample", 1), ("rounds", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"{name}={getattr(self, name)} must be >= {low}")
        if not self.sentinels >= 0:
            raise ValueError(f"sentinels={self.sentinels} must be >= 0")
        if not 0 < self.sample_fraction <= 1:
            raise ValueError(f"sample_fraction={self.sample_fraction} must be in (0, 1]")
        if self.shard is not None and not (self.shard[1] >= 1 and 0 <= self.shard[0] < self.shard[1]):
            raise ValueError(f"shard={self.shard}: need (index, count) with 0 <= index < count")
        if self.gpus is not None and self.shard is not None and self.gpus != 1:
            raise ValueError("give either shard (one GPU per task) or gpus (one process per GPU here), not both")
        if self.simulated and "://" not in self.dataset and _is_shipped(Path(self.dataset)):
            raise ValueError(
                f"dataset={self.dataset!r}: the simulated backend may not write into the shipped dataset; "
                "pass a scratch directory"
            )

    @property
    def simulated(self) -> bool:
        return is_simulated_backend(self.backend)

    @property
    def resolved_state_dir(self) -> Path:
        if self.state_dir is not None:
            return Path(self.state_dir)
        if self.simulated:
            return Path(self.dataset).parent / "nightly-simulated"
        return Path("nightly")

    @property
    def resolved_export_dir(self) -> Path:
        return Path(self.export_dir) if self.export_dir else self.resolved_state_dir / "artifact" / self.device_class

    @property
    def resolved_tracking_uri(self) -> str:
        """The MLflow store; a simulated run defaults to its own and refuses ``sqlite:///mlflow.db``
        (the stores themselves are checked by :func:`prepare_store`)."""
        from .tracking import DEFAULT_TRACKING_URI, tracking_uri

        if not self.simulated:
            return tracking_uri(self.tracking_uri)
        uri = self.tracking_uri or f"sqlite:///{(self.resolved_state_dir / 'mlflow-simulated.db').resolve()}"
        if _same_store(uri, DEFAULT_TRACKING_URI):
            raise NightlyError(
                f"tracking_uri={uri!r} is the real MLflow store; a simulated run logs to its own (default "
                f"{self.resolved_state_dir / 'mlflow-simulated.db'}) so that it never replaces the real champion"
            )
        return uri

    @property
    def label(self) -> str:
        return "SIMULATED" if self.simulated else "real"


def _is_shipped(path: Path) -> bool:
    """The repository's dataset, by the working directory or by this package's location."""
    import tilecost

    candidates = {SHIPPED_DATASET.resolve(), (Path(tilecost.__file__).resolve().parents[1] / SHIPPED_DATASET)}
    return path.resolve() in candidates


def _same_store(a: str, b: str) -> bool:
    def key(uri: str) -> str:
        if uri.startswith("sqlite:///"):
            return str(Path(uri.removeprefix("sqlite:///")).resolve())
        return uri.rstrip("/")

    return key(a) == key(b)


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


@dataclass(frozen=True)
class NightlyResult:
    """What one run did: each step's outcome, the exit status and where the results are."""

    night: str
    simulated: bool
    state_dir: Path
    steps: tuple[StepOutcome, ...]
    exit_code: int

    def outcome(self, step: Step) -> StepOutcome | None:
        return next((s for s in self.steps if s.step is step), None)

    def summary(self) -> str:
        label = "SIMULATED nightly" if self.simulated else "nightly"
        parts = [f"{s.step.value} {s.outcome.value}" for s in self.steps]
        status = {EXIT_OK: "ok", EXIT_DRIFT: "DRIFT: stopped before training", EXIT_INCOMPLETE: "incomplete"}
        return (
            f"{label} {self.night}: {', '.join(parts)}; {status.get(self.exit_code, self.exit_code)}; "
            f"state {self.state_dir / self.night} (report.md)"
        )


# ------------------------------------------------------------------------------------------- helpers
def _dataset_state(files: Sequence[str], root: str) -> str:
    """A digest of the dataset's file names and sizes: its files are written once and never changed,
    so a new digest means new measurements (much cheaper than hashing the bytes)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        size = Path(path).stat().st_size if "://" not in root else 0
        digest.update(f"{path[len(root) :]}\0{size}\0".encode())
    return digest.hexdigest()


def _check_dataset_kind(store: Any, device_class: str, simulated: bool) -> None:
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


class _Night:
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


# ------------------------------------------------------------------------------------------- steps
def _step_plan(night: _Night) -> tuple[list[PlanEntry], StepOutcome]:
    from tilecost.collect.store import DatasetStore

    s, d = night.s, night.dir
    if d.plan_path.is_file():
        entries = read_plan(d.plan_path)
        record = d.read_record("plan") or {}
        return entries, StepOutcome(
            Step.PLAN, Outcome.REUSED, f"plan: {len(entries)} problems from {d.plan_path}", record
        )
    store = DatasetStore(s.dataset)
    measured = measured_problem_keys(store.files(s.device_class))
    flagged: list[Problem] = []
    query_log = s.query_log
    if query_log:
        flagged = flagged_problems(query_log) if Path(query_log).exists() else []
    entries, counts = plan_night(
        flagged=flagged, families=dict(s.families), dtypes=s.dtypes, layouts=s.layouts,
        seed=int(night.dir.compact), measured=measured, max_flagged=s.max_flagged,
    )  # fmt: skip
    if not d.create_exclusive(d.plan_path, plan_json(entries)):  # another shard planned first: use its plan
        entries = read_plan(d.plan_path)
        return entries, StepOutcome(Step.PLAN, Outcome.REUSED, f"plan: {len(entries)} problems from {d.plan_path}")
    record = {"problems": len(entries), "counts": counts, "query_log": query_log, "measured_before": len(measured),
              "plan": str(d.plan_path)}  # fmt: skip
    d.write_record("plan", record)
    source = f"query log {query_log}" if query_log else "no query log configured"
    line = (
        f"plan: {len(entries)} problems ({counts['flagged']} flagged of {counts['flagged_logged']} logged in {source}"
        f" [{counts['flagged_measured']} already measured, {counts['flagged_too_large']} too large, "
        f"{counts['flagged_over_limit']} over the limit]; {counts['fresh']} fresh family samples; "
        f"{counts['heldout']} held out) -> {d.plan_path}"
    )
    return entries, StepOutcome(Step.PLAN, Outcome.DONE, line, record)


def _sentinel_rows(night: _Night) -> SentinelRows:
    import pyarrow.compute as pc

    from tilecost.collect.store import DatasetStore

    store = DatasetStore(night.dir.sentinel_store)
    table = store.read(night.s.device_class, filters=[pc.field("run_id") == night.sentinel_run_id])
    return SentinelRows.from_rows(night.s.night, table.to_pylist())


def _step_sentinels(night: _Night) -> StepOutcome:
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


def _accept(night: _Night, record: dict[str, Any]) -> None:
    """``accept_drift``: tonight's sentinel rows become the reference, and the record says so."""
    _sentinel_rows(night).save(night.dir.sentinel_reference(night.s.device_class))
    record = {**record, "accepted": True}
    night.dir.write_record("sentinels", record)
    night.say(f"sentinels: drift accepted; night {night.s.night} is the new reference")


def _drift_blocks(night: _Night) -> str | None:
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


def _step_collect(night: _Night, entries: list[PlanEntry]) -> StepOutcome:
    from tilecost.collect.store import DatasetStore
    from tilecost.collect.sweep import run_sweep, shard

    s, d = night.s, night.dir
    record = d.read_record(night.shard_name)
    if record is not None and record.get("complete"):
        return StepOutcome(Step.COLLECT, Outcome.REUSED, f"collect: done earlier tonight ({record['line']})", record)
    store = DatasetStore(s.dataset)
    _check_dataset_kind(store, s.device_class, s.simulated)
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
        summary = run_sweep(mine, store, settings, progress_stream=night.stream, time_budget_s=s.time_budget_s)
        complete = not summary.stopped_early
        record = {"line": summary.line(), "complete": complete, "problems": len(mine), "done": summary.problems_done,
                  "skipped": summary.problems_skipped, "rows": summary.rows, "status_counts": summary.status_counts,
                  "compile_s": summary.compile_seconds, "measure_s": summary.measure_seconds}  # fmt: skip
        line = summary.line()
    d.write_record(night.shard_name, record)
    return StepOutcome(Step.COLLECT, Outcome.DONE if complete else Outcome.INCOMPLETE, f"collect: {line}", record)


def _collect_on_gpus(night: _Night, store: Any, entries: list[PlanEntry]) -> tuple[str, bool]:
    """``gpus`` > 1: ``tilecost collect --plan ... --gpus N`` (one sweep process per GPU, the collector's
    own fan-out), then count the plan's problems that have a file for tonight's run id."""
    s = night.s
    command = [
        sys.executable, "-m", "tilecost.cli", "collect", "--plan", str(night.dir.plan_path), "--dataset", s.dataset,
        "--device-class", s.device_class, "--backend", s.backend, "--run-id", night.collect_run_id,
        "--sample-fraction", str(s.sample_fraction), "--rounds", str(s.rounds), "--seed", night.dir.compact,
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


def _shards_complete(night: _Night) -> tuple[int, int]:
    assert night.s.shard is not None
    count = night.s.shard[1]
    done = 0
    for i in range(count):
        record = night.dir.read_record(f"collect-{i}-of-{count}")
        done += bool(record and record.get("complete"))
    return done, count


def _previous_champion(uri: str, name: str) -> tuple[str | None, Any]:
    import mlflow
    from mlflow.exceptions import MlflowException

    from .loading import load_registered_model
    from .tracking import CHAMPION_ALIAS

    mlflow.set_tracking_uri(uri)
    try:
        version = mlflow.MlflowClient().get_model_version_by_alias(name, CHAMPION_ALIAS)
    except MlflowException:
        return None, None
    try:
        model, _ = load_registered_model(f"models:/{name}/{version.version}", uri)
    except (MlflowException, TilecostError, ValueError):
        return str(version.version), None
    return str(version.version), model


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
    from .evaluate import _geomean
    from .pipeline import evaluate_model

    rows = frame[frame["problem_key"].isin(sorted(keys))]
    if rows.empty:
        return None
    after = evaluate_model(new_model, rows, device)
    roles = dict(zip(rows["problem_key"], rows["role"], strict=False))
    out: dict[str, Any] = {
        "problems": {r.problem.key: {"after": r.top1, "role": roles[r.problem.key]} for r in after.problems},
        "after_geomean": _geomean([r.top1 for r in after.problems]),
        "before_geomean": None,
    }
    if old_model is not None:
        before = evaluate_model(old_model, rows, device)
        for r in before.problems:
            out["problems"][r.problem.key]["before"] = r.top1
        out["before_geomean"] = _geomean([r.top1 for r in before.problems])
    return out


def _step_train(night: _Night, entries: Sequence[PlanEntry]) -> StepOutcome:
    from tilecost.collect.store import DatasetStore
    from tilecost.device import load_device

    from .pipeline import train_device_class
    from .tracking import describe, experiment_name

    s, d = night.s, night.dir
    blocked = _drift_blocks(night)
    if blocked:
        return StepOutcome(Step.TRAIN, Outcome.BLOCKED, f"train: {blocked}")
    store = DatasetStore(s.dataset)
    _check_dataset_kind(store, s.device_class, s.simulated)
    state = _dataset_state(store.files(s.device_class), store.root)
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


def _export_job(dataset: str, device_class: str, tracking_uri: str, version: str, run_id: str, directory: str) -> None:
    """The export, in a child process: the registered version's booster, the dataset's rows, the
    pipeline's own artifact writer."""
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
    _export(result, train, Path(directory))


def _swap_in(new: Path, target: Path) -> None:
    """Replace ``target`` by ``new`` with two renames, so readers see the old or the new artifact."""
    import shutil

    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.with_name(f".{target.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    new.rename(target)
    if old.exists():
        shutil.rmtree(old)


def _step_export(night: _Night) -> StepOutcome:
    import shutil

    import mlflow

    s, d = night.s, night.dir
    if s.export is ExportMode.SKIP:
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, "export: skipped (--export skip)")
    train = d.read_record("train")
    if train is None:
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, "export: nothing trained tonight")
    if not train["promoted"]:
        return StepOutcome(Step.EXPORT, Outcome.SKIPPED, f"export: champion unchanged ({train['decision']}); "
                           "its artifact stays")  # fmt: skip
    record = d.read_record("export")
    if record is not None and record.get("model_version") == train["model_version"] and record.get("ok"):
        return StepOutcome(Step.EXPORT, Outcome.REUSED, f"export: {record['directory']} (done earlier tonight)", record)
    target = s.resolved_export_dir
    staging = target.with_name(f".{target.name}.new")
    if staging.exists():
        shutil.rmtree(staging)
    args = (s.dataset, s.device_class, train["tracking_uri"], train["model_version"], train["mlflow_run_id"],
            str(staging))  # fmt: skip
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
    _swap_in(staging, target)
    mlflow.MlflowClient(train["tracking_uri"]).log_artifacts(train["mlflow_run_id"], str(target), "predictor_artifact")
    record["ok"] = True
    d.write_record("export", record)
    line = (
        f"export: v{train['model_version']} -> {target} in {beat.seconds:.0f} s "
        f"(also logged to MLflow run {train['mlflow_run_id']})"
    )
    return StepOutcome(Step.EXPORT, Outcome.DONE, line, record)


def _step_report(night: _Night, outcomes: Sequence[StepOutcome]) -> StepOutcome:
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


# ------------------------------------------------------------------------------------------- the run
FINISH_STALE_S = 3 * 3600  # a finishing shard that died leaves its lock; another host takes over after this


def _finish(night: _Night, entries: list[PlanEntry], steps: set[Step], record: Any) -> None:
    """Train, export and report under the night's finish lock: two shards completing together (or a
    retried pod) never train at once, and whoever comes second finds the records and repeats nothing."""
    s = night.s
    try:
        with NightLock(night.dir.root / "finish.lock", stale_after_s=FINISH_STALE_S):
            if Step.TRAIN in steps:
                record(_step_train(night, entries))
            if Step.EXPORT in steps:
                record(_step_export(night))
            if Step.REPORT in steps:
                record(_step_report(night, night.outcomes))
    except NightLocked as exc:
        if s.shard is None:
            raise
        for step in sorted(steps, key=list(Step).index):
            record(StepOutcome(step, Outcome.SKIPPED, f"{step.value}: another shard is finishing ({exc})"))


def run_nightly(settings: NightlySettings, stream: TextIO | None = sys.stderr) -> NightlyResult:
    """Run the steps of ``settings`` for its night (module docstring); returns what was done."""
    night = _Night(settings, stream)
    s = settings
    if s.simulated:
        night.say("=" * 20 + " SIMULATED: the timer is the roofline model, nothing here is a measurement " + "=" * 20)
    lock = night.dir.root / ("lock" if s.shard is None else f"lock-{s.shard[0]}-of-{s.shard[1]}")
    outcomes = night.outcomes

    def record(outcome: StepOutcome) -> None:
        outcomes.append(outcome)
        for line in outcome.line.splitlines():
            night.say(line)

    started = time.monotonic()
    with NightLock(lock):
        entries: list[PlanEntry] = []
        if Step.PLAN in s.steps or Step.COLLECT in s.steps or Step.TRAIN in s.steps:
            if Step.PLAN in s.steps or Step.COLLECT in s.steps or not night.dir.plan_path.is_file():
                entries, outcome = _step_plan(night)
                record(outcome)
            else:
                entries = read_plan(night.dir.plan_path)
        if Step.SENTINELS in s.steps:
            record(_step_sentinels(night))
        if Step.COLLECT in s.steps:
            record(_step_collect(night, entries))
        finishing = {Step.TRAIN, Step.EXPORT, Step.REPORT} & s.steps
        if finishing and s.shard is not None and Step.COLLECT in s.steps:
            done, count = _shards_complete(night)
            if done < count:
                why = f"{done} of {count} shards complete"
                for step in sorted(finishing, key=list(Step).index):
                    record(StepOutcome(step, Outcome.SKIPPED, f"{step.value}: left to the last shard ({why})"))
                finishing = set()
        if finishing:
            _finish(night, entries, finishing, record)
    exit_code = EXIT_OK
    if any(o.outcome is Outcome.INCOMPLETE for o in outcomes):
        exit_code = EXIT_INCOMPLETE
    if any(o.outcome is Outcome.BLOCKED for o in outcomes) or (
        Step.SENTINELS in s.steps and _drift_blocks(night) is not None
    ):
        exit_code = EXIT_DRIFT
    result = NightlyResult(s.night, s.simulated, night.dir.state_dir, tuple(outcomes), exit_code)
    night.say(f"finished in {time.monotonic() - started:.0f} s")
    return result
