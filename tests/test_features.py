"""tilecost.features: hand-computed values (arithmetic in the comments), the seed's published
numbers, agreement with the scalar functions of tilecost.space, and the feature matrix's contract
(row-by-row equal, the training, prediction and prepared paths equal, finite on extreme shapes)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tilecost import (
    DType,
    KernelVariant,
    Layout,
    Problem,
    TileConfig,
    config_space,
    features,
    load_device,
    problem_candidates,
)
from tilecost import space as tilecost_space

H200 = load_device("h200")
H100 = load_device("h100_sxm")


def one(config: TileConfig) -> features.ConfigArrays:
    return features.ConfigArrays.from_configs([config])


def tile(bm: int, bn: int, bk: int = 64, **kwargs: object) -> TileConfig:
    fields = {"group_m": 1, "split_k": 1, "num_warps": 4, "num_stages": 3} | kwargs
    variant = fields.pop("variant", KernelVariant.PTR)
    return TileConfig(variant, bm, bn, bk, **fields)  # type: ignore[arg-type]


# --- the public surface -------------------------------------------------------------------------


def test_public_names_resolve_and_are_sorted() -> None:
    assert list(features.__all__) == sorted(features.__all__)
    for name in features.__all__:
        assert hasattr(features, name), name


def test_schema_is_consistent() -> None:
    names = features.FEATURE_NAMES
    assert len(names) == len(set(names)) == 49
    assert names == features.PROBLEM_FEATURES + features.CONFIG_FEATURES + features.PAIR_FEATURES
    assert isinstance(features.FEATURE_SCHEMA_VERSION, int) and features.FEATURE_SCHEMA_VERSION >= 1
    assert features.DTYPE_FEATURES == ("dtype_fp16", "dtype_bf16", "dtype_fp32", "dtype_fp8")


# --- struct-of-arrays inputs ----------------------------------------------------------------------


def test_config_arrays_round_trip_and_keys() -> None:
    space = config_space(H200, DType.BF16)[::97]
    arrays = features.ConfigArrays.from_configs(space)
    assert len(arrays) == len(space)
    assert [arrays.config(i) for i in range(len(arrays))] == list(space)
    from_keys = features.ConfigArrays.from_keys([c.key for c in space])
    assert [from_keys.config(i) for i in range(len(from_keys))] == list(space)
    mask = arrays.is_tma
    assert [arrays.take(mask).config(i) for i in range(int(mask.sum()))] == [
        c for c in space if c.variant.value == "tma"
    ]


def test_config_arrays_are_read_only_and_checked() -> None:
    arrays = features.ConfigArrays.from_configs([tile(128, 128)])
    with pytest.raises(ValueError):
        arrays.block_m[0] = 64
    fields = dict(block_m=[128], block_n=[128], block_k=[64], group_m=[1], split_k=[1], num_warps=[4], num_stages=[3])
    with pytest.raises(ValueError, match="block_n=0 is not allowed"):
        features.ConfigArrays(**(fields | {"block_n": [0]}), is_tma=np.array([False]))
    with pytest.raises(ValueError, match="one length"):
        features.ConfigArrays(**(fields | {"split_k": [1, 2]}), is_tma=np.array([False]))
    with pytest.raises(TypeError, match="is_tma"):
        features.ConfigArrays(**fields, is_tma=np.array([1]))


def test_problem_arrays_from_problems_and_columns_agree() -> None:
    problems = [
        Problem(1, 4096, 4096, DType.BF16, Layout.NT),
        Problem(1000, 1000, 8192, DType.FP8, Layout.NN),
        Problem(3, 5, 7),
    ]
    a = features.ProblemArrays.from_problems(problems)
    b = features.ProblemArrays.from_columns(
        [1, 1000, 3], [4096, 1000, 5], [4096, 8192, 7], ["bf16", DType.FP8, "BF16"], [Layout.NT, "nn", "nt"]
    )
    for field in ("m", "n", "k", "dtype_code", "layout_nt", "in_bytes", "out_bytes"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert [a.problem(i) for i in range(3)] == problems
    np.testing.assert_array_equal(a.in_bytes, [2, 1, 2])  # bf16, fp8, bf16 inputs
    np.testing.assert_array_equal(a.out_bytes, [2, 2, 2])  # fp8 products are written as bf16
    np.testing.assert_array_equal(a.peak_flops_per_s(H200), [989.4e12, 1978.9e12, 989.4e12])
    fp32 = features.ProblemArrays.from_columns([8], [8], [8], ["fp32"], ["nn"])
    assert (fp32.in_bytes[0], fp32.out_bytes[0], fp32.peak_flops_per_s(H200)[0]) == (4, 4, 494.7e12)


def test_problem_arrays_are_checked() -> None:
    with pytest.raises(ValueError, match="m=0 is not allowed"):
        features.ProblemArrays(m=[0], n=[1], k=[1], dtype_code=[1], layout_nt=[True])
    with pytest.raises(ValueError, match="k=1.5"):
        features.ProblemArrays(m=[1], n=[1], k=[1.5], dtype_code=[1], layout_nt=[True])
    with pytest.raises(ValueError, match="dtype_code"):
        features.ProblemArrays(m=[1], n=[1], k=[1], dtype_code=[4], layout_nt=[True])
    with pytest.raises(ValueError, match="one length"):
        features.ProblemArrays(m=[1, 2], n=[1], k=[1], dtype_code=[1], layout_nt=[True])
    with pytest.raises(ValueError, match="fp64"):
        features.ProblemArrays.from_columns([1], [1], [1], ["fp64"], ["nt"])


# --- geometry -----------------------------------------------------------------------------------------


def test_133_tiles_on_132_sms_take_two_waves() -> None:
    # 133 / 132 = 1.008 waves -> ceil 2; the second wave holds one block: 133 / (2 * 132) = 0.504.
    assert features.waves(133, H200) == pytest.approx(133 / 132)
    assert math.ceil(features.waves(133, H200)) == 2
    assert features.wave_efficiency(133, H200) == pytest.approx(133 / 264)
    assert features.wave_efficiency(264, H200) == 1.0  # exactly two full waves


def test_1000_square_with_128_tiles_leaves_half_the_sms_idle() -> None:
    # ceil(1000/128) = 8 per side: 8 * 8 = 64 tiles on 132 SMs: 64 / 132 = 0.485.
    tiles = features.tile_count(1000, 1000, 128, 128, 1)
    assert tiles == 64
    assert features.wave_efficiency(tiles, H200) == pytest.approx(0.4848, abs=1e-4)
    # Two resident blocks per SM make 264 slots, of which 64 are used: 0.242.
    assert features.wave_efficiency(tiles, H200, 2) == pytest.approx(64 / 264)


def test_32x256_tiles_on_1000_square_fill_a_wave() -> None:
    # ceil(1000/32) = 32, ceil(1000/256) = 4: 32 * 4 = 128 tiles; 128 / 132 = 0.970.
    tiles = features.tile_count(1000, 1000, 32, 256, 1)
    assert tiles == 128
    assert features.wave_efficiency(tiles, H200) == pytest.approx(0.9697, abs=1e-4)
    # SPLIT_K=4 quadruples the blocks: 512 tiles, ceil(512/132) = 4 waves, 512 / 528 = 0.970.
    assert features.tile_count(1000, 1000, 32, 256, 4) == 512


def test_k_iterations_match_the_kernels_nested_ceiling() -> None:
    assert features.k_iterations(8192, 64, 4) == 32  # 8192 / (64 * 4)
    assert features.k_iterations(1000, 64, 1) == 16  # ceil(15.6)
    assert features.k_iterations(1000, 64, 16) == 1  # ceil(1000 / 1024)
    # The kernel splits cdiv(K, BK) K tiles into SPLIT_K parts of cdiv(k_tiles, SPLIT_K).
    for k, bk, s in itertools.product((1, 31, 1000, 4097, 262144), (32, 64, 128, 256), (1, 2, 4, 8, 16)):
        assert features.k_iterations(k, bk, s) == math.ceil(math.ceil(k / bk) / s)


def test_pipeline_fill_fraction() -> None:
    assert features.pipeline_fill_fraction(6, 4) == 0.5  # 3 prefetched of 6 steps
    assert features.pipeline_fill_fraction(2, 4) == 1.0  # min(3, 2) / 2
    assert features.pipeline_fill_fraction(128, 2) == 1 / 128


def test_padding_waste() -> None:
    # 1000^3 with 128x128x64: 1024 * 1024 * 1024 / 1e9 - 1 = 0.073741824.
    assert features.padding_waste(1000, 1000, 1000, 128, 128, 64) == pytest.approx(0.073741824)
    assert features.padding_waste(4096, 4096, 4096, 128, 256, 64) == 0.0
    # M = 1 in a 16-row tile computes 16 rows: 16 / 1 - 1 = 15.
    assert features.padding_waste(1, 4096, 4096, 16, 128, 64) == 15.0


def test_splitk_reduction_bytes() -> None:
    # 2 * S * M * N * 4 = 2 * 4 * 1024 * 1024 * 4 = 33,554,432.
    assert features.splitk_reduction_bytes(1024, 1024, 4) == 33_554_432
    assert features.splitk_reduction_bytes(1024, 1024, 1) == 0


def test_alignment_flags_match_the_scalar_tma_rule() -> None:
    np.testing.assert_array_equal(features.multiple_of([16, 24, 1000, 4096, 1], 16), [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(features.multiple_of([16, 24, 1000, 4096, 1], 8), [1, 1, 1, 1, 0])
    extents = (1, 2, 4, 7, 8, 12, 16, 24, 1000, 1001, 4096)
    for dtype, layout in itertools.product(DType, Layout):
        problems = [Problem(5, n, k, dtype, layout) for n, k in itertools.product(extents, extents)]
        arrays = features.ProblemArrays.from_problems(problems)
        vectorised = features.tma_aligned(arrays.n, arrays.k, arrays.layout_nt, arrays.in_bytes, arrays.out_bytes)
        np.testing.assert_array_equal(vectorised, [tilecost_space.tma_aligned(p) for p in problems])


def test_operand_rows_aligned_follow_the_strides() -> None:
    # A's stride is K; B's K (nt) or N (nn); C's N: aligned when a multiple of 16 elements.
    for layout_nt, expected in ((False, (True, False, False)), (True, (True, True, False))):
        assert tuple(bool(f) for f in features.operand_rows_aligned(1000, 1024, layout_nt)) == expected
    a, b, c = features.operand_rows_aligned(np.array([1024, 1000]), np.array([1000, 1024]), np.array([False, True]))
    np.testing.assert_array_equal(a, [False, True])  # K 1000, then 1024
    np.testing.assert_array_equal(b, [True, True])  # nn: N 1024; nt: K 1024
    np.testing.assert_array_equal(c, [True, False])


def test_memory_instructions_per_thread() -> None:
    # A 128x64 bf16 tile over 4 warps (128 threads): 8192 / (8 * 128) = 8 with 16-byte vectors, 64 without.
    assert features.memory_instructions_per_thread(128, 64, True, 2, 4) == 8
    assert features.memory_instructions_per_thread(128, 64, False, 2, 4) == 64
    # fp32: 4 elements a vector, 8192 / (4 * 128) = 16; fp8: 16 a vector, 8192 / (16 * 256) = 2 over 8 warps.
    assert features.memory_instructions_per_thread(128, 64, True, 4, 4) == 16
    assert features.memory_instructions_per_thread(128, 64, True, 1, 8) == 2


def test_misaligned_rows_cost_more_instructions_in_the_matrix() -> None:
    # bf16 nn with N off a multiple of 16: B's and C's rows unaligned, A's (stride K = 1024) aligned.
    config = one(tile(128, 64, 64))
    ragged = features.feature_matrix(Problem(512, 1000, 1024, layout=Layout.NN), config, H200)
    aligned = features.feature_matrix(Problem(512, 1024, 1024, layout=Layout.NN), config, H200)
    assert column(ragged, "log2_a_loads_per_thread") == column(aligned, "log2_a_loads_per_thread") == 3  # 8
    assert column(aligned, "log2_b_loads_per_thread") == 2  # 64 * 64 / (8 * 128) = 4
    assert column(ragged, "log2_b_loads_per_thread") == 5  # 4096 / 128 = 32
    assert column(ragged, "log2_c_stores_per_thread") == 6  # 8192 / 128 = 64, against 8 aligned
    # nt reads B along K, so N off a multiple of 16 leaves B's loads vectorised.
    nt = features.feature_matrix(Problem(512, 1000, 1024, layout=Layout.NT), config, H200)
    assert column(nt, "log2_b_loads_per_thread") == 2


def test_arithmetic_intensities() -> None:
    # 4096^3 bf16: 2 * 4096^3 / ((2 * 4096^2) * 2 + 4096^2 * 2) = 4096 / 3 = 1365.3 FLOP/byte.
    assert features.problem_flop_per_byte(4096, 4096, 4096, 2, 2) == pytest.approx(4096 / 3)
    for p in (Problem(1, 7168, 8192), Problem(1000, 3, 17, DType.FP8), Problem(65536, 65536, 65536, DType.FP32)):
        expected = p.flops / p.min_bytes
        assert features.problem_flop_per_byte(p.m, p.n, p.k, p.dtype.in_bytes, p.dtype.out_bytes) == pytest.approx(
            expected
        )
    # 128x128 bf16: 2 * 128 * 128 / (256 * 2) = 64; the seed's fp32 form BM*BN / (2 (BM + BN)) = 32.
    assert features.tile_flop_per_byte(128, 128, 2) == 64
    assert features.tile_flop_per_byte(128, 128, 4) == 128 * 128 / (2 * 256)
    # 32x256 bf16: 2 * 8192 / (288 * 2) = 28.4.
    assert features.tile_flop_per_byte(32, 256, 2) == pytest.approx(8192 / 288)


def test_l2_panel_reuse_matches_the_triton_tutorial() -> None:
    # A 9x9 grid of square tiles and 9 resident blocks. Row-major: 1 row of A panels + 9 columns of
    # B (the tutorial's 9 + 81 = 90 blocks loaded) -> 9 * 2 / 10 = 1.8 uses per panel loaded.
    assert features.l2_panel_reuse(9, 9, 64, 64, 1, 9) == pytest.approx(1.8)
    # GROUP_M=3: 3 rows + 3 columns (27 + 27 = 54 blocks) -> 18 / 6 = 3.
    assert features.l2_panel_reuse(9, 9, 64, 64, 3, 9) == pytest.approx(3.0)
    # All 81 tiles resident: 9 rows + 9 columns serve 81 blocks -> 81 * 2 / 18 = 9, whatever GROUP_M.
    assert features.l2_panel_reuse(9, 9, 64, 64, 1, 132) == pytest.approx(9.0)
    assert features.l2_panel_reuse(9, 9, 64, 64, 8, 132) == pytest.approx(9.0)
    # Two full groups of 3 rows (54 blocks) + 5 blocks of the third: rows 6 + 3, columns 9 -> 59 * 2 / 18.
    assert features.l2_panel_reuse(9, 9, 64, 64, 3, 59) == pytest.approx(59 * 2 / 18)
    # One block alone reuses nothing.
    assert features.l2_panel_reuse(1, 1, 128, 128, 8, 132) == 1.0


# --- occupancy ----------------------------------------------------------------------------------------


def test_smem_bytes_by_hand() -> None:
    # 128x128x64 bf16, 3 stages: 3 * (128*64 + 64*128) * 2 = 98,304.
    assert features.smem_bytes(128, 128, 64, 3, False, 1, 2, 2) == 98_304
    # The TMA kernel stages its 128x128 bf16 output tile too: 98,304 + 128*128*2 = 131,072 ...
    assert features.smem_bytes(128, 128, 64, 3, True, 1, 2, 2) == 131_072
    # ... except under split-K, where it stores fp32 partials through pointers.
    assert features.smem_bytes(128, 128, 64, 3, True, 2, 2, 2) == 98_304
    # fp8 in, bf16 out, 64x256x256, 2 stages, TMA: 2 * (64*256 + 256*256) * 1 + 64*256*2 = 196,608.
    assert features.smem_bytes(64, 256, 256, 2, True, 1, 1, 2) == 196_608


@pytest.mark.parametrize("dtype", list(DType))
def test_smem_bytes_equal_the_scalar_formula_over_the_space(dtype: DType) -> None:
    space = config_space(H200, dtype)
    arrays = features.ConfigArrays.from_configs(space)
    a = arrays
    vectorised = features.smem_bytes(
        a.block_m, a.block_n, a.block_k, a.num_stages, a.is_tma, a.split_k, dtype.in_bytes, dtype.out_bytes
    )
    np.testing.assert_array_equal(vectorised, [tilecost_space.smem_bytes(c, dtype) for c in space])


def test_registers_and_blocks_per_sm_by_hand() -> None:
    # 128x128 on 4 warps: 16,384 / 128 = 128 accumulators + 40 = 168 registers per thread.
    acc = features.accumulators_per_thread(128, 128, 4)
    assert acc == 128
    assert features.registers_per_thread_estimate(acc, H200) == 168
    # A 256x256 tile on 4 warps would want 512 + 40; the device allows 255.
    assert features.registers_per_thread_estimate(features.accumulators_per_thread(256, 256, 4), H200) == 255
    # 128x128x64 bf16, 3 stages, 4 warps on the H200: shared memory 233,472 // (98,304 + 1,024) = 2,
    # registers 65,536 // (168 * 128) = 3, threads 2,048 // 128 = 16, cap 32 -> 2.
    assert features.blocks_per_sm(98_304, 168, 4, H200) == 2
    # 64x64x32 bf16, 2 stages: smem 2 * (64*32 + 32*64) * 2 = 16,384 -> 233,472 // 17,408 = 13;
    # 32 + 40 = 72 registers -> 65,536 // (72 * 128) = 7; so 7.
    assert features.blocks_per_sm(16_384, 72, 4, H200) == 7
    # Measured 128 registers: 65,536 // (128 * 128) = 4. Measured 129 round up to 136: 65,536 // 17,408 = 3.
    assert features.blocks_per_sm(16_384, 128, 4, H200) == 4
    assert features.blocks_per_sm(16_384, 129, 4, H200) == 3
    # 8 warps of 255 registers (-> 256): 65,536 // (256 * 256) = 1.
    assert features.blocks_per_sm(16_384, 255, 8, H200) == 1
    # A block too large for an SM still counts as one, so waves stay finite.
    assert features.blocks_per_sm(10**6, 168, 4, H200) == 1


def test_other_registers_match_the_space_check() -> None:
    # Drift guard: the space's feasibility check and the occupancy estimate assume the same 40.
    assert features.OTHER_REGISTERS_PER_THREAD == tilecost_space._OTHER_REGISTERS


# --- the roofline -------------------------------------------------------------------------------------


def test_tile_efficiency() -> None:
    # 0.5 + 0.5 * min(1, BM*BN / 16,384).
    np.testing.assert_allclose(
        features.tile_efficiency([128, 64, 32, 32, 256], [128, 256, 256, 32, 256]), [1, 1, 0.75, 0.53125, 1]
    )


def test_roofline_by_hand_on_8192_cubed() -> None:
    # H100, bf16, 128x128: 64 * 64 = 4096 tiles, ceil(4096/132) = 32 waves, 4096 / 4224 = 0.970.
    # Compute 2 * 8192^3 / 989.4e12 s = 1111.29 us / 0.970 = 1146.02 us.
    # Memory (256 * 8192 * 2 * 4096 / sqrt(132) + 8192^2 * 2) bytes = 1.6295e9 / 3.35e12 B/s = 486.4 us.
    model = features.roofline(8192, 8192, 8192, 128, 128, 1, 2, 2, 989.4e12, H100)
    assert model.tiles == 4096
    assert model.wave_efficiency == pytest.approx(4096 / 4224)
    assert model.compute_us == pytest.approx(1146.02, abs=0.01)
    assert model.traffic_bytes == pytest.approx(1.6295e9, rel=1e-4)
    assert model.memory_us == pytest.approx(486.43, abs=0.01)
    assert model.time_us == model.compute_us


def test_roofline_floor_and_splitk_traffic() -> None:
    # 16x7168x8192 bf16 reads at least its weights: (16*8192 + 8192*7168) * 2 + 16*7168*2 =
    # 117,932,032 bytes / 3.35e12 B/s = 35.20 us, the seed's decode floor.
    model = features.roofline(16, 7168, 8192, 16, 64, 1, 2, 2, 989.4e12, H100)
    assert model.traffic_bytes == 117_932_032
    assert model.memory_us == pytest.approx(35.20, abs=0.01)
    # SPLIT_K=8 adds 2 * 8 * 16 * 7168 * 4 = 7,340,032 bytes of fp32 partials written and read.
    split = features.roofline(16, 7168, 8192, 16, 64, 8, 2, 2, 989.4e12, H100)
    assert split.splitk_reduction_bytes == 7_340_032
    assert split.traffic_bytes == 117_932_032 + 7_340_032


def seed_times(problem: Problem) -> dict[tuple[int, int], float]:
    """The seed's workshop grid: tiles 32..256 on each side, BK = 64, on its H100."""
    sizes = (32, 64, 128, 256)
    grid = [tile(bm, bn) for bm, bn in itertools.product(sizes, sizes)]
    times = features.roofline_time_us(problem, features.ConfigArrays.from_configs(grid), H100)
    return {(c.block_m, c.block_n): float(t) for c, t in zip(grid, times, strict=True)}


