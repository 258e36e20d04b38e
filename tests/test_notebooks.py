"""The notebooks in notebooks/ run against the shipped data (executed with nbclient in a fresh kernel, in
memory: nothing is written back), and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
DATASET = NOTEBOOKS.parent / "datasets" / "measurements"

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the dev extra)")


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert {p.name for p in _notebooks()} >= {"seed_figure.ipynb", "model_quality.ipynb"}


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_carry_no_outputs(path: Path) -> None:
    book = nbformat.read(path, as_version=4)

    code = [cell for cell in book.cells if cell.cell_type == "code"]
    assert code, "a notebook without code"
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code), (
        f"{path.name} has outputs; strip them (nbstripout, or Jupyter's Clear All Outputs) before committing"
    )


def _execute(name: str) -> object:
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the dev extra)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (the dev extra)")
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})  # fmt: skip
    client.execute()
    return book


def test_the_model_quality_notebook_runs_on_the_shipped_model_and_data() -> None:
    book = _execute("model_quality.ipynb")

    images = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4  # predicted vs measured, top-1, weakest, OOD


def test_the_seed_figure_notebook_runs_or_names_the_missing_problems() -> None:
    from tilecost.collect.store import DatasetStore
    from tilecost.train.figures import SEED_PROBLEMS

    store = DatasetStore(DATASET)
    measured = store.problem_keys(store.files("h200"))
    missing = [p.key for p in SEED_PROBLEMS if p.key not in measured]
    if missing:
        nbclient = pytest.importorskip("nbclient")
        with pytest.raises(nbclient.exceptions.CellExecutionError, match=f"{missing[0]} is not in the dataset"):
            _execute("seed_figure.ipynb")
        return
    book = _execute("seed_figure.ipynb")
    images = [o for c in book.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1
