"""The sweep: a plan × the candidate space → rows in the dataset, resumable and crash-proof.

Order of work. Problems already in the dataset for this run id are skipped. The rest are grouped by
(dtype, layout, specialisation pattern) so that each group's kernels are compiled once, ahead, in
parallel worker processes (:mod:`tilecost.collect.compile`), and then measured one problem at a time.
Each finished problem is written as one Parquet file before the next starts
(:class:`~tilecost.collect.store.DatasetStore`), so a sweep killed at any point loses at most the
problem in flight, and the same command run again measures exactly what is missing.

Compiling overlaps measuring. A background thread drives one pool of worker processes, kept for the
whole sweep (a worker's start, imports and CUDA context, is paid once), through the groups one after
another without waiting for measuring; each problem is measured as soon as its own kernels are
compiled, while the rest of its group compiles, and the measuring process starts beside the first
compile. A sweep therefore costs about the larger of compiling and measuring rather than their sum;
``compile_seconds`` counts only the time the sweep *waited* for a compile (the run line's ``compile wait``:
0 s when compiling kept ahead, however many kernels it built). With
``first_group`` (a shard's index) the group order is rotated, so that the sweeps of several GPUs on one
host start on different patterns and find each other's kernels in the shared Triton cache instead of
compiling the same pattern side by side.

Crash isolation. Measuring happens in a child process (the "backend"). Before each configuration's
first launch the child announces it; a configuration that kills the CUDA context (an illegal
address) or the process is recorded as ``crashed`` by the parent, the child is restarted, and the
problem is measured again without it.

Which candidates. Held-out problems are measured over every candidate the space offers them, so
that the best in the space is known. Training problems are measured over a seeded sample
(``sample_fraction``, at least ``min_sample``): a wider spread of problems teaches the model more
than every candidate of fewer problems. The sample is *shared*: each config of a dtype and layout
gets one seeded rank, and a training problem takes its candidates of lowest rank, so the problems
of a run use largely the same configs and a specialisation pattern compiles about
``sample_fraction`` of the space, not all of it (compiling is the dear part: FACTS.md). Another
``seed`` (a nightly run's) ranks the configs afresh, so successive runs cover the whole space.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import math
import multiprocessing
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from tilecost.collect.plans import PlanEntry, Role
from tilecost.collect.protocol import MeasureProtocol
from tilecost.collect.store import DatasetStore
from tilecost.config import TileConfig
from tilecost.device import load_device
from tilecost.measurement import Status
from tilecost.problem import Problem
from tilecost.space import problem_candidates

__all__ = ["SweepSettings", "SweepSummary", "choose_candidates", "measure_cost", "run_sweep", "sample_rank", "shard"]

MAX_CRASHES_PER_PROBLEM = 5
# How long past its time budget a sweep lets the problem it is measuring run on before giving it up: a held-out
# problem over every candidate can take minutes (the ninth session's H200 call 3 ran 75 s past its budget into
# the device call's hard timeout). benchmarks/h200_round.sh allows the sweep 75 s past its budget.
MEASURE_GRACE_S = 30.0
# How long the measuring process may take to start (imports, CUDA context: ~10-20 s on the H200 beside 15 compile
# processes) before the sweep gives up on it; before the eleventh session the sweep waited without limit.
CHILD_START_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class SweepSettings:
    """What a sweep run does; everything here (except ``workers``) goes into the run id."""

    device_class: str = "h200"
    sample_fraction: float = 0.35
    min_sample: int = 64
    seed: int = 0
    protocol: MeasureProtocol = field(default_factory=MeasureProtocol)
    backend: str = "tilecost.collect.backend:cuda_backend"
    workers: int | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        if not 0 < self.sample_fraction <= 1:
            raise ValueError(f"sample_fraction={self.sample_fraction} must be in (0, 1]")
        if self.min_sample < 1:
            raise ValueError(f"min_sample={self.min_sample} must be >= 1")

    def resolved_run_id(self) -> str:
        if self.run_id:
            return self.run_id
        fields = {k: v for k, v in asdict(self).items() if k not in ("workers", "run_id", "backend")}
        digest = hashlib.blake2b(json.dumps(fields, sort_keys=True, default=str).encode(), digest_size=5)
        return f"r{digest.hexdigest()}"


@dataclass
class SweepSummary:
    run_id: str
    problems_planned: int = 0
    problems_skipped: int = 0
    problems_done: int = 0
    rows: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    measure_seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    stopped_early: bool = False
    abandoned: str | None = None  # the problem given up at the budget's grace (measured again next run)

    def line(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.status_counts.items()))
        return (
            f"run {self.run_id}: {self.problems_done} problems measured, {self.problems_skipped} already in the "
            f"dataset, {self.rows} rows ({counts}); compile wait {self.compile_seconds:.0f} s, "
            f"measure {self.measure_seconds:.0f} s"
            + ("; stopped at the time budget, run again to resume" if self.stopped_early else "")
            + (f" ({self.abandoned} was still measuring and is left for it)" if self.abandoned else "")
        )


def shard(entries: Sequence[PlanEntry], index: int, count: int) -> list[PlanEntry]:
    """Deterministic share ``index`` of ``count``: the entries, ordered by a hash of the problem key
    (so that the split does not depend on the plan's order), dealt out in turn. Every problem lands in
    exactly one shard, and the shards' sizes differ by one at most (a hash modulo ``count`` left 10
    and 14 of the 24 reference problems to two GPUs). A problem's shard depends on the whole plan, so
    every job of a split must see the same plan: the same command and seed, or one plan file (the
    nightly's shards all read the plan the first of them wrote)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {index}/{count}: need count >= 1 and 0 <= index < count")

    def h(e: PlanEntry) -> tuple[int, str]:
        return int.from_bytes(hashlib.blake2b(e.problem.key.encode(), digest_size=8).digest(), "big"), e.problem.key

    dealt = {id(e) for e in sorted(entries, key=h)[index::count]}
    return [e for e in entries if id(e) in dealt]


def sample_rank(config: TileConfig, problem: Problem, seed: int) -> int:
    """The config's seeded rank in the shared training sample of ``problem``'s dtype and layout."""
    text = f"{seed}:{problem.dtype.value}:{problem.layout.value}:{config.key}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def measure_cost(problem: Problem, configs: Sequence[TileConfig]) -> float:
    """A problem's estimated measuring cost, for ordering: its configurations times (a fixed cost per
    configuration, as many flop as 1e9, plus the problem's flop). The ninth session's held-out problems
    over every candidate measured at ~100 configurations a second below 1e9 flop and ~15 at 1e12."""
    return len(configs) * (1e9 + 2.0 * problem.m * problem.n * problem.k)


def choose_candidates(entry: PlanEntry, settings: SweepSettings) -> tuple[list[TileConfig], float]:
    """The configs to measure for ``entry`` and the fraction of its candidates they are."""
    every = problem_candidates(entry.problem, load_device(settings.device_class))
    cands = [c for c in every if entry.admits(c)]
    total = len(every)
    if entry.role is Role.HELDOUT or settings.sample_fraction >= 1 or not cands:
        return cands, (len(cands) / total if total else 1.0)
    count = min(len(cands), max(settings.min_sample, math.ceil(settings.sample_fraction * len(cands))))
    picked = set(sorted(cands, key=lambda c: sample_rank(c, entry.problem, settings.seed))[:count])
    return [c for c in cands if c in picked], count / total


# ------------------------------------------------------------------------------------- the child
def _child(conn: Any, backend_path: str, protocol: MeasureProtocol) -> None:
    """Measuring process: receives (problem key, config keys, seed), announces each config before
    launching it, replies with the outcomes. A CUDA error ends the process after saying so."""
    module, _, name = backend_path.partition(":")
    backend = getattr(importlib.import_module(module), name)(protocol)
    conn.send(("ready", backend.fingerprint))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        problem_key, config_keys, seed = msg
        problem = Problem.from_key(problem_key)
        configs = [TileConfig.from_key(k) for k in config_keys]
        try:
            outcomes = backend.measure(problem, configs, seed, lambda key: conn.send(("config", key)))
        except backend.context_lost as exc:
            conn.send(("lost", exc.config_key, str(exc)[:500]))
            return
        conn.send(("done", outcomes))


class _Child:
    def __init__(self, backend: str, protocol: MeasureProtocol):
        start_timeout_s = CHILD_START_TIMEOUT_S  # read at each start, so that a test can shorten it
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(child_conn, backend, protocol), daemon=True)
        self.proc.start()
        child_conn.close()
        if not self.conn.poll(start_timeout_s):
            self.proc.kill()
            self.proc.join(5)
            waited = f"{start_timeout_s:.0f} s"
            raise RuntimeError(f"measuring process sent nothing within {waited} of its start ({backend})")
        tag, self.fingerprint = self._recv()
        if tag != "ready":
            raise RuntimeError(f"measuring process failed to start: {tag} (exit code {self.fingerprint})")

    def _recv(self) -> Any:
        try:
            return self.conn.recv()
        except EOFError:
            self.proc.join(5)
            return ("died", self.proc.exitcode)

    def measure(
        self, problem: Problem, configs: Sequence[TileConfig], seed: int, deadline: float | None = None
    ) -> tuple[str, Any]:
        """Measure ``configs`` of ``problem``; ``("late", None)`` (the process ended, nothing kept) once
        ``time.monotonic()`` passes ``deadline``."""
        self.conn.send((problem.key, [c.key for c in configs], seed))
        current = None
        while True:
            if deadline is not None:
                while not self.conn.poll(max(0.0, min(0.5, deadline - time.monotonic()))):
                    if time.monotonic() >= deadline:
                        self.proc.kill()
                        self.proc.join(5)
                        return "late", None
            msg = self._recv()
            if msg[0] == "config":
                current = msg[1]
            elif msg[0] == "done":
                return "done", msg[1]
            elif msg[0] == "lost":
                return "crashed", (msg[1], msg[2])
            else:  # the process died: blame the config it had announced last
                return "crashed", (current, f"measuring process exited with code {msg[1]}")

    def close(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):  # the child may be gone already
                self.conn.send(None)
            self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


