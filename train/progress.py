"""Progress for long steps whose inner loop reports nothing (an XGBoost fit, an artifact export).

:class:`Heartbeat` prints ``<label>: running, 45 s`` every ``every_s`` seconds from a daemon thread
while the ``with`` block runs, then ``<label>: done in 62.3 s``. The collector has its own per-problem
progress line (:class:`tilecost.collect.sweep.Progress`); a fit gives no such hook without
callbacks into XGBoost's loop, and the elapsed time is what someone watching a nightly log needs
to tell "slow" from "stuck".
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["Heartbeat"]


class Heartbeat:
    """``with Heartbeat("training", stream): ...``: a line every ``every_s`` seconds, and one at the end.

    ``stream=None`` makes it silent (tests, notebooks). The elapsed time is in :attr:`seconds`.
    """

    def __init__(self, label: str, stream: TextIO | None = sys.stderr, every_s: float = 15.0) -> None:
        if every_s <= 0:
            raise ValueError(f"every_s={every_s} must be positive")
        self.label = label
        self.stream = stream
        self.every_s = every_s
        self.seconds = 0.0

    def _say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(f"{self.label}: {text}\n")
            self.stream.flush()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self._say(f"running, {time.monotonic() - self._started:.0f} s")

    def __enter__(self) -> Heartbeat:
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._say("started")
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.label}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = time.monotonic() - self._started
        self._say(f"{'failed after' if exc_type else 'done in'} {self.seconds:.1f} s")
