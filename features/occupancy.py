"""Occupancy: how many blocks of a configuration one SM holds at once, and what bounds it.

A block of a tile configuration asks an SM for shared memory (its pipelined A and B panels), for
registers (its slice of the fp32 accumulator plus bookkeeping) and for threads; the SM holds as many
blocks as the scarcest of these allows, up to the hardware's cap on resident blocks. All functions
are pure and vectorised over numpy arrays; the device is a :class:`~tilecost.device.DeviceSpec`.
"""

from __future__ import annotations

import numpy as np

from tilecost.device import DeviceSpec

from .geometry import Values, _f64

__all__ = [
    "OTHER_REGISTERS_PER_THREAD",
    "REGISTER_ALLOCATION_UNIT",
    "RESERVED_SMEM_PER_BLOCK_BYTES",
    "accumulators_per_thread",
    "blocks_per_sm",
    "registers_per_thread_estimate",
    "smem_bytes",
]

# Registers a thread needs besides its accumulators (addresses, loop state, operand fragments): the
# same 40 that tilecost.space uses to check that a block fits the register file.
OTHER_REGISTERS_PER_THREAD = 40
# Registers are handed to a warp in units of 256, i.e. a thread's count rounds up to a multiple of 8
# (CUDA occupancy calculator, compute capability 9.0: 168 registers take 168, 170 take 176).
REGISTER_ALLOCATION_UNIT = 8
# CUDA keeps 1 KB of each SM's shared memory per resident block for itself on compute capability 8.0
# and later (CUDA C Programming Guide); it is why an H200 SM has 228 KB but a block may use 227 KB.
RESERVED_SMEM_PER_BLOCK_BYTES = 1024


def smem_bytes(
    block_m: Values,
    block_n: Values,
    block_k: Values,
    num_stages: Values,
    is_tma: Values,
    split_k: Values,
    in_bytes: Values,
    out_bytes: Values,
) -> Values:
    """Shared memory one block needs, in bytes; vectorised :func:`tilecost.space.smem_bytes`.

    ``num_stages · (BM·BK + BK·BN) · in_bytes`` for the pipelined panels, plus ``BM·BN · out_bytes``
    for the output tile the descriptor kernel stages for its TMA store (when it stores C directly,
    i.e. SPLIT_K = 1). Checked by hand: 128×128×64 bf16, 3 stages, pointer kernel:
    3 · (128·64 + 64·128) · 2 = 98,304; the TMA kernel adds 128·128·2 = 32,768. Checked equal to
    the scalar function over every configuration of the H200 space for every dtype.
    """
    block_m = _f64(block_m)
    panels = _f64(num_stages) * (block_m + block_n) * block_k * in_bytes
    stores_c = np.logical_and(is_tma, np.equal(split_k, 1))
    return panels + block_m * block_n * out_bytes * stores_c


def accumulators_per_thread(block_m: Values, block_n: Values, num_warps: Values) -> Values:
    """fp32 accumulator registers per thread: ``BM·BN / (32 · num_warps)``.

    Checked by hand: 128×256 on 8 warps is 32,768 / 256 = 128.
    """
    return _f64(block_m) * block_n / (32.0 * _f64(num_warps))


def registers_per_thread_estimate(accumulators_per_thread: Values, device: DeviceSpec) -> Values:
    """Estimated registers per thread: accumulators + 40, capped at the device's per-thread maximum.

    Takes :func:`accumulators_per_thread`. A compiled kernel reports its real count (``n_regs``);
    pass that to :func:`blocks_per_sm` instead when it is known, on both the training and the
    prediction side. Checked by hand: 128×128 on 4 warps is 16,384/128 + 40 = 168.
    """
    return np.minimum(_f64(accumulators_per_thread) + OTHER_REGISTERS_PER_THREAD, device.max_registers_per_thread)


def blocks_per_sm(smem_bytes: Values, registers_per_thread: Values, num_warps: Values, device: DeviceSpec) -> Values:
    """Resident blocks per SM: the minimum over four limits, at least 1.

    * shared memory: ``⌊smem_per_sm / (smem_bytes + 1024)⌋`` (1 KB reserved per block);
    * registers: ``⌊registers_per_sm / (⌈regs/8⌉·8 · 32 · num_warps)⌋``;
    * threads: ``⌊max_threads_per_sm / (32 · num_warps)⌋``;
    * the device's ``max_blocks_per_sm``.

    Dimensionless. A block that fits nowhere (which the candidate space excludes) counts as 1 so
    that waves stay finite. Checked by hand on the H200, 128×128×64 bf16, 3 stages, 4 warps:
    233,472 // 99,328 = 2 by shared memory, 65,536 // (168·128) = 3 by registers, 2048 // 128 = 16 by
    threads, so 2.
    """
    threads = 32.0 * _f64(num_warps)
    by_smem = np.floor(device.smem_per_sm_bytes / (_f64(smem_bytes) + RESERVED_SMEM_PER_BLOCK_BYTES))
    registers = np.ceil(_f64(registers_per_thread) / REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    by_registers = np.floor(device.registers_per_sm / (registers * threads))
    by_threads = np.floor(device.max_threads_per_sm / threads)
    limit = np.minimum(np.minimum(by_smem, by_registers), np.minimum(by_threads, device.max_blocks_per_sm))
    return np.maximum(limit, 1.0)
