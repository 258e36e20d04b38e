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
from pathlib import Path
from typing import Any

from tilecost.cli import (
    backend_arg,
    dtypes_arg,
    env_shard,
    family_arg,
    fraction_arg,
    gpus_arg,
    int_at_least,
    layouts_arg,
    seconds_arg,
    shard_arg,
)
from tilecost.collect.backend import CUDA_BACKEND

from .cli import add_model_source

__all__ = ["register"]


def _param(text: str) -> tuple[str, Any]:
    from .cli import _param as parse

    return parse(text)


def _warn_missing_query_log(query_log: str | None, from_env: bool, steps: frozenset[Any]) -> None:
    """A query log that does not exist is legal (a night with no flagged problems), but likely a typo: say so."""
    from .nightly import Step

    if query_log and Step.PLAN in steps and not Path(query_log).exists():
        source = "$TILECOST_QUERY_LOG" if from_env else "--query-log"
        print(f"warning: the query log {query_log} ({source}) does not exist; tonight's plan has no flagged "
              "problems", file=sys.stderr)  # fmt: skip


def _cmd_nightly(args: argparse.Namespace) -> int:
    from tilecost.errors import TilecostError

    from .nightly import DEFAULT_FAMILIES, ExportMode, NightlySettings, Step, run_nightly

    night = args.night or os.environ.get("TILECOST_NIGHT")
    try:
        shard = args.shard if args.shard is not None or args.no_env_shard else env_shard()
        steps = Step.parse_list(args.steps)
        query_log = args.query_log if args.query_log is not None else os.environ.get("TILECOST_QUERY_LOG")
        settings = NightlySettings(
            device_class=args.device_class,
            dataset=args.dataset,
            state_dir=args.state_dir,
            backend=args.backend,
            families=tuple(args.family) if args.family is not None else DEFAULT_FAMILIES,
            dtypes=tuple(args.dtypes),
            layouts=tuple(args.layouts),
            query_log=query_log,
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
            steps=steps,
            tracking_uri=args.tracking_uri,
            model_params=tuple(args.param or ()),
            export=ExportMode(args.export),
            export_dir=args.export_dir,
            export_timeout_s=args.export_timeout_s,
            export_samples=args.export_samples,
            accept_drift=args.accept_drift,
            **({"night": night} if night else {}),
        )
        _warn_missing_query_log(settings.query_log, args.query_log is None, settings.steps)
        result = run_nightly(settings, stream=sys.stderr)  # today's stderr, not its import's
    except (TilecostError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    return result.exit_code


def _cmd_report(args: argparse.Namespace) -> int:
    from .cli import registered_model_errors
    from .report import write_report

    # Bad input (TilecostError, ValueError) becomes one "error:" line and status 2 in tilecost.cli.main.
    with registered_model_errors(args.model_uri, args.tracking_uri):
        written = write_report(
            args.dataset, args.device_class, args.out, artifact=args.artifact, model_uri=args.model_uri,
            tracking_uri=args.tracking_uri, stream=sys.stderr,
        )  # fmt: skip
    for note in written.notes:
        print(f"note: {note}", file=sys.stderr)
    print(written.line())
    return 0


def register(sub: Any) -> None:
    """Add ``nightly`` and ``report`` to the CLI's subparsers. Imports nothing heavy."""
    from .nightly_settings import DEFAULT_FAMILIES

    p = sub.add_parser("nightly", help="plan, measure sentinels, collect, train, promote if better, export, report")
    p.add_argument("--device-class", default="h200", help="device class (default %(default)s)")
    p.add_argument("--dataset", default="datasets/measurements",
                   help="dataset root (default %(default)s: the shipped dataset; a scratch one when "
                   "simulated)")  # fmt: skip
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
    p.add_argument("--steps", default="all",
                   help="all, or some of plan,sentinels,collect,train,export,report (default %(default)s)")  # fmt: skip
    p.add_argument(
        "--backend",
        default=CUDA_BACKEND,
        type=backend_arg,
        metavar="MODULE:FUNCTION",
        help="measuring backend MODULE:FUNCTION (default %(default)s: the CUDA GPU; "
        "tilecost.collect.simulated:simulated_backend is the labelled CPU stand-in)",
    )
    p.add_argument("--family", action="append", type=family_arg, metavar="NAME=COUNT",
                   help="NAME=COUNT of fresh samples (repeatable; default "
                   + " ".join(f"{name}={count}" for name, count in DEFAULT_FAMILIES) + ")")  # fmt: skip
    p.add_argument("--dtypes", default="bf16", type=dtypes_arg, help="e.g. bf16,fp16 (default %(default)s)")
    p.add_argument("--layouts", default="nt", type=layouts_arg, help="e.g. nt,nn (default %(default)s)")
    p.add_argument("--query-log", default=None, help="the predictor's query log (default $TILECOST_QUERY_LOG)")
    p.add_argument(
        "--max-flagged", type=int, default=16, help="flagged problems per night at most (default %(default)s)"
    )
    p.add_argument("--model-top", type=int, default=0,
                   help="training problems re-timed on the model's untimed favourites a night "
                   "(default %(default)s: none)")  # fmt: skip
    p.add_argument("--model-top-k", type=int, default=64,
                   help="configurations per model-top problem, at most --min-sample (default %(default)s)")  # fmt: skip
    p.add_argument("--model-top-within", type=int, default=0,
                   help="take only the untimed among the model's N fastest of each problem (0: no bound)")  # fmt: skip
    p.add_argument("--sentinels", type=int, default=5,
                   help="sentinel problems (default %(default)s; 0 skips the drift check)")  # fmt: skip
    p.add_argument("--sentinel-configs", type=int, default=32,
                   help="configurations measured per sentinel (default %(default)s)")  # fmt: skip
    p.add_argument("--sample-fraction", type=fraction_arg, default=0.35,
                   help="of a training problem's candidates, in (0, 1] (default %(default)s)")  # fmt: skip
    p.add_argument("--min-sample", type=int_at_least(1), default=64,
                   help="candidates measured per training problem at least (default %(default)s)")  # fmt: skip
    p.add_argument("--rounds", type=int_at_least(1), default=3,
                   help="interleaved timing rounds after screening (default %(default)s)")  # fmt: skip
    p.add_argument("--workers", type=int_at_least(1), default=None, help="compile processes (default: cores - 1)")
    p.add_argument(
        "--gpus", type=gpus_arg, metavar="N|all", default=None, help="N or all: collect with one process per GPU"
    )
    p.add_argument(
        "--shard",
        type=shard_arg,
        metavar="I/N",
        default=None,
        help="INDEX/COUNT share of the collection (default: from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)",
    )
    p.add_argument("--no-env-shard", action="store_true", help="ignore the Slurm/Kubernetes shard variables")
    p.add_argument("--time-budget-s", type=seconds_arg, default=None,
                   help="start no new problem after this long (default: no limit)")  # fmt: skip
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
        help="export the new champion's predictor artifact (full) or not (skip) (default %(default)s)",
    )
    p.add_argument("--export-dir", default=None, help="where the champion artifact goes (default STATE/artifact/CLASS)")
    p.add_argument("--export-timeout-s", type=seconds_arg, default=3600.0,
                   help="give up the export after this long (default %(default).0f)")  # fmt: skip
    p.add_argument(
        "--export-samples",
        type=int_at_least(1),
        default=None,
        help="sample shapes the export's shortlists are built from (default 384,000; fewer: quicker, coarser)",
    )
    p.add_argument("--accept-drift", action="store_true", help="tonight's sentinels become the new reference")
    p.set_defaults(func=_cmd_nightly)

    p = sub.add_parser("report", help="figures (PNG) and an HTML page of a model on the dataset")
    p.add_argument("--device-class", default="h200", help="device class (default %(default)s)")
    p.add_argument("--dataset", default="datasets/measurements",
                   help="dataset root, a path or pyarrow URI (default %(default)s: the shipped dataset)")  # fmt: skip
    add_model_source(p)
    p.add_argument("--out", default="report", help="output folder (default ./report)")
    p.set_defaults(func=_cmd_report)
