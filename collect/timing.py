"""The CUDA timer behind the measurement protocol (the GPU edge: imports torch and NVML).

Each launch is timed between two CUDA events recorded on the current stream, after the L2 has
been flushed by zeroing a 256 MiB buffer (over four times the H200's 60 MiB L2, as Triton's
``do_bench`` does), so every candidate starts from the same cold-L2 state: the state of a kernel
whose inputs were last touched by other work. The host reads the events once per round, after a
single synchronisation, so it never stalls the device queue in the middle of a round, and a spin
kernel ahead of each chunk of launches keeps the host ahead of the device (see the class).
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
    """A :class:`~tilecost.collect.protocol.RoundTimer` on the current CUDA device.

    Keeping the host ahead. A launch is timed correctly only if the host has already enqueued it when
    the device reaches its start event; otherwise the interval also holds the device waiting for the
    host (Triton's Python launcher costs tens of µs, more than a few-µs kernel). Launches are therefore
    enqueued in chunks of ``chunk`` behind a spin kernel (``torch.cuda._sleep``) long enough for the
    host to enqueue the whole chunk: the device then runs flush, start, kernel, end back to back.
    :attr:`host_bound` counts the launches whose gap since the previous launch's end event exceeded
    ``gap_limit_us`` beyond the flush (the device waited for the host): a diagnostic the backend
    reports, expected to stay near zero; a round with any doubles the spin (up to 8×) for the next.
    """

    def __init__(
        self,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
        nvml: NvmlReader | None = None,
        chunk: int = 48,
        host_lead_us_per_launch: float = 25.0,
        gap_limit_us: float = 20.0,
    ):
        import torch

        self._torch = torch
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
        self._nvml = nvml if nvml is not None else NvmlReader(torch.cuda.current_device())
        self._chunk = chunk
        self._gap_limit_us = gap_limit_us
        # Cycles of spin per chunk: host_lead_us_per_launch of lead per launch at the boost clock (at a
        # lower clock the same cycles last longer, which only lengthens the lead). Doubled, up to
        # 8 times, after any round in which the device still waited for the host.
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        clock_khz = getattr(props, "clock_rate", 0) or 1_980_000
        self._spin_cycles = int(chunk * host_lead_us_per_launch * clock_khz / 1000)
        self._max_spin_cycles = 8 * self._spin_cycles
        self._flush_us = self._time_flush()
        self.host_bound = 0
        self.launches = 0

    def _time_flush(self) -> float:
        """Median device time of one L2 flush (µs), to tell the flush from a wait on the host."""
        torch = self._torch
        Event = torch.cuda.Event
        pairs = []
        torch.cuda._sleep(self._spin_cycles)
        for _ in range(16):
            start, end = Event(enable_timing=True), Event(enable_timing=True)
            start.record()
            self._flush.zero_()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1000.0 for s, e in pairs)
        return times[len(times) // 2]

    def run_round(self, items: Sequence[tuple[Hashable, Callable[[], object], int]]) -> dict[Hashable, list[float]]:
        torch = self._torch
        Event = torch.cuda.Event
        launches = [(key, launch) for key, launch, reps in items for _ in range(reps)]
        pending: list[tuple[Hashable, torch.cuda.Event, torch.cuda.Event, bool]] = []
        for i, (key, launch) in enumerate(launches):
            first_of_chunk = i % self._chunk == 0
            if first_of_chunk:
                torch.cuda._sleep(self._spin_cycles)
            self._flush.zero_()
            start, end = Event(enable_timing=True), Event(enable_timing=True)
            start.record()
            launch()
            end.record()
            pending.append((key, start, end, first_of_chunk))
        torch.cuda.synchronize()
        out: dict[Hashable, list[float]] = {key: [] for key, _, _ in items}
        previous_end = None
        waited = 0
        for key, start, end, first_of_chunk in pending:
            out[key].append(start.elapsed_time(end) * 1000.0)
            if previous_end is not None and not first_of_chunk:
                gap_us = previous_end.elapsed_time(start) * 1000.0
                waited += gap_us > self._flush_us + self._gap_limit_us
            previous_end = end
        self.host_bound += waited
        self.launches += len(pending)
        if waited:
            self._spin_cycles = min(2 * self._spin_cycles, self._max_spin_cycles)
        return out

    def pause(self, seconds: float) -> None:
        self._torch.cuda.synchronize()
        time.sleep(seconds)

    def telemetry(self) -> Telemetry | None:
        return self._nvml.read()
