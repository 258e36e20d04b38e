"""The CUDA timer behind the measurement protocol (the GPU edge: imports torch and NVML).

Each launch is timed between two CUDA events recorded on the current stream, after the L2 has
been flushed by zeroing a 256 MiB buffer (over four times the H200's 60 MiB L2, as Triton's
``do_bench`` does), so every candidate starts from the same cold-L2 state: the state of a kernel
whose inputs were last touched by other work. The host reads the events once per round, after a
single synchronisation, so it never stalls the device queue in the middle of a round, and a spin
kernel ahead of each chunk of launches keeps the host ahead of the device (see the class).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from tilecost.collect.protocol import Telemetry

__all__ = ["CudaEventTimer", "DEFAULT_FLUSH_BYTES", "FIRST_SPIN_FACTOR", "NvmlReader"]

DEFAULT_FLUSH_BYTES = 256 * 1024 * 1024
# The first chunk of a round spins this many times longer (see CudaEventTimer, "The first chunk").
FIRST_SPIN_FACTOR = 4


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

    Checking it. An event is recorded right after each chunk's spin; once the host has enqueued the
    chunk it asks whether that event has completed. If it has, the spin ended before the host was
    done and the device may have waited inside the chunk: its launches are counted in
    :attr:`host_bound` (an upper bound, reported by the backend, expected to stay at zero) and the
    spin doubles, up to 8 times, for the chunks that follow.

    The first chunk. Every round but the first chunk's spin starts behind the previous chunk's
    device work, so the host gains that lead too; the first starts on an idle device (the previous
    round ended with a synchronisation), and its spin alone must outlast the host's 48 enqueues. At
    25 µs a launch it did not: the sixth session's GPU test, with every kernel warm, still had exactly
    its first chunk of 48 counted host-bound, and the sweeps' logs showed 48 or 96 such launches a
    problem, never other chunks. The first chunk's spin is therefore :data:`FIRST_SPIN_FACTOR` times
    longer: 3.6 ms more device time once a round.

    Warming up. The first launch of a kernel in a process costs the host far more than the next ones
    (CUDA loads the kernel's module lazily; Triton's launcher looks the binary up): milliseconds, more
    than any spin. Each launch the timer has not seen before is therefore run once, untimed, before
    the round's first spin is enqueued (:meth:`_warm_up`). The fourth session's GPU test of a fresh
    1024-element add (a kernel never launched before) had its first chunk of 48 counted host-bound;
    with the add warmed, the fifth session's still had, since the timer's own spin, flush and events
    were first launched inside that chunk: the constructor now runs them once
    (:meth:`_warm_own_kernels`).
    """

    def __init__(
        self,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
        nvml: NvmlReader | None = None,
        chunk: int = 48,
        host_lead_us_per_launch: float = 25.0,
    ):
        import torch

        self._torch = torch
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
        self._nvml = nvml if nvml is not None else NvmlReader(torch.cuda.current_device())
        self._chunk = chunk
        # Cycles of spin per chunk: host_lead_us_per_launch of lead per launch at the boost clock (at a
        # lower clock the same cycles last longer, which only lengthens the lead).
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        clock_khz = getattr(props, "clock_rate", 0) or 1_980_000
        self._spin_cycles = int(chunk * host_lead_us_per_launch * clock_khz / 1000)
        self._max_spin_cycles = 8 * self._spin_cycles
        self.host_bound = 0
        self.launches = 0
        self.last_round_suspects: set[Hashable] = set()  # keys of the last round's host-bound chunks
        self._warmed: set[tuple[Hashable, int]] = set()  # (key, id(launch)) already run once
        self._warm_own_kernels()

    def _warm_own_kernels(self) -> None:
        """Run the timer's own launches once, untimed: the spin, the L2 flush and the events.

        CUDA loads a kernel's module on its first launch in a process (lazy loading, the default), and
        the first timing events are created then too: milliseconds of host time. Left to the first
        chunk of the first round, they land after its spin has been enqueued and outlast it. The fifth
        session's GPU test of a warmed 1024-element add still had exactly its first chunk of 48 counted
        host-bound; the add was warm, the flush (``zero_``) and ``_sleep`` of a fresh timer were not.
        """
        torch = self._torch
        torch.cuda._sleep(1)
        self._flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        torch.cuda.synchronize()

    def _warm_up(self, items: Sequence[tuple[Hashable, Callable[[], object], int]]) -> int:
        """Run each launch not seen before once, untimed; returns how many ran. A recycled ``id`` can
        only skip a warm-up, and a chunk that then waits for the host is still counted."""
        if len(self._warmed) > 100_000:  # a long sweep: forget old problems' launches
            self._warmed.clear()
        ran = 0
        for key, launch, _ in items:
            tag = (key, id(launch))
            if tag not in self._warmed:
                launch()
                self._warmed.add(tag)
                ran += 1
        return ran

    def run_round(self, items: Sequence[tuple[Hashable, Callable[[], object], int]]) -> dict[Hashable, list[float]]:
        # Python's garbage collector stays off while a round is enqueued: a full collection (tens of ms
        # after a problem's setup allocated many objects) in the middle of a chunk outlasts any spin.
        # Hypothesis for the "48 of N timed launches waited for the host" of nearly every problem in
        # the third session's logs (one chunk a problem); the next H200 run's counts will say.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run_round(items)
        finally:
            if enabled:
                gc.enable()

    def _run_round(self, items: Sequence[tuple[Hashable, Callable[[], object], int]]) -> dict[Hashable, list[float]]:
        torch = self._torch
        Event = torch.cuda.Event
        launches = [(key, launch) for key, launch, reps in items for _ in range(reps)]
        pending: list[tuple[Hashable, Any, Any]] = []
        suspects: set[Hashable] = set()
        self.last_round_suspects = suspects
        self._warm_up(items)
        for first in range(0, len(launches), self._chunk):
            chunk = launches[first : first + self._chunk]
            # The round starts on an idle device: the first spin alone must cover the host's whole
            # chunk. Later spins start only once the device has run the previous chunk (48 flushes of
            # 256 MiB, milliseconds), which the host spends enqueuing, so they have that lead besides.
            torch.cuda._sleep(self._spin_cycles * (FIRST_SPIN_FACTOR if first == 0 else 1))
            spun = Event()
            spun.record()
            for key, launch in chunk:
                self._flush.zero_()
                start, end = Event(enable_timing=True), Event(enable_timing=True)
                start.record()
                launch()
                end.record()
                pending.append((key, start, end))
            if spun.query():  # the spin was over before the host had enqueued the chunk
                self.host_bound += len(chunk)
                suspects.update(key for key, _ in chunk)
                self._spin_cycles = min(2 * self._spin_cycles, self._max_spin_cycles)
        torch.cuda.synchronize()
        out: dict[Hashable, list[float]] = {key: [] for key, _, _ in items}
        for key, start, end in pending:
            out[key].append(start.elapsed_time(end) * 1000.0)
        self.launches += len(pending)
        return out

    def pause(self, seconds: float) -> None:
        self._torch.cuda.synchronize()
        time.sleep(seconds)

    def telemetry(self) -> Telemetry | None:
        return self._nvml.read()
