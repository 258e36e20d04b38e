"""Problems as a struct of arrays: many matmul problems in columns, for training rows.

A :class:`~tilecost.problem.Problem` is one value; training needs the same fields for thousands of
measured rows at once. :class:`ProblemArrays` holds M, N, K, the dtype and the layout as aligned
1-D arrays so that every feature function runs once over all rows. The predictor, which scores one
problem, passes the ``Problem`` itself to :func:`~tilecost.features.feature_matrix`.

The dtype is stored as a small integer code, its index in :data:`DTYPES`. That order is part of the
feature schema (it fixes the one-hot columns), so it is spelled out here rather than taken from the
enum's declaration order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tilecost.device import DeviceSpec
from tilecost.problem import MAX_DIM, DType, Layout, Problem

__all__ = ["DTYPES", "ProblemArrays"]

# Code i of a ProblemArrays.dtype_code is DTYPES[i]. Changing this order changes the features:
# bump FEATURE_SCHEMA_VERSION in features/schema.py with it.
DTYPES: tuple[DType, ...] = (DType.FP16, DType.BF16, DType.FP32, DType.FP8)
_CODE = {dtype: code for code, dtype in enumerate(DTYPES)}
_IN_BYTES = np.array([d.in_bytes for d in DTYPES], dtype=np.float64)
_OUT_BYTES = np.array([d.out_bytes for d in DTYPES], dtype=np.float64)


def _dims(name: str, values: ArrayLike) -> NDArray[np.float64]:
    """One extent column as float64 (exact for integers below 2**53), checked like ``parse_dim``."""
    array = np.array(values, dtype=np.float64, ndmin=1)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    bad = ~((array >= 1) & (array <= MAX_DIM) & (array == np.floor(array)))
    if bad.any():
        raise ValueError(f"{name}={array[bad][0]:g} is not allowed; use integers 1..{MAX_DIM}")
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class ProblemArrays:
    """Aligned columns of problems: row ``i`` is ``Problem(m[i], n[i], k[i], DTYPES[dtype_code[i]], ...)``.

    ``m``, ``n``, ``k`` are float64 (every feature is float arithmetic, and products such as M·N·K
    overflow int64 near the 2**31 limit of one extent); ``dtype_code`` indexes :data:`DTYPES`;
    ``layout_nt`` is True where B is stored N×K. The arrays are read-only copies of the inputs.
    """

    m: NDArray[np.float64]
    n: NDArray[np.float64]
    k: NDArray[np.float64]
    dtype_code: NDArray[np.intp]
    layout_nt: NDArray[np.bool_]
    in_bytes: NDArray[np.float64] = field(init=False)
    out_bytes: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            object.__setattr__(self, name, _dims(name, getattr(self, name)))
        codes = np.array(self.dtype_code, ndmin=1)
        if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
            raise TypeError(f"dtype_code must be a 1-D integer array, got {codes.dtype} of shape {codes.shape}")
        if codes.size and not ((codes >= 0) & (codes < len(DTYPES))).all():
            raise ValueError(f"dtype_code values must lie in 0..{len(DTYPES) - 1} (indices into DTYPES)")
        codes = codes.astype(np.intp)
        layout = np.array(self.layout_nt, dtype=bool, ndmin=1)
        lengths = {len(self.m), len(self.n), len(self.k), len(codes), len(layout)}
        if len(lengths) != 1:
            raise ValueError(f"m, n, k, dtype_code and layout_nt must have one length, got lengths {sorted(lengths)}")
        for array in (codes, layout):
            array.flags.writeable = False
        object.__setattr__(self, "dtype_code", codes)
        object.__setattr__(self, "layout_nt", layout)
        in_bytes, out_bytes = _IN_BYTES[codes], _OUT_BYTES[codes]
        in_bytes.flags.writeable = False
        out_bytes.flags.writeable = False
        object.__setattr__(self, "in_bytes", in_bytes)
        object.__setattr__(self, "out_bytes", out_bytes)

    def __len__(self) -> int:
        return len(self.m)

    @classmethod
    def from_problems(cls, problems: Sequence[Problem]) -> ProblemArrays:
        """Columns of a sequence of :class:`Problem` values, in order."""
        return cls(
            m=np.array([p.m for p in problems], dtype=np.float64),
            n=np.array([p.n for p in problems], dtype=np.float64),
            k=np.array([p.k for p in problems], dtype=np.float64),
            dtype_code=np.array([_CODE[p.dtype] for p in problems], dtype=np.intp),
            layout_nt=np.array([p.layout is Layout.NT for p in problems], dtype=bool),
        )

    @classmethod
    def from_columns(
        cls, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: ArrayLike, layout: ArrayLike
    ) -> ProblemArrays:
        """Columns as a dataset stores them: dtype and layout as strings (``"bf16"``, ``"nt"``) or enums.

        Each distinct dtype and layout value is parsed once (``np.unique``), so a million rows cost
        a handful of parses; an unknown value raises ``ValueError`` naming it.
        """
        dtypes, dtype_inverse = np.unique(np.asarray(dtype, dtype=object).astype(str), return_inverse=True)
        layouts, layout_inverse = np.unique(np.asarray(layout, dtype=object).astype(str), return_inverse=True)
        dtype_codes = np.array([_CODE[DType.parse(_enum_text(d))] for d in dtypes], dtype=np.intp)
        nt = np.array([Layout.parse(_enum_text(x)) is Layout.NT for x in layouts], dtype=bool)
        return cls(
            m=np.asarray(m, dtype=np.float64),
            n=np.asarray(n, dtype=np.float64),
            k=np.asarray(k, dtype=np.float64),
            dtype_code=dtype_codes[dtype_inverse].ravel(),
            layout_nt=nt[layout_inverse].ravel(),
        )

    def problem(self, row: int) -> Problem:
        """Row ``row`` as a :class:`Problem` value."""
        return Problem(
            int(self.m[row]),
            int(self.n[row]),
            int(self.k[row]),
            DTYPES[int(self.dtype_code[row])],
            Layout.NT if self.layout_nt[row] else Layout.NN,
        )

    def peak_flops_per_s(self, device: DeviceSpec) -> NDArray[np.float64]:
        """Each row's dense tensor-core rate on ``device`` in FLOP/s (``DeviceSpec.peak_flops_per_s``)."""
        table = np.array([device.peak_flops_per_s(d) for d in DTYPES], dtype=np.float64)
        return table[self.dtype_code]


def _enum_text(value: str) -> str:
    """``str(DType.BF16)`` is ``"DType.BF16"``: keep the member name so that enums parse as well."""
    return value.rsplit(".", 1)[-1]
