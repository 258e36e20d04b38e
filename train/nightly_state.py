"""Where a nightly run keeps its state, so that running it again the same night resumes it.

Everything lives under one state directory (``--state-dir``), keyed by the night (a UTC date)::

    <state dir>/
        <night>/plan.json                 tonight's problems (the format `tilecost collect --plan` reads)
        <night>/steps/<step>.json         one record per finished step; collect: one per shard
        <night>/evaluation.txt            the training run's held-out table
        <night>/report.md                 the short report
        <night>/report/                   figures and index.html of the champion (tilecost report)
        sentinels/                        the sentinels' own Parquet store (never training data)
        sentinels/reference-<class>.json  the reference night the sentinels are compared with
        artifact/<class>/                 the exported champion artifact (default --export-dir)

A step whose record exists is not run again (collection resumes inside the sweep, which skips the
problems already written). Records are written whole and renamed into place, and the plan is
created with an exclusive link, so shards of a Slurm array or a Kubernetes Indexed Job starting
together agree on one plan. :class:`NightLock` keeps two processes from working on the same night
and shard at once (a cron run that overlaps the previous one).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["NightDir", "NightLock", "NightLocked", "parse_night", "today"]


def today() -> str:
    """Tonight's key: the UTC date, ``YYYY-MM-DD``."""
    return dt.datetime.now(dt.UTC).date().isoformat()


def parse_night(text: str) -> str:
    """A night key ``YYYY-MM-DD``; anything else raises ``ValueError`` naming the field."""
    try:
        return dt.date.fromisoformat(text).isoformat()
    except (TypeError, ValueError):
        raise ValueError(f"night={text!r} is not allowed; use a date YYYY-MM-DD") from None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


@dataclass(frozen=True)
class NightDir:
    """The files of one night under ``state_dir`` (module docstring)."""

    state_dir: Path
    night: str

    @property
    def root(self) -> Path:
        return self.state_dir / self.night

    @property
    def compact(self) -> str:
        """``20261129``: used in run ids (``n20261129`` collection, ``s20261129`` sentinels) and as the
        seed of tonight's fresh family samples."""
        return self.night.replace("-", "")

    @property
    def plan_path(self) -> Path:
        return self.root / "plan.json"

    @property
    def sentinel_store(self) -> Path:
        return self.state_dir / "sentinels"

    def sentinel_reference(self, device_class: str) -> Path:
        return self.sentinel_store / f"reference-{device_class}.json"

    def record_path(self, step: str) -> Path:
        return self.root / "steps" / f"{step}.json"

    def read_record(self, step: str) -> dict[str, Any] | None:
        path = self.record_path(step)
        return json.loads(path.read_text()) if path.is_file() else None

    def write_record(self, step: str, record: Mapping[str, Any]) -> Path:
        path = self.record_path(step)
        _write_atomic(path, json.dumps(dict(record), indent=1, sort_keys=True, default=str))
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.root / name
        _write_atomic(path, text)
        return path

    def create_exclusive(self, path: Path, text: str) -> bool:
        """Write ``path`` only if it does not exist yet (a link is atomic and fails if the name is
        taken); returns whether this call created it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(text)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink()

    def previous_records(self, step: str) -> list[tuple[str, dict[str, Any]]]:
        """``(night, record)`` of ``step`` on every earlier night in the state directory, oldest first."""
        out: list[tuple[str, dict[str, Any]]] = []
        if not self.state_dir.is_dir():
            return out
        for child in sorted(self.state_dir.iterdir()):
            if child.name >= self.night or not (child / "steps" / f"{step}.json").is_file():
                continue
            try:
                parse_night(child.name)
            except ValueError:
                continue
            out.append((child.name, json.loads((child / "steps" / f"{step}.json").read_text())))
        return out


class NightLocked(RuntimeError):
    """Another live process holds this night's lock."""


class NightLock:
    """``with NightLock(path):`` an exclusive lock file naming its holder (host and pid).

    A lock left by a process that died on this host is taken over; one held on another host
    (a shared volume) is respected until it is ``stale_after_s`` old.
    """

    def __init__(self, path: Path, stale_after_s: float = 12 * 3600) -> None:
        self.path = path
        self.stale_after_s = stale_after_s
        self.holder = {"host": socket.gethostname(), "pid": os.getpid()}

    def _stale(self) -> bool:
        try:
            holder = json.loads(self.path.read_text())
            age = dt.datetime.now(dt.UTC).timestamp() - self.path.stat().st_mtime
        except (OSError, json.JSONDecodeError):
            return True
        if holder.get("host") == self.holder["host"]:
            try:
                os.kill(int(holder["pid"]), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            return False
        return age > self.stale_after_s

    def __enter__(self) -> NightLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if not self._stale():
                    raise NightLocked(f"{self.path} is held by {self.path.read_text().strip()}") from None
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(self.holder))
            return self
        raise NightLocked(f"{self.path}: could not take the lock")

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)
