"""``predict_best`` latency of two versions of tilecost, interleaved shape by shape, one process each.

    .venv/bin/python benchmarks/experiments/commit_ab.py --a HEAD~1 --b . [--shapes 3000] [--rounds 4]

An experiment harness of the twenty-second session (BENCHMARKS §5). This machine's speed swings several-fold
within minutes (the twenty-first session's notes), so two versions timed one after the other cannot be told
apart by a few percent; and only changes to the compiled kernels could be compared in one process (an old kernel
kept beside the new one). Here each version (a git revision checked out into a worktree under /tmp, or ``.`` for
the working tree) runs in a worker process of its own that imports tilecost from its tree, loads the shipped
model and answers shapes sent to it, timing each ``predict_best`` itself (the pipe is outside the time). The
driver sends the same stream of distinct random shapes (every dtype and layout, never from measurements) and
gives shape i of round r to version (i + r) mod 2: one worker runs at a time, so both see the same machine, and
neither has answered that shape before. Both answer 200 warm-up shapes first and must agree on every one.
``--a . --b .`` is the A/A control: how far apart two identical versions read.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The package layout of pyproject.toml ([tool.setuptools] package-dir), resolved against a worker's tree.
PACKAGES = {"tilecost": "tilecost", "tilecost.collect": "collect", "tilecost.features": "features",
            "tilecost.train": "train", "tilecost.predict": "predict"}  # fmt: skip


def checkout(revision: str) -> Path:
    """The tree of ``revision``: the working tree for ``.``, else a detached worktree under /tmp (reused)."""
    if revision == ".":
        return REPO
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", revision], check=True,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    tree = Path(f"/tmp/tilecost-ab-{commit}")
    if not tree.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)  # fmt: skip
    return tree


def worker(root: Path) -> None:
    """Import tilecost from ``root``, load the shipped model, then answer ``m n k dtype layout`` lines with
    ``config_key µs`` lines until stdin closes."""

    class TreeFinder:
        @classmethod
        def find_spec(cls, name: str, path: object = None, target: object = None) -> object:
            if name not in PACKAGES:
                return None
            folder = root / PACKAGES[name]
            return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                          submodule_search_locations=[str(folder)])  # fmt: skip

    sys.meta_path.insert(0, TreeFinder)
    import tilecost
    from tilecost import Predictor, Problem

    assert Path(tilecost.__file__).resolve().parent == (root / "tilecost").resolve(), tilecost.__file__
    predictor = Predictor.load("h200")
    print("ready", flush=True)
    for line in sys.stdin:
        m, n, k, dtype, layout = line.split()
        problem = Problem(int(m), int(n), int(k), dtype, layout)
        start = time.perf_counter_ns()
        answer = predictor.predict_best(problem, measured=False)
        spent = time.perf_counter_ns() - start
        print(answer.config.key, spent / 1e3, flush=True)


class Worker:
    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.process = subprocess.Popen([sys.executable, __file__, "--worker", str(root)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "ready", name

    def ask(self, shape: tuple[int, int, int, str, str]) -> tuple[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(" ".join(map(str, shape)) + "\n")
        key, micros = self.process.stdout.readline().split()
        return key, float(micros)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def distinct_shapes(seed: int) -> Iterator[tuple[int, int, int, str, str]]:
    """Distinct random problems of every dtype and layout, log-uniform over 1..16384 per extent (as
    walk_lockstep.py's), without end."""
    import numpy as np

    rng = np.random.default_rng(seed)
    seen: set[tuple[int, int, int, str, str]] = set()
    while True:
        m, n, k = (max(1, int(round(2 ** rng.uniform(0, 14)))) for _ in range(3))
        shape = (m, n, k, ("bf16", "fp16", "fp8e4m3", "fp32")[rng.integers(4)], ("nt", "nn")[rng.integers(2)])
        if shape not in seen:
            seen.add(shape)
            yield shape


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default="HEAD", help="a git revision, or . for the working tree (default HEAD)")
    parser.add_argument("--b", default=".", help="a git revision, or . for the working tree (default .)")
    parser.add_argument("--shapes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument(
        "--allow-different", action="store_true",
        help="time versions whose answers differ by design (else 200 warm-up shapes must agree)",
    )  # fmt: skip
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return
    workers = [Worker("a", checkout(args.a)), Worker("b", checkout(args.b))]
    shapes = list(itertools.islice(distinct_shapes(args.seed), 200 + args.rounds * args.shapes))
    differ = 0
    for shape in shapes[:200]:
        answers = [w.ask(shape)[0] for w in workers]
        differ += answers[0] != answers[1]
        assert args.allow_different or answers[0] == answers[1], (shape, answers)
    same = "the same answers" if not differ else f"different answers on {differ} of 200 warm-up shapes (allowed)"
    print(f"a = {args.a}, b = {args.b}: {same}; {args.rounds} rounds of {args.shapes} new shapes each")
    ratios = []
    for round_ in range(args.rounds):
        spent: dict[str, list[float]] = {"a": [], "b": []}
        batch = shapes[200 + round_ * args.shapes : 200 + (round_ + 1) * args.shapes]
        for i, shape in enumerate(batch):
            chosen = workers[(i + round_) % 2]
            spent[chosen.name].append(chosen.ask(shape)[1])
        p50 = {name: percentile(v, 50) for name, v in spent.items()}
        ratios.append(p50["b"] / p50["a"])
        print(f"round {round_}: " + " | ".join(
            f"{name} p50 {p50[name]:.1f} µs, p99 {percentile(spent[name], 99):.1f} µs" for name in spent
        ) + f" | b - a p50 {p50['b'] - p50['a']:+.1f} µs, b / a {ratios[-1]:.3f}", flush=True)  # fmt: skip
    print(f"b / a p50 over {args.rounds} rounds: {min(ratios):.3f}-{max(ratios):.3f}")
    for w in workers:
        w.close()


if __name__ == "__main__":
    main()
