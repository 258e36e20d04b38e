"""Write a held-out plan of decode-sized, short-K, very wide layers: the region the shipped model is weakest in.

The shipped model's worst answers on the current models' layers it never saw are DeepSeek V3's ``kv_b``
(N = 32,768, K = 512) at M = 2-16 (docs/BENCHMARKS.md §4, thirty-third session). This plan asks the same kind of
question of layers no plan measured before: MLA key/value up-projections of other models and the LM heads of small
models (a vocabulary of 150-260k over a hidden size of 0.9-2.3k), at the token counts of decoding. Every problem is
held out (role ``heldout``, measured over every candidate): the layers themselves are new to the dataset, so the set
asks how the model does on layers it was never shown, as the sixth set does, in the region it is weakest.

ROLE ``train`` (thirty-fifth session) writes a training plan of the same kind from other models' layers
(``TRAIN_LAYERS``: LM heads of 50-262k vocabularies, MLA up-projections of smaller models) at more decode token
counts, leaving out the problems the seeded hash holds out (`is_heldout`), as `layer_plan.py` does. The thirty-fifth
session's, ``decode_wide_plan.py 2026-12-04-s35-decode-wide 0 bf16,fp8e4m3 train``, was collected at ``SAMPLE=0.5``
(run r35dt; decode problems time fast, so twice the usual training fraction cost 333 s for 209 problems).

    .venv/bin/python scripts/decode_wide_plan.py NAME [SEED [DTYPES [ROLE]]]
        (seconds; writes datasets/plans/NAME-ROLE.json, ROLE ``heldout`` (default) or ``train``)

SEED (default 0) orders the plan (shuffled, so that a collect stopped at its time budget has covered every layer and
token count alike); DTYPES (comma separated, default ``bf16,fp8e4m3``) the input types, all ``nt``. Shapes the
dataset already measured, or outside the collector's bounds, are left out (`layer_plan.candidates`).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from layer_plan import candidates, entry, write_plan

from tilecost.collect.plans import is_heldout

# (model.layer, N, K) of x @ W.T, from the models' published configuration files.
LAYERS: tuple[tuple[str, int, int], ...] = (
    ("kimi-k2.kv_b", 16384, 512),  # 64 heads × (128 + 128) over kv_lora_rank 512
    ("kimi-k2.q_b", 12288, 1536),  # 64 heads × 192 over q_lora_rank 1536
    ("qwen2.5-0.5b.lm_head", 151936, 896),
    ("qwen3-0.6b.lm_head", 151936, 1024),
    ("qwen2.5-1.5b.lm_head", 151936, 1536),
    ("gemma3-1b.lm_head", 262144, 1152),
    ("gemma2-2b.lm_head", 256000, 2304),
)
TOKENS = (1, 2, 4, 8, 16)

# Training layers: none of these models is in LAYERS or in an earlier plan, though a few shapes are (DeepSeek V2's q_b
# is V3's, Llama 3.1 8B's LM head is in the built-in layers family): `candidates` leaves out what is measured.
TRAIN_LAYERS: tuple[tuple[str, int, int], ...] = (
    ("llama3.1-8b.lm_head", 128256, 4096),
    ("qwen3-1.7b.lm_head", 151936, 2048),
    ("qwen3-4b.lm_head", 151936, 2560),
    ("gemma3-4b.lm_head", 262144, 2560),
    ("glm4-9b.lm_head", 151552, 4096),
    ("olmo2-7b.lm_head", 100352, 4096),
    ("phi4.lm_head", 100352, 5120),
    ("smollm2-135m.lm_head", 49152, 576),
    ("smollm2-1.7b.lm_head", 49152, 2048),
    ("gpt2.lm_head", 50257, 768),
    ("deepseek-v2-lite.kv_b", 4096, 512),  # 16 heads × (128 + 128) over kv_lora_rank 512
    ("deepseek-v2-lite.q", 3072, 2048),  # 16 heads × 192, no query compression
    ("minicpm3-4b.kv_b", 5120, 256),  # 40 heads × (64 + 64) over kv_lora_rank 256
    ("minicpm3-4b.q_b", 3840, 768),  # 40 heads × 96 over q_lora_rank 768
    ("deepseek-v2.q_b", 24576, 1536),  # 128 heads × 192 over q_lora_rank 1536
)
TRAIN_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    name = argv[0]
    seed = int(argv[1]) if len(argv) > 1 else 0
    dtypes = argv[2].split(",") if len(argv) > 2 else ["bf16", "fp8e4m3"]
    role = argv[3] if len(argv) > 3 else "heldout"
    if role not in ("heldout", "train"):
        raise SystemExit(f"ROLE must be 'heldout' or 'train', not {role!r}")
    if role == "heldout":
        pool = candidates(dtypes, LAYERS, TOKENS)
    else:
        pool = [(layer, p) for layer, p in candidates(dtypes, TRAIN_LAYERS, TRAIN_TOKENS) if not is_heldout(p)]
    random.Random(seed).shuffle(pool)
    plan = [entry(layer, p, role) for layer, p in pool]
    write_plan(Path(f"datasets/plans/{name}-{role}.json"), plan, dtypes)


if __name__ == "__main__":
    main(sys.argv[1:])
