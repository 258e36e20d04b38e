"""The training problems' candidate rows as arrays, for experiments that fit cost models on subsets of them.

The experiments run as scripts (``python benchmarks/experiments/<name>.py``), so this folder is on their path:
they import :class:`TrainingRows` from here, load it once and fit models on index sets with
:meth:`TrainingRows.fit` (the shipped settings), or get every row's out-of-fold prediction from
:meth:`TrainingRows.out_of_fold` and score it per problem over :meth:`TrainingRows.problem_rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from tilecost.device import DeviceSpec, load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role


def config_keys(rows: pd.DataFrame) -> pd.Series:
    """Each row's configuration within its dtype and layout, ``dtype|layout|config_id``: the key a configuration's
    standing over the training problems (its prior) is taken per."""
    return rows["dtype"].astype(str) + "|" + rows["layout"].astype(str) + "|" + rows["config_id"].astype(str)


def centred_log_time(rows: pd.DataFrame) -> np.ndarray:
    """Each row's ln time minus the mean ln time of its problem's rows (``problem_key``): how fast the configuration
    ran relative to the problem's other timed configurations."""
    log_time = np.log(rows["time_us"].to_numpy(dtype=np.float64))
    return log_time - pd.Series(log_time).groupby(rows["problem_key"].to_numpy()).transform("mean").to_numpy()


def rows_by_problem(groups: np.ndarray) -> list[np.ndarray]:
    """Each problem's row indices, for rows labelled by problem key ``groups`` (problems in key order, rows in the
    order given)."""
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    bounds = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1], True])
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@dataclass(frozen=True)
class TrainingRows:
    """One row per (training problem, timed configuration), with its features, time and problem."""

    device: DeviceSpec
    rows: pd.DataFrame
    X: np.ndarray
    time_us: np.ndarray
    groups: np.ndarray

    @classmethod
    def load(cls, dataset: str = "datasets/measurements", device_class: str = "h200") -> TrainingRows:
        device = load_device(device_class)
        train, _ = split_by_role(load_measurements(dataset, device_class))
        rows = candidate_rows(train)
        return cls(device, rows, build_features(rows, device), rows["time_us"].to_numpy(),
                   rows["problem_key"].to_numpy())  # fmt: skip

    def top1_by_problem(self, index: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
        """For the rows ``index`` and a prediction of each: every problem's best time over the time of its
        fastest-predicted row (its top-1 within the configurations it timed)."""
        groups, times = self.groups[index], self.time_us[index]
        out = {}
        for g in np.unique(groups):
            pos = np.flatnonzero(groups == g)
            out[str(g)] = float(times[pos].min() / times[pos][int(np.argmin(predicted[pos]))])
        return out

    def fit(self, index: np.ndarray, model: CostModel | None = None) -> CostModel:
        """A cost model (``model``, default the shipped settings) fitted on the rows ``index`` (:func:`fit_rows`)."""
        return fit_rows(model or CostModel(), self.rows.iloc[index], self.device, X=self.X[index])

    def folds(self, seed: int) -> Iterator[np.ndarray]:
        """Grouped 5-fold CV over the training problems (fold seed ``seed``): per fold, a row mask of the four
        folds a model is fitted on (the other fold's rows are its test rows)."""
        problems = np.unique(self.groups)
        for fit_p, _ in GroupKFold(5, shuffle=True, random_state=seed).split(problems, groups=problems):
            yield np.isin(self.groups, problems[fit_p])

    def out_of_fold(
        self, seed: int, settings: Mapping[str, Any] = {}, progress: Callable[[np.ndarray], None] | None = None
    ) -> np.ndarray:
        """Every row's out-of-fold prediction: on each of :meth:`folds`, a ``CostModel(**settings)`` (default the
        shipped settings) fitted on the fit folds predicts the test fold's rows. ``progress`` is called after each
        fold with the predictions so far (NaN where not yet predicted)."""
        predicted = np.full(len(self.groups), np.nan)
        for in_fit in self.folds(seed):
            test_i = np.flatnonzero(~in_fit)
            predicted[test_i] = self.fit(np.flatnonzero(in_fit), CostModel(**settings)).predict(self.X[test_i])
            if progress is not None:
                progress(predicted)
        return predicted

    def problem_rows(self) -> list[np.ndarray]:
        """Each training problem's row indices (problems in key order, rows in dataset order)."""
        return rows_by_problem(self.groups)

    def cv_arms(
        self,
        arms: Callable[[int], Mapping[str, np.ndarray]],
        subsets: Mapping[str, Callable[[str], bool]],
        seeds: Sequence[int],
        settings: Mapping[str, Mapping[str, Any]] = {},
    ) -> dict[str, dict[str, list[float]]]:
        """Grouped 5-fold CV over the training problems, once per fold seed: each arm (a row mask from
        ``arms(seed)``) fits a model (CostModel of ``settings[arm]``, default the shipped settings) on the fit
        folds' rows it keeps, and every test problem's top-1 within its timed configurations is recorded under
        each subset (named predicate on the problem key) it is in. Prints one line per fold seed (every test
        problem) and a summary per arm; returns the scores."""
        scores: dict[str, dict[str, list[float]]] = {}
        for seed in seeds:
            masks = arms(seed)
            per_seed: dict[str, list[float]] = {}
            for in_fit in self.folds(seed):
                test_i = np.flatnonzero(~in_fit)
                for arm, keep in masks.items():
                    model = CostModel(**settings.get(arm, {}))
                    pred = self.fit(np.flatnonzero(in_fit & keep), model).predict(self.X[test_i])
                    for g, fr in self.top1_by_problem(test_i, pred).items():
                        for name, member in subsets.items():
                            if member(g):
                                scores.setdefault(arm, {}).setdefault(name, []).append(fr)
                        per_seed.setdefault(arm, []).append(fr)
            line = ", ".join(f"{a.split()[0]} {np.exp(np.log(v).mean()):.3f}" for a, v in per_seed.items())
            print(f"fold seed {seed}: {line}", flush=True)
        width = max(len(a) for a in scores) if scores else 0
        for arm, by in scores.items():
            parts = [f"{n} {np.exp(np.log(v).mean()):.3f} ({int((np.array(v) < 0.9).sum())}/{len(v)})"
                     for n, v in by.items()]  # fmt: skip
            print(f"{arm:<{width}}: {', '.join(parts)}")
        return scores
