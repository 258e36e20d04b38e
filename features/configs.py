"""Tile configurations as a struct of arrays: a candidate space in columns.

The predictor scores one problem against every candidate configuration at once; training scores
one configuration per measured row. Both want each field of :class:`~tilecost.config.TileConfig`
as an aligned array. :class:`ConfigArrays` is that: built once per candidate space with
:meth:`ConfigArrays.from_configs` (or from the config keys a dataset stores, with
:meth:`ConfigArrays.from_keys`), then reused for every problem; :meth:`ConfigArrays.take` cuts out
the subset one problem may use.

Fields are float64 because every feature is float arithmetic on them; the values are exact small
integers (16..256, 1..64), and ``is_tma`` is a bool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.config import KernelVariant, TileConfig

__all__ = ["ConfigArrays"]

_INT_FIELDS = ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
_FIELDS = (*_INT_FIELDS, "is_tma")


@dataclass(frozen=True, eq=False)
class ConfigArrays:
    """Aligned columns of tile configurations; row ``i`` is one :class:`TileConfig`.

    Construction copies each input into a read-only 1-D array and checks that all eight have one
    length and that the integer fields hold positive integers; it does not check membership of
    the candidate space (that is :mod:`tilecost.space`'s job, which knows the device).
    """

    block_m: NDArray[np.float64]
    block_n: NDArray[np.float64]
    block_k: NDArray[np.float64]
    group_m: NDArray[np.float64]
    split_k: NDArray[np.float64]
    num_warps: NDArray[np.float64]
    num_stages: NDArray[np.float64]
    is_tma: NDArray[np.bool_]

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:
            array = np.array(getattr(self, name), dtype=np.float64, ndmin=1)
            if array.ndim != 1:
                raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
            bad = ~((array >= 1) & (array == np.floor(array)) & np.isfinite(array))
            if bad.any():
                raise ValueError(f"{name}={array[bad][0]:g} is not allowed; use positive integers")
            array.flags.writeable = False
            object.__setattr__(self, name, array)
        is_tma = np.array(self.is_tma, ndmin=1)
        if is_tma.dtype != np.bool_:
            raise TypeError(f"is_tma must be a bool array, got {is_tma.dtype}")
        is_tma.flags.writeable = False
        object.__setattr__(self, "is_tma", is_tma)
        lengths = {len(getattr(self, f.name)) for f in fields(self)}
        if len(lengths) != 1:
            raise ValueError(f"the config fields must have one length, got lengths {sorted(lengths)}")

    def __len__(self) -> int:
        return len(self.block_m)

    @classmethod
    def from_configs(cls, configs: Sequence[TileConfig]) -> ConfigArrays:
        """Columns of a sequence of configurations (a candidate space), in order."""
        columns = {name: np.array([getattr(c, name) for c in configs], dtype=np.float64) for name in _INT_FIELDS}
        is_tma = np.array([c.variant is KernelVariant.TMA for c in configs], dtype=bool)
        return cls(**columns, is_tma=is_tma)

    @classmethod
    def from_keys(cls, keys: ArrayLike) -> ConfigArrays:
        """Columns of config keys as datasets store them (``"tma-128x256x64-g8-s1-w8-p3"``).

        Each distinct key is parsed once by :meth:`TileConfig.from_key`, so a dataset of a million
        rows over a few thousand configurations costs a few thousand parses.
        """
        unique, inverse = np.unique(np.asarray(keys, dtype=str), return_inverse=True)
        return cls.from_configs([TileConfig.from_key(str(key)) for key in unique]).take(inverse.ravel())

    def take(self, index: ArrayLike) -> ConfigArrays:
        """The rows selected by an integer index array or a boolean mask, as new ``ConfigArrays``.

        Rows of checked columns are checked already, so the values are not validated again: the
        predictor cuts a shortlist out of its space on every new shape, and re-checking eight columns
        cost ~25 µs of a ~100 µs budget. numpy's indexing still refuses an index out of range.
        """
        index = np.asarray(index)
        taken = object.__new__(ConfigArrays)
        for name in _FIELDS:
            column = getattr(self, name)[index]
            if column.ndim != 1:
                raise ValueError(f"index must select rows (a 1-D integer array or mask), got shape {index.shape}")
            column.flags.writeable = False
            object.__setattr__(taken, name, column)
        return taken

    def config(self, row: int) -> TileConfig:
        """Row ``row`` as a :class:`TileConfig` value."""
        return TileConfig(
            KernelVariant.TMA if self.is_tma[row] else KernelVariant.PTR,
            *(int(getattr(self, name)[row]) for name in _INT_FIELDS),
        )
