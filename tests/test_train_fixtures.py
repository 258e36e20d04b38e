"""Small, real Parquet datasets for the training tests, written through ``DatasetStore.write_problem``.

Times are synthetic but structured so that a model can learn them and the analytical roofline
cannot rank them alone: the roofline time of each pair, times a penalty for 8 warps and for stages
away from 3, plus a fixed 3 µs launch and 4 µs more for split-K. Every config of a problem's
candidate space is written for held-out problems, a deterministic third for training ones.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tilecost.collect.store import DatasetStore
from tilecost.device import load_device
from tilecost.features import ConfigArrays, roofline_time_us
from tilecost.problem import Problem
from tilecost.space import problem_candidates

DEVICE = load_device("h200")
RUN_ID = "rtest"
KEEP = 0.05
TRAIN_PROBLEMS = (
    Problem(256, 512, 1024, "bf16", "nt"),
    Problem(1024, 1024, 512, "bf16", "nt"),
    Problem(64, 2048, 2048, "bf16", "nt"),
    Problem(512, 256, 4096, "bf16", "nt"),
    Problem(2048, 1024, 256, "bf16", "nt"),
    Problem(128, 4096, 1024, "bf16", "nt"),
    Problem(16, 1024, 4096, "bf16", "nt"),
    Problem(768, 768, 768, "bf16", "nt"),
)
HELDOUT_PROBLEMS = (
    Problem(512, 1024, 2048, "bf16", "nt"),
    Problem(32, 2048, 1024, "bf16", "nt"),
    Problem(300, 1000, 700, "bf16", "nt"),
)


def _hash01(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def synthetic_time_us(problem: Problem, configs: ConfigArrays) -> np.ndarray:
    """The synthetic time of each candidate (module docstring)."""
    roof = roofline_time_us(problem, configs, DEVICE)
    penalty = 1 + 0.5 * (configs.num_warps == 8) + 0.15 * np.abs(configs.num_stages - 3) + 0.3 * configs.is_tma
    return roof * penalty + 3.0 + 4.0 * (configs.split_k > 1)


def problem_rows(
    problem: Problem, role: str, *, keep: float = KEEP, fraction: float = 1.0, **overrides: object
) -> list[dict]:
    """Rows of one problem as the collector writes them (every column of the schema).

    ``keep`` is the share of the candidate space written (a deterministic hash subset: the real
    space has thousands of configurations a problem, more than a fast test wants); ``fraction``
    is the ``sample_fraction`` recorded (1.0: the problem counts as measured completely).
    """
    candidates = tuple(c for c in problem_candidates(problem, DEVICE) if _hash01(problem.key + c.key) < keep)
    times = synthetic_time_us(problem, ConfigArrays.from_configs(candidates))
    best = float(times.min())
    rows = []
    for config, time_us in zip(candidates, times, strict=True):
        status = "hopeless" if time_us > 3 * best else "ok"
        rows.append(
            {
                "device_class": "h200",
                "gpu_name": "NVIDIA H200",
                "sm_count": 132,
                "compute_capability": "9.0",
                "driver_version": "580.159.04",
                "cuda_version": "13.0",
                "torch_version": "2.11.0+cu130",
                "triton_version": "3.6.0",
                "run_id": RUN_ID,
                "timestamp": dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
                "family": "test",
                "role": role,
                "sample_fraction": fraction,
                "problem_key": problem.key,
                "m": problem.m,
                "n": problem.n,
                "k": problem.k,
                "dtype": problem.dtype.value,
                "layout": problem.layout.value,
                "config_id": config.key,
                "variant": config.variant.value,
                "block_m": config.block_m,
                "block_n": config.block_n,
                "block_k": config.block_k,
                "group_m": config.group_m,
                "split_k": config.split_k,
                "num_warps": config.num_warps,
                "num_stages": config.num_stages,
                "status": status,
                "time_us": float(time_us),
                "spread": 0.01,
                "reps": 10,
                "rel_error": 1e-3,
                "registers": 128,
                "spills": 0,
                "smem_bytes": 65536,
                "min_sm_clock_mhz": 1980.0,
                "max_power_w": 300.0,
                "max_temperature_c": 40.0,
                "throttled_rounds": 0,
                "error": None,
                **overrides,
            }
        )
    return rows


def write_dataset(
    root: Path,
    train: Iterable[Problem] = TRAIN_PROBLEMS,
    heldout: Iterable[Problem] = HELDOUT_PROBLEMS,
    *,
    train_fraction: float = 0.35,
) -> Path:
    """A dataset under ``root``: training problems marked sampled, held-out ones complete."""
    store = DatasetStore(root)
    for problem in train:
        rows = problem_rows(problem, "train", keep=KEEP * train_fraction / 0.35, fraction=train_fraction)
        store.write_problem("h200", problem, RUN_ID, rows)
    for problem in heldout:
        store.write_problem("h200", problem, RUN_ID, problem_rows(problem, "heldout"))
    return root


def test_fixture_dataset_reads_back(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "ds")

    table = DatasetStore(root).read("h200")

    assert set(table.column("role").to_pylist()) == {"train", "heldout"}
    assert len(set(table.column("problem_key").to_pylist())) == len(TRAIN_PROBLEMS) + len(HELDOUT_PROBLEMS)
