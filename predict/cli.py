"""Commands of tilecost.predict for the ``tilecost`` CLI (registered by tilecost.cli).

tilecost predict 4096 4096 4096 --top 5                  the model's best configurations
tilecost predict 1000 1000 8192 --artifact path/to/h200  with an artifact directory
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add this package's subcommands to the CLI's subparsers. Imports nothing heavy."""
    p = sub.add_parser("predict", help="the fastest configurations of a shape by the cost model")
    p.add_argument("m", type=int, help="rows of A and C")
    p.add_argument("n", type=int, help="columns of B and C")
    p.add_argument("k", type=int, help="reduction depth")
    p.add_argument("--dtype", default="bf16", help="fp16, bf16, fp32 or fp8e4m3 (default bf16)")
    p.add_argument("--layout", default="nt", help="nn or nt (default nt: x @ W.T)")
    p.add_argument("--device", default="h200", help="device class of a shipped model (default h200)")
    p.add_argument("--artifact", default=None, help="an artifact directory instead of the shipped model")
    p.add_argument("--top", type=int, default=1, help="how many configurations to list (default 1)")
    p.add_argument("--exhaustive", action="store_true", help="score every candidate, not the shortlist")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_predict)


def _cmd_predict(args: argparse.Namespace) -> int:
    from tilecost.errors import TilecostError
    from tilecost.predict.predictor import Predictor, shipped_devices

    try:
        if args.artifact is None and args.device not in shipped_devices():
            raise ValueError(
                f"--device {args.device!r} has no shipped model; use one of {shipped_devices()} "
                "or --artifact DIR (an exported artifact directory)"
            )
        predictor = Predictor.load(Path(args.artifact) if args.artifact is not None else args.device)
        ranked = predictor.rank((args.m, args.n, args.k), args.top, dtype=args.dtype, layout=args.layout,
                                exhaustive=args.exhaustive)  # fmt: skip
    except (TilecostError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdict = ranked[0].ood
    if args.json:
        rows = [
            {"config": p.config.key, "time_us": p.time_us, "source": p.source.value}
            | ({"configs_measured": p.configs_measured, "measured_all": p.measured_all} if p.measured else {})
            for p in ranked
        ]
        distance = verdict.neighbour_distance_log2  # infinite with no training problem of the group: null
        ood = {"flagged": bool(verdict), "reasons": [r.value for r in verdict.reasons],
               "neighbour_distance_log2": distance if math.isfinite(distance) else None}  # fmt: skip
        out = {"problem": ranked[0].problem.key, "ranking": rows, "ood": ood}
        print(json.dumps(out, indent=1, allow_nan=False))
    else:
        for place, p in enumerate(ranked, start=1):
            print(f"{place:>3}  {p.config.key:<32} {p.time_us:>12.2f} us  {p.source.value}{_coverage(p)}")
    flag = "in distribution" if not verdict else "OUT OF DISTRIBUTION: " + ", ".join(r.value for r in verdict.reasons)
    source = args.artifact or f"shipped {args.device} model"
    print(f"{ranked[0].problem.key}: {len(ranked)} configuration(s) from {source}; {flag}", file=sys.stderr)
    if ranked[0].measured and len(ranked) > 1:
        # A measured best leads whatever the model predicts for the rest: its time was measured on the device,
        # theirs are predictions, so a lower predicted time further down is not a faster configuration.
        print("the first row was measured on the device and leads; the others are the model's predictions, "
              "ranked among themselves", file=sys.stderr)  # fmt: skip
    return 0


def _coverage(p: Any) -> str:
    """What a measured row is the best of: every feasible configuration, or a sample of them."""
    if not p.measured or p.configs_measured is None:
        return ""
    return f" (best of {'all ' if p.measured_all else ''}{p.configs_measured} timed)"