def test_roofline_reproduces_the_seeds_numbers() -> None:
    # "For a large square multiply the model prefers big tiles - 64 x 256 at 1,146 us - and the
    # worst choice is 1.83 times slower; a fixed 128 x 128 does as well here (1.00x)."
    big = seed_times(Problem(8192, 8192, 8192))
    best = min(big, key=big.__getitem__)
    assert best == (64, 256) and big[best] == pytest.approx(1146, abs=0.5)
    assert max(big.values()) / big[best] == pytest.approx(1.83, abs=0.005)
    assert big[(128, 128)] == big[best]
    # "For the small 1 000 x 1 000 x 8 192 problem ... the best is 32 x 256 ... (97% wave
    # efficiency); the fixed choice is 1.50 times slower."
    small = seed_times(Problem(1000, 1000, 8192))
    assert min(small, key=small.__getitem__) == (32, 256)
    assert small[(128, 128)] / small[(32, 256)] == pytest.approx(1.50, abs=0.005)
    # "For a 16-token decode every choice is memory-bound and they all tie at 35.2 us."
    decode = seed_times(Problem(16, 7168, 8192))
    assert max(decode.values()) == min(decode.values()) == pytest.approx(35.2, abs=0.05)


def test_roofline_baseline_prefers_bigger_tiles_for_big_problems() -> None:
    def best_area(problem: Problem) -> int:
        candidates = problem_candidates(problem, H200)
        times = features.roofline_time_us(problem, features.ConfigArrays.from_configs(candidates), H200)
        best = candidates[int(np.argmin(times))]
        return best.block_m * best.block_n

    assert best_area(Problem(8192, 8192, 8192)) > best_area(Problem(16, 7168, 8192))
    assert best_area(Problem(8192, 8192, 8192)) >= 128 * 128


