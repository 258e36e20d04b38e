"""Write plans of the linear layers of current public models at the token counts a compiler meets, those not
measured yet: a training plan (25% sample) and a held-out plan (every candidate) of the problems the seeded hash
holds out (:func:`tilecost.collect.plans.is_heldout`), so that the held-out side asks how the model does on the
layers of models it was never shown, and the training side fills the tuning database (`measured.json`) with them.

    .venv/bin/python scripts/layer_plan.py NAME [SEED [HELDOUT_COUNT [DTYPES [MAX_FLOP]]]]
        (seconds; writes datasets/plans/NAME-train.json and NAME-heldout.json)

SEED (default 0) orders each plan (shuffled, so that a collect stopped at its time budget has covered every model
and token count alike, not the first layers); HELDOUT_COUNT (default 40) keeps that many held-out problems, at most
MAX_FLOP (default 3e11, so that each measures over every candidate in seconds), from the shuffled order; DTYPES
(comma separated, default ``bf16,fp8e4m3``) the input types, all ``nt`` (``x @ W.T`` with W stored N × K, as the
layers hold their weights). Training problems are capped at 1e12 flop. The shapes are in ``LAYERS`` below, taken
from the models' published configuration files (hidden size, heads × head dimension, key/value heads,
intermediate size, vocabulary); the ``layers`` family of `collect/plans.py` covers older models at seven token counts.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from train_plan import measured_keys

from tilecost.collect.plans import is_heldout, within_bounds
from tilecost.problem import Problem

# (model.layer, N, K) of x @ W.T: query/key/value fused, attention output, MLP up and gate fused, MLP down, LM head.
LAYERS: tuple[tuple[str, int, int], ...] = (
    ("llama3.1-405b.qkv", 18432, 16384),
    ("llama3.1-405b.o", 16384, 16384),
    ("llama3.1-405b.up", 53248, 16384),
    ("llama3.1-405b.down", 16384, 53248),
    ("llama3.2-1b.qkv", 3072, 2048),
    ("llama3.2-1b.o", 2048, 2048),
    ("llama3.2-1b.up_gate", 16384, 2048),
    ("llama3.2-1b.down", 2048, 8192),
    ("llama3.2-1b.lm_head", 128256, 2048),
    ("llama3.2-3b.qkv", 5120, 3072),
    ("llama3.2-3b.o", 3072, 3072),
    ("llama3.2-3b.up_gate", 16384, 3072),
    ("llama3.2-3b.down", 3072, 8192),
    ("qwen2.5-7b.o", 3584, 3584),
    ("qwen2.5-7b.down", 3584, 18944),
    ("qwen2.5-7b.lm_head", 152064, 3584),
    ("qwen2.5-14b.qkv", 7168, 5120),
    ("qwen2.5-14b.up_gate", 27648, 5120),
    ("qwen2.5-14b.down", 5120, 13824),
    ("qwen2.5-32b.o", 5120, 5120),
    ("qwen2.5-32b.up_gate", 55296, 5120),
    ("qwen2.5-32b.down", 5120, 27648),
    ("qwen2.5-72b.up_gate", 59136, 8192),
    ("qwen2.5-72b.down", 8192, 29568),
    ("qwen3-8b.up_gate", 24576, 4096),
    ("qwen3-8b.down", 4096, 12288),
    ("gemma2-9b.qkv", 8192, 3584),
    ("gemma2-9b.o", 3584, 4096),
    ("gemma2-9b.up_gate", 28672, 3584),
    ("gemma2-9b.down", 3584, 14336),
    ("gemma2-27b.qkv", 8192, 4608),
    ("gemma2-27b.o", 4608, 4096),
    ("gemma2-27b.up_gate", 73728, 4608),
    ("gemma2-27b.down", 4608, 36864),
    ("mistral-nemo-12b.qkv", 6144, 5120),
    ("mistral-nemo-12b.o", 5120, 4096),
    ("mistral-nemo-12b.up_gate", 28672, 5120),
    ("mistral-nemo-12b.down", 5120, 14336),
    ("phi3-medium.qkv", 7680, 5120),
    ("phi3-medium.up_gate", 35840, 5120),
    ("phi3-medium.down", 5120, 17920),
    ("deepseek-v3.expert_up_gate", 4096, 7168),
    ("deepseek-v3.expert_down", 7168, 2048),
    ("deepseek-v3.q_a", 1536, 7168),
    ("deepseek-v3.kv_a", 576, 7168),
    ("deepseek-v3.q_b", 24576, 1536),
    ("deepseek-v3.kv_b", 32768, 512),
    ("deepseek-v3.o", 7168, 16384),
)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
TRAIN_MAX_FLOP = 1e12


def candidates(
    dtypes: list[str],
    layers: tuple[tuple[str, int, int], ...] = LAYERS,
    tokens: tuple[int, ...] = TOKENS,
) -> list[tuple[str, Problem]]:
    """Every (layer name, problem) of layers × tokens × dtypes that fits the collector's bounds and is not measured."""
    out: list[tuple[str, Problem]] = []
    seen: set[str] = set()
    for dtype in dtypes:
        measured = measured_keys(dtype, "nt")
        for name, n, k in layers:
            for m in tokens:
                p = Problem(m, n, k, dtype, "nt")
                if not within_bounds(m, n, k, p.dtype) or p.key in measured or p.key in seen:
                    continue
                seen.add(p.key)
                out.append((name, p))
    return out


def entry(name: str, p: Problem, role: str) -> dict:
    return dict(m=p.m, n=p.n, k=p.k, dtype=p.dtype.value, layout=p.layout.value, family=f"layer-{name}", role=role)


def write_plan(path: Path, plan: list[dict], dtypes: list[str]) -> None:
    """Write a plan file and say how many problems of each dtype it holds."""
    path.write_text(json.dumps(plan, indent=0) + "\n")
    by_dtype = {d: sum(e["dtype"] == d for e in plan) for d in dtypes}
    print(f"{path}: {len(plan)} problems {by_dtype}")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    name = argv[0]
    seed = int(argv[1]) if len(argv) > 1 else 0
    heldout_count = int(argv[2]) if len(argv) > 2 else 40
    dtypes = argv[3].split(",") if len(argv) > 3 else ["bf16", "fp8e4m3"]
    max_flop = float(argv[4]) if len(argv) > 4 else 3e11
    pool = candidates(dtypes)
    random.Random(seed).shuffle(pool)
    train = [entry(n, p, "train") for n, p in pool if not is_heldout(p) and 2 * p.m * p.n * p.k <= TRAIN_MAX_FLOP]
    held = [entry(n, p, "heldout") for n, p in pool if is_heldout(p) and 2 * p.m * p.n * p.k <= max_flop]
    held = held[:heldout_count]
    for suffix, plan in (("train", train), ("heldout", held)):
        write_plan(Path(f"datasets/plans/{name}-{suffix}.json"), plan, dtypes)


if __name__ == "__main__":
    main(sys.argv[1:])
