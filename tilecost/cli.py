"""The ``tilecost`` command line (also ``python -m tilecost``).

    tilecost space     --device h200 --dtype bf16 --layout nt      count / list the candidate space
    tilecost collect   --family random=40 --dtypes bf16 ...        sweep a plan into the dataset
    tilecost compact   --run-id r19mt                                merge a finished run's files, one per partition
    tilecost train / evaluate / refresh-measured                     (tilecost.train.cli)
    tilecost nightly   --device-class h200                           the nightly loop (tilecost.train.nightly)
    tilecost report    --out DIR                                     figures and an HTML page of a model
    tilecost predict   24 14336 4096                                 (tilecost.predict.cli)

Each command ends with a one-line summary of what it did and where the results are. Option values are
checked as they are parsed (the argument types below, shared with the stage packages' commands), so a
wrong one is refused naming the option and what it allows before any work starts.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilecost.collect.backend import CUDA_BACKEND
from tilecost.collect.store import SHIPPED_DATASET  # relative to the working directory: run from the repository
from tilecost.problem import DType, Layout

__all__ = [
    "backend_arg",
    "dtype_arg",
    "dtypes_arg",
    "env_shard",
    "family_arg",
    "fraction_arg",
    "gpus_arg",
    "int_at_least",
    "layout_arg",
    "layouts_arg",
    "main",
    "package_version",
    "seconds_arg",
    "shard_arg",
    "shard_from_env",
]

DEFAULT_FAMILIES = {"random": 40, "layers": 40, "decode": 20, "unaligned": 20}


# ------------------------------------------------------------------------------- argument types
# argparse shows an ArgumentTypeError's message after "argument --OPTION:", and for any other exception only
# "invalid <function name> value", so each type below raises ArgumentTypeError saying what is allowed.
def _enum_arg(kind: type[DType] | type[Layout], what: str, text: str) -> Any:
    try:
        return kind.parse(text.strip())
    except ValueError:
        allowed = ", ".join(sorted(m.value for m in kind))
        raise argparse.ArgumentTypeError(f"{text.strip()!r} is not a {what}; use one of {allowed}") from None


def dtype_arg(text: str) -> DType:
    """``bf16``: one dtype."""
    return _enum_arg(DType, "dtype", text)  # type: ignore[no-any-return]


def layout_arg(text: str) -> Layout:
    """``nt``: one layout."""
    return _enum_arg(Layout, "layout", text)  # type: ignore[no-any-return]


def dtypes_arg(text: str) -> list[DType]:
    """``bf16,fp16`` (spaces after the commas allowed): dtypes."""
    return [dtype_arg(x) for x in text.split(",") if x.strip()]


def layouts_arg(text: str) -> list[Layout]:
    """``nt,nn`` (spaces after the commas allowed): layouts."""
    return [layout_arg(x) for x in text.split(",") if x.strip()]


def int_at_least(low: int) -> Callable[[str], int]:
    """An argument type: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; use one >= {low}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not allowed; use an integer >= {low}")
        return value

    return parse


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds_arg(text: str) -> float:
    """A duration in seconds, > 0."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not allowed; use a number of seconds > 0")
    return value


def fraction_arg(text: str) -> float:
    """A fraction in (0, 1]."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not allowed; use a fraction in (0, 1], e.g. 0.35")
    return value


def gpus_arg(text: str) -> int:
    """``N`` (>= 1) or ``all`` (returned as 0: every visible GPU)."""
    if text.strip() == "all":
        return 0
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; use a GPU count >= 1 or all")
    return value


def shard_arg(text: str) -> tuple[int, int]:
    """``INDEX/COUNT`` with ``0 <= INDEX < COUNT``: one share of a plan."""
    index, sep, count = text.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        shard = (-1, 0)
    if not sep or not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shard; use INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4")
    return shard


def family_arg(text: str) -> tuple[str, int]:
    """``NAME=COUNT`` of a built-in plan family (the family's name is checked where the plan is built)."""
    name, sep, count = text.partition("=")
    try:
        value = int(count)
    except ValueError:
        value = -1
    if not sep or not name or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use NAME=COUNT with COUNT >= 0, e.g. random=40")
    return name, value


