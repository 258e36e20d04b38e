"""``tilecost report``: the figures of :mod:`tilecost.train.figures` as PNG files and one HTML page.

For one model (an exported artifact, by default the shipped one, or an MLflow registered model such
as ``models:/tilecost-h200@champion``) and one dataset, :func:`write_report` writes into a folder:

* ``seed_figure.png``: the seed's tile heatmaps from measurements (whichever of
  :data:`~tilecost.train.figures.SEED_PROBLEMS` the dataset holds; the page names the missing ones);
* ``predicted_vs_measured.png``, ``top1_distribution.png``, ``weakest.png``, ``ood_vs_error.png``:
  the model on the dataset's held-out problems;
* ``index.html``: the summary table and the figures with their captions, plain HTML and CSS (no
  script, nothing fetched from elsewhere), so a nightly job can publish the folder as it is.

Held-out problems the model was trained on (an artifact's training domain lists them) are left out
of its evaluation, and the page says so.
"""

from __future__ import annotations

import datetime as dt
import html
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tilecost.errors import DatasetError
from tilecost.problem import Problem

from .figures import (
    SEED_BLOCK_K,
    SEED_PROBLEMS,
    QualityData,
    ood_figure,
    predicted_vs_measured_figure,
    quality_data,
    read_problem_rows,
    seed_figure,
    tile_grid,
    top1_figure,
    weakest_figure,
)

__all__ = ["WrittenReport", "heldout_quality", "load_model", "write_report"]

CAPTIONS = {
    "seed_figure.png": (
        "The seed's figure from real measurements: each cell is the fastest measured configuration of that "
        f"BLOCK_M × BLOCK_N tile at BLOCK_K = {SEED_BLOCK_K} (kernel variant, GROUP_M, SPLIT_K, warps and stages "
        "at their best), next to the seed's analytical model for the same cells (which has no split-K). Best, "
        "worst and the fixed 128 × 128 are marked with their ratios to the best; hatched cells hold only a "
        "screening lower bound."
    ),
    "predicted_vs_measured.png": "Predicted against measured time of every candidate of the held-out problems.",
    "top1_distribution.png": (
        "Top-1 over held-out problems: the share of problems whose pick reaches at most a given fraction of the "
        "best measured time, for the model and the baselines."
    ),
    "weakest.png": "Where the model is weakest: top-1 by problem group, and the weakest problems.",
    "ood_vs_error.png": (
        "Out-of-distribution verdicts against the actual error: each held-out problem's top-1 by its distance "
        "to the nearest training problem; flagged problems in red."
    ),
}


@dataclass(frozen=True)
class WrittenReport:
    """What :func:`write_report` wrote: the folder, the page, the figures and the notes on the page."""

    directory: Path
    html: Path
    figures: tuple[Path, ...]
    notes: tuple[str, ...]
    model: str
    summary: dict[str, float]

    def line(self) -> str:
        s = self.summary
        quality = f"held-out top-1 {s['top1_geomean']:.3f} over {int(s['problems'])} problems; " if s else ""
        return f"report of {self.model}: {quality}{len(self.figures)} figures and {self.html}"


def load_model(
    device_class: str, *, artifact: str | Path | None = None, model_uri: str | None = None,
    tracking_uri: str | None = None,
) -> tuple[Any, Any, set[str], str]:  # fmt: skip
    """``(model, OOD checker or None, problems it was trained on, description)`` of an artifact
    directory (default: the shipped model of the class) or an MLflow model URI."""
    from tilecost.predict.ood import OODChecker

    from .export import default_export_dir
    from .loading import load_artifact_model, load_registered_model

    if artifact is not None and model_uri is not None:
        raise ValueError("give at most one of artifact and model_uri")
    if model_uri is not None:
        model, name = load_registered_model(model_uri, tracking_uri)
        return model, None, set(), f"MLflow model {name} ({model_uri})"
    directory = Path(artifact) if artifact is not None else default_export_dir(device_class)
    model, metadata = load_artifact_model(directory)
    checker = OODChecker.from_metadata(metadata.domain, metadata.ood)
    trained = {Problem.from_key(k).key for k in metadata.domain.get("problems", [])}
    return model, checker, trained, f"artifact {directory} (Triton {metadata.triton_version})"


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    return path


def heldout_quality(
    dataset: str | Path, device_class: str, model: Any, checker: Any = None, trained: set[str] | None = None,
    notes: list[str] | None = None,
) -> QualityData | None:  # fmt: skip
    """:func:`~tilecost.train.figures.quality_data` of ``model`` on the dataset's held-out problems, less
    those it was ``trained`` on; ``checker`` defaults to the dataset's training problems with the default
    threshold. What was left out, and why, is appended to ``notes``. None without held-out problems."""
    from tilecost.predict.ood import OODChecker, training_domain

    from .dataset import load_measurements
    from .pipeline import split_by_role

    notes = [] if notes is None else notes
    measurements = load_measurements(dataset, device_class)
    train, heldout = split_by_role(measurements)
    seen = sorted((trained or set()) & set(heldout["problem_key"]))
    if seen:
        notes.append(f"left out of the evaluation, as the model was trained on them: {', '.join(seen)}")
        heldout = heldout[~heldout["problem_key"].isin(seen)]
    if heldout.empty:
        notes.append("the dataset has no held-out problem the model was not trained on: no quality figures")
        return None
    if checker is None:
        problems = [Problem.from_key(k) for k in sorted(set(train["problem_key"]))]
        checker = OODChecker.from_metadata(training_domain(problems), {})
        notes.append("OOD verdicts use the dataset's training problems and the default threshold "
                     "(an MLflow model carries no training domain)")  # fmt: skip
    return quality_data(model, heldout, device_class, checker)


