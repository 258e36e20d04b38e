"""An opt-in, bounded log of the queries the predictor flagged, for a nightly job to measure.

A compiler asks about shapes nobody measured; the ones the predictor flags out of distribution
(:mod:`tilecost.predict.ood`) are the shapes worth timing next. With a log configured
(``Predictor.load(..., query_log=path)`` or the ``TILECOST_QUERY_LOG`` environment variable), each
flagged *model* answer is appended to it; answers from measurements and unflagged answers are not.
``tilecost nightly`` reads :meth:`QueryLog.flagged`.

Format: JSON lines, one object per flagged answer, oldest first::

    {"problem": "24x14336x4096-bf16-nt", "reasons": ["sparse_neighbourhood"], "distance_log2": 1.9,
     "time": 1796000000.0}

Bounds: at most ``max_entries`` lines. When an append takes the file past that, it is rewritten
with its newest ``max_entries // 2`` lines (a temporary file in the same directory, then
``os.replace``), so a long-running process pays for a rewrite once every ``max_entries // 2``
appends. Each append is one ``write`` of one line to a file opened in append mode, which POSIX
keeps whole for lines this short even with several processes appending; a rewrite racing another
process's append may drop that append (a lost hint, not a corrupt file: unreadable lines are
skipped when reading).

Errors: the predictor runs inside compilers, so :meth:`QueryLog.record` never raises on I/O
errors (a read-only or full disk, a vanished directory): it counts them in :attr:`QueryLog.errors`
and returns False.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from pathlib import Path

from tilecost.problem import Problem

from .ood import OODVerdict

__all__ = ["QUERY_LOG_ENV", "QueryLog"]

QUERY_LOG_ENV = "TILECOST_QUERY_LOG"


class QueryLog:
    """Flagged queries appended to ``path`` as JSON lines, at most ``max_entries`` of them.

    The constructor only stores its arguments (no I/O); the file and its directory are created on
    the first :meth:`record`.
    """

    def __init__(self, path: str | Path, max_entries: int = 10_000) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 2:
            raise ValueError(f"max_entries={max_entries!r} is not allowed; use an int >= 2")
        self.path = Path(path)
        self.max_entries = max_entries
        self.errors = 0  # I/O errors swallowed by record()
        self.skipped = 0  # unreadable lines the last flagged() skipped
        self._lines: int | None = None  # lines in the file, counted on the first record()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"QueryLog({str(self.path)!r}, max_entries={self.max_entries})"

    def record(self, problem: Problem, verdict: OODVerdict) -> bool:
        """Append ``problem`` if ``verdict`` flags it; True if a line was written. Never raises on I/O."""
        if not verdict:
            return False
        distance = verdict.neighbour_distance_log2
        entry = {
            "problem": problem.key,
            "reasons": [reason.value for reason in verdict.reasons],
            "distance_log2": round(distance, 4) if math.isfinite(distance) else None,
            "time": round(time.time(), 3),
        }
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock:
            try:
                if self._lines is None:
                    self._lines = len(self._read_lines())
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line)
                self._lines += 1
                if self._lines > self.max_entries:
                    self._compact()
            except OSError:
                self.errors += 1
                return False
        return True

    def flagged(self) -> list[Problem]:
        """The distinct problems of the log, the most recently flagged first ([] without a log).

        A line that is not a JSON object whose ``"problem"`` is a valid problem key (a torn or foreign line,
        ``{"problem": null}``, a list, a number) is skipped and counted in :attr:`skipped`."""
        seen: dict[Problem, None] = {}
        skipped = 0
        for line in reversed(self._read_lines()):
            try:
                entry = json.loads(line)
                seen.setdefault(Problem.from_key(entry["problem"]), None)
            except (ValueError, KeyError, TypeError, RecursionError):
                # ValueError: not JSON or a malformed key; KeyError: no "problem"; TypeError: a list, string, number
                # or null instead of an object, or a key that is not a str; RecursionError: nested past json's limit
                skipped += 1
        self.skipped = skipped
        return list(seen)

    def _read_lines(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as handle:
                return [line for line in handle.read().splitlines() if line.strip()]
        except FileNotFoundError:
            return []
        except OSError:
            return []

    def _compact(self) -> None:
        """Keep the newest ``max_entries // 2`` lines (temporary file, then an atomic rename)."""
        keep = self._read_lines()[-(self.max_entries // 2) :]
        handle, temporary = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in keep))
            os.replace(temporary, self.path)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._lines = len(keep)
