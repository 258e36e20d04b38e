"""The device queue: which plan each lent GPU measures next, read from the dataset itself.

The device tool lends whichever GPU comes (an H200 or an H100, docs/COLLECTING.md), so a collection call
branches on the GPU's name. ``datasets/plans/queue.json`` lists, per device class, the name that selects it
and its plans in order, each with the run id and sample fraction it is (or was) collected under. The next
plan of a class is the first whose run still lacks a problem of it: the sweep's own test
(:meth:`~tilecost.collect.store.DatasetStore.has`, the run's per-problem file or its compacted file), so a
plan cut short by a call's time budget is resumed under the same run id, and a plan is never measured twice.

:func:`device_command` writes the one-line command of a call: each class's next plans (:func:`next_entries`, up
to three) under ``benchmarks/h200_round.sh collect``, one after another against one deadline, chosen by
``nvidia-smi``'s GPU name; a plan starts only while 150 s of the call are left (the first always), and only the newest
``measurements.tgz`` is kept (each holds every file the machine wrote since its install), so a call returns at
most seven files. :func:`keep_runs` names the run ids whose files a slimmed tree must keep (``SLIM_KEEP_RUNS`` of
``scripts/device_tree.sh``: the call's, and every run started and not finished) so a resume skips them; the round
script refuses to resume a run whose files the slimmed tree left behind. :func:`add_entry` adds a plan to a class's
queue (``scripts/device_queue.py --add``). Nothing here touches a GPU.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilecost.collect.plans import load_plan_file
from tilecost.collect.store import DatasetStore
from tilecost.device import list_device_classes

__all__ = [
    "QueueEntry",
    "DeviceQueue",
    "Progress",
    "load_queue",
    "add_entry",
    "progress",
    "planned_keys",
    "next_entry",
    "next_entries",
    "keep_runs",
    "device_command",
]

_WORD = re.compile(r"^[A-Za-z0-9_.-]+$")
_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")
COMMAND_LIMIT = 2000  # characters the device tool takes in one command
PLAN_START_S = 150  # a plan starts only with this much of the call left: the round script keeps 90 s to pack up
MAX_PLANS = 3  # plans a call may take: two logs each and one archive stay within the device tool's 8 files


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One plan of a device class's queue."""

    plan: str  # path of a JSON plan, relative to the repository root
    run_id: str
    sample: float  # the collector's --sample-fraction (training problems); held-out problems take every candidate


@dataclass(frozen=True, slots=True)
class DeviceQueue:
    """A device class's plans in the order its GPU measures them."""

    device_class: str
    gpu_name: str  # a part of nvidia-smi's name that selects this class ("H200")
    entries: tuple[QueueEntry, ...]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a queue entry's run has measured its plan."""

    entry: QueueEntry
    planned: int
    measured: int

    @property
    def left(self) -> int:
        return self.planned - self.measured


def _get(item: Mapping[str, object], name: str, where: str) -> object:
    if name not in item:
        raise ValueError(f"{where}: lacks {name!r}")
    return item[name]


def _word(item: Mapping[str, object], name: str, where: str, pattern: re.Pattern[str] = _WORD) -> str:
    value = _get(item, name, where)
    if not isinstance(value, str) or not pattern.match(value) or "--" in value:
        raise ValueError(f"{where}: {name}={value!r} is not allowed; use letters, digits, '_', '.', '-' (no '--')")
    return value


def _objects(items: list[object], where: str) -> Iterator[tuple[str, Mapping[str, object]]]:
    """Each item of a JSON list with its name (``where[i]``); an item that is not an object is refused."""
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{at} must be an object")
        yield at, item


