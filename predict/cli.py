"""Commands of tilecost.predict for the ``tilecost`` CLI (registered by tilecost.cli).

tilecost predict 4096 4096 4096 --top 5                  the model's best configurations
tilecost predict 1000 1000 8192 --artifact path/to/h200  with an artifact directory
tilecost predict 4096 4096 4096 --for h100_sxm           the h200 model's answers for another device, flagged
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
    p.add_argument("--for", dest="for_device", default=None, metavar="DEVICE",
                   help="the device class the answers are for, when not the model's own (e.g. h100_sxm): that "
                        "device's measured bests where the artifact holds them; else the model's device's, else the "
                        "model's, flagged device_mismatch")  # fmt: skip
    p.add_argument("--top", type=int, default=1, help="how many configurations to list (default 1)")
    p.add_argument("--exhaustive", action="store_true", help="score every candidate, not the shortlist")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_cmd_predict)


def _cmd_predict(args: argparse.Namespace) -> int:
    from tilecost.device import list_device_classes
    from tilecost.errors import TilecostError
    from tilecost.predict.predictor import Predictor, shipped_devices

    try:
        if args.artifact is None and args.device not in shipped_devices():
            raise ValueError(_no_shipped_model(args.device, shipped_devices(), list_device_classes()))
        source = Path(args.artifact) if args.artifact is not None else args.device
        predictor = Predictor.load(source, device=args.for_device)
        ranked = predictor.rank((args.m, args.n, args.k), args.top, dtype=args.dtype, layout=args.layout,
                                exhaustive=args.exhaustive)  # fmt: skip
    except (TilecostError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdict = ranked[0].ood
    if args.json:
        rows = [
            {
                "config": p.config.key,
                "time_us": p.time_us,
                "source": p.source.value,
                "ood_reasons": [r.value for r in p.ood.reasons],
            }  # fmt: skip
            | ({"configs_measured": p.configs_measured, "measured_all": p.measured_all} if _is_measurement(p) else {})
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
    flag = _flag(verdict)
    origin = (args.artifact or f"shipped {args.device} model") + (f" for {args.for_device}" if args.for_device else "")
    print(f"{ranked[0].problem.key}: {len(ranked)} configuration(s) from {origin}; {flag}", file=sys.stderr)
    if _is_measurement(ranked[0]) and len(ranked) > 1:
        # A measured best leads whatever the model predicts for the rest: its time was measured on a device,
        # theirs are predictions, so a lower predicted time further down is not a faster configuration.
        where = "the device" if ranked[0].measured else f"the model's device ({predictor.metadata.device_class})"
        print(f"the first row was measured on {where} and leads; the others are the model's predictions, "
              "ranked among themselves", file=sys.stderr)  # fmt: skip
        if ranked[1].ood.reasons != verdict.reasons:  # a device's own measurement above another device's model
            print(f"the model's rows: {_flag(ranked[1].ood)}", file=sys.stderr)
    return 0


def _flag(verdict: Any) -> str:
    return "in distribution" if not verdict else "OUT OF DISTRIBUTION: " + ", ".join(r.value for r in verdict.reasons)


def _no_shipped_model(device: str, shipped: list[str], known: list[str]) -> str:
    """The error for ``--device`` without a shipped model; a known device class is pointed at ``--for``."""
    message = (
        f"--device {device!r} has no shipped model; use one of {shipped} or --artifact DIR (an artifact directory)"
    )
    if device in known and shipped:
        message += (
            f", or --device {shipped[0]} --for {device}: the {shipped[0]} artifact's answers for it, flagged "
            "device_mismatch where not measured on it"
        )
    return message


def _is_measurement(p: Any) -> bool:
    """Whether a row is a measured best: of this device, or of the model's device answering for another."""
    from tilecost.predict.predictor import Source

    return p.source is not Source.MODEL


def _coverage(p: Any) -> str:
    """What a measured row is the best of: every feasible configuration, or a sample of them."""
    if not _is_measurement(p) or p.configs_measured is None:
        return ""
    return f" (best of {'all ' if p.measured_all else ''}{p.configs_measured} timed)"
