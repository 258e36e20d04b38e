"""``python -m tilecost``: the ``tilecost`` command (:func:`tilecost.cli.main`)."""

from __future__ import annotations

import sys

from tilecost.cli import main

if __name__ == "__main__":
    sys.exit(main())
