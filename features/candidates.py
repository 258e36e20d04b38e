"""A candidate space's problem-independent feature columns, computed once and reused.

Of the feature matrix's columns, :data:`~tilecost.features.schema.CONFIG_FEATURES` depend on the
configuration, the device and the dtype but not on M, N or K: the tile's own fields, its shared
memory, registers and occupancy. A predictor scores every problem of one dtype against the same
candidate space, so it builds :class:`ConfigFeatures` once per (space, device, dtype) and passes it
to :func:`~tilecost.features.matrix.feature_matrix` in place of the :class:`ConfigArrays`; that
saves about a third of the matrix's cost for ~50 candidates. Both routes compute the columns with the one function
:func:`config_columns`, so they give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.device import DeviceSpec
from tilecost.problem import DType

from .configs import ConfigArrays
from .geometry import Values, tile_flop_per_byte
from .occupancy import accumulators_per_thread, blocks_per_sm, registers_per_thread_estimate, smem_bytes
from .roofline import tile_efficiency
from .schema import CONFIG_FEATURES

__all__ = ["ConfigFeatures", "config_columns"]

F64 = NDArray[np.float64]

_BLOCKS_PER_SM = CONFIG_FEATURES.index("blocks_per_sm")


def config_columns(
    configs: ConfigArrays,
    device: DeviceSpec,
    in_bytes: Values,
    out_bytes: Values,
    registers_per_thread: ArrayLike | None = None,
) -> F64:
    """The :data:`CONFIG_FEATURES` columns, ``rows × len(CONFIG_FEATURES)`` float64.

    ``in_bytes`` and ``out_bytes`` are the dtype's (scalars, or one per row for training rows of
    mixed dtypes); rows is their broadcast with ``len(configs)``. ``registers_per_thread`` is the
    compiled kernels' measured count, a scalar or one per row; without it the estimate of
    :func:`~tilecost.features.occupancy.registers_per_thread_estimate` is used. Whichever is chosen
    must be the same when training and when predicting.
    """
    c = configs
    rows = np.broadcast_shapes((len(c),), np.shape(in_bytes), np.shape(out_bytes))[0]
    accumulators = accumulators_per_thread(c.block_m, c.block_n, c.num_warps)
    if registers_per_thread is None:
        registers = registers_per_thread_estimate(accumulators, device)
    else:
        registers = _measured_registers(registers_per_thread, rows)
    smem = smem_bytes(c.block_m, c.block_n, c.block_k, c.num_stages, c.is_tma, c.split_k, in_bytes, out_bytes)
    occupancy = blocks_per_sm(smem, registers, c.num_warps, device)
    values = {
        "block_m": c.block_m,
        "block_n": c.block_n,
        "block_k": c.block_k,
        "group_m": c.group_m,
        "split_k": c.split_k,
        "num_warps": c.num_warps,
        "num_stages": c.num_stages,
        "is_tma": c.is_tma,
        "tile_flop_per_byte": tile_flop_per_byte(c.block_m, c.block_n, in_bytes),
        "accumulators_per_thread": accumulators,
        "registers_per_thread": registers,
        "smem_bytes": smem,
        "blocks_per_sm": occupancy,
        "warps_per_sm": occupancy * c.num_warps,
        "tile_efficiency": tile_efficiency(c.block_m, c.block_n),
    }
    assert len(values) == len(CONFIG_FEATURES)
    columns = np.empty((rows, len(CONFIG_FEATURES)), dtype=np.float64)
    for index, name in enumerate(CONFIG_FEATURES):
        columns[:, index] = values[name]
    return columns


def _measured_registers(registers_per_thread: ArrayLike, rows: int) -> F64:
    """A caller's measured registers per thread, checked: a positive scalar or one per row."""
    registers = np.asarray(registers_per_thread, dtype=np.float64)
    if registers.ndim > 1 or registers.size not in (1, rows):
        raise ValueError(f"registers_per_thread has shape {registers.shape}; give a scalar or one per row ({rows})")
    if not (np.isfinite(registers) & (registers > 0)).all():
        raise ValueError(f"registers_per_thread must be positive and finite, got minimum {registers.min()!r}")
    return registers


@dataclass(frozen=True, eq=False)
class ConfigFeatures:
    """The :data:`CONFIG_FEATURES` columns of ``configs`` on ``device`` for ``dtype``.

    Build with :meth:`build`; ``columns`` has one row per configuration. :meth:`take` cuts out the
    candidates of one problem without recomputing anything.
    """

    configs: ConfigArrays
    device: DeviceSpec
    dtype: DType
    columns: F64

    def __post_init__(self) -> None:
        expected = (len(self.configs), len(CONFIG_FEATURES))
        if np.shape(self.columns) != expected:
            shape = np.shape(self.columns)
            raise ValueError(f"columns has shape {shape}, expected {expected}; build with ConfigFeatures.build")
        columns = np.array(self.columns, dtype=np.float64)
        columns.flags.writeable = False
        object.__setattr__(self, "columns", columns)

    @classmethod
    def build(
        cls,
        configs: ConfigArrays,
        device: DeviceSpec,
        dtype: DType,
        *,
        registers_per_thread: ArrayLike | None = None,
    ) -> ConfigFeatures:
        """Compute the columns once (see :func:`config_columns` for ``registers_per_thread``)."""
        dtype = DType.parse(dtype)
        columns = config_columns(configs, device, float(dtype.in_bytes), float(dtype.out_bytes), registers_per_thread)
        return cls(configs, device, dtype, columns)

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def blocks_per_sm(self) -> F64:
        """Resident blocks per SM of each configuration (a column of :attr:`columns`)."""
        return self.columns[:, _BLOCKS_PER_SM]

    def take(self, index: ArrayLike) -> ConfigFeatures:
        """The rows selected by an integer index array or a boolean mask (rows of checked columns:
        not checked again, see :meth:`ConfigArrays.take`)."""
        index = np.asarray(index)
        columns = self.columns[index]
        columns.flags.writeable = False
        taken = object.__new__(ConfigFeatures)
        for name, value in (("configs", self.configs.take(index)), ("device", self.device), ("dtype", self.dtype),
                            ("columns", columns)):  # fmt: skip
            object.__setattr__(taken, name, value)
        return taken
