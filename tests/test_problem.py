"""``Problem``: a matmul shape, dtype and layout that is valid by construction.

Checked here: strings and enum members both construct it, its key round-trips, its FLOP and byte
counts match hand arithmetic, every bad field is refused with the field's name and what is allowed
(property-based over the integer ranges and over random garbage), and it is a frozen, hashable value.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilecost import DType, Layout, Problem
from tilecost.problem import MAX_DIM

DIMS = ("m", "n", "k")
ALLOWED_DTYPES = ("'fp16'", "'bf16'", "'fp32'", "'fp8e4m3'")

valid_dims = st.integers(min_value=1, max_value=MAX_DIM)
problems = st.builds(
    Problem, m=valid_dims, n=valid_dims, k=valid_dims, dtype=st.sampled_from(DType), layout=st.sampled_from(Layout)
)


def _with(field: str, value: object) -> dict[str, object]:
    """Keyword arguments of a valid problem with one field replaced."""
    kwargs: dict[str, object] = {"m": 64, "n": 64, "k": 64, "dtype": "bf16", "layout": "nt"}
    kwargs[field] = value
    return kwargs


# --- construction ---------------------------------------------------------------------------------


def test_strings_and_enum_members_build_the_same_problem() -> None:
    from_strings = Problem(4096, 1024, 512, "fp16", "nn")
    from_enums = Problem(4096, 1024, 512, DType.FP16, Layout.NN)

    assert from_strings == from_enums
    assert from_strings.dtype is DType.FP16
    assert from_strings.layout is Layout.NN


def test_defaults_are_bf16_and_the_linear_layer_layout() -> None:
    problem = Problem(8, 16, 32)

    assert problem.dtype is DType.BF16
    assert problem.layout is Layout.NT


@pytest.mark.parametrize("text", ["fp8e4m3", "FP8E4M3", "fp8", "FP8"])
def test_dtype_accepts_its_value_or_its_name_in_any_case(text: str) -> None:
    assert Problem(1, 1, 1, text).dtype is DType.FP8


def test_bytes_per_element_of_each_dtype() -> None:
    # fp8 products are written as bf16, so fp8 is the one dtype whose output is wider than its input.
    assert {d: (d.in_bytes, d.out_bytes) for d in DType} == {
        DType.FP16: (2, 2),
        DType.BF16: (2, 2),
        DType.FP32: (4, 4),
        DType.FP8: (1, 2),
    }


def test_numpy_integers_are_accepted_and_stored_as_python_ints() -> None:
    problem = Problem(np.int64(4096), np.int32(128), np.uint16(64))

    assert (problem.m, problem.n, problem.k) == (4096, 128, 64)
    assert all(type(v) is int for v in (problem.m, problem.n, problem.k))
    assert problem.key == "4096x128x64-bf16-nt"


def test_the_extreme_extents_are_accepted() -> None:
    problem = Problem(1, MAX_DIM, 1)

    assert MAX_DIM == 2_147_483_647
    assert problem.n == MAX_DIM


# --- key ------------------------------------------------------------------------------------------


def test_key_names_the_dims_dtype_and_layout() -> None:
    assert Problem(4096, 4096, 4096).key == "4096x4096x4096-bf16-nt"
    assert Problem(1, 2, 3, "fp8e4m3", "nn").key == "1x2x3-fp8e4m3-nn"
    assert str(Problem(7, 5, 3, "fp32", "nn")) == "7x5x3-fp32-nn"


@given(problems)
def test_from_key_inverts_key(problem: Problem) -> None:
    assert Problem.from_key(problem.key) == problem


@given(problems)
def test_to_dict_holds_plain_values_that_rebuild_the_problem(problem: Problem) -> None:
    data = problem.to_dict()

    assert data == {
        "m": problem.m,
        "n": problem.n,
        "k": problem.k,
        "dtype": problem.dtype.value,
        "layout": problem.layout.value,
    }
    assert Problem(**data) == problem  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key",
    ["", "4096x4096-bf16-nt", "4096x4096x4096x2-bf16-nt", "4096x4096x4096", "axbxc-bf16-nt", "4096x4096x4096-bf16"],
)
def test_from_key_refuses_malformed_keys_naming_the_expected_form(key: str) -> None:
    with pytest.raises(ValueError, match=re.escape("MxNxK-dtype-layout")):
        Problem.from_key(key)


def test_from_key_refuses_a_well_formed_key_with_invalid_values() -> None:
    with pytest.raises(ValueError, match=r"dtype='bf17'"):
        Problem.from_key("16x16x16-bf17-nt")
    with pytest.raises(ValueError, match=r"layout='tn'"):
        Problem.from_key("16x16x16-bf16-tn")
    with pytest.raises(ValueError, match=r"k=0 is out of range"):
        Problem.from_key("16x16x0-bf16-nt")


@pytest.mark.parametrize("key", [5, None, 4096.0, b"16x16x16-bf16-nt", ["16x16x16-bf16-nt"]])
def test_from_key_refuses_a_key_that_is_not_a_str_naming_it_and_the_expected_form(key: object) -> None:
    with pytest.raises(TypeError, match=re.escape(f"a str of the form MxNxK-dtype-layout, got {type(key).__name__}")):
        Problem.from_key(key)  # type: ignore[arg-type]


# --- flops and bytes ------------------------------------------------------------------------------


def test_flops_and_min_bytes_of_a_square_bf16_problem() -> None:
    problem = Problem(4096, 4096, 4096, "bf16")

    # 2 * 4096**3 = 2 * 68,719,476,736
    assert problem.flops == 137_438_953_472
    # A and B: (4096*4096 + 4096*4096) * 2 = 67,108,864; C: 4096*4096 * 2 = 33,554,432
    assert problem.min_bytes == 100_663_296


def test_fp8_reads_one_byte_per_input_and_writes_two_per_output() -> None:
    problem = Problem(128, 256, 512, "fp8e4m3")

    # 2 * 128 * 256 * 512
    assert problem.flops == 33_554_432
    # A: 128*512 * 1 = 65,536; B: 512*256 * 1 = 131,072; C (bf16): 128*256 * 2 = 65,536
    assert problem.min_bytes == 262_144


def test_fp32_ragged_problem() -> None:
    problem = Problem(3, 5, 7, "fp32", "nn")

    # 2 * 3 * 5 * 7
    assert problem.flops == 210
    # A: 3*7 * 4 = 84; B: 7*5 * 4 = 140; C: 3*5 * 4 = 60
    assert problem.min_bytes == 284


@given(problems)
def test_layout_changes_neither_flops_nor_bytes(problem: Problem) -> None:
    other = dataclasses.replace(problem, layout=Layout.NN if problem.layout is Layout.NT else Layout.NT)

    assert (other.flops, other.min_bytes) == (problem.flops, problem.min_bytes)


# --- refusing bad input ---------------------------------------------------------------------------


@given(field=st.sampled_from(DIMS), value=st.integers(max_value=0))
def test_zero_and_negative_extents_are_refused_with_the_allowed_range(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"^{field}={value} is out of range; allowed 1\.\.2147483647$"):
        Problem(**_with(field, value))  # type: ignore[arg-type]


@given(field=st.sampled_from(DIMS), value=st.integers(min_value=MAX_DIM + 1))
def test_extents_above_int32_are_refused_with_the_allowed_range(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"^{field}={value} is out of range; allowed 1\.\.2147483647$"):
        Problem(**_with(field, value))  # type: ignore[arg-type]


@given(field=st.sampled_from(DIMS), value=valid_dims)
def test_every_extent_in_range_is_kept_as_given(field: str, value: int) -> None:
    assert getattr(Problem(**_with(field, value)), field) == value  # type: ignore[arg-type]


not_an_int = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.integers(min_value=1, max_value=MAX_DIM).map(float),  # 4096.0 is still not an int
    st.integers(min_value=1, max_value=MAX_DIM).map(str),  # nor is "4096"
    st.text(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.just(4096 + 0j),
)


@given(field=st.sampled_from(DIMS), value=not_an_int)
def test_non_integer_extents_are_refused_with_a_type_error_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=rf"^{field} must be an int in 1\.\.{MAX_DIM}, got {type(value).__name__} "):
        Problem(**_with(field, value))  # type: ignore[arg-type]


@given(st.one_of(st.text(), st.integers(), st.none(), st.floats(), st.binary()))
def test_unknown_dtypes_are_refused_listing_the_allowed_ones(value: object) -> None:
    valid_spellings = {d.value for d in DType} | {d.name for d in DType}
    if isinstance(value, str) and (value.lower() in valid_spellings or value.upper() in valid_spellings):
        return  # a real dtype; the garbage is everything else
    with pytest.raises(ValueError, match=re.escape(f"dtype={value!r} is not allowed")) as info:
        Problem(**_with("dtype", value))  # type: ignore[arg-type]
    assert all(allowed in str(info.value) for allowed in ALLOWED_DTYPES)


@pytest.mark.parametrize("value", ["tn", "tt", "", "row", None, 0, DType.BF16])
def test_unknown_layouts_are_refused_listing_the_allowed_ones(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(f"layout={value!r} is not allowed; use one of 'nn', 'nt'")):
        Problem(**_with("layout", value))  # type: ignore[arg-type]


# --- a value --------------------------------------------------------------------------------------


def test_a_problem_is_frozen() -> None:
    problem = Problem(64, 64, 64)

    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.m = 128  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.dtype = DType.FP32  # type: ignore[misc]
    assert problem.m == 64


def test_equal_problems_hash_equal_and_deduplicate() -> None:
    a = Problem(64, 128, 256, "bf16", "nt")
    b = Problem(64, 128, 256, DType.BF16, Layout.NT)

    assert hash(a) == hash(b)
    assert len({a, b, Problem(64, 128, 256, "bf16", "nn")}) == 2
