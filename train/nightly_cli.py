"""Commands ``tilecost nightly`` and ``tilecost report`` (registered by tilecost.cli).

    tilecost nightly --device-class h200 [--steps all] [--shard i/N]      the nightly loop (tilecost.train.nightly)
    tilecost report  --device-class h200 [--artifact DIR | --model-uri URI] --out DIR     figures + index.html

Both end with one line saying what they did and where the results are. Heavy libraries load inside
the command functions only.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tilecost.problem import DType, Layout

__all__ = ["register"]


def _family(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    try:
        return name, int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--family {text!r}: use NAME=COUNT, e.g. random=4") from None


def _shard(text: str) -> tuple[int, int]:
    index, sep, count = text.partition("/")
    try:
        if not sep:
            raise ValueError
        return int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: use INDEX/COUNT, e.g. 0/4") from None


def _param(text: str) -> tuple[str, Any]:
    from .cli import _param as parse

    return parse(text)


def _cmd_nightly(args: argparse.Namespace) -> int:
    from tilecost.cli import shard_from_env
    from tilecost.errors import TilecostError

    from .nightly import DEFAULT_FAMILIES, ExportMode, NightlySettings, Step, run_nightly

    night = args.night or os.environ.get("TILECOST_NIGHT")
    shard = args.shard
    if shard is None and not args.no_env_shard:
        found = shard_from_env()
        shard = _shard(found) if found else None
    try:
        settings = NightlySettings(
            device_class=args.device_class,
            dataset=args.dataset,
            state_dir=args.state_dir,
            backend=args.backend,
            families=tuple(args.family) if args.family is not None else DEFAULT_FAMILIES,
            dtypes=tuple(args.dtypes),
            layouts=tuple(args.layouts),
            query_log=args.query_log if args.query_log is not None else os.environ.get("TILECOST_QUERY_LOG"),
            max_flagged=args.max_flagged,
            model_top=args.model_top,
            model_top_k=args.model_top_k,
            model_top_within=args.model_top_within,
            sentinels=args.sentinels,
            sentinel_configs=args.sentinel_configs,
            sample_fraction=args.sample_fraction,
            min_sample=args.min_sample,
            rounds=args.rounds,
            workers=args.workers,
            gpus=args.gpus,
            shard=shard,
            time_budget_s=args.time_budget_s,
            steps=Step.parse_list(args.steps),
            tracking_uri=args.tracking_uri,
            model_params=tuple(args.param or ()),
            export=ExportMode(args.export),
            export_dir=args.export_dir,
            export_timeout_s=args.export_timeout_s,
            export_samples=args.export_samples,
            accept_drift=args.accept_drift,
            **({"night": night} if night else {}),
        )
        result = run_nightly(settings)
    except (TilecostError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    return result.exit_code


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    # Bad input (TilecostError, ValueError) becomes one "error:" line and status 2 in tilecost.cli.main.
    written = write_report(
        args.dataset, args.device_class, args.out, artifact=args.artifact, model_uri=args.model_uri,
        tracking_uri=args.tracking_uri,
    )  # fmt: skip
    for note in written.notes:
        print(f"note: {note}", file=sys.stderr)
    print(written.line())
    return 0


def _gpus(text: str) -> int:
    return 0 if text == "all" else int(text)


def register(sub: Any) -> None:
    """Add ``nightly`` and ``report`` to the CLI's subparsers. Imports nothing heavy."""
    p = sub.add_parser("nightly", help="plan, measure sentinels, collect, train, promote if better, export, report")
    p.add_argument("--device-class", default="h200")
    p.add_argument("--dataset", default="datasets/measurements", help="dataset root (a scratch one when simulated)")
    p.add_argument(
        "--state-dir",
        default=None,
        help="plans, step records, sentinels, reports (default ./nightly; simulated: next to the dataset)",
    )
    p.add_argument(
        "--night",
        default=None,
        help="YYYY-MM-DD (default $TILECOST_NIGHT, else today in UTC); a re-run the same night resumes",
    )
    p.add_argument("--steps", default="all", help="all, or some of plan,sentinels,collect,train,export,report")
    p.add_argument(
        "--backend",
        default="tilecost.collect.backend:cuda_backend",
        help="measuring backend; tilecost.collect.simulated:simulated_backend is the labelled CPU stand-in",
    )
    p.add_argument("--family", action="append", type=_family, help="NAME=COUNT of fresh samples (repeatable)")
    p.add_argument("--dtypes", default=[DType.BF16], type=lambda s: [DType.parse(x) for x in s.split(",") if x])
    p.add_argument("--layouts", default=[Layout.NT], type=lambda s: [Layout.parse(x) for x in s.split(",") if x])
    p.add_argument("--query-log", default=None, help="the predictor's query log (default $TILECOST_QUERY_LOG)")
    p.add_argument("--max-flagged", type=int, default=16, help="flagged problems per night at most")
    p.add_argument("--model-top", type=int, default=0,
                   help="training problems re-timed on the model's untimed favourites a night")  # fmt: skip
    p.add_argument("--model-top-k", type=int, default=64,
                   help="configurations per model-top problem (at most --min-sample)")  # fmt: skip
    p.add_argument("--model-top-within", type=int, default=0,
                   help="take only the untimed among the model's N fastest of each problem (0: no bound)")  # fmt: skip
    p.add_argument("--sentinels", type=int, default=5, help="sentinel problems (0 to skip the drift check)")
    p.add_argument("--sentinel-configs", type=int, default=32, help="configurations measured per sentinel")
    p.add_argument("--sample-fraction", type=float, default=0.35, help="of a training problem's candidates")
    p.add_argument("--min-sample", type=int, default=64, help="candidates measured per training problem at least")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds after screening")
    p.add_argument("--workers", type=int, default=None, help="compile processes (default: cores - 1)")
    p.add_argument("--gpus", type=_gpus, default=None, help="N or all: collect with one process per GPU")
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        help="i/N share of the collection (also from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)",
    )
    p.add_argument("--no-env-shard", action="store_true", help="ignore the Slurm/Kubernetes shard variables")
    p.add_argument("--time-budget-s", type=float, default=None, help="start no new problem after this long")
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store (default $MLFLOW_TRACKING_URI or sqlite:///mlflow.db; simulated: its own)",
    )
    p.add_argument("--param", action="append", type=_param, help="CostModel parameter NAME=VALUE (repeatable)")
    p.add_argument(
        "--export",
        default="full",
        choices=["full", "skip"],
        help="export the new champion's predictor artifact (full) or not (skip)",
    )
    p.add_argument("--export-dir", default=None, help="where the champion artifact goes (default STATE/artifact/CLASS)")
    p.add_argument("--export-timeout-s", type=float, default=3600.0, help="give up the export after this long")
    p.add_argument(
        "--export-samples",
        type=int,
        default=None,
        help="sample shapes the export's shortlists are built from (default 384,000; fewer: quicker, coarser)",
    )
    p.add_argument("--accept-drift", action="store_true", help="tonight's sentinels become the new reference")
    p.set_defaults(func=_cmd_nightly)

    p = sub.add_parser("report", help="figures (PNG) and an HTML page of a model on the dataset")
    p.add_argument("--device-class", default="h200")
    p.add_argument("--dataset", default="datasets/measurements", help="dataset root (path or pyarrow URI)")
    p.add_argument("--artifact", default=None, help="artifact directory (default: the shipped model of the class)")
    p.add_argument("--model-uri", default=None, help="an MLflow model instead, e.g. models:/tilecost-h200@champion")
    p.add_argument("--tracking-uri", default=None, help="MLflow store for --model-uri")
    p.add_argument("--out", default="report", help="output folder (default ./report)")
    p.set_defaults(func=_cmd_report)
