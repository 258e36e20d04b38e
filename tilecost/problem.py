"""A matmul problem: ``C[M, N] = A[M, K] @ B[K, N]`` in one dtype and one memory layout.

The problem is the unit tilecost measures and predicts for. It is a frozen value that checks itself
at construction, so a ``Problem`` that exists is always a valid one.
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DType", "Layout", "MAX_DIM", "Problem", "nk_pattern", "parse_dim"]

# Triton and torch index with int32 in places; 2**31 - 1 elements along one dim is the ceiling.
MAX_DIM = 2**31 - 1

E = TypeVar("E", bound=enum.Enum)


class DType(enum.Enum):
    """Input dtype of the product. The accumulator is always fp32."""

    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"  # the kernels' fp32 dot runs in tf32 on tensor cores
    FP8 = "fp8e4m3"  # e4m3 inputs, fp32 accumulation, bf16 output

    # Members are singletons compared by identity; object's hash agrees with that and runs in C, where
    # Enum's own (hash of the name) is a Python call: a query hashes a dtype and a layout ~10 times.
    __hash__ = object.__hash__

    @property
    def in_bytes(self) -> int:
        """Bytes per input element."""
        return _IN_BYTES[self]

    @property
    def out_bytes(self) -> int:
        """Bytes per output element (fp8 products are written as bf16)."""
        return _OUT_BYTES[self]

    @classmethod
    def parse(cls, value: object) -> DType:
        """Accept a ``DType`` or its string value (``"bf16"``); anything else raises ``ValueError``."""
        return _parse_enum(cls, value, "dtype")


_IN_BYTES = {DType.FP16: 2, DType.BF16: 2, DType.FP32: 4, DType.FP8: 1}
_OUT_BYTES = {DType.FP16: 2, DType.BF16: 2, DType.FP32: 4, DType.FP8: 2}


class Layout(enum.Enum):
    """How B is stored. A is always M×K row-major and C is M×N row-major.

    ``NN``: B is K×N row-major. ``NT``: B is given as N×K row-major, the ``nn.Linear`` weight case
    (``x @ w.T``).
    """

    NN = "nn"
    NT = "nt"

    __hash__ = object.__hash__  # as DType's

    @classmethod
    def parse(cls, value: object) -> Layout:
        """Accept a ``Layout`` or its string value (``"nt"``); anything else raises ``ValueError``."""
        return _parse_enum(cls, value, "layout")


def _parse_enum(cls: type[E], value: object, field: str) -> E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value)  # the exact value ("bf16"), looked up in the enum's own table
        except ValueError:
            pass
        for member in cls:
            if member.value == value.lower() or member.name == value.upper():
                return member
    allowed = ", ".join(repr(m.value) for m in cls)
    raise ValueError(f"{field}={value!r} is not allowed; use one of {allowed}")


def parse_dim(field: str, value: object) -> int:
    """Check one extent: a true integer (not bool, not float), 1 <= value <= 2**31 - 1."""
    if type(value) is int and 1 <= value <= MAX_DIM:  # the common case, without the ABC check (~0.5 µs)
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int in 1..{MAX_DIM}, got {type(value).__name__} {value!r}")
    value = int(value)
    if not 1 <= value <= MAX_DIM:
        raise ValueError(f"{field}={value} is out of range; allowed 1..{MAX_DIM}")
    return value


def nk_pattern(n: int, k: int) -> str:
    """Whether N and K are multiples of 16, as the collector names pointer patterns: ``"16-x"`` is N a multiple of 16
    and K not. Alignment changes which configurations are fast (tensor descriptors, vectorised loads), so the OOD
    check's neighbourhoods and the groups the promotion verdict names are per pattern."""
    return f"{'16' if n % 16 == 0 else 'x'}-{'16' if k % 16 == 0 else 'x'}"


@dataclass(frozen=True, slots=True)
class Problem:
    """One matmul problem. ``Problem(4096, 4096, 4096, "bf16", "nt")`` and enum members both work."""

    m: int
    n: int
    k: int
    dtype: DType = DType.BF16
    layout: Layout = Layout.NT

    def __post_init__(self) -> None:
        # Fields already valid are left as they are: a compiler builds one per query (3.1 µs instead of 5.3 here).
        for field in ("m", "n", "k"):
            value = getattr(self, field)
            parsed = parse_dim(field, value)
            if parsed is not value:
                object.__setattr__(self, field, parsed)
        if type(self.dtype) is not DType:
            object.__setattr__(self, "dtype", DType.parse(self.dtype))
        if type(self.layout) is not Layout:
            object.__setattr__(self, "layout", Layout.parse(self.layout))

    @property
    def flops(self) -> int:
        """Floating-point operations of the product: 2·M·N·K (a multiply and an add per term)."""
        return 2 * self.m * self.n * self.k

    @property
    def min_bytes(self) -> int:
        """Fewest bytes moved through HBM: A and B read once, C written once."""
        return (self.m * self.k + self.k * self.n) * self.dtype.in_bytes + self.m * self.n * self.dtype.out_bytes

    @property
    def key(self) -> str:
        """Stable readable key, e.g. ``"4096x4096x4096-bf16-nt"``."""
        return f"{self.m}x{self.n}x{self.k}-{self.dtype.value}-{self.layout.value}"

    @classmethod
    def from_key(cls, key: str) -> Problem:
        """Inverse of :attr:`key`. Anything but a ``str`` raises ``TypeError`` and a malformed key ``ValueError``,
        each naming the key and the form ``MxNxK-dtype-layout``; a well-formed key of invalid values raises
        ``ValueError`` naming the field (``dtype='bf17'``)."""
        if not isinstance(key, str):
            raise TypeError(
                f"problem key must be a str of the form MxNxK-dtype-layout, got {type(key).__name__} {key!r}"
            )
        try:
            dims, dtype, layout = key.rsplit("-", 2)
            m, n, k = (int(d) for d in dims.split("x"))
        except ValueError:
            raise ValueError(f"problem key {key!r} is not of the form MxNxK-dtype-layout") from None
        return cls(m, n, k, DType.parse(dtype), Layout.parse(layout))

    def to_dict(self) -> dict[str, object]:
        return {"m": self.m, "n": self.n, "k": self.k, "dtype": self.dtype.value, "layout": self.layout.value}

    def __str__(self) -> str:
        return self.key
