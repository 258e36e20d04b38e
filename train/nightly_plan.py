"""Tonight's problems: flagged queries first, then fresh samples of the plan families, then the model's own picks.

Three sources, in this order, the first two without the problems the dataset already holds (under any run id)
and without repeats:

1. **flagged**: problems the predictor answered with an out-of-distribution verdict, read from its
   query log (:class:`tilecost.predict.querylog.QueryLog`, opt-in and bounded in size), at most
   ``max_flagged`` of them; problems too large to measure (over :data:`~tilecost.collect.plans.MAX_FLOP`
   or :data:`~tilecost.collect.plans.MAX_OPERAND_BYTES`) are set aside and counted;
2. **fresh**: :func:`tilecost.collect.plans.build_plan` of the configured families, seeded with the
   night (``20261129``), so each night samples new shapes and a re-run the same night the same ones.
3. **model-top** (``model_top`` problems, off by default): training problems the dataset already holds,
   drawn in an order seeded by the night, each restricted (``only``) to the ``model_top_k``
   configurations the model ranks fastest among those never timed on it (:func:`model_top_entries`).
   Training problems are measured on a seeded sample of their space, so the model's favourites on them
   are often guesses; timing them shows it where it is wrong. In grouped CV over the training problems
   measured over their whole space, adding each fit problem's model top 64 to its 25% sample raised
   top-1 from 0.909 to 0.934 (mean of four sample draws), where as many random configurations did not
   (0.907; ``benchmarks/experiments/model_topk_rows_cv.py``, docs/BENCHMARKS.md §4).

Roles come from :func:`tilecost.collect.plans.is_heldout` as for every other problem, so a fifth of
tonight's flagged problems are measured over their whole candidate space and judge the model.
A dataset without any held-out problem cannot evaluate a model; on such a dataset (a fresh scratch
one) the plan draws more ``random`` problems until it holds one (:func:`ensure_heldout`).

The sentinels are not part of this plan: they go to their own store (:mod:`tilecost.train.drift`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tilecost.collect.plans import (
    MAX_FLOP,
    MAX_OPERAND_BYTES,
    PlanEntry,
    Role,
    build_plan,
    is_heldout,
    load_plan_file,
    plan_family,
)
from tilecost.config import TileConfig
from tilecost.problem import DType, Layout, Problem

__all__ = [
    "FLAGGED_FAMILY",
    "MODEL_TOP_FAMILY",
    "ensure_heldout",
    "flagged_problems",
    "measurable",
    "model_top_entries",
    "model_top_phrase",
    "plan_json",
    "plan_line",
    "plan_night",
    "read_plan",
]

FLAGGED_FAMILY = "flagged"
MODEL_TOP_FAMILY = "model-top"
# Extra random draws allowed to find one held-out problem (each is held out with probability 0.2,
# so 64 draws miss with probability 0.8**64, about 6e-7).
_HELDOUT_DRAWS = 64


def measurable(problem: Problem) -> bool:
    """Whether the collector's plan limits allow measuring ``problem`` (the plans' own bounds)."""
    largest = max(problem.m * problem.k, problem.k * problem.n) * problem.dtype.in_bytes
    return problem.flops <= MAX_FLOP and largest <= MAX_OPERAND_BYTES and problem.m * problem.n * 4 <= MAX_OPERAND_BYTES


def flagged_problems(query_log: str | Path) -> list[Problem]:
    """The problems the predictor flagged, from its query log (the predictor's own reader)."""
    try:
        from tilecost.predict.querylog import QueryLog
    except ImportError as exc:  # the predictor's query log came with a later tilecost
        raise RuntimeError(f"--query-log {query_log}: this tilecost has no tilecost.predict.querylog ({exc})") from exc
    return list(QueryLog(Path(query_log)).flagged())


def ensure_heldout(
    entries: list[PlanEntry], measured: set[str], dtype: DType, layout: Layout, seed: int
) -> tuple[list[PlanEntry], int]:
    """``entries`` plus random problems until the dataset and the plan hold a held-out problem;
    returns the new list and how many were added."""
    if any(e.role is Role.HELDOUT for e in entries) or any(is_heldout(Problem.from_key(k)) for k in measured):
        return entries, 0
    taken = {e.problem for e in entries}
    added = []
    for problem in plan_family("random", _HELDOUT_DRAWS, dtype, layout, seed=seed + 1):
        if problem in taken or problem.key in measured:
            continue
        taken.add(problem)
        role = Role.HELDOUT if is_heldout(problem) else Role.TRAIN
        added.append(PlanEntry(problem, "random", role))
        if role is Role.HELDOUT:
            return entries + added, len(added)
    return entries + added, len(added)


def model_top_entries(
    measured_configs: Mapping[str, set[str]],
    predicted_times: Callable[[Problem], Mapping[TileConfig, float]],
    *,
    problems: int,
    per_problem: int,
    seed: int,
    within: int | None = None,
) -> list[PlanEntry]:
    """Up to ``problems`` training problems of ``measured_configs`` (problem key -> the config ids timed
    on it, every run together), taken in an order seeded by ``seed``, each restricted to the
    ``per_problem`` configurations fastest by ``predicted_times`` among those not yet timed on it; a
    problem with none left untimed is passed over. With ``within``, only configurations among the
    problem's ``within`` fastest predicted count (timed or not): the untimed part of the model's own top,
    so a problem whose top is already timed is passed over too. The entries measure all of their
    configurations (at most a sweep's ``min_sample``, which :class:`NightlySettings` checks)."""
    if problems < 0 or per_problem < 1:
        raise ValueError(f"model_top={problems} must be >= 0 and model_top_k={per_problem} >= 1")
    if within is not None and within < 1:
        raise ValueError(f"within={within} is not allowed; use None or an int >= 1")
    keys = sorted(measured_configs)
    random.Random(f"model-top:{seed}").shuffle(keys)
    out: list[PlanEntry] = []
    for key in keys:
        if len(out) >= problems:
            break
        problem = Problem.from_key(key)
        timed = measured_configs[key]
        ranked = sorted((t, c.key) for c, t in predicted_times(problem).items())[:within]
        untimed = [(t, k) for t, k in ranked if k not in timed][:per_problem]
        if untimed:
            only = (("config_id", tuple(sorted(k for _, k in untimed))),)
            out.append(PlanEntry(problem, MODEL_TOP_FAMILY, Role.TRAIN, only))
    return out


def plan_night(
    *,
    flagged: Sequence[Problem],
    families: Mapping[str, int],
    dtypes: Sequence[DType],
    layouts: Sequence[Layout],
    seed: int,
    measured: set[str],
    max_flagged: int,
    model_top: Sequence[PlanEntry] = (),
) -> tuple[list[PlanEntry], dict[str, int]]:
    """Tonight's plan (module docstring) and the counts of what went into it: ``flagged_logged``,
    ``flagged_measured`` (already in the dataset), ``flagged_too_large``, ``flagged_over_limit``,
    ``flagged``, ``fresh``, ``fresh_measured``, ``heldout_draws``, ``heldout``, ``train``,
    ``model_top`` (the entries of :func:`model_top_entries` given, measured problems by construction,
    appended last)."""
    if max_flagged < 0:
        raise ValueError(f"max_flagged={max_flagged} must be >= 0")
    counts = {"flagged_logged": len(flagged), "flagged_measured": 0, "flagged_too_large": 0, "flagged_over_limit": 0}
    entries: list[PlanEntry] = []
    seen: set[Problem] = set()
    for problem in flagged:
        if problem in seen:
            continue
        seen.add(problem)
        if problem.key in measured:
            counts["flagged_measured"] += 1
        elif not measurable(problem):
            counts["flagged_too_large"] += 1
        elif len(entries) >= max_flagged:
            counts["flagged_over_limit"] += 1
        else:
            entries.append(PlanEntry(problem, FLAGGED_FAMILY, Role.HELDOUT if is_heldout(problem) else Role.TRAIN))
    counts["flagged"] = len(entries)
    counts["fresh_measured"] = 0
    for entry in build_plan(dict(families), list(dtypes), list(layouts), seed=seed) if families else []:
        if entry.problem in seen:
            continue
        seen.add(entry.problem)
        if entry.problem.key in measured:
            counts["fresh_measured"] += 1
            continue
        entries.append(entry)
    counts["fresh"] = len(entries) - counts["flagged"]
    entries, counts["heldout_draws"] = ensure_heldout(entries, measured, dtypes[0], layouts[0], seed)
    counts["model_top"] = 0
    for entry in model_top:
        if entry.problem not in seen and entry.role is Role.TRAIN:
            seen.add(entry.problem)
            entries.append(entry)
            counts["model_top"] += 1
    counts["heldout"] = sum(e.role is Role.HELDOUT for e in entries)
    counts["train"] = len(entries) - counts["heldout"]
    return entries, counts


def model_top_phrase(retimed: int, model_top: int, model_top_k: int) -> str:
    """What a plan says of its model-top part: that none was asked for (``model_top`` 0, the default), or how
    many training problems are re-timed, each on at most ``model_top_k`` of the model's fastest configurations
    not yet timed on it (fewer where fewer are left untimed)."""
    if model_top == 0:
        return "no training problems re-timed on the model's favourites (--model-top 0)"
    return (
        f"{retimed} of {model_top} training problems re-timed on up to {model_top_k} of the model's fastest "
        "untimed configurations each"
    )


def plan_line(counts: Mapping[str, int], source: str, model_top: int, model_top_k: int, path: Path | str) -> str:
    """The plan step's one line: ``counts`` of :func:`plan_night`, where the flagged problems came from
    (``source``), the model-top settings and the plan file."""
    return (
        f"plan: {counts['train'] + counts['heldout']} problems "
        f"({counts['flagged']} flagged of {counts['flagged_logged']} logged in {source}"
        f" [{counts['flagged_measured']} already measured, {counts['flagged_too_large']} too large, "
        f"{counts['flagged_over_limit']} over the limit]; {counts['fresh']} fresh family samples; "
        f"{model_top_phrase(counts['model_top'], model_top, model_top_k)}; {counts['heldout']} held out) -> {path}"
    )


def plan_json(entries: Sequence[PlanEntry]) -> str:
    """The plan as JSON in the format :func:`tilecost.collect.plans.load_plan_file` reads."""
    items = [
        {"m": e.problem.m, "n": e.problem.n, "k": e.problem.k, "dtype": e.problem.dtype.value,
         "layout": e.problem.layout.value, "family": e.family, "role": e.role.value,
         **({"only": {name: list(values) for name, values in e.only}} if e.only else {})}
        for e in entries
    ]  # fmt: skip
    return json.dumps(items, indent=1)


def read_plan(path: Path) -> list[PlanEntry]:
    return load_plan_file(path)
