"""The next device call of the collection queue (``datasets/plans/queue.json``, ``tilecost.collect.queue``).

    .venv/bin/python scripts/device_queue.py                 each class's plans, measured / planned, then the call
    .venv/bin/python scripts/device_queue.py --keep-runs     only the run ids for SLIM_KEEP_RUNS
    .venv/bin/python scripts/device_queue.py --command       only the command (the device tool's `command`)
    ... [--plans N] [--total-s S]    plans a call may take (1-3, default 3) and its deadline (default 540 s)
    .venv/bin/python scripts/device_queue.py --add PLAN RUN_ID SAMPLE --device-class CLASS [--before RUN]
                                                     add a plan to a class's queue (before RUN's, or last), then list

Run it here, before ``scripts/device_tree.sh slim``, and again after each call's archive is unpacked and compacted:
the dataset says what each run still lacks, so a call cut short at its time budget is resumed, and a finished plan
hands over to the next. Reads the dataset's file names and compacted runs' problem keys; ~1 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tilecost.collect.queue import (
    MAX_PLANS,
    QueueEntry,
    add_entry,
    device_command,
    keep_runs,
    load_queue,
    next_entries,
    progress,
)
from tilecost.collect.store import DatasetStore

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", default=str(REPO / "datasets/plans/queue.json"))
    parser.add_argument("--dataset", default=str(REPO / "datasets/measurements"))
    parser.add_argument("--root", default=str(REPO), help="the folder the queue's plan paths are relative to")
    parser.add_argument("--total-s", type=int, default=540, help="the call's deadline in s (155-590; default 540)")
    parser.add_argument("--plans", type=int, default=MAX_PLANS, help=f"plans one call may take (1-{MAX_PLANS})")
    parser.add_argument("--add", nargs=3, metavar=("PLAN", "RUN_ID", "SAMPLE"), help="add a plan to a class's queue")
    parser.add_argument("--device-class", help="the class whose queue --add adds to")
    parser.add_argument("--before", metavar="RUN", help="with --add: the run whose plan the new one goes before")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--keep-runs", action="store_true", help="print only the run ids a slimmed tree keeps")
    shown.add_argument("--command", action="store_true", help="print only the device command")
    args = parser.parse_args(argv)
    if (args.add is None) != (args.device_class is None) or (args.before and args.add is None):
        parser.error("--add and --device-class go together, and --before only with them")
    try:
        if args.add is not None:
            plan, run_id, sample = args.add
            try:
                fraction = float(sample)
            except ValueError:
                raise ValueError(f"sample={sample!r} must be a number in (0, 1]") from None
            at = add_entry(args.queue, args.device_class, QueueEntry(plan, run_id, fraction), before=args.before,
                           root=args.root)  # fmt: skip
            print(f"added {run_id} ({plan}, sample {fraction:g}) to the {args.device_class} queue at {at + 1}",
                  file=sys.stderr)  # fmt: skip
        queues = load_queue(args.queue)
        store = DatasetStore(args.dataset)
        states = {q.device_class: progress(q, store, args.root) for q in queues}
        pending = {name: next_entries(s, args.plans) for name, s in states.items()}
        command = device_command(queues, pending, args.total_s)
    except ValueError as exc:
        print(f"device_queue: {exc}", file=sys.stderr)
        return 2
    if args.keep_runs:
        print(" ".join(keep_runs(pending, states)))
        return 0
    if args.command:
        print(command)
        return 0
    for q in queues:
        print(f"{q.device_class} (GPU name *{q.gpu_name}*):")
        ahead = pending[q.device_class]  # the call's plans, the next first
        for s in states[q.device_class]:
            mark = "done" if s.left == 0 else "next" if ahead and s is ahead[0] else "then" if s in ahead else ""
            e = s.entry
            print(f"  {mark:>4}  {e.run_id:<8} {s.measured:>4} of {s.planned:<4} {e.plan} (sample {e.sample:g})")
        if not ahead:
            print("  every plan measured: add plans to the queue")
    print(f'\nSLIM_KEEP_RUNS="{" ".join(keep_runs(pending, states))}"\n\n{command}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
