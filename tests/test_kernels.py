"""The kernel family computes the right product: every variant × layout × dtype on ragged shapes.

On CPU the kernels run under ``TRITON_INTERPRET=1`` (fp16 and fp32 only: bf16 dots are wrong in the
interpreter and fp32 dots there are exact fp32, not tf32). On the H200 (``TILECOST_DEVICE=cuda``) the
same checks run for real for every dtype, plus large shapes. Inputs are random normal (never zeros,
which hide unwritten outputs) and the output is poisoned with NaN before each run, so an element the
kernel fails to write fails the check.

Tolerances are on the relative Frobenius error ‖C − C64‖ / ‖C64‖ against a float64 product of the
same (already rounded) inputs (the collector's ``runner.relative_error``: the denominator is floored
at the product's expected norm, ‖A‖·‖B‖/√K, for tiny outputs whose products cancel), so they measure
the kernel's arithmetic and output rounding only:
fp32 2e-3 on GPU (tf32 operands, 10-bit mantissa: ~3e-4 expected), 1e-5 under the interpreter (exact
fp32); fp16 2e-3 (output rounding 2^-11: ~3e-4 expected); bf16 1e-2 (2^-8: ~2.3e-3 expected); fp8
e4m3 2e-2 (bf16 output, fp32 accumulation).
"""

from __future__ import annotations

import pytest

from tilecost import DType, KernelVariant, Layout, Problem, TileConfig
from tilecost.space import config_space, tma_aligned

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecost.collect import bind, matmul, problem_of  # noqa: E402
from tilecost.collect.launch import torch_dtype, torch_out_dtype  # noqa: E402
from tilecost.collect.runner import TOLERANCE, expected_norm, relative_error  # noqa: E402
from tilecost.errors import UnsupportedError  # noqa: E402

GPU_TOLERANCE = TOLERANCE  # the collector's per-dtype check, derived in this module's docstring
INTERPRETER_TOLERANCE = {DType.FP32: 1e-5, DType.FP16: 2e-3}

# Ragged shapes: dims not multiples of the tile, of 16 or of 8, and M = 1.
RAGGED = [(1, 17, 33), (37, 41, 69), (5, 96, 200)]
# The descriptor kernel needs 16-byte aligned row strides: K and N multiples of 8 (fp16) or 4 (fp32),
# but M and the tile edges are still ragged here.
ALIGNED_RAGGED = [(1, 40, 72), (37, 48, 104)]

PTR_CONFIGS = [
    TileConfig(KernelVariant.PTR, 16, 32, 32, 1, 1, 2, 2),
    TileConfig(KernelVariant.PTR, 32, 16, 32, 8, 1, 2, 3),
    TileConfig(KernelVariant.PTR, 32, 32, 32, 1, 2, 2, 2),
    TileConfig(KernelVariant.PTR, 16, 64, 32, 1, 4, 4, 3),
]
TMA_CONFIGS = [
    TileConfig(KernelVariant.TMA, c.block_m, c.block_n, c.block_k, c.group_m, c.split_k, c.num_warps, c.num_stages)
    for c in PTR_CONFIGS
]


def _operands(m: int, n: int, k: int, dtype: DType, layout: Layout, device: str, seed: int):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(device)
    w = torch.randn(k, n, generator=gen) if layout is Layout.NN else torch.randn(n, k, generator=gen)
    w = w.to(device)
    a, w = a.to(torch_dtype(dtype)), w.to(torch_dtype(dtype))
    b = w if layout is Layout.NN else w.T
    return a, b


def _poisoned_out(m: int, n: int, dtype: DType, device: str):
    return torch.full((m, n), float("nan"), dtype=torch_out_dtype(dtype), device=device)


def _relative_error(c, a, b) -> float:
    return relative_error(c, a.double() @ b.double(), expected_norm(a, b))


def _check(m, n, k, dtype, layout, config, device, tolerance, seed=0):
    a, b = _operands(m, n, k, dtype, layout, device, seed)
    assert problem_of(a, b) == Problem(m, n, k, dtype, layout)
    out = _poisoned_out(m, n, dtype, device)
    c = matmul(a, b, config, out=out)
    assert c.data_ptr() == out.data_ptr()
    assert not torch.isnan(c).any(), f"{config.key} left unwritten (NaN) elements"
    err = _relative_error(c, a, b)
    assert err < tolerance, f"{Problem(m, n, k, dtype, layout)} {config.key}: relative error {err:.2e} >= {tolerance}"


