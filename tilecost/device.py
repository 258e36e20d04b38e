"""Device specs: the hardware a cost model reasons about, read from data files.

Each device class has one JSON file in ``tilecost/devices/`` (``h200.json``, ``h100_sxm.json``).
Model math takes a :class:`DeviceSpec` as an argument and never queries a GPU; only the collector
reads the live device, to fingerprint what it measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tilecost.errors import SpecError
from tilecost.problem import DType

__all__ = ["DeviceSpec", "device_class_for_gpu_name", "list_device_classes", "load_device"]

_INT_FIELDS = (
    "sm_count",
    "smem_per_block_bytes",
    "smem_per_sm_bytes",
    "registers_per_sm",
    "max_registers_per_thread",
    "max_threads_per_block",
    "max_threads_per_sm",
    "max_blocks_per_sm",
    "l2_bytes",
    "hbm_bytes",
)
_FLOAT_FIELDS = ("hbm_bandwidth_gbps", "sm_clock_mhz")


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """What a device offers a matmul kernel. Units are in the field names."""

    device_class: str
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    smem_per_block_bytes: int
    smem_per_sm_bytes: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    l2_bytes: int
    hbm_bytes: int
    hbm_bandwidth_gbps: float
    sm_clock_mhz: float
    peak_dense_tflops: Mapping[DType, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.device_class, str) or not self.device_class.replace("_", "").isalnum():
            raise SpecError(f"device_class={self.device_class!r} must be a non-empty [a-z0-9_] key")
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(f"{self.device_class}: {name}={value!r} must be a positive int")
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise SpecError(f"{self.device_class}: {name}={value!r} must be a positive number")
        missing = [d.value for d in DType if d not in self.peak_dense_tflops]
        if missing:
            raise SpecError(f"{self.device_class}: peak_dense_tflops lacks {', '.join(missing)}")
        for dtype, rate in self.peak_dense_tflops.items():
            if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
                raise SpecError(
                    f"{self.device_class}: peak_dense_tflops[{dtype.value}]={rate!r} must be a positive number"
                )
        object.__setattr__(self, "peak_dense_tflops", MappingProxyType(dict(self.peak_dense_tflops)))

    def peak_flops_per_s(self, dtype: DType) -> float:
        """Dense tensor-core rate for ``dtype`` in FLOP/s."""
        return self.peak_dense_tflops[dtype] * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_gbps * 1e9

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceSpec:
        """Build from the JSON layout of ``tilecost/devices/*.json``; unknown keys other than
        ``sources`` are refused so that a typo cannot silently leave a default in place."""
        if not isinstance(data, Mapping):
            raise SpecError(f"device spec must be a JSON object, got {type(data).__name__}")
        known = set(cls.__dataclass_fields__) | {"sources"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"device spec has unknown keys {unknown}; allowed {sorted(known)}")
        missing = sorted(set(cls.__dataclass_fields__) - set(data))
        if missing:
            raise SpecError(f"device spec lacks {missing}")
        try:
            peaks = {DType.parse(k): float(v) for k, v in data["peak_dense_tflops"].items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise SpecError(f"device spec: peak_dense_tflops: {exc}") from exc
        cc = data["compute_capability"]
        if not (
            isinstance(cc, (list, tuple))
            and len(cc) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in cc)
        ):
            raise SpecError(f"compute_capability={cc!r} must be [major, minor], two non-negative ints")
        kwargs = {k: data[k] for k in cls.__dataclass_fields__ if k not in ("peak_dense_tflops", "compute_capability")}
        return cls(peak_dense_tflops=peaks, compute_capability=(cc[0], cc[1]), **kwargs)


def list_device_classes() -> list[str]:
    """The device classes that ship a spec file, sorted."""
    folder = resources.files("tilecost") / "devices"
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def load_device(device: str | Path | DeviceSpec = "h200") -> DeviceSpec:
    """Load a shipped device class by key (``"h200"``), a spec file by path, or pass a spec through."""
    if isinstance(device, DeviceSpec):
        return device
    if isinstance(device, Path) or str(device).endswith(".json"):
        path = Path(device)
        if not path.is_file():
            raise SpecError(f"device spec file {path} does not exist")
        text = path.read_text()
    else:
        key = str(device).lower()
        known = list_device_classes()
        if key not in known:
            raise ValueError(f"device={device!r} is not a known device class; use one of {known} or a .json path")
        text = (resources.files("tilecost") / "devices" / f"{key}.json").read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"device spec {device}: invalid JSON ({exc})") from exc
    return DeviceSpec.from_dict(data)


# Exact GPU names as CUDA reports them. The class comes from the name, never from a proxy number
# (the SM count of an H100 SXM and an H200 is the same 132).
_GPU_NAMES = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100_sxm"}


def device_class_for_gpu_name(name: str) -> str:
    """Map a CUDA device name to a device class key; unknown names raise ``SpecError``."""
    try:
        return _GPU_NAMES[name.strip()]
    except KeyError:
        raise SpecError(
            f"GPU {name!r} has no device class; add a spec file under tilecost/devices/ and map its name"
        ) from None
