"""``matmul(a, b, config) -> c``: the one launcher in front of the kernel family (imports torch).

The layout is read off B's strides, as torch does for ``x @ w.T``:

* ``nn``: ``b`` is a row-major K×N tensor (strides ``(N, 1)``);
* ``nt``: ``b`` is the transpose of a row-major N×K tensor, ``w.T`` (strides ``(1, K)``).

A is row-major M×K. C is allocated row-major M×N in the problem's output dtype (fp8 products are
written as bf16). :func:`bind` does the checking and allocation once and returns a zero-argument
callable that only launches, which is what the timer calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from tilecost.config import KernelVariant, TileConfig
from tilecost.errors import UnsupportedError
from tilecost.problem import DType, Layout, Problem
from tilecost.space import tma_aligned

if TYPE_CHECKING:
    import torch

__all__ = ["bind", "matmul", "problem_of", "torch_dtype"]

# int32 offsets inside the kernels: every operand and the split-K workspace must index below 2**31.
_MAX_ELEMENTS = 2**31 - 1


def torch_dtype(dtype: DType) -> torch.dtype:
    """The torch input dtype of a tilecost dtype."""
    import torch

    return {
        DType.FP16: torch.float16,
        DType.BF16: torch.bfloat16,
        DType.FP32: torch.float32,
        DType.FP8: torch.float8_e4m3fn,
    }[dtype]


def _tilecost_dtype(dtype: torch.dtype) -> DType:
    for candidate in DType:
        if torch_dtype(candidate) == dtype:
            return candidate
    allowed = ", ".join(str(torch_dtype(d)) for d in DType)
    raise TypeError(f"a.dtype={dtype} is not supported; use one of {allowed}")


def problem_of(a: torch.Tensor, b: torch.Tensor) -> Problem:
    """The :class:`Problem` that ``a @ b`` poses, with the layout read off B's strides."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, got a.shape={tuple(a.shape)}, b.shape={tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise TypeError(f"a.dtype={a.dtype} and b.dtype={b.dtype} must match")
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}; both must be on one device")
    m, k = a.shape
    k_b, n = b.shape
    if k != k_b:
        raise ValueError(f"inner dimensions differ: a.shape={tuple(a.shape)}, b.shape={tuple(b.shape)}")
    if a.stride(1) != 1 or (m > 1 and a.stride(0) != k):
        raise ValueError(f"a must be row-major contiguous M×K, got strides {a.stride()}")
    if b.stride(1) == 1 and (k == 1 or b.stride(0) == n):
        layout = Layout.NN
    elif b.stride(0) == 1 and (n == 1 or b.stride(1) == k):
        layout = Layout.NT
    else:
        raise ValueError(
            f"b must be row-major K×N (nn) or the transpose of a row-major N×K tensor (nt), "
            f"got strides {b.stride()} for shape {tuple(b.shape)}"
        )
    return Problem(m, n, k, _tilecost_dtype(a.dtype), layout)


def bind(a: torch.Tensor, b: torch.Tensor, config: TileConfig, out: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    """Check the operands once and return a callable that launches ``a @ b`` with ``config``.

    Raises ``ValueError``/``TypeError`` for malformed operands and ``UnsupportedError`` for a
    configuration this problem cannot use (a descriptor kernel on unaligned strides, a problem too
    large for 32-bit offsets).
    """
    import torch
    import triton

    from tilecost.collect.kernels import REDUCE_BLOCK, matmul_ptr_kernel, matmul_tma_kernel, splitk_reduce_kernel

    problem = problem_of(a, b)
    m, n, k = problem.m, problem.n, problem.k
    out_dtype = torch.bfloat16 if problem.dtype is DType.FP8 else a.dtype
    if out is None:
        out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    elif out.shape != (m, n) or out.dtype != out_dtype or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {m}×{n} {out_dtype} tensor, got {tuple(out.shape)} {out.dtype}")
    largest = max(m * k, k * n, m * n * max(1, config.split_k))
    if largest > _MAX_ELEMENTS:
        raise UnsupportedError(f"{problem}: an operand or workspace of {largest} elements exceeds 2**31 - 1")
    if config.variant is KernelVariant.TMA and not tma_aligned(problem):
        raise UnsupportedError(f"{problem}: tensor descriptors need 16-byte aligned row strides ({config.key})")

    split = config.split_k
    ws = torch.empty((split, m, n), dtype=torch.float32, device=a.device) if split > 1 else out
    grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), split)
    meta = dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        GROUP_M=config.group_m,
        SPLIT_K=split,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )

    if config.variant is KernelVariant.TMA:
        from triton.tools.tensor_descriptor import TensorDescriptor

        b_is_nk = problem.layout is Layout.NT
        b_mat = b.T if b_is_nk else b  # the row-major tensor B is stored as
        a_desc = TensorDescriptor.from_tensor(a, [config.block_m, config.block_k])
        b_block = [config.block_n, config.block_k] if b_is_nk else [config.block_k, config.block_n]
        b_desc = TensorDescriptor.from_tensor(b_mat, b_block)
        c_desc = TensorDescriptor.from_tensor(out, [config.block_m, config.block_n])

        def launch_main() -> None:
            matmul_tma_kernel[grid](a_desc, b_desc, c_desc, ws, m, n, k, B_IS_NK=b_is_nk, **meta)

    else:

        def launch_main() -> None:
            matmul_ptr_kernel[grid](
                a, b, out, ws, m, n, k,
                a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
                **meta,
            )  # fmt: skip

    if split == 1:

        def run() -> torch.Tensor:
            launch_main()
            return out

    else:
        reduce_grid = (triton.cdiv(m * n, REDUCE_BLOCK),)

        def run() -> torch.Tensor:
            launch_main()
            splitk_reduce_kernel[reduce_grid](ws, out, m * n, SPLIT_K=split, BLOCK=REDUCE_BLOCK, num_warps=4)
            return out

    return run


def matmul(a: torch.Tensor, b: torch.Tensor, config: TileConfig, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` computed by the kernel family with ``config``; see the module docstring for layouts."""
    return bind(a, b, config, out)()
