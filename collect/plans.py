"""Shape plans: which problems a sweep measures, and which of them are held out from training.

Built-in families (all deterministic for a seed):

* ``random``: each of M, N, K log-uniform over 1..65,536, redrawn until the aspect ratio
  max/min stays within 512 and the problem stays within :data:`MAX_FLOP` and :data:`MAX_OPERAND_BYTES`
  (realistic: matmuls in models are neither 1×65536×1 needles nor minutes long).
* ``layers``: the linear layers of real models (attention projections, MLPs, LM heads) as
  ``x @ W.T`` with M = token count in {1, 8, 32, 128, 512, 2048, 8192}.
* ``decode``: skinny products, M in 1..64, N and K of model widths.
* ``unaligned``: dims that are not multiples of 8 or 16 (odd vocabularies, ragged batches).

A plan can also be a file (JSON list of objects with m, n, k, dtype, layout, and optional family,
role and ``only``: a restriction of the candidates to some values of config fields, e.g.
``{"only": {"block_k": [64]}}`` for the seed's BLOCK_M × BLOCK_N figure, or ``{"only": {"config_id":
[...]}}`` for exactly those configs (the collector benchmark's sample); such a problem is a training
problem, since held-out problems are measured over every candidate). Held-out problems are chosen
by a seeded hash of the problem key, so a problem is held out in
every plan and every run, and no shape is ever on both sides.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilecost.problem import DType, Layout, Problem

__all__ = [
    "MAX_FLOP",
    "MAX_OPERAND_BYTES",
    "PlanEntry",
    "Role",
    "build_plan",
    "is_heldout",
    "load_plan_file",
    "plan_family",
    "within_bounds",
]

MAX_FLOP = 2 * 8192**3 * 2  # two 8192³ products: about 3.5 ms at the H200's bf16 rate
MAX_OPERAND_BYTES = 2 * 1024**3  # per operand, so three operands and a workspace fit easily
HELDOUT_FRACTION = 0.2


class Role(enum.Enum):
    TRAIN = "train"
    HELDOUT = "heldout"


# The TileConfig fields a plan entry may restrict (``only``).
FILTER_FIELDS = (
    "config_id", "variant", "block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlanEntry:
    problem: Problem
    family: str
    role: Role
    # (field, allowed values) pairs: measure only the candidates whose fields take these values.
    only: tuple[tuple[str, tuple[object, ...]], ...] = ()

    def __post_init__(self) -> None:
        for name, values in self.only:
            if name not in FILTER_FIELDS:
                raise ValueError(f"only: field {name!r} is not a config field; use one of {', '.join(FILTER_FIELDS)}")
            if not values:
                raise ValueError(f"only: field {name!r} needs at least one value")
        if self.only and self.role is Role.HELDOUT:
            raise ValueError(f"{self.problem.key}: a held-out problem is measured over every candidate; drop 'only'")

    def admits(self, config: object) -> bool:
        """Whether ``config`` (a TileConfig) passes this entry's ``only`` restriction."""
        fields = {**config.to_dict(), "config_id": config.key}  # type: ignore[attr-defined]
        return all(fields[name] in values for name, values in self.only)