# ------------------------------------------------------------------------------------- progress
class Progress:
    """One status line: problems, configs, rate and ETA; a line per update when not a terminal."""

    def __init__(self, total_problems: int, total_configs: int, stream: TextIO = sys.stderr):
        self.total_problems, self.total_configs = total_problems, total_configs
        self.problems = self.configs = 0
        self.start = time.monotonic()
        self.stream = stream
        self.tty = stream.isatty()

    def update(self, problems: int, configs: int, note: str = "") -> None:
        self.problems += problems
        self.configs += configs
        elapsed = time.monotonic() - self.start
        rate = self.configs / elapsed if elapsed > 0 else 0.0
        left = self.total_configs - self.configs
        eta = f"{left / rate / 60:.1f} min" if rate > 0 and left > 0 else "-"
        line = (
            f"[{self.problems}/{self.total_problems} problems] {self.configs}/{self.total_configs} configs "
            f"{rate:.0f} configs/s ETA {eta} {note}"
        )
        self.stream.write(("\r" + line.ljust(110)) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


# ------------------------------------------------------------------------------------- the sweep
def _rows(
    entry: PlanEntry,
    outcomes: Sequence[Mapping[str, Any]],
    fingerprint: Mapping[str, Any],
    run_id: str,
    fraction: float,
) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    p = entry.problem
    base = dict(fingerprint)
    base.update(
        run_id=run_id, timestamp=now, family=entry.family, role=entry.role.value, sample_fraction=fraction,
        problem_key=p.key, m=p.m, n=p.n, k=p.k, dtype=p.dtype.value, layout=p.layout.value,
    )  # fmt: skip
    rows = []
    for o in outcomes:
        config = TileConfig.from_key(o["config_id"])
        row = dict(base)
        row.update(config_id=config.key, **config.to_dict())
        row.update({k: v for k, v in o.items() if k != "config_id"})
        rows.append(row)
    return rows


def run_sweep(
    entries: Sequence[PlanEntry],
    store: DatasetStore,
    settings: SweepSettings = SweepSettings(),
    progress_stream: TextIO | None = sys.stderr,
    precompile_fn: Callable[..., Mapping[tuple[str, str], Any]] | None = None,
    time_budget_s: float | None = None,
    first_group: int = 0,
) -> SweepSummary:
    """Measure every entry not yet in ``store`` for this run id; see the module docstring.

    ``precompile_fn`` (default: :func:`tilecost.collect.compile.precompile` for the CUDA backend,
    none otherwise) compiles a group's kernels ahead of measuring, the next group's while this one is
    measured; it is called as ``precompile_fn(pairs, workers=..., stop=event)`` and should return
    early once ``event`` is set. With ``time_budget_s`` no new problem is started once that many
    seconds have passed (the rest is left for the next run, which resumes), and a problem still being
    measured :data:`MEASURE_GRACE_S` later is given up, its measuring process ended and nothing of it
    written (except the run's first problem, so that every run progresses); groups with the most
    problems go first, so a budget buys the most problems per compile, and within a group the cheapest
    (:func:`measure_cost`), so a run's first problem is a short one. ``first_group`` rotates that
    order (a shard's index: see the module docstring).
    """
    started = time.monotonic()
    run_id = settings.resolved_run_id()
    summary = SweepSummary(run_id=run_id, problems_planned=len(entries))
    store.clean_partial()
    todo = []
    for entry in entries:
        if store.has(settings.device_class, entry.problem, run_id):
            summary.problems_skipped += 1
        else:
            configs, fraction = choose_candidates(entry, settings)
            todo.append((entry, configs, fraction))
    from tilecost.collect.compile import close_pool, compile_pool, precompile, problem_pattern

    pool = None
    if precompile_fn is None and settings.backend.endswith(":cuda_backend"):
        pool = compile_pool(settings.workers)
        precompile_fn = functools.partial(precompile, pool=pool)

    def group_of(item: tuple[PlanEntry, list[TileConfig], float]) -> str:
        return problem_pattern(item[0].problem)

    sizes: dict[str, int] = {}
    for item in todo:
        sizes[group_of(item)] = sizes.get(group_of(item), 0) + 1
    # Groups with the most problems first; within a group the cheapest problems first, so that a budget
    # buys the most problems and a run's first problem (never given up) is not one that outlasts a call.
    todo.sort(key=lambda item: (-sizes[group_of(item)], group_of(item), measure_cost(item[0].problem, item[1])))
    batches: list[list[tuple[PlanEntry, list[TileConfig], float]]] = []
    for item in todo:
        if batches and group_of(batches[-1][0]) == group_of(item):
            batches[-1].append(item)
        else:
            batches.append([item])
    if batches and first_group % len(batches):
        shift = first_group % len(batches)
        batches = batches[shift:] + batches[:shift]
    progress = Progress(len(todo), sum(len(c) for _, c, _ in todo), progress_stream) if progress_stream else None

    # Compile results arrive problem by problem from the compile thread (``on_problem``); a problem is
    # measured as soon as its own kernels are ready, not when its whole group is.
    compiled: dict[tuple[str, str], Any] = {}
    ready = {entry.problem.key: threading.Event() for entry, _, _ in todo}
    lock = threading.Lock()

    def on_problem(key: str, results: Mapping[tuple[str, str], Any]) -> None:
        with lock:
            compiled.update(results)
        ready[key].set()

    def compile_group(batch: list[tuple[PlanEntry, list[TileConfig], float]]) -> None:
        assert precompile_fn is not None
        pairs = [(e.problem, c) for e, cs, _ in batch for c in cs]
        if progress:
            progress.update(0, 0, f"compiling {len(pairs)} pairs of pattern {group_of(batch[0])}")
        results = precompile_fn(pairs, workers=settings.workers, stop=stop_compiling, on_problem=on_problem)
        with lock:
            compiled.update(results)
        for entry, _, _ in batch:  # a stand-in compiler may not report problem by problem
            ready[entry.problem.key].set()

    def out_of_time() -> bool:
        return time_budget_s is not None and time.monotonic() - started > time_budget_s

    def wait_compiled(key: str, group: Future[None] | None) -> bool:
        """Wait until ``key``'s kernels are compiled; False once the time budget is spent (waiting
        counts against it too: the fourth session's H200 call waited past its budget for a
        2,475-kernel fp8 pattern and was killed by its timeout)."""
        t0 = time.monotonic()
        try:
            while not ready[key].wait(0.05):
                if group is not None and group.done():
                    group.result()  # raises what the compiler raised
                    break
                if out_of_time():
                    return False
            return True
        finally:
            summary.compile_seconds += time.monotonic() - t0

    child: _Child | None = None
    # One thread drives the compiler, group after group, ahead of measuring; the CPU would idle otherwise.
    compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilecost-compile")
    stop_compiling = threading.Event()
    groups: list[Future[None] | None] = []
    finished = False
    try:
        for batch in batches:
            if precompile_fn is None:
                groups.append(None)
                for entry, _, _ in batch:
                    ready[entry.problem.key].set()
            else:
                groups.append(compiler.submit(compile_group, batch))
        if todo:
            # The measuring process starts (imports, CUDA context) while the first kernels compile.
            child = _start_child(settings)
        for index, batch in enumerate(batches):
            for entry, configs, fraction in batch:
                # The first problem is started whatever the clock says once its kernels are ready
                # (the measuring process's start counts against the budget), so every run progresses.
                late = out_of_time() and summary.problems_done > 0
                if late or not wait_compiled(entry.problem.key, groups[index]):
                    summary.stopped_early = True
                    break
                t0 = time.monotonic()
                if child is None:
                    child = _start_child(settings)
                with lock:
                    done = {(entry.problem.key, c.key): compiled.get((entry.problem.key, c.key)) for c in configs}
                # A problem still measuring MEASURE_GRACE_S past the budget is given up (the next run measures
                # it again); the run's first problem never is, so every run progresses.
                deadline = None
                if time_budget_s is not None and summary.problems_done > 0:
                    deadline = started + time_budget_s + MEASURE_GRACE_S
                outcomes, child = _measure_entry(entry, configs, done, child, settings, deadline)
                if outcomes is None:
                    summary.stopped_early = True
                    summary.abandoned = entry.problem.key
                    summary.measure_seconds += time.monotonic() - t0
                    break
                rows = _rows(entry, outcomes, child.fingerprint if child else {}, run_id, fraction)
                path = store.write_problem(settings.device_class, entry.problem, run_id, rows)
                summary.files.append(path)
                summary.problems_done += 1
                summary.rows += len(rows)
                for r in rows:
                    summary.status_counts[r["status"]] = summary.status_counts.get(r["status"], 0) + 1
                summary.measure_seconds += time.monotonic() - t0
                if progress:
                    progress.update(1, len(configs), entry.problem.key)
            if summary.stopped_early:
                break
        finished = not summary.stopped_early
    finally:
        if child is not None:
            child.close()
        # Compiles of groups the sweep will not reach (time budget, an error) are told to stop, and
        # the compile workers are ended at once: a kernel cut off mid-compile never reaches Triton's
        # cache, and the next run compiles it again.
        stop_compiling.set()
        if pool is not None:
            close_pool(pool, terminate=not finished)
        compiler.shutdown(wait=True, cancel_futures=True)
        if progress:
            progress.close()
    return summary


def _start_child(settings: SweepSettings) -> _Child:
    child = _Child(settings.backend, settings.protocol)
    found = child.fingerprint.get("device_class")
    if found != settings.device_class:
        child.close()
        raise ValueError(
            f"device_class={settings.device_class!r} was asked for, but the measuring "
            f"process runs on {child.fingerprint.get('gpu_name')!r} ({found!r})"
        )
    return child


def _measure_entry(
    entry: PlanEntry,
    configs: Sequence[TileConfig],
    compiled: Mapping[tuple[str, str], Any],
    child: _Child,
    settings: SweepSettings,
    deadline: float | None = None,
) -> tuple[list[dict[str, Any]] | None, _Child | None]:
    """Outcomes for every config of one problem, restarting the child around crashing configs; ``(None,
    None)`` when ``deadline`` (``time.monotonic()``) passed first: the child was ended, nothing is kept."""
    fixed: dict[str, dict[str, Any]] = {}
    runnable = []
    for c in configs:
        res = compiled.get((entry.problem.key, c.key))
        if res is not None and res.status is not Status.OK:
            fixed[c.key] = {"config_id": c.key, "status": res.status.value, "error": res.error}
        else:
            runnable.append(c)
    crashes = 0
    while runnable:
        tag, payload = child.measure(entry.problem, runnable, settings.seed, deadline)
        if tag == "late":
            return None, None
        if tag == "done":
            for o in payload:
                fixed[o["config_id"]] = o
            break
        key, message = payload
        child.close()
        child = _Child(settings.backend, settings.protocol)
        crashes += 1
        if key is None or crashes > MAX_CRASHES_PER_PROBLEM:
            for c in runnable:
                fixed[c.key] = {"config_id": c.key, "status": Status.CRASHED.value, "error": message}
            break
        fixed[key] = {"config_id": key, "status": Status.CRASHED.value, "error": message}
        runnable = [c for c in runnable if c.key != key]
    return [fixed[c.key] for c in configs], child
