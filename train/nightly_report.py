"""The nightly loop's short report (``<state>/<night>/report.md``) and which model its figures describe.

The report is built from the night's step records, not only from what this process did, so the
report of a run that resumed (or of the shard that finished a sharded night) covers the whole night:
the plan, the sentinels' drift verdict, the collection, the training run and its champion decision,
tonight's gain on the flagged problems, the export, and where every result is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .drift import DriftReport
from .nightly_plan import model_top_phrase
from .nightly_state import NightDir

if TYPE_CHECKING:
    from .nightly_settings import NightlySettings
    from .nightly_steps import StepOutcome

__all__ = ["champion_source", "gain_lines", "nightly_markdown"]


def champion_source(settings: NightlySettings, night: NightDir) -> dict[str, Any] | None:
    """Keyword arguments of :func:`tilecost.train.report.write_report` for the current champion: the
    artifact exported tonight, else the champion of the run's MLflow store, else ``None`` (no champion)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from .tracking import CHAMPION_ALIAS, experiment_name

    export = night.read_record("export")
    if export is not None and export.get("ok"):
        return {"artifact": export["directory"]}
    train = night.read_record("train")
    uri = train["tracking_uri"] if train else settings.resolved_tracking_uri
    name = experiment_name(settings.device_class)
    try:
        mlflow.MlflowClient(uri).get_model_version_by_alias(name, CHAMPION_ALIAS)
    except MlflowException:
        return None
    return {"model_uri": f"models:/{name}@{CHAMPION_ALIAS}", "tracking_uri": uri}


def gain_lines(gain: dict[str, Any] | None) -> list[str]:
    """Tonight's flagged problems, before (previous champion) and after (tonight's model)."""
    if not gain:
        return ["No flagged problem was collected tonight."]
    problems = gain["problems"]
    train_role = sum(p["role"] == "train" for p in problems.values())
    before = gain.get("before_geomean")
    head = (
        f"Flagged problems collected tonight: {len(problems)} ({train_role} trained on tonight, "
        f"{len(problems) - train_role} held out). Top-1 (best measured / measured time of the pick), geometric "
        f"mean: previous champion {before:.3f} -> tonight's model {gain['after_geomean']:.3f}."
        if before is not None
        else f"Flagged problems collected tonight: {len(problems)}; no previous champion to compare with; "
        f"tonight's model top-1 {gain['after_geomean']:.3f}."
    )
    lines = [head, "Train-role problems were measured on a sample of their candidates and trained on: for them "
             "'after' is in-sample and 'best' is the best of the sample (benchmarks/nightly_gain.py measures the "
             "honest gain)."]  # fmt: skip
    for key, p in sorted(problems.items()):
        was = f"{p['before']:.3f}" if "before" in p else "-"
        lines.append(f"  {key:<26} {p['role']:<7} {was} -> {p['after']:.3f}")
    return lines


def nightly_markdown(settings: NightlySettings, night: NightDir, outcomes: Sequence[StepOutcome]) -> str:
    """The night's short report in Markdown (module docstring)."""
    s = settings
    label = "SIMULATED (roofline stand-in timer; nothing here is a measurement)" if s.simulated else "real"
    lines = [f"# tilecost nightly {s.night}: {label}", "",
             f"Device class {s.device_class}; dataset `{s.dataset}`; state `{night.root}`; backend `{s.backend}`.",
             "", "## Steps (this run)", ""]  # fmt: skip
    for o in outcomes:
        first, *rest = o.line.splitlines() or [""]
        lines.append(f"- **{o.step.value}** {o.outcome.value}: {first}")
        lines.extend(f"    {r}" for r in rest)
    plan = night.read_record("plan")
    if plan:
        c = plan["counts"]
        lines += ["", "## Plan", "",
                  f"{plan['problems']} problems: {c['flagged']} flagged (of {c['flagged_logged']} in the query log; "
                  f"{c['flagged_measured']} already measured, {c['flagged_too_large']} too large, "
                  f"{c['flagged_over_limit']} over the limit), {c['fresh']} fresh family samples; "
                  f"{model_top_phrase(c.get('model_top', 0), s.model_top, s.model_top_k)}; {c['heldout']} held "
                  f"out. File: `{plan['plan']}`."]  # fmt: skip
    sentinels = night.read_record("sentinels")
    if sentinels:
        report = DriftReport.from_dict(sentinels["drift"])
        lines += ["", "## Sentinels", "", "```", *report.lines(), "```"]
        if sentinels.get("accepted"):
            lines.append("Drift accepted (--accept-drift): tonight is the new reference.")
    collects = sorted(p.stem for p in (night.root / "steps").glob("collect*.json")) if night.root.is_dir() else []
    if collects:
        lines += ["", "## Collection", ""]
        for name in collects:
            record = night.read_record(name) or {}
            lines.append(f"- {name}: {'complete' if record.get('complete') else 'INCOMPLETE'}; {record.get('line')}")
    train = night.read_record("train")
    if train:
        h = train["heldout"]
        lines += ["", "## Training", "",
                  f"Held-out top-1 {h['top1_geomean']:.3f} (worst {h['top1_worst']:.3f}, "
                  f"top-5 {h['top5_geomean']:.3f}) on {int(h['problems'])} problems; "
                  f"{train['train_problems']} training problems.",
                  f"MLflow `{train['tracking_uri']}`: run {train['mlflow_run_id']}, {train['model_name']} "
                  f"v{train['model_version']}: {'PROMOTED' if train['promoted'] else 'not promoted'} "
                  f"({train['decision']}).", f"Full table: `{night.root / 'evaluation.txt'}`.", "",
                  *gain_lines(train.get("flagged_gain"))]  # fmt: skip
    export = night.read_record("export")
    if export:
        state = "written" if export.get("ok") else f"NOT written ({export.get('error')})"
        lines += ["", "## Export", "", f"Artifact of v{export['model_version']} {state}: `{export['directory']}`."]
        gate = export.get("answer_gate")
        if gate and gate.get("problems"):
            ours, theirs = gate["challenger"], gate["champion"]
            lines.append(
                f"Answer gate ({'passed' if gate['passed'] else 'FAILED'}: {gate['reason']}), the predictors' "
                f"answers on {gate['problems']} held-out problems: {ours['geomean']:.4f} of the best, "
                f"{ours['bad']} below 0.90 ({ours['bad_flagged']} of them flagged), against the previous artifact's "
                f"{theirs['geomean']:.4f} and {theirs['bad']} ({theirs['bad_flagged']}); ratio x{gate['ratio']:.4f} "
                f"(90% x{gate['interval'][0]:.4f}-x{gate['interval'][1]:.4f})."
            )
        if export.get("withheld"):
            lines.append(f"The champion alias is back on v{export.get('champion')}; the previous artifact stays.")
    return "\n".join(lines) + "\n"
