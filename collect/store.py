"""The measurement dataset: Parquet files, Hive-partitioned, one file per (problem, sweep run).

Layout under the dataset root (local path or any URI pyarrow's filesystems open, e.g. ``s3://``)::

    device_class=h200/dtype=bf16/layout=nt/<problem key>--<run id>.parquet
    device_class=h200/dtype=bf16/layout=nt/<run id>.parquet          (a compacted run)

Partitioning by device class, dtype and layout makes the reads that training does (one device
class, often one dtype) touch only their folders. Each file holds every row of one problem from one
sweep run and is written whole, then renamed into place (atomic on a local filesystem; an object
store never shows a partial object), so a crash leaves either the whole problem or nothing, and a
re-run measures exactly the problems without a file: no row lost, none duplicated. Shards and GPUs
running the same plan write disjoint files and merge by sharing the directory.

Compacting (:meth:`DatasetStore.compact_run`): a run's per-problem files of one partition merged into
one file named after the run, the rows unchanged. Reading pays per file (pyarrow opened ~8,200 files of
the H200 dataset at ~2 ms each on a 2-core machine, 17 s of a 29 s read, after the nineteenth session's
model-top run had re-timed 3,595 problems a few configurations each, a file apiece), so a finished run
is best compacted. A compacted run's problems still count as measured (:meth:`DatasetStore.has`,
:meth:`DatasetStore.problem_keys`), so resuming it measures only what it lacks.

The schema version is stored in each file's metadata under ``tilecost.schema_version``; readers
refuse files of another version.

The repository's shipped dataset holds real measurements only: :meth:`DatasetStore.write_problem`
refuses rows of the simulated backend (``gpu_name`` beginning :data:`SIMULATED_GPU_PREFIX`) there,
however its path is spelled (:func:`is_shipped_dataset`), so no command or working directory can
put a stand-in timer's numbers among the measurements.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilecost.errors import DatasetError
from tilecost.measurement import Status
from tilecost.problem import Problem

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

__all__ = [
    "SCHEMA_VERSION",
    "SHIPPED_DATASET",
    "SIMULATED_GPU_PREFIX",
    "DatasetStore",
    "is_shipped_dataset",
    "refuse_simulated_into_shipped",
    "schema",
    "shipped_dataset_dirs",
]

SCHEMA_VERSION = 1
_META_KEY = b"tilecost.schema_version"

# (column, pyarrow type name, description). The datasets README is generated from this list.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("device_class", "string", "device class key, e.g. h200 (also the partition folder)"),
    ("gpu_name", "string", "CUDA device name"),
    ("sm_count", "int32", "streaming multiprocessors of the device measured"),
    ("compute_capability", "string", "e.g. 9.0"),
    ("driver_version", "string", "NVIDIA driver version (NVML)"),
    ("cuda_version", "string", "CUDA version torch was built with"),
    ("torch_version", "string", "torch version"),
    ("triton_version", "string", "Triton version that compiled the kernels"),
    ("run_id", "string", "sweep run id (deterministic from the plan and settings, so a re-run resumes)"),
    ("timestamp", "timestamp[us, tz=UTC]", "when the problem's measurement finished"),
    ("family", "string", "plan family the problem came from (random, layers, decode, unaligned, file)"),
    ("role", "string", "train or heldout"),
    ("sample_fraction", "float64", "fraction of the problem's candidates measured (1.0 = all)"),
    ("problem_key", "string", "MxNxK-dtype-layout"),
    ("m", "int64", "rows of A and C"),
    ("n", "int64", "columns of B and C"),
    ("k", "int64", "reduction depth"),
    ("dtype", "string", "input dtype: fp16, bf16, fp32 (tf32 dot), fp8e4m3 (bf16 output)"),
    ("layout", "string", "nn (B is K×N) or nt (B stored N×K, x @ W.T)"),
    ("config_id", "string", "stable config key, e.g. tma-128x128x64-g8-s1-w4-p3"),
    ("variant", "string", "ptr or tma"),
    ("block_m", "int32", "BLOCK_M"),
    ("block_n", "int32", "BLOCK_N"),
    ("block_k", "int32", "BLOCK_K"),
    ("group_m", "int32", "GROUP_M tile swizzle"),
    ("split_k", "int32", "SPLIT_K parts of the reduction"),
    ("num_warps", "int32", "warps per block"),
    ("num_stages", "int32", "software pipeline stages"),
    ("status", "string", "ok, hopeless, compile_error, out_of_resources, wrong_result, timeout, crashed"),
    ("time_us", "float64", "median device time per launch in µs (ok); the screening time that bounds it (hopeless)"),
    ("spread", "float64", "interquartile range / median of the timed launches"),
    ("reps", "int32", "timed launches behind time_us"),
    ("rel_error", "float64", "‖C − C64‖/‖C64‖ against a float64 product"),
    ("registers", "int32", "registers per thread (compiler report)"),
    ("spills", "int32", "registers spilled per thread"),
    ("smem_bytes", "int32", "shared memory per block (compiler report)"),
    ("min_sm_clock_mhz", "float64", "lowest SM clock read after the rounds the config was timed in"),
    ("max_power_w", "float64", "highest board power read after those rounds"),
    ("max_temperature_c", "float64", "highest GPU temperature read after those rounds"),
    ("throttled_rounds", "int32", "rounds whose telemetry showed a power or thermal clock limit"),
    ("error", "string", "the compiler's or checker's message for failed configs"),
)


def schema() -> pa.Schema:
    import pyarrow as pa

    def typ(name: str) -> pa.DataType:
        if name.startswith("timestamp"):
            return pa.timestamp("us", tz="UTC")
        return {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64()}[name]

    return pa.schema([pa.field(c, typ(t)) for c, t, _ in COLUMNS], metadata={_META_KEY: str(SCHEMA_VERSION).encode()})


# The repository's dataset of real measurements, relative to the repository root (and the commands' default
# --dataset, relative to the working directory).
SHIPPED_DATASET = Path("datasets/measurements")
# How a row of the simulated backend begins its gpu_name (tilecost.collect.simulated.SIMULATED_GPU_NAME).
SIMULATED_GPU_PREFIX = "SIMULATED"


def shipped_dataset_dirs() -> frozenset[Path]:
    """The shipped dataset's directory, resolved: beside this package's source tree (``<repo>/datasets/
    measurements``), and under the working directory (where a run from a clone with the package installed
    elsewhere, or the default ``--dataset``, finds it)."""
    import tilecost

    beside_package = Path(tilecost.__file__).resolve().parents[1] / SHIPPED_DATASET
    return frozenset({beside_package.resolve(), SHIPPED_DATASET.resolve()})


def _local_path(root: str | Path) -> Path | None:
    """``root`` as an absolute local path with symlinks resolved; None for a URI of another filesystem."""
    text = str(root)
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    elif "://" in text:
        return None
    return Path(text).expanduser().resolve()


def is_shipped_dataset(root: str | Path) -> bool:
    """Whether ``root`` names the shipped dataset (:func:`shipped_dataset_dirs`), however spelled: relative to
    any working directory, through a symlink, with ``..`` or a trailing slash, or as a ``file://`` URI. Other
    URIs (``s3://``) never do."""
    path = _local_path(root)
    return path is not None and path in shipped_dataset_dirs()


def refuse_simulated_into_shipped(root: str | Path) -> None:
    """Raise :class:`DatasetError` if ``root`` is the shipped dataset: simulated rows go to a scratch one."""
    if is_shipped_dataset(root):
        raise DatasetError(
            f"dataset={str(root)!r} is the shipped dataset of real measurements ({_local_path(root)}): the "
            "simulated backend may not write into the shipped dataset; pass a scratch directory (--dataset DIR)"
        )


class DatasetStore:
    """Reads and writes the measurement dataset under ``root`` (a path or a pyarrow filesystem URI)."""

    def __init__(self, root: str | Path):
        import pyarrow.fs as pafs

        root_str = str(root)
        if "://" in root_str:
            self.fs, self.root = pafs.FileSystem.from_uri(root_str)
        else:
            self.fs, self.root = pafs.LocalFileSystem(), str(Path(root_str).resolve())
        self._local = isinstance(self.fs, pafs.LocalFileSystem)

    # ---------------------------------------------------------------- layout
    def partition_dir(self, device_class: str, problem: Problem) -> str:
        return f"{self.root}/device_class={device_class}/dtype={problem.dtype.value}/layout={problem.layout.value}"

    def file_path(self, device_class: str, problem: Problem, run_id: str) -> str:
        return f"{self.partition_dir(device_class, problem)}/{problem.key}--{run_id}.parquet"

    def run_path(self, device_class: str, problem: Problem, run_id: str) -> str:
        """Where :meth:`compact_run` puts ``run_id``'s rows of ``problem``'s partition."""
        return f"{self.partition_dir(device_class, problem)}/{run_id}.parquet"

    def has(self, device_class: str, problem: Problem, run_id: str) -> bool:
        """Whether ``run_id`` measured ``problem``: its own file, or a row of the run's compacted file."""
        import pyarrow.fs as pafs

        if self.fs.get_file_info(self.file_path(device_class, problem, run_id)).type == pafs.FileType.File:
            return True
        path = self.run_path(device_class, problem, run_id)
        return self.fs.get_file_info(path).type == pafs.FileType.File and problem.key in self.problem_keys([path])

    def problem_keys(self, paths: Iterable[str]) -> set[str]:
        """The problem keys of these dataset files: from the name of a problem's file
        (``<problem key>--<run id>.parquet``), from the ``problem_key`` column of a compacted run's."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        keys: set[str] = set()
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if not name.endswith(".parquet"):
                continue
            if "--" in name:
                keys.add(name.split("--", 1)[0])
            else:
                column = pq.read_table(path, columns=["problem_key"], filesystem=self.fs).column(0)
                keys.update(pc.unique(column).to_pylist())
        return keys

    # ---------------------------------------------------------------- writing
    def compact_run(self, device_class: str, run_id: str) -> dict[str, int]:
        """Merge ``run_id``'s per-problem files into one file per partition (module docstring).

        Returns the number of problem files merged per partition folder. The merged file is written
        whole and renamed into place before the problem files are deleted; a compaction stopped between
        the two leaves both, which a second call merges and deletes (the compacted file's rows of those
        problems are replaced by their files' rows, so no row is counted twice). Refuses files whose rows
        are not all of ``run_id``.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq

        if not run_id or "--" in run_id or "/" in run_id:
            raise DatasetError(f"run_id={run_id!r} is not allowed; use a run id of the dataset (no '--' or '/')")
        suffix = f"--{run_id}.parquet"
        by_folder: dict[str, list[str]] = {}
        for path in self.files(device_class):
            if path.endswith(suffix):
                by_folder.setdefault(path.rsplit("/", 1)[0], []).append(path)
        merged: dict[str, int] = {}
        for folder, paths in sorted(by_folder.items()):
            tables = []
            for path in paths:
                check_schema_version(path, self.fs)
                table = pq.read_table(path, filesystem=self.fs, schema=schema())
                runs = pc.unique(table.column("run_id")).to_pylist()
                if runs != [run_id]:
                    raise DatasetError(f"{path}: rows of run(s) {runs}, not only {run_id!r}; nothing compacted")
                tables.append(table)
            target = f"{folder}/{run_id}.parquet"
            fresh = self.problem_keys(paths)
            if self.fs.get_file_info(target).type == pafs.FileType.File:
                check_schema_version(target, self.fs)
                before = pq.read_table(target, filesystem=self.fs, schema=schema())
                tables.insert(0, before.filter(pc.invert(pc.is_in(before.column("problem_key"), pa.array(fresh)))))
            table = pa.concat_tables(tables)
            table = table.sort_by([("problem_key", "ascending"), ("config_id", "ascending")])
            self._write_atomically(table, target)
            for path in paths:
                self.fs.delete_file(path)
            merged[folder[len(self.root) :].lstrip("/")] = len(paths)
        return merged

    def _write_atomically(self, table: pa.Table, final: str) -> None:
        import pyarrow.parquet as pq

        if self._local:
            tmp = f"{final}.{uuid.uuid4().hex}.tmp"
            pq.write_table(table, tmp, filesystem=self.fs, compression="zstd", compression_level=9)
            self.fs.move(tmp, final)  # rename: atomic within one filesystem
        else:
            pq.write_table(table, final, filesystem=self.fs, compression="zstd", compression_level=9)

    def write_problem(self, device_class: str, problem: Problem, run_id: str, rows: list[Mapping[str, Any]]) -> str:
        """Write one problem's rows as one file, atomically. Returns the file's path. Simulated rows are
        refused in the shipped dataset (:func:`refuse_simulated_into_shipped`)."""
        import pyarrow as pa

        if not rows:
            raise DatasetError(f"{problem}: no rows to write")
        if self._local and any(str(r.get("gpu_name") or "").startswith(SIMULATED_GPU_PREFIX) for r in rows):
            refuse_simulated_into_shipped(self.root)
        sch = schema()
        unknown = set(rows[0]) - set(sch.names)
        if unknown:
            raise DatasetError(f"rows carry columns not in the schema: {sorted(unknown)}")
        for row in rows:
            status = row.get("status")
            if status not in {s.value for s in Status}:
                raise DatasetError(f"{problem}: status={status!r} is not one of {[s.value for s in Status]}")
        table = pa.Table.from_pylist([dict(r) for r in rows], schema=sch)
        final = self.file_path(device_class, problem, run_id)
        self.fs.create_dir(self.partition_dir(device_class, problem), recursive=True)
        self._write_atomically(table, final)
        return final

    def clean_partial(self) -> int:
        """Delete ``*.tmp`` files a killed writer left behind; returns how many."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True, allow_not_found=True))
        except FileNotFoundError:
            return 0
        stale = [i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(".tmp")]
        for path in stale:
            self.fs.delete_file(path)
        return len(stale)

    # ---------------------------------------------------------------- reading
    def files(self, device_class: str | None = None) -> list[str]:
        """Every Parquet file of the dataset (of one device class if given), sorted."""
        import pyarrow.fs as pafs

        base = self.root if device_class is None else f"{self.root}/device_class={device_class}"
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except FileNotFoundError:
            return []
        return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet"))

    def read(
        self,
        device_class: str | None = None,
        filters: Iterable[Any] | None = None,
        columns: Iterable[str] | None = None,
    ) -> pa.Table:
        """Read the dataset (filters pushed down to the partitions), checking the schema version.

        ``columns`` reads only those columns (any of :data:`COLUMNS`; filters may use others)."""
        import pyarrow.dataset as ds

        paths = self.files(device_class)
        if not paths:
            where = f"device class {device_class!r}" if device_class else "any device class"
            raise DatasetError(f"no measurement files under {self.root} for {where}")
        for path in paths:
            check_schema_version(path, self.fs)
        names = None
        if columns is not None:
            names = list(columns)
            known = {c for c, _, _ in COLUMNS}
            unknown = [c for c in names if c not in known]
            if unknown:
                raise DatasetError(f"columns={unknown} are not dataset columns; use any of {sorted(known)}")
        dataset = ds.dataset(paths, filesystem=self.fs, format="parquet", partitioning="hive", schema=schema())
        expr = None
        for f in filters or ():
            expr = f if expr is None else expr & f
        return dataset.to_table(columns=names, filter=expr)


def check_schema_version(path: str, fs: pafs.FileSystem | None = None, file_schema: pa.Schema | None = None) -> None:
    """Raise :class:`DatasetError` unless the file at ``path`` carries this tilecost's schema version
    (read from ``file_schema``, when the caller has read it already)."""
    import pyarrow.parquet as pq

    meta = (file_schema if file_schema is not None else pq.read_schema(path, filesystem=fs)).metadata or {}
    found = meta.get(_META_KEY)
    if found is None:
        raise DatasetError(f"{path}: no tilecost.schema_version in the file metadata; not a tilecost dataset file")
    if int(found) != SCHEMA_VERSION:
        raise DatasetError(f"{path}: schema version {int(found)}, this tilecost reads version {SCHEMA_VERSION}")