# --- the feature matrix -------------------------------------------------------------------------------

PROBLEMS = [
    Problem(4096, 4096, 4096, DType.BF16, Layout.NT),
    Problem(16, 7168, 8192, DType.BF16, Layout.NN),
    Problem(1000, 1000, 8192, DType.FP16, Layout.NT),
    Problem(1, 4096, 4096, DType.FP8, Layout.NT),
    Problem(4000, 3000, 1000, DType.FP32, Layout.NN),
]


def column(matrix: np.ndarray, name: str) -> np.ndarray:
    return matrix[:, features.FEATURE_NAMES.index(name)]


@pytest.mark.parametrize("problem", PROBLEMS, ids=str)
def test_matrix_rows_equal_rows_computed_alone(problem: Problem) -> None:
    candidates = problem_candidates(problem, H200)[::7]
    configs = features.ConfigArrays.from_configs(candidates)
    matrix = features.feature_matrix(problem, configs, H200)
    assert matrix.shape == (len(candidates), len(features.FEATURE_NAMES))
    assert matrix.dtype == np.float64 and matrix.flags.c_contiguous
    for i in range(0, len(candidates), 5):
        np.testing.assert_array_equal(matrix[i], features.feature_matrix(problem, configs.take([i]), H200)[0])
    prepared = features.ConfigFeatures.build(configs, H200, problem.dtype)
    np.testing.assert_array_equal(features.feature_matrix(problem, prepared, H200), matrix)
    np.testing.assert_array_equal(features.feature_matrix(problem, prepared.take([3, 1]), H200), matrix[[3, 1]])


