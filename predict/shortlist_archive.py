"""The artifact's ``shortlists.npz``, each (dtype, layout) group's arrays decoded on its first use.

The file holds, per group, ``<group>.table`` and ``<group>.lists`` (:class:`ShortlistTable`), deflated. Decoding
all eight groups took ~0.17 s of a predictor's load on this 2-core machine (BENCHMARKS §5, twenty-fourth
session), and a process usually asks about one or two groups. So a load checks what it can without decoding: every
group's two members are present, their ``.npy`` headers say integer arrays of the shapes the group's grid needs;
the arrays themselves are read, and their values checked (:class:`ShortlistTable`), on the group's first query.
The file's bytes were already checked against the sidecar's checksum, so what is left to find then is an export's
mistake, not corruption; it raises :class:`~tilecost.errors.ArtifactError` like the load's checks.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator, Mapping
from typing import IO

import numpy as np

from tilecost.errors import ArtifactError

from .shortlist import GridSpec, ShortlistTable

__all__ = ["ShortlistArchive"]


class ShortlistArchive(Mapping[str, ShortlistTable]):
    """Group name (``"bf16-nt"``) to its :class:`ShortlistTable`, decoded on first access and kept.

    Not locked: the predictor reads it under its own lock, when it builds a group."""

    def __init__(self, data: bytes, grids: Mapping[str, GridSpec], name: str = "shortlists.npz") -> None:
        self._data = data
        self._grids = dict(grids)
        self._name = name
        self._tables: dict[str, ShortlistTable] = {}
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = set(archive.namelist())
                for group, grid in self._grids.items():
                    for part, ndim in (("table", 4), ("lists", 2)):
                        member = f"{group}.{part}.npy"
                        if member not in members:
                            raise ArtifactError(f"{name} has no {group}.{part} array")
                        with archive.open(member) as stream:
                            shape, dtype = _header(stream)
                        if len(shape) != ndim or dtype.kind not in "iu":
                            raise ArtifactError(
                                f"{name}: {group}.{part} is a {dtype} array of shape {shape}; "
                                f"a {ndim}-d integer array is needed"
                            )
                        if part == "table" and shape not in ((*grid.shape, 8), (*grid.shape, 16)):
                            raise ArtifactError(
                                f"{name}: {group}.table has shape {shape}, the grid needs {(*grid.shape, 8)} "
                                "or 16 variants"
                            )
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
            raise ArtifactError(f"{name} is malformed: {exc!r}") from exc

    @property
    def decoded(self) -> tuple[str, ...]:
        """The groups whose arrays have been read so far."""
        return tuple(self._tables)

    def __getitem__(self, group: str) -> ShortlistTable:
        table = self._tables.get(group)
        if table is None:
            grid = self._grids[group]  # KeyError for an unknown group, as a Mapping should
            try:
                with np.load(io.BytesIO(self._data), allow_pickle=False) as npz:
                    table = ShortlistTable(grid, npz[f"{group}.table"], npz[f"{group}.lists"])
            except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
                raise ArtifactError(f"{self._name}: the {group} arrays are malformed: {exc!r}") from exc
            self._tables[group] = table
        return table

    def __iter__(self) -> Iterator[str]:
        return iter(self._grids)

    def __len__(self) -> int:
        return len(self._grids)


def _header(stream: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """An ``.npy`` member's shape and dtype, from its header alone (the data is not read)."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    return tuple(shape), np.dtype(dtype)