def is_heldout(problem: Problem, seed: int = 0, fraction: float = HELDOUT_FRACTION) -> bool:
    """Deterministic held-out membership from a hash of the shape (dtype and layout included)."""
    digest = hashlib.blake2b(f"{seed}:{problem.key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


def within_bounds(m: int, n: int, k: int, dtype: DType) -> bool:
    """Whether a shape is inside the collector's bounds.

    At most :data:`MAX_FLOP`, and no operand (nor the fp32 output) above :data:`MAX_OPERAND_BYTES`.
    """
    largest = max(m * k, k * n) * dtype.in_bytes
    return 2 * m * n * k <= MAX_FLOP and largest <= MAX_OPERAND_BYTES and m * n * 4 <= MAX_OPERAND_BYTES


def _random(rng: random.Random, count: int, dtype: DType, layout: Layout) -> list[Problem]:
    out: list[Problem] = []
    while len(out) < count:
        m, n, k = (round(math.exp(rng.uniform(0, math.log(65536)))) for _ in range(3))
        if max(m, n, k) / min(m, n, k) > 512 or not within_bounds(m, n, k, dtype):
            continue
        out.append(Problem(m, n, k, dtype, layout))
    return out


# (name, N, K) of x @ W.T for W of shape N×K; hidden sizes and MLP widths of public model configs.
LAYER_SHAPES: tuple[tuple[str, int, int], ...] = (
    ("llama3-8b.qkv", 6144, 4096),
    ("llama3-8b.o", 4096, 4096),
    ("llama3-8b.up_gate", 28672, 4096),
    ("llama3-8b.down", 4096, 14336),
    ("llama3-8b.lm_head", 128256, 4096),
    ("llama3-70b.qkv", 10240, 8192),
    ("llama3-70b.down", 8192, 28672),
    ("mistral-7b.up", 14336, 4096),
    ("gpt2.qkv", 2304, 768),
    ("gpt2.mlp_up", 3072, 768),
    ("gpt2.mlp_down", 768, 3072),
    ("gpt2.lm_head", 50257, 768),
    ("bert-large.mlp_up", 4096, 1024),
    ("qwen2-7b.qkv", 4608, 3584),
    ("qwen2-7b.up", 18944, 3584),
    ("phi3-mini.qkv", 9216, 3072),
)
TOKENS = (1, 8, 32, 128, 512, 2048, 8192)


def _layers(rng: random.Random, count: int, dtype: DType, layout: Layout) -> list[Problem]:
    all_shapes = [
        Problem(t, n, k, dtype, layout) for _, n, k in LAYER_SHAPES for t in TOKENS if within_bounds(t, n, k, dtype)
    ]
    rng.shuffle(all_shapes)
    return all_shapes[:count]


def _decode(rng: random.Random, count: int, dtype: DType, layout: Layout) -> list[Problem]:
    out: list[Problem] = []
    while len(out) < count:
        _, n, k = rng.choice(LAYER_SHAPES)
        m = rng.choice((1, 2, 4, 8, 16, 24, 32, 48, 64))
        if within_bounds(m, n, k, dtype):
            out.append(Problem(m, n, k, dtype, layout))
    return out


def _unaligned(rng: random.Random, count: int, dtype: DType, layout: Layout) -> list[Problem]:
    out: list[Problem] = []
    while len(out) < count:
        m, n, k = (round(math.exp(rng.uniform(math.log(8), math.log(16384)))) for _ in range(3))
        # at least one of N, K off the multiples of 8 (so neither kernel gets 16-byte rows there)
        if n % 8 == 0 and k % 8 == 0:
            k += rng.choice((1, 3, 5, 7))
        if max(m, n, k) / min(m, n, k) > 512 or not within_bounds(m, n, k, dtype):
            continue
        out.append(Problem(m, n, k, dtype, layout))
    return out


def _aligned(rng: random.Random, count: int, dtype: DType, layout: Layout) -> list[Problem]:
    """Mid-size and large problems on tile-friendly extents: M from 64 to 16384 and N, K from 256 to 32768,
    log-uniform, each rounded to a multiple of 64, 128 or 256 (one step for the three). They fill the region
    the layer shapes sample only at their token counts and widths, where the twelfth session found the model
    weakest (M > 64, aligned N and K)."""
    out: list[Problem] = []
    while len(out) < count:
        step = rng.choice((64, 128, 256))
        m = round(math.exp(rng.uniform(math.log(64), math.log(16384))))
        n, k = (round(math.exp(rng.uniform(math.log(256), math.log(32768)))) for _ in range(2))
        m, n, k = (max(step, round(x / step) * step) for x in (m, n, k))
        if not within_bounds(m, n, k, dtype):
            continue
        out.append(Problem(m, n, k, dtype, layout))
    return out


_FAMILIES = {"random": _random, "layers": _layers, "decode": _decode, "unaligned": _unaligned, "aligned": _aligned}


def plan_family(name: str, count: int, dtype: DType, layout: Layout, seed: int = 0) -> list[Problem]:
    """``count`` problems of one built-in family (fewer for ``layers`` if it has fewer)."""
    if name not in _FAMILIES:
        raise ValueError(f"plan family {name!r} is not known; use one of {sorted(_FAMILIES)}")
    if count < 0:
        raise ValueError(f"count={count} must be >= 0")
    rng = random.Random(f"{seed}:{name}:{dtype.value}:{layout.value}")
    return _FAMILIES[name](rng, count, dtype, layout)


def build_plan(
    families: dict[str, int],
    dtypes: Sequence[DType],
    layouts: Sequence[Layout],
    seed: int = 0,
) -> list[PlanEntry]:
    """The union of the families for every dtype × layout, deduplicated, with roles assigned."""
    seen: set[Problem] = set()
    out: list[PlanEntry] = []
    for dtype in dtypes:
        for layout in layouts:
            for family, count in families.items():
                for problem in plan_family(family, count, dtype, layout, seed):
                    if problem not in seen:
                        seen.add(problem)
                        role = Role.HELDOUT if is_heldout(problem) else Role.TRAIN
                        out.append(PlanEntry(problem, family, role))
    return out


def load_plan_file(path: str | Path) -> list[PlanEntry]:
    """Read a JSON plan: a list of {m, n, k, dtype, layout[, family][, role]} objects."""
    path = Path(path)
    try:
        items = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"plan file {path}: {exc}") from exc
    if not isinstance(items, list):
        raise ValueError(f"plan file {path} must hold a JSON list of problems")
    out: list[PlanEntry] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"plan file {path}: entry {i} must be an object, got {item!r}")
        try:
            problem = Problem(item["m"], item["n"], item["k"], item.get("dtype", "bf16"), item.get("layout", "nt"))
        except KeyError as exc:
            raise ValueError(f"plan file {path}: entry {i} lacks {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"plan file {path}: entry {i}: {exc}") from None
        only = item.get("only", {})
        if not isinstance(only, dict) or not all(isinstance(v, list) for v in only.values()):
            raise ValueError(f"plan file {path}: entry {i}: 'only' must map config fields to lists of values")
        if "role" in item:
            try:
                role = Role(item["role"])
            except ValueError:
                msg = f"plan file {path}: entry {i}: role={item['role']!r}; use 'train' or 'heldout'"
                raise ValueError(msg) from None
        else:
            role = Role.TRAIN if only or not is_heldout(problem) else Role.HELDOUT
        try:
            restriction = tuple((f, tuple(v)) for f, v in only.items())
            entry = PlanEntry(problem, str(item.get("family", "file")), role, restriction)
        except ValueError as exc:
            raise ValueError(f"plan file {path}: entry {i}: {exc}") from None
        out.append(entry)
    return out


def describe(entries: Iterable[PlanEntry]) -> dict[str, int]:
    """Counts per family and role, for the summary line."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[f"{e.family}/{e.role.value}"] = counts.get(f"{e.family}/{e.role.value}", 0) + 1
    return counts
