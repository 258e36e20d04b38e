"""``matmul(a, b, config) -> c``: the one launcher in front of the kernel family (imports torch).

The layout is read off B's strides, as torch does for ``x @ w.T``:

* ``nn``: ``b`` is a row-major K×N tensor (strides ``(N, 1)``);
* ``nt``: ``b`` is the transpose of a row-major N×K tensor, ``w.T`` (strides ``(1, K)``).

A is row-major M×K. C is allocated row-major M×N in the problem's output dtype (fp8 products are
written as bf16). :func:`bind` does the checking and allocation once and returns a zero-argument
callable that only launches, which is what the timer calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilecost.config import KernelVariant, TileConfig
from tilecost.errors import UnsupportedError
from tilecost.problem import DType, Layout, Problem
from tilecost.space import MAX_OPERAND_ELEMENTS, tma_aligned

REDUCE_BLOCK = 1024  # elements per block of the split-K reduction

if TYPE_CHECKING:
    import torch

__all__ = ["BoundMatmul", "KernelInfo", "bind", "matmul", "problem_of", "torch_dtype", "torch_out_dtype"]


def torch_dtype(dtype: DType) -> torch.dtype:
    """The torch input dtype of a tilecost dtype."""
    import torch

    return {
        DType.FP16: torch.float16,
        DType.BF16: torch.bfloat16,
        DType.FP32: torch.float32,
        DType.FP8: torch.float8_e4m3fn,
    }[dtype]


def torch_out_dtype(dtype: DType) -> torch.dtype:
    """The torch dtype C is written in: the input dtype, except bf16 for fp8 products."""
    import torch

    return torch.bfloat16 if dtype is DType.FP8 else torch_dtype(dtype)


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


@dataclass(frozen=True, slots=True)
class KernelInfo:
    """What the compiler reports for the main kernel of one configuration."""

    registers: int | None  # per thread (None under Triton's interpreter)
    spills: int | None  # registers spilled to local memory, per thread
    smem_bytes: int | None  # shared memory per block


class BoundMatmul:
    """``a @ b`` bound to one configuration: operands checked and outputs allocated once.

    Calling it launches the kernel (and the split-K reduction) and returns C; :meth:`compile`
    compiles (or loads from Triton's cache) without launching and reports registers, spills and
    shared memory.
    """

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        config: TileConfig,
        out: torch.Tensor | None = None,
        workspace: torch.Tensor | None = None,
    ):
        import torch
        import triton

        from tilecost.collect.kernels import kernel_for, splitk_reduce_kernel

        problem = problem_of(a, b)
        m, n, k = problem.m, problem.n, problem.k
        out_dtype = torch_out_dtype(problem.dtype)
        if out is None:
            out = torch.empty((m, n), dtype=out_dtype, device=a.device)
        elif tuple(out.shape) != (m, n) or out.dtype != out_dtype or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous {m}×{n} {out_dtype} tensor, got {tuple(out.shape)} {out.dtype}")
        largest = max(m * k, k * n, m * n * config.split_k)
        if largest > MAX_OPERAND_ELEMENTS:  # int32 offsets inside the kernels, the split-K workspace's too
            raise UnsupportedError(f"{problem}: an operand or workspace of {largest} elements exceeds 2**31 - 1")
        if config.variant is KernelVariant.TMA and not tma_aligned(problem):
            raise UnsupportedError(f"{problem}: tensor descriptors need 16-byte aligned row strides ({config.key})")

        self.problem = problem
        self.config = config
        self.out = out
        split = config.split_k
        if split == 1:
            self._ws = out
        elif workspace is None:
            self._ws = torch.empty((split, m, n), dtype=torch.float32, device=a.device)
        elif workspace.dtype != torch.float32 or workspace.numel() < split * m * n or not workspace.is_contiguous():
            raise ValueError(f"workspace must be a contiguous float32 tensor of at least {split * m * n} elements")
        else:
            self._ws = workspace.view(-1)[: split * m * n].view(split, m, n)
        self._kernel = kernel_for(config.variant)
        self._grid = (triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n), split)
        self._meta: dict[str, object] = dict(
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
            b_stored = b.T if b_is_nk else b  # the row-major tensor B is stored as
            b_block = [config.block_n, config.block_k] if b_is_nk else [config.block_k, config.block_n]
            self._args: tuple[object, ...] = (
                TensorDescriptor.from_tensor(a, [config.block_m, config.block_k]),
                TensorDescriptor.from_tensor(b_stored, b_block),
                TensorDescriptor.from_tensor(out, [config.block_m, config.block_n]),
                self._ws, m, n, k,
            )  # fmt: skip
            self._meta["B_IS_NK"] = b_is_nk
        else:
            self._args = (
                a, b, out, self._ws, m, n, k,
                a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
            )  # fmt: skip
        self._reduce = splitk_reduce_kernel[(triton.cdiv(m * n, REDUCE_BLOCK),)]

    def __call__(self) -> torch.Tensor:
        self._kernel[self._grid](*self._args, **self._meta)
        split = self.config.split_k
        if split > 1:
            self._reduce(
                self._ws, self.out, self.problem.m * self.problem.n, SPLIT_K=split, BLOCK=REDUCE_BLOCK, num_warps=4
            )
        return self.out

    def compile(self) -> KernelInfo:
        """Compile the main kernel (or load it from the cache) without launching it.

        Raises Triton's ``OutOfResources`` when the kernel needs more shared memory or threads than
        the device has, and its ``CompilationError`` family when the compiler refuses it.
        """
        compiled = self._kernel.warmup(*self._args, grid=self._grid, **self._meta)
        if compiled is None:  # Triton's interpreter: nothing is compiled, nothing to report
            return KernelInfo(None, None, None)
        compiled._init_handles()
        return KernelInfo(int(compiled.n_regs), int(compiled.n_spills), int(compiled.metadata.shared))


def bind(
    a: torch.Tensor,
    b: torch.Tensor,
    config: TileConfig,
    out: torch.Tensor | None = None,
    workspace: torch.Tensor | None = None,
) -> BoundMatmul:
    """Check the operands once and return a callable that launches ``a @ b`` with ``config``.

    Raises ``ValueError``/``TypeError`` for malformed operands and ``UnsupportedError`` for a
    configuration this problem cannot use (a descriptor kernel on unaligned strides, a problem too
    large for 32-bit offsets). ``out`` and the split-K ``workspace`` may be shared between bound
    configurations of one problem that never run at the same time (the sweep does).
    """
    return BoundMatmul(a, b, config, out, workspace)


def matmul(a: torch.Tensor, b: torch.Tensor, config: TileConfig, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` computed by the kernel family with ``config``; see the module docstring for layouts."""
    return bind(a, b, config, out)()