def test_training_path_equals_prediction_path() -> None:
    rows_problems: list[Problem] = []
    rows_configs: list[TileConfig] = []
    expected = []
    for problem in PROBLEMS:
        candidates = problem_candidates(problem, H200)[::41]
        rows_problems += [problem] * len(candidates)
        rows_configs += candidates
        expected.append(features.feature_matrix(problem, features.ConfigArrays.from_configs(candidates), H200))
    training = features.feature_matrix(
        features.ProblemArrays.from_problems(rows_problems), features.ConfigArrays.from_configs(rows_configs), H200
    )
    np.testing.assert_array_equal(training, np.concatenate(expected))
    # One problem as ProblemArrays of length 1 broadcasts like the Problem itself.
    configs = features.ConfigArrays.from_configs(rows_configs[:20])
    one_problem = features.ProblemArrays.from_problems([PROBLEMS[0]])
    np.testing.assert_array_equal(
        features.feature_matrix(one_problem, configs, H200), features.feature_matrix(PROBLEMS[0], configs, H200)
    )


def test_matrix_columns_are_the_documented_functions() -> None:
    problem = Problem(1000, 1000, 8192, DType.BF16, Layout.NT)
    configs = [tile(128, 128), tile(32, 256, num_warps=8), tile(64, 64, 32, split_k=4, variant=KernelVariant.TMA)]
    matrix = features.feature_matrix(problem, features.ConfigArrays.from_configs(configs), H200)
    np.testing.assert_array_equal(column(matrix, "log2_m"), math.log2(1000))
    np.testing.assert_array_equal(column(matrix, "dtype_bf16"), 1)
    np.testing.assert_array_equal(column(matrix, "dtype_fp16") + column(matrix, "dtype_fp8"), 0)
    np.testing.assert_array_equal(column(matrix, "layout_nt"), 1)
    np.testing.assert_array_equal(column(matrix, "k_multiple_of_16"), 1)  # 8192
    np.testing.assert_array_equal(column(matrix, "m_multiple_of_16"), 0)  # 1000 = 62.5 * 16
    np.testing.assert_array_equal(column(matrix, "m_multiple_of_8"), 1)  # 1000 = 125 * 8
    np.testing.assert_array_equal(column(matrix, "tma_aligned"), 1)  # 8192 * 2 and 1000 * 2 bytes
    np.testing.assert_array_equal(column(matrix, "block_n"), [128, 256, 64])
    np.testing.assert_array_equal(column(matrix, "is_tma"), [0, 0, 1])
    # 98,304 (by hand above); 3 * (32*64 + 64*256) * 2 = 110,592; 3 * (64*32 + 32*64) * 2 = 24,576.
    np.testing.assert_array_equal(column(matrix, "smem_bytes"), [98_304, 110_592, 24_576])
    np.testing.assert_array_equal(column(matrix, "log2_tiles"), np.log2([64, 128, 16 * 16 * 4]))
    np.testing.assert_allclose(column(matrix, "sm_wave_efficiency"), [64 / 132, 128 / 132, 1024 / 1056])
    np.testing.assert_array_equal(column(matrix, "k_iterations"), [128, 128, 64])  # 8192/64, 8192/64, 8192/128
    np.testing.assert_array_equal(column(matrix, "splitk_reduction_bytes"), [0, 0, 2 * 4 * 1000 * 1000 * 4])
    block_m, block_n, split_k = np.array([128, 32, 64]), np.array([128, 256, 64]), np.array([1, 1, 4])
    model = features.roofline(1000, 1000, 8192, block_m, block_n, split_k, 2, 2, 989.4e12, H200)
    np.testing.assert_allclose(column(matrix, "log2_roofline_time_us"), np.log2(model.time_us))
    np.testing.assert_allclose(column(matrix, "roofline_compute_over_memory"), model.compute_us / model.memory_us)


