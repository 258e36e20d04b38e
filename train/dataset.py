"""Reading the measurement dataset for training and evaluation, with the checks that keep bad data out.

:func:`load_measurements` reads one device class of the Parquet dataset written by
:class:`tilecost.collect.store.DatasetStore`, pushing the selection down to pyarrow: partition
pruning on the Hive folders (``device_class=``/``dtype=``/``layout=``), a filter expression on the
same columns (and on ``triton_version`` if asked), and a projection onto the columns training needs.
It refuses, with :class:`~tilecost.errors.DatasetError` naming the file, column or value:

* a file of another schema version, or one that lacks a column training reads;
* a device class (or dtype/layout selection) with no files or no rows, naming what exists;
* a status outside :class:`~tilecost.measurement.Status`, or a timed row (``ok``/``hopeless``)
  without a positive finite time;
* rows measured with more than one Triton version (timings change between releases; pick one);
* a dataset in which every row failed.

A configuration of a problem measured again by a later run (a held-out problem re-measured with a better
protocol, a training problem re-timed on the model's favourites) is read from its newest run only: the older
rows are set aside and counted in :attr:`Measurements.superseded_rows`, so no configuration is counted twice
and a held-out problem re-measured over its whole space has the best of one complete measurement. The
configurations only an older run timed stay: a later run over a few of a problem's configurations adds to
its earlier sample rather than replacing it. (Until the eighth session a problem's newest run replaced all
of its earlier rows; on that session's dataset this keeps 2,829 more training rows, of 6 problems whose two
runs drew different samples, and changes no held-out row.)

The rows come in one order whatever the files' layout: by problem key, then configuration key. The booster
XGBoost fits depends on the order of its rows (its histograms sum gradients in that order), and by more than the
held-out figures can tell models apart: in the twentieth session, compacting every run reordered the same rows and
moved the held-out top-1 from 0.9740 to 0.9709, the worst problem from 0.811 to 0.766 and top-5 from 0.9918 to 0.9895
(without that session's new run: 0.9743 to 0.9733, 0.808 to 0.808, 0.9909 to 0.9903). Sorted, a model is a function
of what was measured, not of how the files are cut (the sort takes ~1.3 s of the read).

Only timed rows are candidates: ``ok`` rows carry the full protocol's median and ``hopeless`` rows
the screening time that bounds them (a true, noisier time of a configuration more than 3x slower
than the best screened), both valid measurements. Failed rows (compile errors and the like) are
counted by status in :attr:`Measurements.status_counts` and reported, never silently dropped: a
warning is raised when they are more than half of the rows read.

:attr:`Measurements.digest` is a SHA-256 over the relative names and the bytes of exactly the files
read, in sorted order, so that a model can be traced to the data it saw.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilecost.errors import DatasetError
from tilecost.measurement import Status
from tilecost.problem import DType, Layout

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "FINGERPRINT_COLUMNS",
    "Measurements",
    "REQUIRED_COLUMNS",
    "device_classes",
    "load_measurements",
    "newest_run_mask",
]

# What the device fingerprint of a model is made of (one value each, or the sorted distinct values).
FINGERPRINT_COLUMNS = (
    "gpu_name",
    "sm_count",
    "compute_capability",
    "driver_version",
    "cuda_version",
    "torch_version",
    "triton_version",
)
# Columns training and evaluation read; a file without one of them is refused.
REQUIRED_COLUMNS = (
    "device_class",
    *FINGERPRINT_COLUMNS,
    "role",
    "sample_fraction",
    "run_id",
    "timestamp",
    "problem_key",
    "m",
    "n",
    "k",
    "dtype",
    "layout",
    "config_id",
    "variant",
    "block_m",
    "block_n",
    "block_k",
    "group_m",
    "split_k",
    "num_warps",
    "num_stages",
    "status",
    "time_us",
)
ROLES = ("train", "heldout")
# Above this share of failed rows a warning says how much of the data cannot be used.
FAILED_WARNING_SHARE = 0.5


@dataclass(frozen=True, eq=False)
class Measurements:
    """The timed rows of one device class, with where they came from.

    ``frame`` holds one row per timed (problem, configuration) measurement, columns
    :data:`REQUIRED_COLUMNS` plus ``time_us``; ``files`` are the dataset-relative names of the
    Parquet files read, ``digest`` their SHA-256 (see the module docstring), ``status_counts`` the
    number of rows read per status before failed rows were set aside.
    """

    device_class: str
    frame: pd.DataFrame
    files: tuple[str, ...]
    digest: str
    status_counts: dict[str, int]
    root: str = ""
    selection: dict[str, Any] = field(default_factory=dict)
    superseded_rows: int = 0  # rows of problems measured again by a newer run, set aside

    @property
    def rows_read(self) -> int:
        return sum(self.status_counts.values())

    @property
    def rows_timed(self) -> int:
        return len(self.frame)

    def problem_keys(self, role: str | None = None) -> list[str]:
        """Sorted problem keys, of one role (``train`` or ``heldout``) if given."""
        keys = self.frame["problem_key"] if role is None else self.frame.loc[self.frame["role"] == role, "problem_key"]
        return sorted(keys.unique().tolist())

    def subset(self, role: str) -> pd.DataFrame:
        """The rows of one role, in the frame's order (problem key, then configuration key)."""
        if role not in ROLES:
            raise ValueError(f"role={role!r} is not allowed; use one of {ROLES}")
        return self.frame[self.frame["role"] == role].reset_index(drop=True)

    def fingerprint(self) -> dict[str, Any]:
        """Device fingerprint of the rows: each column's single value, or its sorted distinct values."""
        out: dict[str, Any] = {}
        for column in FINGERPRINT_COLUMNS:
            values = sorted({_plain(v) for v in self.frame[column].unique()}, key=str)
            out[column] = values[0] if len(values) == 1 else values
        return out

    def summary(self) -> str:
        """One line: rows read by status, rows kept, problems per role, files."""
        counts = ", ".join(f"{status} {count:,}" for status, count in sorted(self.status_counts.items()))
        roles = ", ".join(f"{len(self.problem_keys(role))} {role}" for role in ROLES)
        newer = f" ({self.superseded_rows:,} superseded by a newer run)" if self.superseded_rows else ""
        return (
            f"{self.device_class}: read {self.rows_read:,} rows ({counts}) from {len(self.files)} files; "
            f"{self.rows_timed:,} timed rows kept as candidates{newer}; problems: {roles}; digest {self.digest[:12]}"
        )


