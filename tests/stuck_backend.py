"""A measuring backend that never starts (it sleeps in its constructor), named by import path so that the
sweep's spawned measuring process can build it: the sweep must give up on it instead of waiting forever."""

from __future__ import annotations

import time

from tilecost.collect.protocol import MeasureProtocol


def stuck_backend(protocol: MeasureProtocol) -> None:
    time.sleep(3600)