def _page(title: str, model: str, dataset: str, figures: Sequence[Path], notes: Sequence[str],
          q: QualityData | None, preamble: str | None) -> str:  # fmt: skip
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
        "figure{margin:2em 0}img{max-width:100%;border:1px solid #ddd}figcaption{color:#555;font-size:.9em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
        "th:first-child,td:first-child{text-align:left}pre{background:#f6f6f6;padding:1em;overflow-x:auto}"
        ".note{color:#8a4b00}</style>",
        "</head><body>",
        f"<h1>{esc(title)}</h1>",
        f"<p>Model: {esc(model)}<br>Dataset: {esc(dataset)}<br>"
        f"Written {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}</p>",
    ]
    if preamble:
        parts.append(f"<h2>Nightly run</h2><pre>{esc(preamble)}</pre>")
    if q is not None:
        ev = q.evaluation
        parts.append(f"<h2>Held-out problems ({len(ev.problems)})</h2><table><tr><th>group</th><th>problems</th>"
                     "<th>model top-1</th><th>worst</th><th>top-5</th><th>fixed</th><th>tutorial</th>"
                     "<th>roofline</th></tr>")  # fmt: skip
        for slug, label in ev.groups():
            s = ev.summary(slug)
            parts.append(
                f"<tr><td>{esc(label)}</td><td>{int(s['problems'])}</td><td>{s['top1_geomean']:.3f}</td>"
                f"<td>{s['top1_worst']:.3f}</td><td>{s['top5_geomean']:.3f}</td><td>{s['fixed_geomean']:.3f}</td>"
                f"<td>{s['tutorial_geomean']:.3f}</td><td>{s['roofline_geomean']:.3f}</td></tr>"
            )
        parts.append(f"</table><p>Geometric means of best / chosen time; log-RMSE of predicted time "
                     f"{ev.log_rmse:.3f} over {ev.rows:,} candidates.</p>")  # fmt: skip
    for note in notes:
        parts.append(f'<p class="note">{esc(note)}</p>')
    for path in figures:
        caption = CAPTIONS.get(path.name, path.stem)
        parts.append(f'<figure><img src="{esc(path.name)}" alt="{esc(caption)}">'
                     f"<figcaption>{esc(caption)}</figcaption></figure>")  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(
    dataset: str | Path,
    device_class: str,
    out: str | Path,
    *,
    artifact: str | Path | None = None,
    model_uri: str | None = None,
    tracking_uri: str | None = None,
    seed_problems: Sequence[Problem] = SEED_PROBLEMS,
    title: str | None = None,
    preamble: str | None = None,
    stream: TextIO | None = sys.stderr,
) -> WrittenReport:
    """Write the figures and ``index.html`` for one model and dataset into ``out`` (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never opens a window
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        if stream is not None:
            print(f"report: {text}", file=stream, flush=True)

    notes: list[str] = []
    figures: list[Path] = []
    say(f"seed figure from {dataset}")
    rows = read_problem_rows(dataset, device_class, [p.key for p in seed_problems])
    grids = []
    for problem in seed_problems:
        try:
            grids.append(tile_grid(rows, problem, device=device_class))
        except DatasetError as exc:
            notes.append(f"seed figure: {exc}")
    if grids:
        figures.append(_save(seed_figure(grids), out / "seed_figure.png"))
    say("loading the model")
    model, checker, trained, description = load_model(
        device_class, artifact=artifact, model_uri=model_uri, tracking_uri=tracking_uri
    )
    say(f"scoring the held-out problems with {description}")
    q = heldout_quality(dataset, device_class, model, checker, trained, notes)
    if q is not None:
        figures.append(_save(predicted_vs_measured_figure(q), out / "predicted_vs_measured.png"))
        figures.append(_save(top1_figure(q), out / "top1_distribution.png"))
        figures.append(_save(weakest_figure(q), out / "weakest.png"))
        figures.append(_save(ood_figure(q), out / "ood_vs_error.png"))
    page = out / "index.html"
    page.write_text(_page(title or f"tilecost {device_class}: the current model", description, str(dataset),
                          figures, notes, q, preamble))  # fmt: skip
    summary = q.evaluation.summary() if q is not None else {}
    return WrittenReport(out, page, tuple(figures), tuple(notes), description, summary)
