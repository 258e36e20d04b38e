"""The figures' data (tile grids, model quality) on real Parquet files written to a temporary dataset, and
the drawing of every figure without a display."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from tests.test_train_fixtures import HELDOUT_PROBLEMS, TRAIN_PROBLEMS, problem_rows, write_dataset
from tilecost.collect.store import DatasetStore
from tilecost.device import load_device
from tilecost.errors import DatasetError
from tilecost.features import ConfigArrays, roofline_time_us
from tilecost.problem import Problem
from tilecost.space import BLOCK_MN, problem_candidates

pytest.importorskip("matplotlib")
from tilecost.train.figures import (  # noqa: E402  (after the skip: matplotlib is optional)
    ood_figure,
    predicted_vs_measured_figure,
    quality_data,
    read_problem_rows,
    seed_figure,
    tile_grid,
    top1_figure,
    weakest_figure,
)

PROBLEM = Problem(1000, 1000, 8192)


def _time(block_m: int, block_n: int, stages: int) -> float:
    """Best cell 64×128; each octave away in BLOCK_M or BLOCK_N costs 100 µs; 3 stages are the best."""
    return 100.0 * (1 + abs(np.log2(block_m / 64)) + abs(np.log2(block_n / 128))) + abs(stages - 3)


def write_seed_problem(root: Path, problem: Problem = PROBLEM) -> Path:
    """Every BLOCK_K = 64 candidate of ``problem``: 16×16 only as hopeless screening bounds, and the
    best config of the 64×128 cell measured twice (two runs, times 90 and 110: median 100)."""
    template = problem_rows(TRAIN_PROBLEMS[0], "train")[0]
    rows = []
    for config in problem_candidates(problem):
        if config.block_k != 64:
            continue
        hopeless = (config.block_m, config.block_n) == (16, 16)
        rows.append({**template, **config.to_dict(), "config_id": config.key, "problem_key": problem.key,
                     "m": problem.m, "n": problem.n, "k": problem.k, "family": "seed", "role": "train",
                     "status": "hopeless" if hopeless else "ok",
                     "time_us": _time(config.block_m, config.block_n, config.num_stages)})  # fmt: skip
    store = DatasetStore(root)
    store.write_problem("h200", problem, "r1", rows)
    best = min((r for r in rows if (r["block_m"], r["block_n"]) == (64, 128)), key=lambda r: r["time_us"])
    again = [{**best, "run_id": "r2", "time_us": t} for t in (90.0, 110.0)]
    store.write_problem("h200", problem, "r2", again[:1])
    store.write_problem("h200", problem, "r3", [{**again[1], "run_id": "r3"}])
    return root


@pytest.fixture(scope="module")
def seed_rows(tmp_path_factory: pytest.TempPathFactory):
    root = write_seed_problem(tmp_path_factory.mktemp("seed") / "ds")
    return read_problem_rows(root, "h200", [PROBLEM.key])


def _cell(block_m: int, block_n: int) -> tuple[int, int]:
    return BLOCK_MN.index(block_m), BLOCK_MN.index(block_n)


def test_each_cell_is_the_best_of_its_tile_and_bounds_are_marked(seed_rows) -> None:
    grid = tile_grid(seed_rows, PROBLEM)

    assert grid.best() == _cell(64, 128)
    # 90, 100 (run r1) and 110: the config's median is 100, the cell's best time
    assert grid.measured_us[_cell(64, 128)] == pytest.approx(100.0)
    assert grid.lower_bound[_cell(16, 16)] and not grid.lower_bound[_cell(64, 128)]
    # 16×16: two octaves off in M, three in N: 100·(1 + 2 + 3) = 600 µs, the slowest, and a bound
    assert grid.worst() == _cell(16, 16) and grid.ratio(grid.worst()) == pytest.approx(6.0)
    assert grid.ratio(grid.fixed()) == pytest.approx(2.0)  # 128×128: one octave off in M
    assert grid.label(grid.best()) == "64×128"


def test_cells_the_space_does_not_offer_stay_empty(seed_rows) -> None:
    grid = tile_grid(seed_rows, PROBLEM)

    assert not grid.offered[_cell(256, 256)] and np.isnan(grid.measured_us[_cell(256, 256)])
    assert grid.offered.sum() == np.isfinite(grid.measured_us).sum()


def test_the_model_panel_is_the_seeds_roofline_of_the_same_cells(seed_rows) -> None:
    from tilecost.config import TileConfig

    grid = tile_grid(seed_rows, PROBLEM)
    config = TileConfig.from_key("tma-32x256x64-g1-s1-w4-p3")
    expected = roofline_time_us(PROBLEM, ConfigArrays.from_configs([config]), load_device("h200"))[0]

    assert grid.model_us[_cell(32, 256)] == pytest.approx(expected)
    # the seed's model picks 32×256 on the H100 for this problem; on the H200's spec too
    assert grid.label(grid.best("model")) == "32×256"


def test_a_missing_problem_fails_with_what_to_measure(seed_rows) -> None:
    with pytest.raises(DatasetError, match=r"8192x8192x8192-bf16-nt is not in the dataset with BLOCK_K = 64; "):
        tile_grid(seed_rows, Problem(8192, 8192, 8192))


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    return buffer.getvalue()


def test_the_seed_figure_draws_measured_and_model_panels(seed_rows) -> None:
    fig = seed_figure([tile_grid(seed_rows, PROBLEM)])

    assert len(fig.axes) == 4  # two panels and their colour bars
    assert "≥6.00×" in fig.axes[0].get_title()  # the worst cell is a lower bound
    assert _png(fig).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="grids is empty"):
        seed_figure([])


@pytest.fixture(scope="module")
def quality(tmp_path_factory: pytest.TempPathFactory):
    from tilecost.predict.ood import OODChecker, training_domain
    from tilecost.train.dataset import load_measurements
    from tilecost.train.model import CostModel
    from tilecost.train.pipeline import build_features, split_by_role

    root = write_dataset(tmp_path_factory.mktemp("quality") / "ds")
    train, heldout = split_by_role(load_measurements(root, "h200"))
    device = load_device("h200")
    model = CostModel(n_estimators=20, max_depth=4, n_jobs=1).fit(
        build_features(train, device), train["time_us"].to_numpy(), groups=train["problem_key"].to_numpy()
    )
    checker = OODChecker.from_metadata(training_domain(list(TRAIN_PROBLEMS)), {"sparse_distance_log2": 0.5})
    return quality_data(model, heldout, device, checker)


def test_quality_data_scores_every_held_out_candidate(quality) -> None:
    assert {r.problem for r in quality.evaluation.problems} == set(HELDOUT_PROBLEMS)
    assert len(quality.predicted_us) == len(quality.measured_us) == quality.evaluation.rows
    assert (quality.predicted_us > 0).all()
    flagged = {key for key, (is_flagged, _, _) in quality.ood.items() if is_flagged}
    # 300×1000×700 lies over half an octave from every training problem
    assert "300x1000x700-bf16-nt" in flagged and quality.threshold_log2 == 0.5


@pytest.mark.parametrize("draw", [predicted_vs_measured_figure, top1_figure, weakest_figure, ood_figure])
def test_every_quality_figure_draws(quality, draw) -> None:
    assert _png(draw(quality)).startswith(b"\x89PNG")
