"""The device queue: which plan each lent GPU measures next, read from the dataset itself.

The device tool lends whichever GPU comes (an H200 or an H100, docs/COLLECTING.md), so a collection call
branches on the GPU's name. ``datasets/plans/queue.json`` lists, per device class, the name that selects it
and its plans in order, each with the run id and sample fraction it is (or was) collected under. The next
plan of a class is the first whose run still lacks a problem of it: the sweep's own test
(:meth:`~tilecost.collect.store.DatasetStore.has`, the run's per-problem file or its compacted file), so a
plan cut short by a call's time budget is resumed under the same run id, and a plan is never measured twice.

:func:`device_command` writes the one-line command of a call: each class's next plan under
``benchmarks/h200_round.sh collect``, chosen by ``nvidia-smi``'s GPU name; :func:`keep_runs` the run ids whose
files a slimmed tree must keep (``SLIM_KEEP_RUNS`` of ``scripts/device_tree.sh``) so the resume skips them.
Nothing here touches a GPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilecost.collect.plans import load_plan_file
from tilecost.collect.store import DatasetStore
from tilecost.device import list_device_classes

__all__ = [
    "QueueEntry",
    "DeviceQueue",
    "Progress",
    "load_queue",
    "progress",
    "next_entry",
    "keep_runs",
    "device_command",
]

_WORD = re.compile(r"^[A-Za-z0-9_.-]+$")
_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")
COMMAND_LIMIT = 2000  # characters the device tool takes in one command


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
    path = Path(path)
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
    return tuple(queues)


def progress(queue: DeviceQueue, store: DatasetStore, root: str | Path = ".") -> list[Progress]:
    """Each entry's problems measured by its run, in queue order (plan paths relative to ``root``)."""
    out = []
    for entry in queue.entries:
        problems = [p.problem for p in load_plan_file(Path(root) / entry.plan)]
        measured = sum(store.has(queue.device_class, p, entry.run_id) for p in problems)
        out.append(Progress(entry, len(problems), measured))
    return out


def next_entry(states: Sequence[Progress]) -> Progress | None:
    """The first entry its run has not finished, or None when the queue is done."""
    return next((s for s in states if s.left > 0), None)


def keep_runs(heads: Mapping[str, Progress | None]) -> list[str]:
    """The run ids a slimmed tree keeps: every class's next entry, so its resume skips what it measured."""
    return [h.entry.run_id for h in heads.values() if h is not None]


def device_command(queues: Sequence[DeviceQueue], heads: Mapping[str, Progress | None], total_s: int = 540) -> str:
    """One device call: each class's next plan for the GPU whose name selects it; another GPU exits 3, a class
    whose queue is done exits 4. Results land in ``$OUT/<run id>``."""
    if not 60 <= total_s <= 590:
        raise ValueError(f"total_s={total_s!r} must be 60-590 seconds (the device tool's call limit is 600)")
    branches = []
    for q in queues:
        head = heads.get(q.device_class)
        if head is None:
            action = f'echo "the {q.device_class} queue is done"; exit 4'
        else:
            e = head.entry
            action = (
                f'OUT=$OUT/{e.run_id} TOTAL_S={total_s} ARGS="--plan {e.plan} --device-class {q.device_class}" '
                f"RUN_ID={e.run_id} SAMPLE={e.sample} bash benchmarks/h200_round.sh collect"
            )
        branches.append(f"*{q.gpu_name}*) {action};;")
    command = (
        'G=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "GPU: $G"; date -u; '
        f'case "$G" in {" ".join(branches)} *) exit 3;; esac'
    )
    if len(command) > COMMAND_LIMIT:
        raise ValueError(f"the command is {len(command)} characters, over the device tool's {COMMAND_LIMIT}")
    return command
