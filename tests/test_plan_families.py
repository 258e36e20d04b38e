"""The built-in plan families: what each draws, reproducibly, and the error for an unknown one."""

from __future__ import annotations

import pytest

from tilecost.collect.plans import MAX_FLOP, plan_family, within_bounds
from tilecost.problem import DType, Layout


@pytest.mark.parametrize("name", ["random", "layers", "decode", "unaligned", "aligned"])
def test_a_family_draws_the_same_problems_for_a_seed_and_others_for_another(name):
    a = plan_family(name, 20, DType.BF16, Layout.NT, seed=1)
    assert a == plan_family(name, 20, DType.BF16, Layout.NT, seed=1)
    assert a != plan_family(name, 20, DType.BF16, Layout.NT, seed=2)
    assert all(p.flops <= MAX_FLOP and (p.dtype, p.layout) == (DType.BF16, Layout.NT) for p in a)


def test_the_collector_bounds_cap_work_operand_size_and_the_fp32_output():
    assert within_bounds(8192, 8192, 8192, DType.BF16)  # one product at the work cap's half
    assert not within_bounds(65536, 65536, 65536, DType.BF16)  # far over MAX_FLOP
    # 1 x 4096 x 262144 is little work, but its fp32 weight (4 GiB) is over MAX_OPERAND_BYTES; in bf16 it is 2 GiB
    assert not within_bounds(1, 4096, 262144, DType.FP32)
    assert within_bounds(1, 4096, 262144, DType.BF16)
    # a thin K with a 2^16 x 2^16 fp32 output (16 GiB) is out, though each input is small
    assert not within_bounds(65536, 65536, 1, DType.BF16)


def test_aligned_problems_are_mid_size_and_on_multiples_of_64():
    problems = plan_family("aligned", 300, DType.FP8, Layout.NN, seed=0)
    assert len(problems) == 300
    for p in problems:
        assert p.m >= 64 and p.n >= 256 and p.k >= 256
        assert p.m % 64 == 0 and p.n % 64 == 0 and p.k % 64 == 0
    # the three steps all occur, so that not every extent is a multiple of 256
    assert any(p.k % 128 for p in problems) and any(p.k % 256 for p in problems)


def test_decode_problems_have_small_m_and_layer_widths():
    assert all(p.m <= 64 for p in plan_family("decode", 50, DType.FP16, Layout.NT))


def test_an_unknown_family_names_the_known_ones():
    with pytest.raises(ValueError, match=r"'aligned', 'decode', 'layers', 'random', 'unaligned'"):
        plan_family("square", 3, DType.BF16, Layout.NT)
