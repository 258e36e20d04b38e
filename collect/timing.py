"""The CUDA timer behind the measurement protocol (the GPU edge: imports torch and NVML).

Each launch is timed between two CUDA events recorded on the current stream, after the L2 has
been flushed by zeroing a 256 MiB buffer (over four times the H200's 60 MiB L2, as Triton's
``do_bench`` does), so every candidate starts from the same cold-L2 state: the state of a kernel
whose inputs were last touched by other work. The host reads the events once per round, after a
single synchronisation, so it never stalls the device queue in the middle of a round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from tilecost.collect.protocol import Telemetry

if TYPE_CHECKING:
    import torch

__all__ = ["CudaEventTimer", "DEFAULT_FLUSH_BYTES", "NvmlReader"]

DEFAULT_FLUSH_BYTES = 256 * 1024 * 1024


class NvmlReader:
    """Reads clocks, power, temperature and clock-event reasons of one GPU through NVML.

    Returns ``None`` readings when NVML is not available (the reading is then absent, not faked).
    """

    def __init__(self, index: int = 0):
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # noqa: BLE001 - pynvml raises its own NVMLError family or ImportError
            self._nvml = None
            self._handle = None

    def read(self) -> Telemetry | None:
        if self._nvml is None:
            return None
        nv = self._nvml
        h = self._handle
        reasons_fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return Telemetry(
            sm_clock_mhz=float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            power_w=nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            temperature_c=float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            clock_event_reasons=int(reasons_fn(h)),
        )

    def driver_version(self) -> str:
        if self._nvml is None:
            return "unknown"
        version = self._nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)


class CudaEventTimer:
    """A :class:`~tilecost.collect.protocol.RoundTimer` on the current CUDA device."""

    def __init__(self, flush_bytes: int = DEFAULT_FLUSH_BYTES, nvml: NvmlReader | None = None):
        import torch

        self._torch = torch
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
        self._nvml = nvml if nvml is not None else NvmlReader(torch.cuda.current_device())

    def run_round(self, items: Sequence[tuple[Hashable, Callable[[], object], int]]) -> dict[Hashable, list[float]]:
        torch = self._torch
        Event = torch.cuda.Event
        pending: list[tuple[Hashable, torch.cuda.Event, torch.cuda.Event]] = []
        for key, launch, reps in items:
            for _ in range(reps):
                self._flush.zero_()
                start, end = Event(enable_timing=True), Event(enable_timing=True)
                start.record()
                launch()
                end.record()
                pending.append((key, start, end))
        torch.cuda.synchronize()
        out: dict[Hashable, list[float]] = {key: [] for key, _, _ in items}
        for key, start, end in pending:
            out[key].append(start.elapsed_time(end) * 1000.0)
        return out

    def pause(self, seconds: float) -> None:
        self._torch.cuda.synchronize()
        time.sleep(seconds)

    def telemetry(self) -> Telemetry | None:
        return self._nvml.read()
