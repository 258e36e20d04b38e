"""Hybrid use with Triton: the model prunes, ``triton.autotune`` measures only its top k.

Triton's autotuner times every configuration it is given (seconds per new shape, FACTS.md: ~110 ms
a config with ``do_bench``'s defaults). :func:`prune_configs_by` builds the dict its
``prune_configs_by=`` argument takes from a :class:`~tilecost.predict.Predictor`, so that only the
model's ``top_k`` fastest configurations are timed:

* ``{"perf_model": f, "top_k": k}``: Triton calls ``f(**kernel args, **config kwargs)`` per config
  and keeps the k of least predicted time. ``f`` reads M, N, K and the config's meta-parameters,
  scores every candidate of the problem once (cached per problem) and returns the predicted µs,
  ``inf`` for a configuration that is not a candidate of the problem (a tile wider than the problem,
  a split-K with more parts than K steps);
* ``{"early_config_prune": g}``: the same ranking in one call, returning the top k configs.

:func:`autotuned_matmul` is the example kernel: tilecost's pointer kernel under ``triton.autotune``
with this pruning (tests/test_predict_autotune.py runs it under the interpreter with an injected
``do_bench``). Only this module's functions import triton (through tilecost.collect.kernels), and
only when called.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from tilecost.config import KernelVariant, TileConfig
from tilecost.problem import DType, Layout, Problem

from .predictor import Predictor

__all__ = ["autotuned_matmul", "prune_configs_by"]

_CACHED_PROBLEMS = 64


def _config_of(variant: KernelVariant, values: dict[str, Any]) -> TileConfig | None:
    """The TileConfig a Triton config's meta-parameters spell, or None if they spell none."""
    try:
        return TileConfig(
            variant, values["BLOCK_M"], values["BLOCK_N"], values["BLOCK_K"], values.get("GROUP_M", 1),
            values.get("SPLIT_K", 1), values.get("num_warps", 4), values.get("num_stages", 3),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None


def prune_configs_by(
    predictor: Predictor,
    *,
    top_k: int = 5,
    dtype: DType | str = DType.BF16,
    layout: Layout | str = Layout.NT,
    variant: KernelVariant | str = KernelVariant.PTR,
    extents: tuple[str, str, str] = ("M", "N", "K"),
    style: str = "perf_model",
) -> dict[str, Any]:
    """The ``prune_configs_by`` dict for ``triton.autotune`` (``style`` "perf_model" or "early_config_prune").

    ``dtype``, ``layout`` and ``variant`` describe the kernel being tuned; ``extents`` name its M, N,
    K arguments (they should be in the autotuner's ``key``).
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k={top_k!r} is not allowed; use an int >= 1")
    if style not in ("perf_model", "early_config_prune"):
        raise ValueError(f"style={style!r} is not allowed; use 'perf_model' or 'early_config_prune'")
    dtype, layout, variant = DType.parse(dtype), Layout.parse(layout), KernelVariant.parse(variant)
    cache: OrderedDict[Problem, dict[TileConfig, float]] = OrderedDict()

    def times_of(values: dict[str, Any]) -> dict[TileConfig, float]:
        problem = Problem(values[extents[0]], values[extents[1]], values[extents[2]], dtype, layout)
        times = cache.get(problem)
        if times is None:
            times = cache[problem] = predictor.predicted_times_us(problem)
            if len(cache) > _CACHED_PROBLEMS:
                cache.popitem(last=False)
        return times

    def perf_model(**values: Any) -> float:
        config = _config_of(variant, values)
        return math.inf if config is None else times_of(values).get(config, math.inf)

    if style == "perf_model":
        return {"perf_model": perf_model, "top_k": top_k}

    def early_config_prune(configs: Sequence[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        times = times_of({**named_args, **kwargs})

        def predicted(config: Any) -> float:
            tile = _config_of(variant, config.all_kwargs())
            return math.inf if tile is None else times.get(tile, math.inf)

        return sorted(configs, key=predicted)[:top_k]

    return {"early_config_prune": early_config_prune}


def autotuned_matmul(
    predictor: Predictor,
    *,
    top_k: int = 5,
    dtype: DType | str = DType.BF16,
    layout: Layout | str = Layout.NT,
    configs: Sequence[TileConfig] | None = None,
    do_bench: Callable[..., Any] | None = None,
) -> Callable[[Any, Any], Any]:
    """The example: ``matmul(a, b) -> c`` through tilecost's pointer kernel under ``triton.autotune``,
    pruned to the model's ``top_k``. ``configs`` default to the pointer-kernel candidates of the space
    without split-K (the example leaves out the split-K reduction launch); ``do_bench`` is passed to
    ``triton.autotune`` (tests inject one; on a GPU leave it None for Triton's own timer)."""
    import torch
    import triton

    from tilecost.collect.kernels import matmul_ptr_kernel, to_triton_config
    from tilecost.space import config_space

    dtype, layout = DType.parse(dtype), Layout.parse(layout)
    if configs is None:
        space = config_space(predictor.device, dtype, layout)
        configs = [c for c in space if c.variant is KernelVariant.PTR and c.split_k == 1]
    if any(c.variant is not KernelVariant.PTR or c.split_k != 1 for c in configs):
        raise ValueError("the example kernel runs pointer-kernel configurations without split-K only")
    kernel = triton.autotune(
        configs=[to_triton_config(c) for c in configs],
        key=["M", "N", "K"],
        prune_configs_by=prune_configs_by(predictor, top_k=top_k, dtype=dtype, layout=layout),
        do_bench=do_bench,
    )(matmul_ptr_kernel)

    def matmul(a: Any, b: Any) -> Any:
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), dtype=a.dtype, device=a.device)

        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), meta["SPLIT_K"])

        kernel[grid](a, b, c, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return c

    matmul.autotuner = kernel  # type: ignore[attr-defined]
    return matmul
