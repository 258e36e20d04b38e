"""The candidate space: which tile configurations exist per device and dtype, and per problem.

Feasibility is checked against hand-computed shared-memory and accumulator figures (the arithmetic is
in the comments), on both sides of each limit; the space is checked for size, order and the axes the
issue asks for; the per-problem rules (TMA alignment, tile clipping, split-K, GROUP_M) are checked on
hand-picked shapes and, as properties, on random ones.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecost import DType, KernelVariant, Layout, Problem, TileConfig, config_space, load_device, problem_candidates
from tilecost.space import (
    MAX_ACC_PER_THREAD,
    MIN_ACC_PER_THREAD,
    accumulators_per_thread,
    hardware_infeasibility,
    problem_infeasibility,
    smem_bytes,
)

H200 = load_device("h200")
H200_SMEM_PER_BLOCK = 232_448
ALL_SPACES = [(dtype, layout) for dtype in DType for layout in Layout]

cfg = TileConfig.from_key


def _space_keys(dtype: DType | str = "bf16", layout: Layout | str = "nt") -> set[str]:
    return {c.key for c in config_space("h200", dtype, layout)}


def _candidate_keys(m: int, n: int, k: int, dtype: str = "bf16", layout: str = "nt") -> set[str]:
    return {c.key for c in problem_candidates(Problem(m, n, k, dtype, layout))}


def _values(configs: tuple[TileConfig, ...], field: str) -> list[object]:
    return sorted({getattr(c, field) for c in configs}, key=str)


# --- shared memory --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "dtype", "expected"),
    [
        # 3 * (128*64 + 64*128) * 2 = 3 * 16,384 * 2
        ("ptr-128x128x64-g1-s1-w4-p3", DType.BF16, 98_304),
        # the same panels + the 128*128 * 2 = 32,768-byte output tile the TMA store stages
        ("tma-128x128x64-g1-s1-w4-p3", DType.BF16, 131_072),
        # split-K partial sums are not staged through shared memory: panels only
        ("tma-128x128x64-g1-s2-w4-p3", DType.BF16, 98_304),
        # 4 * (64*32 + 32*64) * 4 = 4 * 4,096 * 4
        ("ptr-64x64x32-g1-s1-w4-p4", DType.FP32, 65_536),
        # fp8: 3 * (128*128 + 128*256) * 1 = 147,456 panels + 128*256 * 2 (bf16 out) = 65,536
        ("tma-128x256x128-g1-s1-w8-p3", DType.FP8, 212_992),
        # fp16 is two bytes like bf16: 2 * (16*32 + 32*32) * 2 = 2 * 1,536 * 2
        ("ptr-16x32x32-g1-s1-w2-p2", DType.FP16, 6_144),
    ],
)
def test_smem_bytes_by_hand(key: str, dtype: DType, expected: int) -> None:
    assert smem_bytes(cfg(key), dtype) == expected


def test_a_config_just_under_the_h200_limit_is_in_the_space() -> None:
    # 3 * (128*128 + 128*128) * 2 = 196,608 + 128*128 * 2 = 32,768 -> 229,376 <= 232,448
    config = cfg("tma-128x128x128-g1-s1-w8-p3")

    assert smem_bytes(config, DType.BF16) == 229_376
    assert hardware_infeasibility(config, DType.BF16, H200) is None
    assert config.key in _space_keys("bf16")


def test_a_config_just_over_the_h200_limit_is_not() -> None:
    # 5 * (256*64 + 64*64) * 2 = 204,800 + 256*64 * 2 = 32,768 -> 237,568 > 232,448
    config = cfg("tma-256x64x64-g1-s1-w8-p5")

    assert smem_bytes(config, DType.BF16) == 237_568
    reason = hardware_infeasibility(config, DType.BF16, H200)
    assert reason == "needs 237568 bytes of shared memory, device allows 232448 per block"
    assert config.key not in _space_keys("bf16")
    # one stage fewer: 4 * 20,480 * 2 = 163,840 + 32,768 = 196,608 fits
    assert "tma-256x64x64-g1-s1-w8-p4" in _space_keys("bf16")


def test_the_limit_is_inclusive_and_comes_from_the_device() -> None:
    config = cfg("ptr-128x128x64-g1-s1-w4-p3")  # 98,304 bytes, as above

    exactly = dataclasses.replace(H200, smem_per_block_bytes=98_304)
    one_short = dataclasses.replace(H200, smem_per_block_bytes=98_303)

    assert hardware_infeasibility(config, DType.BF16, exactly) is None
    assert "needs 98304 bytes" in str(hardware_infeasibility(config, DType.BF16, one_short))


def test_the_tma_output_tile_decides_feasibility_only_without_split_k() -> None:
    # fp32 panels: 3 * (128*64 + 64*128) * 4 = 196,608; output tile 128*128 * 4 = 65,536
    fp32 = _space_keys("fp32")

    assert smem_bytes(cfg("tma-128x128x64-g1-s1-w8-p3"), DType.FP32) == 262_144
    assert "tma-128x128x64-g1-s1-w8-p3" not in fp32  # 262,144 > 232,448
    assert "tma-128x128x64-g1-s2-w8-p3" in fp32  # 196,608
    assert "ptr-128x128x64-g1-s1-w8-p3" in fp32  # 196,608


def test_a_smaller_device_gets_a_subset_of_the_space() -> None:
    # 99 KiB per block, as on an A100-class part
    small = dataclasses.replace(H200, device_class="small", smem_per_block_bytes=101_376)
    small_space = config_space(small, "bf16", "nt")

    assert set(small_space) < set(config_space("h200", "bf16", "nt"))
    assert max(smem_bytes(c, DType.BF16) for c in small_space) <= 101_376


# --- accumulators per thread ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected", "feasible"),
    [
        ("ptr-128x256x64-g1-s1-w4-p3", 256, False),  # 128*256 / (32*4) = 256 > 128: spills
        ("ptr-128x256x64-g1-s1-w8-p3", 128, True),  # 128*256 / (32*8) = 128, the ceiling
        ("ptr-256x256x32-g1-s1-w8-p2", 256, False),  # 256*256 / 256: too many even at 8 warps
        ("ptr-16x32x32-g1-s1-w2-p2", 8, True),  # 16*32 / (32*2) = 8, the floor
        ("ptr-16x32x32-g1-s1-w4-p2", 4, False),  # 16*32 / (32*4) = 4 < 8: idle threads
        ("ptr-16x16x32-g1-s1-w2-p2", 4, True),  # 16*16 / (32*2) = 4 < 8, but 2 warps is the fewest on offer
        ("ptr-16x32x32-g1-s1-w4-p2", 4, False),  # 16*32 / (32*4) = 4 < 8 with fewer warps available
    ],
)
def test_accumulators_per_thread_bounds(key: str, expected: int, feasible: bool) -> None:
    config = cfg(key)

    assert (MIN_ACC_PER_THREAD, MAX_ACC_PER_THREAD) == (8, 128)
    assert accumulators_per_thread(config) == expected
    assert (hardware_infeasibility(config, DType.BF16, H200) is None) is feasible
    assert (key in _space_keys("bf16")) is feasible


def test_a_spilling_config_is_refused_with_the_count() -> None:
    reason = hardware_infeasibility(cfg("ptr-128x256x64-g1-s1-w4-p3"), DType.BF16, H200)

    assert reason == "256 accumulators per thread exceed 128 (register spills)"


def test_split_k_is_only_for_tiles_up_to_128_wide() -> None:
    # 256*64 / 256 = 64 accumulators and 2 * (256*32 + 32*64) * 2 = 40,960 bytes: feasible but for the split
    assert hardware_infeasibility(cfg("ptr-256x64x32-g1-s1-w8-p2"), DType.BF16, H200) is None
    assert "SPLIT_K" in str(hardware_infeasibility(cfg("ptr-256x64x32-g1-s2-w8-p2"), DType.BF16, H200))
    assert all(max(c.block_m, c.block_n) <= 128 for c in config_space("h200", "bf16") if c.split_k > 1)


def test_block_k_256_is_only_in_the_fp8_space() -> None:
    # 2 * (64*256 + 256*64) * 1 = 65,536 bytes of fp8; 64*64 / 128 = 32 accumulators
    config = cfg("ptr-64x64x256-g1-s1-w4-p2")

    assert hardware_infeasibility(config, DType.FP8, H200) is None
    assert hardware_infeasibility(config, DType.BF16, H200) == "BLOCK_K=256 is only in the fp8 space"


@pytest.mark.parametrize(("dtype", "layout"), ALL_SPACES, ids=lambda v: v.value)
def test_every_config_in_the_space_is_within_every_limit(dtype: DType, layout: Layout) -> None:
    for c in config_space("h200", dtype, layout):
        panels = c.num_stages * (c.block_m * c.block_k + c.block_k * c.block_n) * dtype.in_bytes
        epilogue = c.block_m * c.block_n * dtype.out_bytes if c.variant is KernelVariant.TMA and c.split_k == 1 else 0
        assert panels + epilogue <= H200_SMEM_PER_BLOCK, c.key
        acc = c.block_m * c.block_n / (32 * c.num_warps)
        assert acc <= 128, c.key
        assert acc >= 8 or c.num_warps == 2, c.key


# --- the space ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "layout"), ALL_SPACES, ids=lambda v: v.value)
def test_the_space_holds_at_least_1000_configs(dtype: DType, layout: Layout) -> None:
    assert len(config_space("h200", dtype, layout)) >= 1000


def test_the_bf16_space_spans_every_axis_the_issue_requires() -> None:
    space = config_space("h200", "bf16", "nt")

    assert _values(space, "variant") == [KernelVariant.PTR, KernelVariant.TMA]
    assert sorted({c.block_m for c in space}) == [16, 32, 64, 128, 256]
    assert sorted({c.block_n for c in space}) == [16, 32, 64, 128, 256]
    assert sorted({c.block_k for c in space}) == [32, 64, 128]
    assert sorted({c.num_warps for c in space}) == [2, 4, 8]
    assert sorted({c.num_stages for c in space}) == [2, 3, 4, 5]
    assert sorted({c.group_m for c in space}) == [1, 8]
    assert sorted({c.split_k for c in space}) == [1, 2, 4, 8, 16]


def test_only_fp8_adds_block_k_256() -> None:
    assert sorted({c.block_k for c in config_space("h200", "fp8e4m3", "nt")}) == [32, 64, 128, 256]
    for dtype in ("fp16", "bf16", "fp32"):
        assert sorted({c.block_k for c in config_space("h200", dtype, "nn")}) == [32, 64, 128]


def test_group_m_8_is_paired_only_with_split_k_1() -> None:
    assert all(c.split_k == 1 for c in config_space("h200", "bf16") if c.group_m == 8)


def test_the_space_is_in_axis_order() -> None:
    space = config_space("h200", "bf16", "nt")
    variant_order = list(KernelVariant)

    def axis_order(c: TileConfig) -> tuple[int, ...]:
        return (variant_order.index(c.variant), c.block_m, c.block_n, c.block_k, c.split_k, c.group_m, c.num_warps,
                c.num_stages)  # fmt: skip

    assert list(space) == sorted(space, key=axis_order)
    assert space[0].key == "ptr-16x16x32-g1-s1-w2-p2"


def test_the_space_is_the_same_on_every_call_and_for_every_spelling() -> None:
    assert config_space("h200", "bf16", "nt") == config_space(H200, DType.BF16, Layout.NT)
    assert config_space() == config_space("h200", "bf16", "nt")


def test_the_space_does_not_depend_on_the_hash_seed() -> None:
    script = "from tilecost import config_space; print(','.join(c.key for c in config_space('h200', 'fp8e4m3', 'nn')))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)

    assert out.stdout.strip().split(",") == [c.key for c in config_space("h200", "fp8e4m3", "nn")]


def test_bad_space_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"dtype='int8' is not allowed"):
        config_space("h200", "int8")
    with pytest.raises(ValueError, match=r"layout='tn' is not allowed"):
        config_space("h200", "bf16", "tn")
    with pytest.raises(ValueError, match=r"device='b200' is not a known device class"):
        config_space("b200")


# --- per problem: TMA alignment -------------------------------------------------------------------


def _variants(m: int, n: int, k: int, dtype: str, layout: str) -> set[str]:
    return {c.variant.value for c in problem_candidates(Problem(m, n, k, dtype, layout))}


def test_tma_needs_a_16_byte_aligned_k_stride() -> None:
    # bf16 K=1001: A's row is 1001 * 2 = 2,002 bytes, 2,002 mod 16 = 2
    assert _variants(4096, 4096, 1001, "bf16", "nt") == {"ptr"}
    assert _variants(4096, 4096, 1001, "bf16", "nn") == {"ptr"}
    # K=1000: 2,000 = 16 * 125
    assert _variants(4096, 4096, 1000, "bf16", "nt") == {"ptr", "tma"}


def test_tma_needs_a_16_byte_aligned_n_stride_in_both_layouts() -> None:
    # fp32 N=6: C's row is 6 * 4 = 24 bytes (and nn's B row too), 24 mod 16 = 8
    assert _variants(4096, 6, 4096, "fp32", "nn") == {"ptr"}
    assert _variants(4096, 6, 4096, "fp32", "nt") == {"ptr"}
    # fp32 N=8: 32 bytes
    assert _variants(4096, 8, 4096, "fp32", "nn") == {"ptr", "tma"}
    assert _variants(4096, 8, 4096, "fp32", "nt") == {"ptr", "tma"}


def test_tma_alignment_depends_on_the_layout_of_b() -> None:
    # fp8 N=8: nn stores B as K x N, a row of 8 * 1 = 8 bytes; nt stores it as N x K, a row of
    # 4096 * 1 bytes; C is bf16 either way, a row of 8 * 2 = 16 bytes
    assert _variants(4096, 8, 4096, "fp8e4m3", "nn") == {"ptr"}
    assert _variants(4096, 8, 4096, "fp8e4m3", "nt") == {"ptr", "tma"}


def test_m_is_not_a_stride_so_it_never_blocks_tma() -> None:
    assert _variants(1001, 4096, 4096, "bf16", "nt") == {"ptr", "tma"}


# --- per problem: tile clipping -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "block_ms"),
    [(1, [16]), (16, [16]), (17, [16, 32]), (100, [16, 32, 64, 128]), (129, [16, 32, 64, 128, 256])],
)
def test_block_m_stops_at_the_smallest_tile_covering_m(m: int, block_ms: list[int]) -> None:
    assert sorted({c.block_m for c in problem_candidates(Problem(m, 4096, 4096))}) == block_ms


@pytest.mark.parametrize(("n", "block_ns"), [(16, [16]), (33, [16, 32, 64]), (4096, [16, 32, 64, 128, 256])])
def test_block_n_stops_at_the_smallest_tile_covering_n(n: int, block_ns: list[int]) -> None:
    assert sorted({c.block_n for c in problem_candidates(Problem(4096, n, 4096))}) == block_ns


@pytest.mark.parametrize(
    ("k", "dtype", "block_ks"),
    [(1, "bf16", [32]), (32, "bf16", [32]), (33, "bf16", [32, 64]), (200, "bf16", [32, 64, 128]),
     (200, "fp8e4m3", [32, 64, 128, 256]), (128, "fp8e4m3", [32, 64, 128])],
)  # fmt: skip
def test_block_k_stops_at_the_smallest_step_covering_k(k: int, dtype: str, block_ks: list[int]) -> None:
    assert sorted({c.block_k for c in problem_candidates(Problem(128, 128, k, dtype))}) == block_ks


# --- per problem: split-K -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "max_split"),
    [
        (512, {32: 16, 64: 8, 128: 4}),  # 512/32 = 16 K steps, 512/64 = 8, 512/128 = 4
        (300, {32: 8, 64: 4, 128: 2}),  # ceil(300/32) = 10, ceil(300/64) = 5, ceil(300/128) = 3: the axis' 8, 4, 2
        (4096, {32: 16, 64: 16, 128: 16}),  # 32 K steps or more: the axis' 16 is the cap
        (16, {32: 1}),  # one K step: nothing to split
    ],
)
def test_split_k_never_exceeds_the_k_steps(k: int, max_split: dict[int, int]) -> None:
    candidates = problem_candidates(Problem(64, 64, k))
    largest: dict[int, int] = {}
    for c in candidates:
        largest[c.block_k] = max(largest.get(c.block_k, 0), c.split_k)

    assert largest == max_split


@pytest.mark.parametrize("k", [33, 100, 256])
def test_split_k_is_refused_up_to_k_256(k: int) -> None:
    # 8 and more K steps of BLOCK_K=32 at K=256, yet split-K never won at K <= 256 on the H200
    config = cfg("ptr-64x64x32-g1-s2-w4-p3")

    reason = problem_infeasibility(Problem(64, 64, k), config, H200)

    assert reason == f"SPLIT_K at K={k}: split-K only pays from K > 256"
    assert {c.split_k for c in problem_candidates(Problem(64, 64, k))} == {1}


def test_split_k_is_offered_from_k_257() -> None:
    config = cfg("ptr-64x64x32-g1-s2-w4-p3")

    assert problem_infeasibility(Problem(64, 64, 257), config, H200) is None
    assert config in problem_candidates(Problem(64, 64, 257))


def test_split_k_is_refused_from_two_full_waves_of_tiles() -> None:
    config = cfg("ptr-64x64x64-g1-s2-w4-p3")

    # 1 * ceil(16,832 / 64) = 263 tiles < 2 * 132 SMs: splitting may still fill the GPU
    assert problem_infeasibility(Problem(64, 16_832, 4096), config, H200) is None
    assert config in problem_candidates(Problem(64, 16_832, 4096))
    # 2 * ceil(8,448 / 64) = 2 * 132 = 264 tiles: two full waves already
    reason = problem_infeasibility(Problem(128, 8448, 4096), config, H200)
    assert reason == "SPLIT_K on a grid of 264 tiles, already 2 or more waves"
    assert config not in problem_candidates(Problem(128, 8448, 4096))


def test_the_wave_rule_counts_the_devices_sms() -> None:
    config = cfg("ptr-64x64x64-g1-s2-w4-p3")
    ten_sms = dataclasses.replace(H200, device_class="ten_sms", sm_count=10)

    # 1 * 1,216/64 = 19 tiles < 2 * 10; 1 * 1,280/64 = 20 tiles = 2 * 10
    assert problem_infeasibility(Problem(64, 1216, 4096), config, ten_sms) is None
    assert problem_infeasibility(Problem(64, 1280, 4096), config, ten_sms) is not None


def test_a_large_square_problem_keeps_every_config_but_split_k() -> None:
    # 4096/256 = 16 tiles a side at the largest tile, so GROUP_M applies everywhere; split-K tiles
    # are at most 128 wide, so at least (4096/128)^2 = 1,024 tiles >= 264: no split-K
    space = config_space("h200", "bf16", "nt")

    assert problem_candidates(Problem(4096, 4096, 4096)) == tuple(c for c in space if c.split_k == 1)


def test_a_small_grid_with_a_deep_k_gets_every_split() -> None:
    splits = {c.split_k for c in problem_candidates(Problem(128, 128, 8192))}

    assert splits == {1, 2, 4, 8, 16}


# --- per problem: GROUP_M -------------------------------------------------------------------------


def test_group_m_is_absent_on_a_one_row_grid() -> None:
    # M=16: every block_m is 16, so the grid is one row of tiles
    assert {c.group_m for c in problem_candidates(Problem(16, 4096, 4096))} == {1}


def test_group_m_is_absent_on_a_one_column_grid() -> None:
    assert {c.group_m for c in problem_candidates(Problem(4096, 16, 4096))} == {1}


def test_group_m_is_kept_exactly_for_tiles_that_make_several_rows() -> None:
    # M=64: block_m 16 and 32 make 4 and 2 rows, block_m 64 one
    grouped = {c.block_m for c in problem_candidates(Problem(64, 4096, 4096)) if c.group_m == 8}

    assert grouped == {16, 32}


# --- per problem: properties ----------------------------------------------------------------------

extents = st.one_of(st.integers(1, 300), st.integers(1, 20_000))
problems = st.builds(
    Problem, m=extents, n=extents, k=extents, dtype=st.sampled_from(DType), layout=st.sampled_from(Layout)
)


def _tma_aligned(p: Problem) -> bool:
    b_row = p.n if p.layout is Layout.NN else p.k
    strides = (p.k * p.dtype.in_bytes, b_row * p.dtype.in_bytes, p.n * p.dtype.out_bytes)  # A, B, C rows
    return all(s % 16 == 0 for s in strides)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems)
def test_candidates_obey_every_rule_and_come_from_the_space_in_its_order(p: Problem) -> None:
    space = config_space(H200, p.dtype, p.layout)
    position = {c: i for i, c in enumerate(space)}
    candidates = problem_candidates(p)

    indices = [position[c] for c in candidates]  # KeyError: a candidate outside the space
    assert indices == sorted(indices)
    cover = {dim: min(256, max(16, 1 << (extent - 1).bit_length())) for dim, extent in (("m", p.m), ("n", p.n))}
    for c in candidates:
        rows, cols = math.ceil(p.m / c.block_m), math.ceil(p.n / c.block_n)
        assert c.variant is KernelVariant.PTR or _tma_aligned(p)
        assert c.block_m <= cover["m"] and c.block_n <= cover["n"]
        assert c.split_k <= math.ceil(p.k / c.block_k)
        assert c.split_k == 1 or rows * cols < 2 * 132
        assert c.group_m == 1 or (rows > 1 and cols > 1)


@settings(max_examples=40, deadline=None)
@given(problems.filter(lambda p: max(p.m, p.n) > 16))
def test_every_problem_beyond_one_tile_has_candidates_of_each_usable_variant(p: Problem) -> None:
    variants = {c.variant for c in problem_candidates(p)}

    assert variants == ({KernelVariant.PTR, KernelVariant.TMA} if _tma_aligned(p) else {KernelVariant.PTR})


@pytest.mark.parametrize(("m", "n", "k", "dtype"), [(16, 16, 4096, "bf16"), (1, 1, 1, "fp32"), (8, 16, 64, "fp8e4m3")])
def test_every_valid_problem_has_candidates(m: int, n: int, k: int, dtype: str) -> None:
    assert problem_candidates(Problem(m, n, k, dtype)) != ()


def test_configurations_triton_miscompiles_are_refused_where_k_is_not_a_multiple_of_16() -> None:
    """ptr, BLOCK_M=32, BLOCK_K=128, 4 warps: wrong results with split-K at BLOCK_N=128 (GROUP_M=1), illegal memory
    accesses at BLOCK_N=256, measured on the H200 where K % 16 != 0 (BENCHMARKS §1); refused there only."""
    from tilecost.space import miscompiled_on_ragged_k

    bad = [
        TileConfig.from_key("ptr-32x128x128-g1-s2-w4-p3"),
        TileConfig.from_key("ptr-32x128x128-g1-s16-w4-p5"),
        TileConfig.from_key("ptr-32x256x128-g8-s1-w4-p2"),
        TileConfig.from_key("ptr-32x256x128-g1-s1-w4-p3"),
    ]
    fine = [
        TileConfig.from_key("ptr-32x128x128-g8-s2-w4-p3"),  # GROUP_M=8
        TileConfig.from_key("ptr-32x128x128-g1-s1-w4-p3"),  # no split-K
        TileConfig.from_key("ptr-32x128x128-g1-s2-w8-p3"),  # 8 warps
        TileConfig.from_key("ptr-32x128x64-g1-s2-w4-p3"),  # BLOCK_K=64
        TileConfig.from_key("tma-32x128x128-g1-s2-w4-p3"),  # descriptors
        TileConfig.from_key("ptr-64x256x128-g1-s1-w4-p2"),  # BLOCK_M=64
    ]
    assert all(miscompiled_on_ragged_k(c) for c in bad) and not any(miscompiled_on_ragged_k(c) for c in fine)
    ragged, aligned = Problem(128, 4096, 11000), Problem(128, 4096, 11008)
    device = load_device("h200")
    for config in bad:
        assert "miscompiles" in (problem_infeasibility(ragged, config, device) or "")
        assert problem_infeasibility(aligned, config, device) is None
    assert not any(miscompiled_on_ragged_k(c) for c in problem_candidates(ragged))
    assert sum(miscompiled_on_ragged_k(c) for c in problem_candidates(aligned)) == 20