def _sample(item: Mapping[str, object], where: str) -> float:
    value = _get(item, "sample", where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{where}: sample={value!r} must be a number in (0, 1]")
    return float(value)


def load_queue(path: str | Path) -> tuple[DeviceQueue, ...]:
    """Read ``queue.json``; a malformed one raises ``ValueError`` naming the entry and the field."""
    return _read_queue(Path(path))[1]


def _read_queue(path: Path) -> tuple[Any, tuple[DeviceQueue, ...]]:
    """``queue.json``'s JSON as read, and its queues checked (:func:`load_queue`)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"queue file {path}: {exc}") from exc
    classes = raw.get("device_classes") if isinstance(raw, dict) else None
    if not isinstance(classes, list) or not classes:
        raise ValueError(f"queue file {path}: needs a non-empty list 'device_classes'")
    queues: list[DeviceQueue] = []
    for where, item in _objects(classes, f"queue file {path}: device_classes"):
        device_class = _word(item, "device_class", where)
        if device_class not in list_device_classes():
            raise ValueError(f"{where}: device_class={device_class!r}; use one of {list_device_classes()}")
        gpu_name = _word(item, "gpu_name", where)
        raw_entries = _get(item, "entries", where)
        if not isinstance(raw_entries, list):
            raise ValueError(f"{where}: entries={raw_entries!r} must be a list")
        entries = tuple(
            QueueEntry(_word(e, "plan", at, _PATH), _word(e, "run_id", at), _sample(e, at))
            for at, e in _objects(raw_entries, f"{where}.entries")
        )
        queues.append(DeviceQueue(device_class, gpu_name, entries))
    names = [q.device_class for q in queues]
    if len(set(names)) != len(names):
        raise ValueError(f"queue file {path}: a device class is listed twice ({names})")
    runs = [e.run_id for q in queues for e in q.entries]
    twice = sorted({r for r in runs if runs.count(r) > 1})
    if twice:
        raise ValueError(f"queue file {path}: run_id {twice[0]!r} is listed twice; each plan needs its own run id")
    return raw, tuple(queues)


def add_entry(
    path: str | Path, device_class: str, entry: QueueEntry, *, before: str | None = None, root: str | Path = "."
) -> int:
    """Add ``entry`` to ``device_class``'s queue in ``queue.json``, before the entry of run ``before`` or last, and
    return its position in that queue. Refused with ``ValueError``, the file untouched: a queue that does not load, a
    class it does not list, a run id already in it, a bad plan path, run id or sample, a plan that does not load
    (relative to ``root``) or holds no problem, or a ``before`` run the class lacks. The file is replaced whole
    (written beside it, then renamed), so a crash leaves the old queue or the new one."""
    path = Path(path)
    raw, queues = _read_queue(path)
    at = f"queue entry to add to {device_class!r}"
    item = {"plan": entry.plan, "run_id": entry.run_id, "sample": entry.sample}
    checked = QueueEntry(_word(item, "plan", at, _PATH), _word(item, "run_id", at), _sample(item, at))
    classes = [q.device_class for q in queues]
    if device_class not in classes:
        raise ValueError(f"device_class={device_class!r} is not in the queue; use one of {classes}")
    if any(e.run_id == checked.run_id for q in queues for e in q.entries):
        raise ValueError(f"run_id={checked.run_id!r} is already in the queue; each plan needs its own run id")
    if not load_plan_file(Path(root) / checked.plan):
        raise ValueError(f"plan file {checked.plan}: holds no problem")
    entries = next(c for c in raw["device_classes"] if c["device_class"] == device_class)["entries"]
    runs = [e["run_id"] for e in entries]
    if before is not None and before not in runs:
        raise ValueError(f"before={before!r} is not a run of the {device_class} queue; use one of {runs}")
    index = len(entries) if before is None else runs.index(before)
    entries.insert(index, item)
    text = json.dumps(raw, indent=1, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)  # mkstemp's file is the owner's alone; keep the queue's mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return index


def progress(queue: DeviceQueue, store: DatasetStore, root: str | Path = ".") -> list[Progress]:
    """Each entry's problems measured by its run, in queue order (plan paths relative to ``root``)."""
    out = []
    for entry in queue.entries:
        problems = [p.problem for p in load_plan_file(Path(root) / entry.plan)]
        measured = sum(store.has(queue.device_class, p, entry.run_id) for p in problems)
        out.append(Progress(entry, len(problems), measured))
    return out


def planned_keys(queues: Sequence[DeviceQueue], device_class: str, root: str | Path = ".") -> frozenset[str]:
    """The problem keys of every plan in ``device_class``'s queue, measured or not (plan paths relative to
    ``root``): a plan script skips them as well as the measured ones, since a problem planned under a second run id
    would be timed twice. A class the queue does not list plans nothing."""
    return frozenset(
        item.problem.key
        for queue in queues
        if queue.device_class == device_class
        for entry in queue.entries
        for item in load_plan_file(Path(root) / entry.plan)
    )


def next_entry(states: Sequence[Progress]) -> Progress | None:
    """The first entry its run has not finished, or None when the queue is done."""
    first = next_entries(states, 1)
    return first[0] if first else None


def next_entries(states: Sequence[Progress], limit: int = MAX_PLANS) -> tuple[Progress, ...]:
    """The first ``limit`` entries their runs have not finished, in queue order: what one call takes."""
    if not 1 <= limit <= MAX_PLANS:
        raise ValueError(f"plans={limit!r} must be 1-{MAX_PLANS} (two logs a plan and one archive: the device tool "
                         "returns 8 files)")  # fmt: skip
    return tuple(s for s in states if s.left > 0)[:limit]


def keep_runs(
    pending: Mapping[str, Sequence[Progress]], states: Mapping[str, Sequence[Progress]] | None = None
) -> list[str]:
    """The run ids a slimmed tree keeps: every entry a call may take, then every other run of ``states`` (each
    class's whole queue) that has started and not finished, so each resume skips what its run measured, even a
    resume written by hand for a later call on the same warm machine (the sixtieth session's call 6 timed ten
    problems again: their run was not among the first call's three plans, so its files had stayed behind)."""
    runs = [p.entry.run_id for entries in pending.values() for p in entries]
    started = [s.entry.run_id for entries in (states or {}).values() for s in entries if 0 < s.measured < s.planned]
    return list(dict.fromkeys(runs + started))


def device_command(
    queues: Sequence[DeviceQueue],
    pending: Mapping[str, Sequence[Progress]],
    total_s: int = 540,
    *,
    plan_start_s: int = PLAN_START_S,
) -> str:
    """One device call: each class's pending plans, in order, for the GPU whose name selects it, each with the
    call's time left; a plan starts only with ``plan_start_s`` left (the first always: ``total_s`` must exceed
    it by 5 s); another GPU exits 3, a class whose queue is done exits 4, a round script that fails (its install)
    stops the call with its exit status. A collect that fails does not: the round script logs ``collect exit N``
    and exits 0, and the next plan runs. Results land in ``$OUT/<run id>``."""
    if not plan_start_s + 5 <= total_s <= 590:
        raise ValueError(f"total_s={total_s!r} must be {plan_start_s + 5}-590 seconds (the device tool's call limit "
                         f"is 600; a plan starts only with {plan_start_s} s left)")  # fmt: skip
    branches = []
    for q in queues:
        entries = pending.get(q.device_class, ())
        if not entries:
            action = f'echo "the {q.device_class} queue is done"; exit 4'
        else:
            action = "q " + " ".join(f'"{p.entry.run_id} {p.entry.plan} {p.entry.sample} {q.device_class}"'
                                     for p in entries)  # fmt: skip
        branches.append(f"*{q.gpu_name}*) {action};;")
    command = (
        'G=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "GPU: $G"; date -u; '
        f"B=$OUT; E=$(($(date +%s) + {total_s})); R=0; "
        'q() { for P in "$@"; do set -- $P; L=$((E - $(date +%s))); '
        f"[ $L -ge {plan_start_s} ] || break; "
        'OUT=$B/$1 TOTAL_S=$L ARGS="--plan $2 --device-class $4" RUN_ID=$1 SAMPLE=$3 '
        "bash benchmarks/h200_round.sh collect || { R=$?; break; }; done; }; "
        f'case "$G" in {" ".join(branches)} *) exit 3;; esac; '
        "N=$(ls -t $B/*/measurements.tgz 2>/dev/null | head -1); "
        'for f in $B/*/measurements.tgz; do [ "$f" = "$N" ] || rm -f "$f"; done; exit $R'
    )
    if len(command) > COMMAND_LIMIT:
        raise ValueError(f"the command is {len(command)} characters, over the device tool's {COMMAND_LIMIT}; "
                         "take fewer plans")  # fmt: skip
    return command
