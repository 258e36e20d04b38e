"""The Triton matmul kernels of tilecost's kernel family (the GPU edge: imports triton).

Two kernels compute ``C[M, N] = A[M, K] @ B[K, N]`` with an fp32 accumulator, one block per
``BLOCK_M × BLOCK_N`` output tile, stepping through K in ``BLOCK_K`` slices:

* ``matmul_ptr_kernel`` loads its panels through pointers. It runs any shape and any row stride;
  when N, K and the strides are multiples of 16 Triton proves the alignment and issues 16-byte loads,
  otherwise it falls back to narrower ones (FACTS.md: 4-7× slower on such shapes).
* ``matmul_tma_kernel`` loads through Hopper tensor descriptors (the bulk tensor copy engine),
  which zero-fill out-of-range rows and columns in hardware and so need no masks; it needs every
  row stride to be a multiple of 16 bytes (``tilecost.space.tma_aligned``).

Both order their tiles in groups of ``GROUP_M`` rows of tiles (the Triton tutorial's swizzle: with
GROUP_M=8 the blocks resident at one time read 8 panels of A and a few of B instead of 1 of A and
all of B, so more of the panels they share is still in L2) and split K into ``SPLIT_K`` parts along
the second grid axis.

Split-K reduction. With ``SPLIT_K = S > 1`` part ``s`` writes its fp32 partial tile into slice ``s``
of a contiguous workspace ``W[S, M, N]``, and :func:`splitk_reduce_kernel` sums the S slices in a
fixed order and casts to the output dtype. That is deterministic (no atomics, so the same inputs
give the same bits) at the cost of ``2·S·M·N·4`` extra bytes of HBM traffic (the partials written,
then read) and a second launch of a few microseconds. Split-K is therefore only in the space for
grids too small to fill the GPU, where M·N is small and that traffic is cheap against the K loop.

``M`` (and, for the descriptor kernel, ``N`` and ``K``) are not specialised by Triton: M only
bounds masks, so one compiled kernel serves every M (the token count a compiler sees vary most),
and the descriptor kernel's shapes live in the descriptors. N and K of the pointer kernel stay
specialised because their divisibility by 16 is what lets Triton vectorise the loads.
"""

from __future__ import annotations

import triton
import triton.language as tl

from tilecost.config import KernelVariant, TileConfig

__all__ = [
    "matmul_ptr_kernel",
    "matmul_tma_kernel",
    "splitk_reduce_kernel",
    "to_triton_config",
]


@triton.jit
def _tile_coords(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped ('swizzled') tile order: GROUP_M rows of tiles are walked column by column."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _k_tile_range(pid_k, K, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    """The K tiles [lo, hi) that split ``pid_k`` reduces; the last parts may be shorter or empty."""
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    lo = pid_k * per_split
    hi = tl.minimum(lo + per_split, k_tiles)
    return lo, hi


@triton.jit
def _store_partial(ws_ptr, acc, pid_m, pid_n, pid_k, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write an fp32 partial tile into slice ``pid_k`` of the contiguous workspace W[S, M, N]."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = ws_ptr + pid_k * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(ptrs, acc, mask=mask)


@triton.jit(do_not_specialize=["M"])
def matmul_ptr_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coords(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    lo, hi = _k_tile_range(pid_k, K, BLOCK_K, SPLIT_K)

    # Rows and columns past the edge wrap around (``% M``) so that the loads need no mask on M or N;
    # the store below masks them out. The hints let Triton vectorise along a contiguous dimension.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + (lo * BLOCK_K + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (lo * BLOCK_K + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(lo, hi):
        k_left = K - kt * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if SPLIT_K == 1:
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        _store_partial(ws_ptr, acc, pid_m, pid_n, pid_k, M, N, BLOCK_M, BLOCK_N)


@triton.jit(do_not_specialize=["M", "N", "K"])
def matmul_tma_kernel(
    a_desc, b_desc, c_desc, ws_ptr,
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, B_IS_NK: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m, pid_n = _tile_coords(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    lo, hi = _k_tile_range(pid_k, K, BLOCK_K, SPLIT_K)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(lo, hi):
        off_k = kt * BLOCK_K
        a = a_desc.load([off_m, off_k])
        if B_IS_NK:  # nt layout: B stored N×K, the tile arrives K-contiguous
            b = b_desc.load([off_n, off_k])
            acc = tl.dot(a, b.T, acc)
        else:
            b = b_desc.load([off_k, off_n])
            acc = tl.dot(a, b, acc)

    if SPLIT_K == 1:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
    else:
        _store_partial(ws_ptr, acc, pid_m, pid_n, pid_k, M, N, BLOCK_M, BLOCK_N)


@triton.jit
def splitk_reduce_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """C.flat[i] = sum over s of W[s].flat[i], in order s = 0..S-1, cast to C's dtype."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def to_triton_config(config: TileConfig) -> triton.Config:
    """The one place a :class:`TileConfig` becomes a ``triton.Config`` (for ``triton.autotune``)."""
    kwargs = {
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "GROUP_M": config.group_m,
        "SPLIT_K": config.split_k,
    }
    return triton.Config(kwargs, num_warps=config.num_warps, num_stages=config.num_stages)


def kernel_for(variant: KernelVariant) -> triton.runtime.JITFunction:
    """The jitted kernel behind a variant."""
    return matmul_tma_kernel if variant is KernelVariant.TMA else matmul_ptr_kernel