def _plain(value: Any) -> Any:
    """numpy scalars to Python values, so that fingerprints serialise as JSON."""
    return value.item() if hasattr(value, "item") else value


def _selected(path: str, key: str, allowed: set[str] | None) -> bool:
    """Partition pruning by the Hive folder ``key=value`` in ``path`` (kept when the folder is absent)."""
    if allowed is None:
        return True
    for part in path.split("/"):
        if part.startswith(f"{key}="):
            return part.split("=", 1)[1] in allowed
    return True


def _check_file(path: str, fs: Any) -> None:
    """Schema version and required columns of one file, from its footer only."""
    import pyarrow.parquet as pq

    from tilecost.collect.store import check_schema_version

    file_schema = pq.read_schema(path, filesystem=fs)
    check_schema_version(path, fs, file_schema)
    names = set(file_schema.names)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; training reads {list(REQUIRED_COLUMNS)}")


def dataset_digest(paths: Sequence[str], root: str, fs: Any) -> str:
    """SHA-256 over ``relative name NUL bytes NUL`` of each file, in sorted order of names."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        relative = path[len(root) :].lstrip("/") if path.startswith(root) else path
        digest.update(relative.encode())
        digest.update(b"\0")
        with fs.open_input_stream(path) as stream:
            digest.update(stream.read())
        digest.update(b"\0")
    return digest.hexdigest()


def device_classes(root: str | Path) -> list[str]:
    """The device classes ``root`` holds measurement files of (its ``device_class=`` folders), sorted."""
    from tilecost.collect.store import DatasetStore

    files = DatasetStore(root).files()
    return sorted({p.split("device_class=", 1)[1].split("/", 1)[0] for p in files if "device_class=" in p})


def load_measurements(
    root: str | Path,
    device_class: str,
    *,
    dtypes: Sequence[DType | str] | None = None,
    layouts: Sequence[Layout | str] | None = None,
    triton_version: str | None = None,
) -> Measurements:
    """Read the timed rows of ``device_class`` (optionally some dtypes/layouts, one Triton version).

    ``root`` is the dataset root (a path or a pyarrow URI). Raises
    :class:`~tilecost.errors.DatasetError` for the bad data listed in the module docstring.
    """
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from tilecost.collect.store import DatasetStore, schema

    store = DatasetStore(root)
    dtype_values = None if dtypes is None else {DType.parse(d).value for d in dtypes}
    layout_values = None if layouts is None else {Layout.parse(x).value for x in layouts}
    every = store.files(device_class)
    if not every:
        known = device_classes(root)
        raise DatasetError(f"no measurement files for device class {device_class!r} under {root}; found {known}")
    paths = [p for p in every if _selected(p, "dtype", dtype_values) and _selected(p, "layout", layout_values)]
    selection = {
        "dtypes": sorted(dtype_values) if dtype_values else None,
        "layouts": sorted(layout_values) if layout_values else None,
        "triton_version": triton_version,
    }
    if not paths:
        raise DatasetError(
            f"no files of device class {device_class!r} match {selection} ({len(every)} files of other dtypes/layouts)"
        )
    for path in paths:
        _check_file(path, store.fs)

    expr = pc.field("device_class") == device_class
    if dtype_values:
        expr &= pc.field("dtype").isin(sorted(dtype_values))
    if layout_values:
        expr &= pc.field("layout").isin(sorted(layout_values))
    if triton_version:
        expr &= pc.field("triton_version") == triton_version
    dataset = ds.dataset(paths, filesystem=store.fs, format="parquet", schema=schema())
    table: pa.Table = dataset.to_table(columns=list(REQUIRED_COLUMNS), filter=expr)
    if table.num_rows == 0:
        raise DatasetError(f"device class {device_class!r}: {len(paths)} files but no rows match {selection}")
    frame = table.to_pandas()

    statuses = frame["status"].value_counts()
    counts = {str(s): int(c) for s, c in statuses.items()}
    unknown = sorted(set(counts) - {s.value for s in Status})
    if unknown:
        raise DatasetError(
            f"device class {device_class!r}: unknown status value(s) {unknown}; allowed {[s.value for s in Status]}"
        )
    timed_values = [s.value for s in Status if s.timed]
    timed = frame["status"].isin(timed_values).to_numpy()
    if not timed.any():
        raise DatasetError(
            f"device class {device_class!r}: all {len(frame):,} rows failed ({counts}); nothing to train on"
        )
    times = frame["time_us"].to_numpy(dtype=np.float64, na_value=np.nan)
    bad = timed & ~(np.isfinite(times) & (times > 0))
    if bad.any():
        example = frame.loc[bad, ["problem_key", "config_id", "status", "time_us"]].iloc[0].to_dict()
        raise DatasetError(f"{int(bad.sum())} timed row(s) without a positive finite time_us, e.g. {example}")
    failed = len(frame) - int(timed.sum())
    if failed > FAILED_WARNING_SHARE * len(frame):
        warnings.warn(
            f"device class {device_class!r}: {failed:,} of {len(frame):,} rows failed ({counts}); "
            "only the timed rows are candidates",
            stacklevel=2,
        )
    frame, superseded = _newest_run_per_problem(frame[timed])
    roles = sorted(set(frame["role"].unique()) - set(ROLES))
    if roles:
        raise DatasetError(f"device class {device_class!r}: unknown role value(s) {roles}; allowed {list(ROLES)}")
    versions = sorted(frame["triton_version"].unique())
    if len(versions) > 1:
        raise DatasetError(
            f"device class {device_class!r}: rows from Triton versions {versions}; "
            "timings differ between releases, so train on one (--triton-version)"
        )
    relative = tuple(p[len(store.root) :].lstrip("/") for p in paths)
    return Measurements(
        device_class=device_class,
        frame=frame,
        files=relative,
        digest=dataset_digest(paths, store.root, store.fs),
        status_counts=counts,
        root=str(root),
        selection=selection,
        superseded_rows=superseded,
    )


def newest_run_mask(frame: pd.DataFrame) -> np.ndarray:
    """Which rows (columns ``problem_key``, ``config_id``, ``run_id``, ``timestamp``) belong to the newest
    run that measured their configuration of their problem, a run's time being its latest timestamp on
    that problem: measurements are never deleted from the files, and training, evaluation and the
    predictor's benchmark read the newest of each (problem, configuration) only."""
    import numpy as np
    import pandas as pd

    # On integer codes, with numpy: the nineteenth session's model-top run re-timed 3,595 of 4,096 training problems,
    # and the pandas join and sort this replaced took 5.3 s on their 2.7 M rows (1.3 s now; 0.4 s when 65 problems
    # had two runs and only their rows were joined).
    problem = pd.factorize(frame["problem_key"])[0]
    config = pd.factorize(frame["config_id"])[0]
    run = pd.factorize(frame["run_id"])[0]
    if len(frame) == 0 or run.max() == 0:
        return np.ones(len(frame), dtype=bool)
    # A run's time on a problem: its latest timestamp there (ns since the epoch; missing ones sort first).
    stamp = frame["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    pair = problem.astype(np.int64) * (int(run.max()) + 1) + run
    pair_codes, pair_of_row = np.unique(pair, return_inverse=True)
    run_time = np.full(len(pair_codes), np.iinfo(np.int64).min)
    np.maximum.at(run_time, pair_of_row, stamp)
    # Per (problem, configuration): the run of its last row once sorted by run time, ties in frame order.
    cell = problem.astype(np.int64) * (int(config.max()) + 1) + config
    order = np.lexsort((np.arange(len(frame)), run_time[pair_of_row], cell))
    sorted_cells = cell[order]
    last = np.flatnonzero(np.r_[sorted_cells[1:] != sorted_cells[:-1], True])
    newest_run = run[order][last]
    return run == newest_run[np.searchsorted(sorted_cells[last], cell)]


def _newest_run_per_problem(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows of each (problem, configuration)'s newest run (:func:`newest_run_mask`), sorted by problem key
    and configuration key (one row each once superseded rows are set aside), and how many were set aside."""
    keep = newest_run_mask(frame)
    newest = frame[keep].sort_values(["problem_key", "config_id"], kind="stable")
    return newest.reset_index(drop=True), int((~keep).sum())
