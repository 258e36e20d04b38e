"""Refreshing an artifact's tuning database from a newer dataset, without retraining.

An artifact's ``measured.json`` (:func:`~tilecost.train.export.measured_database`) holds the measured best of every
problem of the dataset it was exported from. Measurements collected after that export are answered by the model until
the next export (~30 min on a 2-core machine). :func:`refresh_measured` rebuilds only that table from a newer dataset
of the same device class and Triton version: the booster and every precomputed file are kept byte for byte, the
sidecar gets the new checksum and records the dataset the table came from (``measured_from``).

With ``for_device`` (``--for``), another device class than the artifact's: the table of that class's measured bests
(``measured-<class>.json``, :func:`~tilecost.predict.artifact.device_measured_file`), written into the artifact beside
its own, so that a predictor loaded for that class (``Predictor.load("h200", device="h100_sxm")``) answers a shape
that device measured with that device's best, as a measurement. Same Triton version as the artifact's; any SM count.

:func:`refresh_every_table` (``--all``) refreshes the artifact's own table and every other device class's, in one
write (the nightly loop's export step when the champion stays, fifty-sixth session).

It refuses, naming what differs and writing nothing: a dataset of another Triton version or SM count than the
artifact's, or one that lacks problems the artifact's table holds (a dataset older than the artifact's, or another
one). The refreshed artifact is written beside the target and swapped in
(:func:`~tilecost.predict.artifact.swap_in`), so a crash leaves the old artifact whole.

    tilecost refresh-measured [--artifact DIR] [--dataset datasets/measurements] [--out DIR] [--for DEVICE | --all]
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecost.errors import ArtifactError, DatasetError
from tilecost.predict.artifact import (
    device_measured_file,
    device_measured_files,
    load_artifact,
    save_artifact,
    swap_in,
)

from .dataset import Measurements, device_classes, load_measurements
from .export import MEASURED_FILE, measured_database, measured_file, measured_provenance
from .pipeline import candidate_rows

__all__ = ["RefreshResult", "device_table", "other_device_tables", "refresh_every_table", "refresh_measured"]


@dataclass(frozen=True)
class RefreshResult:
    """What :func:`refresh_measured` did: where it wrote, which table (its file), the table's size before and
    after, the problems it added, those whose best changed (its configuration or its time: measured again by a newer
    run), those timed again that kept their best (a newer run timed more configurations, none faster), and the
    dataset the table now comes from."""

    artifact: Path
    before: int
    after: int
    added: tuple[str, ...]
    changed: tuple[str, ...]
    measured_from: dict[str, Any]
    file: str = MEASURED_FILE
    kept: tuple[str, ...] = ()

    def summary(self) -> str:
        kept = f", {len(self.kept):,} timed again with the same best" if self.kept else ""
        return (
            f"refreshed {self.file} of {self.artifact}: {self.before:,} -> {self.after:,} measured problems "
            f"({len(self.added):,} added, {len(self.changed):,} with a new best{kept}), from dataset "
            f"{str(self.measured_from['dataset_digest'])[:12]}"
        )


def refresh_measured(
    artifact: str | Path, dataset: str | Path, *, out: str | Path | None = None, for_device: str | None = None
) -> RefreshResult:
    """Rebuild ``artifact``'s ``measured.json`` from ``dataset`` and write the artifact to ``out`` (default: in
    place); with ``for_device`` (another device class than the artifact's), that class's table instead. Raises
    :class:`~tilecost.errors.ArtifactError` for an artifact that does not load and
    :class:`~tilecost.errors.DatasetError` for a dataset that does not fit it; nothing is written then. A write
    that fails (a read-only directory, a full disk) raises ``ArtifactError`` and leaves ``out`` as it was."""
    if for_device is not None:
        try:
            device_measured_file(for_device)
        except ValueError:
            raise ValueError(f"for_device={for_device!r} is not a device class key (as 'h100_sxm')") from None
    source = Path(artifact)
    target = source if out is None else Path(out)
    taken = target.exists() and (not target.is_dir() or any(target.iterdir()))
    if out is not None and taken and target.resolve() != source.resolve():
        raise ValueError(f"out={str(target)!r} exists and is not an empty directory; name a new one")
    metadata, files = _load_refreshable(source)
    table = _rebuilt_table(metadata, files, dataset, for_device or metadata.device_class, source)
    _write_refreshed(target, metadata, files, [table])
    return table.result(target)


def refresh_every_table(artifact: str | Path, dataset: str | Path) -> tuple[list[RefreshResult], list[str]]:
    """Refresh ``artifact`` in place: its own ``measured.json`` (as :func:`refresh_measured` does, whose errors
    propagate and leave the artifact as it was) and the table of every other device class that the artifact holds
    or that ``dataset`` has rows of, written in one swap. Returns the refreshes done and, for each other class not
    refreshed, why: a table the artifact holds that the dataset cannot refresh (it stays as it was) or a class of
    the dataset with no rows of the artifact's Triton release (no table is added)."""
    source = Path(artifact)
    metadata, files = _load_refreshable(source)
    tables = [_rebuilt_table(metadata, files, dataset, metadata.device_class, source)]
    held = {json.loads(data).get("device_class") for data in device_measured_files(files).values()} - {None}
    not_refreshed = []
    for device_class in sorted((held | set(device_classes(dataset))) - {metadata.device_class}):
        try:
            tables.append(_rebuilt_table(metadata, files, dataset, device_class, source))
        except (DatasetError, ValueError) as exc:  # the dataset does not fit this table: the next one
            what = (
                f"{device_measured_file(device_class)} kept as it was"
                if device_class in held
                else f"{device_class}: no table added"
            )
            not_refreshed.append(f"{what} ({exc})")
    _write_refreshed(source, metadata, files, tables)
    return [table.result(source) for table in tables], not_refreshed


@dataclass(frozen=True)
class _Table:
    """One rebuilt table of an artifact: its file name and bytes, its problems before and after, and the dataset
    they now come from."""

    name: str
    data: bytes
    old: dict[str, Any]
    new: dict[str, Any]
    provenance: dict[str, Any]

    def result(self, artifact: Path) -> RefreshResult:
        retimed = sorted(key for key in self.old if self.old[key] != self.new[key])
        new_best = {key for key in retimed if _best(self.old[key]) != _best(self.new[key])}
        return RefreshResult(
            artifact=artifact,
            before=len(self.old),
            after=len(self.new),
            added=tuple(sorted(set(self.new) - set(self.old))),
            changed=tuple(key for key in retimed if key in new_best),
            measured_from=self.provenance,
            file=self.name,
            kept=tuple(key for key in retimed if key not in new_best),
        )


def _best(entry: dict[str, Any]) -> tuple[Any, Any]:
    """A table entry's best: its configuration and time (the rest says how much of the space was timed)."""
    return entry.get("config_id"), entry.get("time_us")


def _load_refreshable(source: Path) -> tuple[Any, dict[str, bytes]]:
    metadata, files = load_artifact(source)
    if MEASURED_FILE not in files:
        raise ArtifactError(f"{source}: lists no {MEASURED_FILE}; export it again with tilecost train --export-dir")
    return metadata, files


def _rebuilt_table(
    metadata: Any, files: dict[str, bytes], dataset: str | Path, device_class: str, source: Path
) -> _Table:
    """``device_class``'s table of the artifact (``metadata``, ``files``, read from ``source``) rebuilt from
    ``dataset``: ``measured.json`` for the artifact's own class, ``measured-<class>.json`` for another. Raises
    :class:`~tilecost.errors.DatasetError` for a dataset that does not fit it."""
    other = device_class != metadata.device_class
    name = device_measured_file(device_class) if other else MEASURED_FILE
    measurements = load_measurements(dataset, device_class, triton_version=metadata.triton_version)
    if not other:  # another device class has its own SM count
        _check_device(metadata.fingerprint, measurements.fingerprint(), dataset)
    stored = json.loads(files[name]) if name in files else {"problems": {}}  # another class's: its first refresh
    old = stored["problems"] if other else stored
    new = measured_database(candidate_rows(measurements.frame))
    lost = sorted(set(old) - set(new))
    if lost:
        raise DatasetError(
            f"{dataset} lacks {len(lost):,} of the {len(old):,} problems {source}/{name} holds "
            f"(e.g. {', '.join(lost[:3])}): refresh from the dataset the artifact was exported from or a newer one"
        )
    data = device_table(measurements, new) if other else measured_file(new)
    return _Table(name, data, old, new, measured_provenance(measurements))


def _write_refreshed(target: Path, metadata: Any, files: dict[str, bytes], tables: list[_Table]) -> None:
    """The artifact with ``tables`` in place of the files of their names (the own table's provenance in the
    sidecar), written to ``target``; a failed write raises ``ArtifactError`` and leaves ``target`` as it was."""
    own = [table.provenance for table in tables if table.name == MEASURED_FILE]
    refreshed = dataclasses.replace(metadata, files={}, **({"measured_from": own[0]} if own else {}))
    extra = {name: data for name, data in files.items() if name != metadata.model_file}
    extra.update({table.name: table.data for table in tables})
    try:
        _write_swapped(target, files[metadata.model_file], refreshed, extra)
    except OSError as exc:  # a read-only install, a full disk: the old artifact is whole (_write_swapped)
        raise ArtifactError(
            f"{target}: the refreshed artifact could not be written ({exc.strerror or exc}); it is unchanged. "
            "Name a writable directory with out= (--out)"
        ) from exc


def device_table(measurements: Measurements, problems: dict[str, dict[str, Any]] | None = None) -> bytes:
    """The bytes of ``measured-<class>.json`` for ``measurements`` of a device class other than an artifact's: its
    measured bests (``problems``, :func:`~tilecost.train.export.measured_database` of the rows unless given) and the
    dataset they came from."""
    if problems is None:
        problems = measured_database(candidate_rows(measurements.frame))
    table = {
        "device_class": measurements.device_class,
        "measured_from": measured_provenance(measurements),
        "problems": problems,
    }
    return json.dumps(table, indent=1, sort_keys=True).encode()


def other_device_tables(dataset: str | Path, device_class: str, triton_version: str) -> dict[str, bytes]:
    """:func:`device_table` of every device class but ``device_class`` that ``dataset`` holds rows of measured with
    ``triton_version``, by file name (``tilecost train --export-dir`` writes them into the artifact it exports)."""
    tables = {}
    for other in device_classes(dataset):
        if other == device_class:
            continue
        try:
            measurements = load_measurements(dataset, other, triton_version=triton_version)
        except DatasetError:  # none of its rows are of this Triton release
            continue
        tables[device_measured_file(other)] = device_table(measurements)
    return tables


def _check_device(ours: Any, theirs: dict[str, Any], dataset: str | Path) -> None:
    """The dataset's rows must come from the artifact's device: the same SM count (its Triton version is the
    filter the rows were read with)."""
    expected, found = ours.get("sm_count"), theirs.get("sm_count")
    if expected is not None and found != expected:
        raise DatasetError(f"{dataset}: rows measured on devices with sm_count={found}, the artifact's is {expected}")


def _write_swapped(target: Path, model: bytes, metadata: Any, extra: dict[str, bytes]) -> None:
    """Write the artifact into a fresh directory beside ``target``, with ``target``'s permissions (a new one: the
    umask's), then :func:`swap_in` it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.new-{uuid.uuid4().hex[:12]}")
    staging.mkdir()
    try:
        if target.exists():
            staging.chmod(target.stat().st_mode & 0o7777)
        save_artifact(staging, model, metadata, extra)
        swap_in(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
