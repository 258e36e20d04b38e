"""The training problems' candidate rows as arrays, for experiments that fit cost models on subsets of them.

The experiments run as scripts (``python benchmarks/experiments/<name>.py``), so this folder is on their path:
they import :class:`TrainingRows` from here, load it once and fit models on index sets with
:meth:`TrainingRows.fit` (the shipped settings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tilecost.device import DeviceSpec, load_device
from tilecost.train.dataset import load_measurements
from tilecost.train.model import CostModel
from tilecost.train.pipeline import build_features, candidate_rows, fit_rows, split_by_role


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

    def fit(self, index: np.ndarray) -> CostModel:
        """A cost model of the shipped settings fitted on the rows ``index`` (:func:`fit_rows`)."""
        return fit_rows(CostModel(), self.rows.iloc[index], self.device, X=self.X[index])