def test_configs_used_here_are_in_the_space():
    space = set(config_space("h200", DType.FP16, Layout.NT))
    assert set(PTR_CONFIGS + TMA_CONFIGS) <= space


@pytest.mark.interpreter
@pytest.mark.parametrize("layout", list(Layout), ids=lambda x: x.value)
@pytest.mark.parametrize("dtype", [DType.FP16, DType.FP32], ids=lambda x: x.value)
@pytest.mark.parametrize("config", PTR_CONFIGS + TMA_CONFIGS, ids=lambda c: c.key)
def test_interpreter_ragged(config, dtype, layout):
    shapes = ALIGNED_RAGGED if config.variant is KernelVariant.TMA else RAGGED + ALIGNED_RAGGED
    for i, (m, n, k) in enumerate(shapes):
        _check(m, n, k, dtype, layout, config, "cpu", INTERPRETER_TOLERANCE[dtype], seed=i)


@pytest.mark.interpreter
def test_interpreter_split_k_more_parts_than_k_steps_still_correct():
    # K=69 with BLOCK_K=32 has 3 K steps; SPLIT_K=4 leaves one part empty, which must write zeros.
    _check(7, 24, 69, DType.FP32, Layout.NN, TileConfig("ptr", 16, 32, 32, 1, 4, 2, 2), "cpu", 1e-5)


@pytest.mark.interpreter
def test_tma_on_unaligned_strides_is_refused_not_crashed():
    a, b = _operands(8, 16, 33, DType.FP16, Layout.NN, "cpu", 0)
    assert not tma_aligned(problem_of(a, b))
    with pytest.raises(UnsupportedError, match="16-byte aligned"):
        bind(a, b, TMA_CONFIGS[0])


def test_bad_operands_raise_clear_errors():
    a = torch.randn(4, 8)
    with pytest.raises(ValueError, match="inner dimensions"):
        problem_of(a, torch.randn(7, 4))
    with pytest.raises(TypeError, match="must match"):
        problem_of(a, torch.randn(8, 4, dtype=torch.float16))
    with pytest.raises(TypeError, match="not supported"):
        problem_of(a.double(), torch.randn(8, 4).double())
    with pytest.raises(ValueError, match="row-major"):
        problem_of(a.T.contiguous().T, torch.randn(8, 4))
    with pytest.raises(ValueError, match="strides"):
        problem_of(a, torch.randn(8, 8)[:, ::2])
    with pytest.raises(ValueError, match="contiguous"):
        bind(a, torch.randn(8, 4), PTR_CONFIGS[0], out=torch.empty(4, 5))


def test_layout_is_read_off_b_strides():
    a = torch.randn(3, 8)
    assert problem_of(a, torch.randn(8, 5)).layout is Layout.NN
    assert problem_of(a, torch.randn(5, 8).T).layout is Layout.NT


# ---------------------------------------------------------------------------------------------- GPU
GPU_SHAPES = RAGGED + ALIGNED_RAGGED + [(1000, 1000, 8192), (16, 7168, 8192), (4096, 4096, 4096), (4000, 3000, 1000)]
GPU_CONFIGS = [
    *PTR_CONFIGS,
    *TMA_CONFIGS,
    TileConfig(KernelVariant.PTR, 128, 128, 64, 8, 1, 4, 4),
    TileConfig(KernelVariant.TMA, 128, 256, 64, 8, 1, 8, 3),
    TileConfig(KernelVariant.TMA, 64, 128, 128, 1, 4, 4, 3),
    TileConfig(KernelVariant.PTR, 64, 64, 128, 1, 8, 4, 2),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", list(Layout), ids=lambda x: x.value)
@pytest.mark.parametrize("dtype", list(DType), ids=lambda x: x.value)
def test_gpu_every_variant_layout_dtype(dtype, layout):
    failures = []
    space = set(config_space("h200", dtype, layout))
    for i, (m, n, k) in enumerate(GPU_SHAPES):
        problem = Problem(m, n, k, dtype, layout)
        for config in GPU_CONFIGS:
            if config.variant is KernelVariant.TMA and not tma_aligned(problem):
                continue
            if config not in space:
                continue
            try:
                _check(m, n, k, dtype, layout, config, "cuda", GPU_TOLERANCE[dtype], seed=i)
            except AssertionError as exc:
                failures.append(str(exc))
    assert not failures, "\n".join(failures)