def backend_arg(text: str) -> str:
    """A measuring backend's ``module:function``, checked to import (a typo fails here, not in the measuring
    process after planning and compiling); returned as given, for the measuring process to import again.
    Whether the machine can run it (a CUDA device) is checked by the command (:func:`_check_backend`)."""
    from tilecost.collect.backend import load_backend_factory

    try:
        load_backend_factory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def shard_from_env() -> str | None:
    """``i/N`` from a Slurm array or a Kubernetes Indexed Job, when running inside one."""
    if "SLURM_ARRAY_TASK_ID" in os.environ and "SLURM_ARRAY_TASK_COUNT" in os.environ:
        lo = int(os.environ.get("SLURM_ARRAY_TASK_MIN", "0"))
        return f"{int(os.environ['SLURM_ARRAY_TASK_ID']) - lo}/{os.environ['SLURM_ARRAY_TASK_COUNT']}"
    if "JOB_COMPLETION_INDEX" in os.environ and "TILECOST_SHARDS" in os.environ:
        return f"{os.environ['JOB_COMPLETION_INDEX']}/{os.environ['TILECOST_SHARDS']}"
    return None


def env_shard() -> tuple[int, int] | None:
    """:func:`shard_from_env` parsed; ``ValueError`` naming the variables when they do not make a shard."""
    try:
        found = shard_from_env()
        return None if found is None else shard_arg(found)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise ValueError(
            "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (or JOB_COMPLETION_INDEX/TILECOST_SHARDS) do not make a "
            f"shard: {exc}"
        ) from None


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


def _check_backend(backend: str) -> None:
    """Refuse, before compiling or measuring, a CUDA backend on a machine that shows no CUDA device (it would
    die in the measuring process, after compiling, with torch's traceback)."""
    from tilecost.collect.backend import SIMULATED_BACKEND, BackendError, cuda_backend, load_backend_factory

    if load_backend_factory(backend) is cuda_backend and visible_gpu_count() == 0:
        raise BackendError(
            f"--backend {backend} measures on a CUDA GPU, and this machine shows none (CUDA_VISIBLE_DEVICES, "
            f"NVML and torch see none); for a dry run on CPU use --backend {SIMULATED_BACKEND} --dataset DIR "
            "(a scratch directory)"
        )


def _cmd_collect(args: argparse.Namespace) -> int:
    from tilecost.collect.backend import is_simulated_backend
    from tilecost.collect.plans import build_plan, describe, load_plan_file
    from tilecost.collect.protocol import MeasureProtocol
    from tilecost.collect.store import DatasetStore, refuse_simulated_into_shipped
    from tilecost.collect.sweep import SweepSettings, run_sweep, shard

    if is_simulated_backend(args.backend):  # the store refuses its rows there too; this says so before any work
        refuse_simulated_into_shipped(args.dataset)
    if args.plan:
        entries = load_plan_file(args.plan)
    else:
        families = dict(args.family) if args.family else DEFAULT_FAMILIES
        entries = build_plan(families, args.dtypes, args.layouts, seed=args.seed)
    _check_backend(args.backend)  # after the input's own checks (a plan file's), before any process starts
    if args.gpus is not None and args.gpus != 1:
        return _fan_out_gpus(args.gpus, args.argv)
    shard_spec = args.shard or env_shard()
    first_group = 0
    if shard_spec:
        entries = shard(entries, *shard_spec)
        first_group = shard_spec[0]
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
    # the progress stream is passed, not run_sweep's default: that one is the sys.stderr of its import
    summary = run_sweep(entries, DatasetStore(args.dataset), settings, progress_stream=sys.stderr,
                        time_budget_s=args.time_budget_s, first_group=first_group)  # fmt: skip
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


