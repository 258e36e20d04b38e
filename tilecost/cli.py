"""The ``tilecost`` command line.

    tilecost space     --device h200 --dtype bf16 --layout nt      count / list the candidate space
    tilecost collect   --family random=40 --dtypes bf16 ...        sweep a plan into the dataset
    tilecost compact   --run-id r19mt                                merge a finished run's files, one per partition
    tilecost train / evaluate                                        (tilecost.train.cli)
    tilecost nightly   --device-class h200                           the nightly loop (tilecost.train.nightly)
    tilecost report    --out DIR                                     figures and an HTML page of a model
    tilecost predict   24 14336 4096                                 (tilecost.predict.cli)

Each command ends with a one-line summary of what it did and where the results are.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilecost.problem import DType, Layout

__all__ = ["main", "shard_from_env"]

SHIPPED_DATASET = Path("datasets/measurements")
DEFAULT_FAMILIES = {"random": 40, "layers": 40, "decode": 20, "unaligned": 20}


def _csv(parse: Callable[[str], Any], text: str) -> list[Any]:
    return [parse(x.strip()) for x in text.split(",") if x.strip()]


def _family(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    try:
        return name, int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--family {text!r}: use NAME=COUNT, e.g. random=40") from None


def shard_from_env() -> str | None:
    """``i/N`` from a Slurm array or a Kubernetes Indexed Job, when running inside one."""
    if "SLURM_ARRAY_TASK_ID" in os.environ and "SLURM_ARRAY_TASK_COUNT" in os.environ:
        lo = int(os.environ.get("SLURM_ARRAY_TASK_MIN", "0"))
        return f"{int(os.environ['SLURM_ARRAY_TASK_ID']) - lo}/{os.environ['SLURM_ARRAY_TASK_COUNT']}"
    if "JOB_COMPLETION_INDEX" in os.environ and "TILECOST_SHARDS" in os.environ:
        return f"{os.environ['JOB_COMPLETION_INDEX']}/{os.environ['TILECOST_SHARDS']}"
    return None


def _cmd_space(args: argparse.Namespace) -> int:
    from tilecost.space import config_space

    space = config_space(args.device, args.dtype, args.layout)
    if args.list:
        for c in space:
            print(c.key)
    print(
        f"{len(space)} feasible configurations for {args.device} {args.dtype.value} {args.layout.value}",
        file=sys.stderr,
    )
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    from tilecost.collect.plans import build_plan, describe, load_plan_file
    from tilecost.collect.protocol import MeasureProtocol
    from tilecost.collect.store import DatasetStore
    from tilecost.collect.sweep import SweepSettings, run_sweep, shard

    if "simulated" in args.backend and Path(args.dataset).resolve() == SHIPPED_DATASET.resolve():
        print(f"error: the simulated backend may not write into the shipped dataset {SHIPPED_DATASET}; "
              "pass --dataset to a scratch directory", file=sys.stderr)  # fmt: skip
        return 2
    if args.plan:
        entries = load_plan_file(args.plan)
    else:
        families = dict(args.family) if args.family else DEFAULT_FAMILIES
        entries = build_plan(families, args.dtypes, args.layouts, seed=args.seed)
    if args.gpus is not None and args.gpus != 1:
        return _fan_out_gpus(args.gpus, args.argv)
    shard_spec = args.shard or shard_from_env()
    first_group = 0
    if shard_spec:
        i, _, n = shard_spec.partition("/")
        entries = shard(entries, int(i), int(n))
        first_group = int(i)
    if args.max_problems is not None:
        entries = entries[: args.max_problems]
    settings = SweepSettings(
        device_class=args.device_class,
        sample_fraction=args.sample_fraction,
        min_sample=args.min_sample,
        seed=args.seed,
        protocol=MeasureProtocol(rounds=args.rounds, seed=args.seed),
        backend=args.backend,
        workers=args.workers,
        run_id=args.run_id,
    )
    print(f"plan: {len(entries)} problems {describe(entries)}; run id {settings.resolved_run_id()}", file=sys.stderr)
    summary = run_sweep(entries, DatasetStore(args.dataset), settings, time_budget_s=args.time_budget_s,
                        first_group=first_group)  # fmt: skip
    print(f"{summary.line()}; dataset {args.dataset}")
    return 0


def _fan_out_gpus(gpus: int, argv: list[str]) -> int:
    """``--gpus N|all``: one sweep process per GPU, each on its own shard, all sharing the dataset."""
    count = gpus or visible_gpu_count()
    if count == 0:
        print("error: --gpus all found no GPU (CUDA_VISIBLE_DEVICES, NVML and torch see none)", file=sys.stderr)
        return 2
    base = [sys.executable, "-m", "tilecost.cli", *_strip_option(argv, "--gpus")]
    procs = []
    for i in range(count):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(i))
        procs.append(subprocess.Popen([*base, "--gpus", "1", "--shard", f"{i}/{count}"], env=env))
    codes = [p.wait() for p in procs]
    print(f"{count} GPU workers finished with exit codes {codes}")
    return max(codes)


def visible_gpu_count() -> int:
    """GPUs this process may use, without importing torch (which costs seconds in a parent that only
    starts one sweep per GPU): CUDA_VISIBLE_DEVICES when set, else NVML's count, else torch's."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",")]
        # CUDA stops at the first invalid entry (e.g. "-1" hides every GPU after it)
        count = 0
        for v in ids:
            if not v or v.startswith("-"):
                break
            count += 1
        return count
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML library or driver: let torch decide
        try:
            import torch
        except ImportError:
            return 0
        return torch.cuda.device_count()


