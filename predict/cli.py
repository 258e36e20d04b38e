"""Commands of tilecost.predict for the ``tilecost`` CLI (registered by tilecost.cli)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add this package's subcommands to the CLI's subparsers. Imports nothing heavy."""
    del sub