def test_matrix_of_no_candidates_is_empty() -> None:
    empty = features.ConfigArrays.from_configs([])
    assert features.feature_matrix(Problem(64, 64, 64), empty, H200).shape == (0, len(features.FEATURE_NAMES))


def test_measured_registers_change_occupancy() -> None:
    problem = Problem(4096, 4096, 4096)
    configs = features.ConfigArrays.from_configs([tile(64, 64, 32, num_stages=2)])
    estimated = features.feature_matrix(problem, configs, H200)
    measured = features.feature_matrix(problem, configs, H200, registers_per_thread=[128])
    assert column(estimated, "registers_per_thread")[0] == 72 and column(estimated, "blocks_per_sm")[0] == 7
    assert column(measured, "registers_per_thread")[0] == 128 and column(measured, "blocks_per_sm")[0] == 4
    with pytest.raises(ValueError, match="positive"):
        features.feature_matrix(problem, configs, H200, registers_per_thread=[0])
    with pytest.raises(ValueError, match="one per row"):
        features.feature_matrix(problem, configs, H200, registers_per_thread=[128, 128])


EXTREMES = [
    Problem(1, 1, 1),
    Problem(1, 4096, 4096),
    Problem(16, 16, 262144, DType.FP32, Layout.NN),
    Problem(1, 7168, 262144, DType.FP8),
    Problem(65536, 65536, 65536),
    Problem(65536, 1, 65536, DType.FP16, Layout.NN),
]