def _cmd_compact(args: argparse.Namespace) -> int:
    from tilecost.collect.store import DatasetStore

    merged = DatasetStore(args.dataset).compact_run(args.device_class, args.run_id)
    if not merged:
        raise ValueError(f"run_id={args.run_id!r}: no per-problem files of this run under {args.dataset}")
    for folder, count in merged.items():
        print(f"{folder}: {count} problem files -> {args.run_id}.parquet")
    print(f"compacted run {args.run_id}: {sum(merged.values())} problem files into {len(merged)} files")
    return 0


def _strip_option(argv: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == name:
            skip = True
            continue
        if a.startswith(name + "="):
            continue
        out.append(a)
    return out


def _gpus(text: str) -> int:
    return 0 if text == "all" else int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilecost", description="Learned Triton matmul tile selection")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("space", help="count or list the candidate space")
    p.add_argument("--device", default="h200")
    p.add_argument("--dtype", default="bf16", type=DType.parse)
    p.add_argument("--layout", default="nt", type=Layout.parse)
    p.add_argument("--list", action="store_true", help="print every config key")
    p.set_defaults(func=_cmd_space)

    p = sub.add_parser("collect", help="measure a plan of problems into the Parquet dataset")
    p.add_argument("--dataset", default=str(SHIPPED_DATASET), help="dataset root (path or pyarrow URI)")
    p.add_argument("--device-class", default="h200")
    p.add_argument("--plan", help="JSON plan file instead of the built-in families")
    p.add_argument("--family", action="append", type=_family, help="NAME=COUNT of a built-in family (repeatable)")
    p.add_argument("--dtypes", default=[DType.BF16], type=lambda s: _csv(DType, s))
    p.add_argument("--layouts", default=[Layout.NT], type=lambda s: _csv(Layout, s))
    p.add_argument("--sample-fraction", type=float, default=0.35, help="of a training problem's candidates")
    p.add_argument("--min-sample", type=int, default=64, help="candidates measured per training problem at least")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds after screening")
    p.add_argument("--backend", default="tilecost.collect.backend:cuda_backend")
    p.add_argument("--workers", type=int, default=None, help="compile processes (default: cores - 1)")
    p.add_argument("--run-id", default=None, help="default: derived from the settings, so a re-run resumes")
    p.add_argument("--shard", default=None, help="i/N share of the plan (also from SLURM_ARRAY_TASK_ID)")
    p.add_argument("--gpus", type=_gpus, default=None, help="N or all: one sweep process per GPU")
    p.add_argument("--max-problems", type=int, default=None)
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="start no new problem after this long; give up one still measuring 30 s later")  # fmt: skip
    p.set_defaults(func=_cmd_collect)

    p = sub.add_parser("compact", help="merge a finished run's per-problem files into one file per partition")
    p.add_argument("--dataset", default=str(SHIPPED_DATASET), help="dataset root (path or pyarrow URI)")
    p.add_argument("--device-class", default="h200")
    p.add_argument("--run-id", required=True, help="the run whose files to merge (its problems stay measured)")
    p.set_defaults(func=_cmd_compact)

    # Stage packages add their own commands; each register() imports nothing heavy.
    from tilecost.predict.cli import register as register_predict
    from tilecost.train.cli import register as register_train
    from tilecost.train.nightly_cli import register as register_nightly

    register_train(sub)
    register_nightly(sub)
    register_predict(sub)
    return parser


def _dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr and the command goes on: how to see where a
    long sweep or nightly is without stopping it (the eleventh session's H200 call hung with no clue where)."""
    import contextlib
    import faulthandler
    import signal

    if not hasattr(signal, "SIGUSR1"):
        return
    # stderr without a file descriptor (captured: io.UnsupportedOperation) or none at all (RuntimeError)
    with contextlib.suppress(OSError, RuntimeError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand. Bad input (a ``ValueError`` or :class:`~tilecost.errors.TilecostError`, whose
    messages name the field and what is allowed) ends in one ``error:`` line and exit status 2;
    ``TILECOST_DEBUG=1`` shows the traceback instead."""
    import os

    from tilecost.errors import TilecostError

    _dump_stacks_on_sigusr1()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        return int(args.func(args))
    except (TilecostError, ValueError) as exc:
        if os.environ.get("TILECOST_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
