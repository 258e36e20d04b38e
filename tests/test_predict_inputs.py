"""Bad input raises a clear error naming the field and what is allowed (property-based)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecost
from tilecost import DType, Layout, Predictor, Problem
from tilecost.predict import parse_problem

from . import test_predict_fixture as fixtures

artifact = fixtures.artifact  # the session fixture, shared by the predictor's test modules

MAX = 2**31 - 1
good = st.integers(1, MAX)
FIELDS = ("m", "n", "k")


@pytest.fixture(scope="module")
def predictor(artifact: Path) -> Predictor:
    return Predictor.load(artifact)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2), st.one_of(st.integers(max_value=0), st.integers(min_value=MAX + 1)), good, good)
def test_extents_out_of_range_name_the_field_and_range(position: int, bad: int, a: int, b: int) -> None:
    shape = [a, b]
    shape.insert(position, bad)

    with pytest.raises(ValueError, match=rf"^{FIELDS[position]}={bad} is out of range; allowed 1\.\.{MAX}$"):
        parse_problem(tuple(shape))


not_an_int = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    st.decimals(allow_nan=True),
    st.just(4096.0),
    st.just(math.nan),
)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2), not_an_int, good, good)
def test_non_integers_nan_and_bools_name_the_field(position: int, bad: object, a: int, b: int) -> None:
    shape = [a, b]
    shape.insert(position, bad)

    with pytest.raises(TypeError, match=rf"^{FIELDS[position]} must be an int in 1\.\.{MAX}, got "):
        parse_problem(tuple(shape))


@settings(max_examples=50, deadline=None)
@given(
    st.text(max_size=8).filter(lambda s: s.lower() not in {d.value for d in DType} | {d.name.lower() for d in DType})
)
def test_unknown_dtypes_list_the_allowed_ones(dtype: str) -> None:
    with pytest.raises(ValueError, match=r"dtype=.* is not allowed; use one of 'fp16', 'bf16', 'fp32', 'fp8e4m3'"):
        parse_problem((8, 8, 8), dtype=dtype)


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.text(max_size=4).filter(lambda s: s.lower() not in ("nn", "nt")), st.floats(), st.integers()))
def test_unknown_layouts_list_the_allowed_ones(layout: object) -> None:
    with pytest.raises(ValueError, match=r"layout=.* is not allowed; use one of 'nn', 'nt'"):
        parse_problem((8, 8, 8), layout=layout)


@pytest.mark.parametrize("shape", [(1, 2), (1, 2, 3, 4), "1x2x3", 7, None, {1, 2, 3}])
def test_a_shape_must_be_three_extents_or_a_problem(shape: object) -> None:
    with pytest.raises(TypeError, match=r"shape must be an \(m, n, k\) tuple of ints or a tilecost.Problem"):
        parse_problem(shape)


def test_a_problem_with_a_contradicting_keyword_is_refused() -> None:
    with pytest.raises(ValueError, match="dtype='fp16' contradicts the problem's dtype 'bf16'"):
        parse_problem(Problem(8, 8, 8), dtype="fp16")
    assert parse_problem(Problem(8, 8, 8, "fp16"), dtype="fp16", layout=Layout.NT) == Problem(8, 8, 8, "fp16")


@pytest.mark.parametrize("device", ["h100_sxm", "b200", "H200 "])
def test_unknown_devices_name_the_shipped_ones(device: str) -> None:
    with pytest.raises(ValueError, match=rf"device='{device}' has no shipped model; use one of \["):
        tilecost.predict_best((8, 8, 8), device=device)


def test_a_known_device_without_a_model_is_pointed_at_the_flagged_fallback() -> None:
    with pytest.raises(ValueError) as excinfo:
        tilecost.predict_best((8, 8, 8), device="h100_sxm")
    hint = (
        "Predictor.load('h200', device='h100_sxm') for the h200 artifact's answers (that device's measured bests "
        "where it holds them; else its own, else its model's, flagged device_mismatch)"
    )
    assert hint in str(excinfo.value)
    # What the hint names works: the h200 artifact answers for the H100, flagged.
    answer = tilecost.Predictor.load("h200", device="h100_sxm").predict_best((8, 8, 8))
    assert tilecost.OODReason.DEVICE_MISMATCH in answer.ood.reasons
    with pytest.raises(ValueError) as excinfo:
        tilecost.predict_best((8, 8, 8), device="b200")
    assert "device_mismatch" not in str(excinfo.value)  # not a known device: no fallback to name


@pytest.mark.parametrize("device", [None, 200, ["h200"], math.nan])
def test_devices_must_be_names(device: object) -> None:
    with pytest.raises(TypeError, match="device must be a device class name"):
        tilecost.rank((8, 8, 8), device=device)


@settings(max_examples=30, deadline=None)
@given(
    st.tuples(st.one_of(good, not_an_int, st.integers()), st.one_of(good, not_an_int), st.one_of(good, st.integers()))
)
def test_the_predictor_accepts_exactly_what_problem_accepts(predictor: Predictor, shape: tuple) -> None:
    try:
        expected: object = Problem(*shape)
    except (TypeError, ValueError) as exc:
        expected = type(exc)
    if isinstance(expected, Problem):
        assert predictor.predict_best(shape).problem == expected
    else:
        with pytest.raises((TypeError, ValueError)):
            predictor.predict_best(shape)


def test_rank_k_must_be_a_positive_int(predictor: Predictor) -> None:
    for k in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=r"k=.* is not allowed; use an int >= 1"):
            predictor.rank((8, 8, 8), k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["dtype", "layout"])
@pytest.mark.parametrize("bad", [[], {}, {"bf16"}])
def test_an_unhashable_dtype_or_layout_is_named_as_itself(field: str, bad: object) -> None:
    other = "layout" if field == "dtype" else "dtype"

    with pytest.raises(ValueError, match=rf"^{field}=.* is not allowed") as caught:
        parse_problem((8, 8, 8), **{field: bad})
    assert f"{other}=" not in str(caught.value)


@pytest.mark.parametrize("measured", ["no", 0, 1, None, 1.0])
def test_measured_must_be_a_bool(predictor: Predictor, measured: object) -> None:
    predictor.predict_best((77, 88, 99), measured=True)  # a cached answer must not let a non-bool through

    with pytest.raises(TypeError, match=rf"measured={measured!r} is not allowed; use True or False"):
        predictor.predict_best((77, 88, 99), measured=measured)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="measured=.* is not allowed"):
        predictor.rank((77, 88, 99), 2, measured=measured)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exhaustive=.* is not allowed"):
        predictor.rank((77, 88, 99), 2, exhaustive=measured)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        ("shortlist_width", 2.5, ValueError, r"shortlist_width=2.5 is not allowed; use an int >= 1 or None"),
        ("shortlist_width", "8", ValueError, r"shortlist_width='8' is not allowed"),
        ("shortlist_width", 0, ValueError, r"shortlist_width=0 is not allowed"),
        ("shortlist_width", True, ValueError, r"shortlist_width=True is not allowed"),
        ("extend_from", -1, ValueError, r"extend_from=-1 is not allowed; use an int >= 0 or None"),
        ("cache_size", "x", ValueError, r"cache_size='x' is not allowed; use an int >= 0"),
        ("cache_size", -1, ValueError, r"cache_size=-1 is not allowed"),
        ("query_log", 5, TypeError, r"query_log=5 is not allowed; use a path, a QueryLog or None"),
    ],
)
def test_load_options_are_checked_at_load(
    artifact: Path, option: str, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Predictor.load(artifact, **{option: value})  # type: ignore[arg-type]


def test_no_cache_still_answers(artifact: Path) -> None:
    uncached = Predictor.load(artifact, cache_size=0)

    first = uncached.predict_best((300, 400, 500))

    assert uncached.predict_best((300, 400, 500)) == first and uncached.predict_best((300, 400, 500)) is not first