@pytest.mark.parametrize("problem", EXTREMES, ids=str)
def test_matrix_is_finite_on_extreme_shapes(problem: Problem) -> None:
    configs = features.ConfigArrays.from_configs(config_space(H200, problem.dtype, problem.layout))
    matrix = features.feature_matrix(problem, configs, H200)
    assert np.isfinite(matrix).all()
    assert np.isfinite(matrix.astype(np.float32)).all()  # XGBoost reads float32


def test_matrix_refuses_mismatched_inputs() -> None:
    problem = Problem(4096, 4096, 4096)
    configs = features.ConfigArrays.from_configs([tile(128, 128), tile(64, 64)])
    with pytest.raises(ValueError, match="do not broadcast"):
        features.feature_matrix(features.ProblemArrays.from_problems([problem] * 3), configs, H200)
    with pytest.raises(TypeError, match="Problem or ProblemArrays"):
        features.feature_matrix("4096x4096x4096-bf16-nt", configs, H200)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ConfigArrays or ConfigFeatures"):
        features.feature_matrix(problem, [tile(128, 128)], H200)  # type: ignore[arg-type]
    prepared = features.ConfigFeatures.build(configs, H200, DType.FP16)
    with pytest.raises(ValueError, match="dtype 'fp16'"):
        features.feature_matrix(problem, prepared, H200)
    with pytest.raises(ValueError, match="device 'h200'"):
        features.feature_matrix(Problem(64, 64, 64, DType.FP16), prepared, H100)
    with pytest.raises(ValueError, match="ConfigFeatures.build"):
        features.feature_matrix(Problem(64, 64, 64, DType.FP16), prepared, H200, registers_per_thread=128)