def package_version() -> str:
    """The installed distribution's version, else the source tree's (``pyproject.toml`` beside this package)."""
    from importlib import metadata

    try:
        return metadata.version("tilecost")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown (neither installed nor in a source tree)"


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked (argparse's own action wants it at build time)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilecost", description="Learned Triton matmul tile selection")
    parser.add_argument("--version", action=_VersionAction, help="print the installed tilecost version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("space", help="count or list the candidate space")
    p.add_argument("--device", default="h200", help="device class, a spec in tilecost/devices (default %(default)s)")
    p.add_argument("--dtype", default="bf16", type=dtype_arg,
                   help="input dtype: bf16, fp16, fp32 or fp8e4m3 (default %(default)s)")  # fmt: skip
    p.add_argument("--layout", default="nt", type=layout_arg,
                   help="nt (B stored N×K, x @ W.T) or nn (default %(default)s)")  # fmt: skip
    p.add_argument("--list", action="store_true", help="print every config key (the count goes to stderr)")
    p.set_defaults(func=_cmd_space)

    p = sub.add_parser("collect", help="measure a plan of problems into the Parquet dataset")
    p.add_argument("--dataset", default=str(SHIPPED_DATASET),
                   help="dataset root, a path or pyarrow URI (default %(default)s: the shipped dataset, "
                   "run from the repository root)")  # fmt: skip
    p.add_argument("--device-class", default="h200", help="device class measured (default %(default)s)")
    p.add_argument("--plan", help="JSON plan file instead of the built-in families")
    p.add_argument("--family", action="append", type=family_arg, metavar="NAME=COUNT",
                   help="NAME=COUNT of a built-in family (repeatable; default "
                   + " ".join(f"{k}={v}" for k, v in DEFAULT_FAMILIES.items()) + ")")  # fmt: skip
    p.add_argument("--dtypes", default="bf16", type=dtypes_arg, help="e.g. bf16,fp16 (default %(default)s)")
    p.add_argument("--layouts", default="nt", type=layouts_arg, help="e.g. nt,nn (default %(default)s)")
    p.add_argument("--sample-fraction", type=fraction_arg, default=0.35,
                   help="of a training problem's candidates, in (0, 1] (default %(default)s)")  # fmt: skip
    p.add_argument("--min-sample", type=int_at_least(1), default=64,
                   help="candidates measured per training problem at least (default %(default)s)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="plan and sample seed (default %(default)s)")
    p.add_argument("--rounds", type=int_at_least(1), default=3,
                   help="interleaved timing rounds after screening (default %(default)s)")  # fmt: skip
    p.add_argument("--backend", default=CUDA_BACKEND, type=backend_arg, metavar="MODULE:FUNCTION",
                   help="measuring backend MODULE:FUNCTION (default %(default)s: the CUDA GPU; "
                   "tilecost.collect.simulated:simulated_backend is the labelled CPU stand-in)")  # fmt: skip
    p.add_argument("--workers", type=int_at_least(1), default=None, help="compile processes (default: cores - 1)")
    p.add_argument("--run-id", default=None, help="default: derived from the settings, so a re-run resumes")
    p.add_argument("--shard", type=shard_arg, metavar="I/N", default=None,
                   help="INDEX/COUNT share of the plan (default: from SLURM_ARRAY_TASK_ID or "
                   "JOB_COMPLETION_INDEX, else all of it)")  # fmt: skip
    p.add_argument(
        "--gpus",
        type=gpus_arg,
        metavar="N|all",
        default=None,
        help="N or all: one sweep process per GPU (default: one)",
    )
    p.add_argument("--max-problems", type=int_at_least(1), default=None,
                   help="measure at most the plan's first N problems (default: all)")  # fmt: skip
    p.add_argument("--time-budget-s", type=seconds_arg, default=None,
                   help="start no new problem after this long; give up one still measuring 30 s later "
                   "(default: no limit)")  # fmt: skip
    p.set_defaults(func=_cmd_collect)

    p = sub.add_parser("compact", help="merge a finished run's per-problem files into one file per partition")
    p.add_argument("--dataset", default=str(SHIPPED_DATASET),
                   help="dataset root, a path or pyarrow URI (default %(default)s)")  # fmt: skip
    p.add_argument("--device-class", default="h200", help="device class (default %(default)s)")
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
    ``TILECOST_DEBUG=1`` shows the traceback instead. An option argparse refuses ends in its usage line and
    one ``error:`` line naming the option and what it allows, also with status 2. A reader that goes away
    (``tilecost space --list | head -1``) ends the command quietly with status 141, as SIGPIPE would."""
    from tilecost.errors import TilecostError

    _dump_stacks_on_sigusr1()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader gone away shows here, inside the handler, not at the interpreter's exit
        return code
    except BrokenPipeError:
        # Python's documented recipe (library/signal.html, "Note on SIGPIPE"): point stdout at devnull so that
        # the flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):  # stdout without a file descriptor (captured): no flush
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (TilecostError, ValueError) as exc:
        if os.environ.get("TILECOST_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
