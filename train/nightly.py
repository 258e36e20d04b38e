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
   (the predictor's precomputation can be slow), swapped into ``export_dir`` whole when its answers pass the
   answer gate against the artifact there (:mod:`~tilecost.train.answer_gate`: the predictor's answers on the
   held-out problems, not the full model's, no worse beyond chance and no more of them bad), else
   withheld: the artifact there stays and the ``champion`` alias goes back to its version; with the champion
   unchanged, its artifact there gets its tuning database, and the other device classes' tables it holds or
   tonight's dataset has rows of, refreshed from tonight's dataset (:mod:`~tilecost.train.refresh`);
6. **report**: ``<night>/report.md`` and, with matplotlib, the champion's figures and HTML page
   (:mod:`tilecost.train.report`).

Each step leaves a record (:mod:`tilecost.train.nightly_state`); a step whose record exists is not
repeated, training re-runs only when the dataset changed since its record. With ``shard=(i, N)``
(a Slurm array task or a Kubernetes Indexed Job pod) the sentinels run on shard 0, every shard
collects its share, and the shard that completes last trains, exports and reports.

**Simulated runs.** With the simulated backend (:mod:`tilecost.collect.simulated`) nothing here is
a measurement: every line says ``SIMULATED``, the dataset must be a scratch one (the shipped
dataset, and any dataset holding real rows, is refused), and the MLflow store defaults to
``<state>/mlflow-simulated.db``; ``sqlite:///mlflow.db`` and any store whose experiment holds real runs
are refused, so a simulated model can never become the real champion.

Errors: :class:`NightlyError` (a :class:`~tilecost.errors.TilecostError`) for a state or data the
loop refuses to work on; ``ValueError`` for settings out of range.

Modules: :mod:`~tilecost.train.nightly_settings` (the settings), :mod:`~tilecost.train.nightly_steps`
(plan, sentinels, collect, report), :mod:`~tilecost.train.nightly_train` (train, export),
:mod:`~tilecost.train.nightly_plan`, :mod:`~tilecost.train.nightly_state`, :mod:`~tilecost.train.drift`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tilecost.collect.plans import PlanEntry

from .nightly_plan import read_plan
from .nightly_settings import CUDA_BACKEND, DEFAULT_FAMILIES, ExportMode, NightlyError, NightlySettings, Step
from .nightly_state import NightLock, NightLocked
from .nightly_steps import (
    NightContext,
    Outcome,
    StepOutcome,
    drift_blocks,
    shards_complete,
    step_collect,
    step_plan,
    step_report,
    step_sentinels,
)
from .nightly_train import prepare_store, step_export, step_train

__all__ = [
    "CUDA_BACKEND",
    "DEFAULT_FAMILIES",
    "EXIT_DRIFT",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "ExportMode",
    "NightlyError",
    "NightlyResult",
    "NightlySettings",
    "Outcome",
    "Step",
    "StepOutcome",
    "prepare_store",
    "run_nightly",
]

EXIT_OK = 0
EXIT_DRIFT = 3  # sentinels drifted beyond their noise: stopped before training
EXIT_INCOMPLETE = 75  # EX_TEMPFAIL: collection stopped at its time budget; run again to resume


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


# ------------------------------------------------------------------------------------------- the run
FINISH_STALE_S = 3 * 3600  # a finishing shard that died leaves its lock; another host takes over after this


def _finish(night: NightContext, entries: list[PlanEntry], steps: set[Step], record: Any) -> None:
    """Train, export and report under the night's finish lock: two shards completing together (or a
    retried pod) never train at once, and whoever comes second finds the records and repeats nothing."""
    s = night.s
    try:
        with NightLock(night.dir.root / "finish.lock", stale_after_s=FINISH_STALE_S):
            if Step.TRAIN in steps:
                record(step_train(night, entries))
            if Step.EXPORT in steps:
                record(step_export(night))
            if Step.REPORT in steps:
                record(step_report(night, night.outcomes))
    except NightLocked as exc:
        if s.shard is None:
            raise
        for step in sorted(steps, key=list(Step).index):
            record(StepOutcome(step, Outcome.SKIPPED, f"{step.value}: another shard is finishing ({exc})"))


def run_nightly(settings: NightlySettings, stream: TextIO | None = sys.stderr) -> NightlyResult:
    """Run the steps of ``settings`` for its night (module docstring); returns what was done."""
    night = NightContext(settings, stream)
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
                entries, outcome = step_plan(night)
                record(outcome)
            else:
                entries = read_plan(night.dir.plan_path)
        if Step.SENTINELS in s.steps:
            record(step_sentinels(night))
        if Step.COLLECT in s.steps:
            record(step_collect(night, entries))
        finishing = {Step.TRAIN, Step.EXPORT, Step.REPORT} & s.steps
        if finishing and s.shard is not None and Step.COLLECT in s.steps:
            done, count = shards_complete(night)
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
        Step.SENTINELS in s.steps and drift_blocks(night) is not None
    ):
        exit_code = EXIT_DRIFT
    result = NightlyResult(s.night, s.simulated, night.dir.state_dir, tuple(outcomes), exit_code)
    night.say(f"finished in {time.monotonic() - started:.0f} s")
    return result
