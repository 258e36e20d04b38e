"""A tile configuration: how one kernel of the family walks a matmul's iteration space.

``TileConfig`` is a frozen value. Its :attr:`TileConfig.key` is the stable id written into every
measured row and every model artifact, e.g. ``"tma-128x256x64-g8-s1-w8-p3"``: variant, BLOCK_M ×
BLOCK_N × BLOCK_K, GROUP_M, SPLIT_K, num_warps, num_stages (p for pipeline). Conversion to a
``triton.Config`` happens in one function at the GPU edge (``tilecost.collect.kernels``), never here.
"""

from __future__ import annotations

import enum
import numbers
import re
from dataclasses import dataclass

__all__ = ["KernelVariant", "TileConfig"]


class KernelVariant(enum.Enum):
    """Which kernel of the family runs the configuration.

    ``PTR``: plain pointer loads (works for any shape and stride). ``TMA``: Hopper tensor descriptors
    (needs 16-byte aligned row strides; the candidate space excludes it where a problem lacks them).
    """

    PTR = "ptr"
    TMA = "tma"

    @classmethod
    def parse(cls, value: object) -> KernelVariant:
        if isinstance(value, cls):
            return value
        for member in cls:
            if isinstance(value, str) and value.lower() == member.value:
                return member
        raise ValueError(f"variant={value!r} is not allowed; use one of 'ptr', 'tma'")


_POW2_TILE = (16, 32, 64, 128, 256)
_BLOCK_K = (16, 32, 64, 128, 256)
_WARPS = (1, 2, 4, 8, 16)
_KEY_RE = re.compile(r"(ptr|tma)-([1-9]\d*)x([1-9]\d*)x([1-9]\d*)-g([1-9]\d*)-s([1-9]\d*)-w([1-9]\d*)-p([1-9]\d*)")


@dataclass(frozen=True, slots=True)
class TileConfig:
    """One point of the candidate space. Validates its own fields, not its feasibility on a device
    (that is :mod:`tilecost.space`'s job, which knows the device)."""

    variant: KernelVariant
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 1
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "variant", KernelVariant.parse(self.variant))
        for name in ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages"):
            object.__setattr__(self, name, _check_int(name, getattr(self, name)))
        _check_choice("block_m", self.block_m, _POW2_TILE)
        _check_choice("block_n", self.block_n, _POW2_TILE)
        _check_choice("block_k", self.block_k, _BLOCK_K)
        _check_choice("num_warps", self.num_warps, _WARPS)
        _check_range("group_m", self.group_m, 1, 64)
        _check_range("split_k", self.split_k, 1, 64)
        _check_range("num_stages", self.num_stages, 1, 8)

    @property
    def key(self) -> str:
        """The stable id of this configuration (its canonical text)."""
        return (
            f"{self.variant.value}-{self.block_m}x{self.block_n}x{self.block_k}"
            f"-g{self.group_m}-s{self.split_k}-w{self.num_warps}-p{self.num_stages}"
        )

    @classmethod
    def from_key(cls, key: str) -> TileConfig:
        """Inverse of :attr:`key`; raises ``ValueError`` naming the expected form."""
        match = _KEY_RE.fullmatch(key)
        if match is None:
            raise ValueError(f"config key {key!r} is not of the form ptr|tma-BMxBNxBK-gG-sS-wW-pP")
        variant, *ints = match.groups()
        bm, bn, bk, g, s, w, p = (int(x) for x in ints)
        return cls(KernelVariant(variant), bm, bn, bk, g, s, w, p)

    @property
    def num_threads(self) -> int:
        return 32 * self.num_warps

    def to_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant.value,
            "block_m": self.block_m,
            "block_n": self.block_n,
            "block_k": self.block_k,
            "group_m": self.group_m,
            "split_k": self.split_k,
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> TileConfig:
        fields = ("variant", "block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
        missing = [f for f in fields if f not in data]
        if missing:
            raise ValueError(f"config is missing {', '.join(missing)}")
        return cls(**{f: data[f] for f in fields})  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.key


def _check_int(field: str, value: object) -> int:
    if type(value) is int:  # the common case, without the ABC check below (~2 µs a config of a 10,800 space)
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _check_choice(field: str, value: object, allowed: tuple[int, ...]) -> None:
    if _check_int(field, value) not in allowed:
        raise ValueError(f"{field}={value} is not allowed; use one of {allowed}")


def _check_range(field: str, value: object, low: int, high: int) -> None:
    if not low <= _check_int(field, value) <= high:
        raise ValueError(f"{field}={value} is out of range; allowed {low}..{high}")
