"""``TileConfig``: one point of the candidate space, identified by a stable key.

Checked here: the key's exact text, that the key and ``to_dict`` round-trip for every configuration
of every shipped space (and are unique there), and that each invalid field is refused with its name
and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from tilecost import DType, KernelVariant, Layout, TileConfig, config_space

ALL_SPACES = [(dtype, layout) for dtype in DType for layout in Layout]
KEY_FORM = "ptr|tma-BMxBNxBK-gG-sS-wW-pP"


def _fields(**changes: object) -> dict[str, object]:
    """The fields of a valid configuration with some replaced."""
    fields: dict[str, object] = {
        "variant": "tma",
        "block_m": 128,
        "block_n": 256,
        "block_k": 64,
        "group_m": 8,
        "split_k": 1,
        "num_warps": 8,
        "num_stages": 3,
    }
    fields.update(changes)
    return fields


# --- the key --------------------------------------------------------------------------------------


def test_key_is_variant_tile_group_split_warps_stages() -> None:
    config = TileConfig(KernelVariant.TMA, 128, 256, 64, group_m=8, split_k=1, num_warps=8, num_stages=3)

    assert config.key == "tma-128x256x64-g8-s1-w8-p3"
    assert str(config) == "tma-128x256x64-g8-s1-w8-p3"


def test_key_of_the_defaults() -> None:
    # group_m=1, split_k=1, num_warps=4, num_stages=3 when not given
    assert TileConfig("ptr", 64, 32, 16).key == "ptr-64x32x16-g1-s1-w4-p3"


def test_variant_strings_parse_in_any_case() -> None:
    assert TileConfig("TMA", 64, 64, 32).variant is KernelVariant.TMA
    assert TileConfig("ptr", 64, 64, 32).variant is KernelVariant.PTR


@pytest.mark.parametrize(("dtype", "layout"), ALL_SPACES, ids=lambda v: v.value)
def test_every_config_of_every_space_round_trips_through_key_and_dict(dtype: DType, layout: Layout) -> None:
    space = config_space("h200", dtype, layout)
    keys = [c.key for c in space]

    assert len(set(keys)) == len(space)
    assert [TileConfig.from_key(k) for k in keys] == list(space)
    assert [TileConfig.from_dict(c.to_dict()) for c in space] == list(space)


def test_to_dict_is_plain_json() -> None:
    config = TileConfig.from_key("tma-128x256x64-g8-s1-w8-p3")
    data = config.to_dict()

    assert data == {
        "variant": "tma",
        "block_m": 128,
        "block_n": 256,
        "block_k": 64,
        "group_m": 8,
        "split_k": 1,
        "num_warps": 8,
        "num_stages": 3,
    }
    assert TileConfig.from_dict(json.loads(json.dumps(data))) == config


@pytest.mark.parametrize(
    "key",
    [
        "",
        "tma-128x256x64-g8-s1-w8",  # no stage count
        "tma-128x256-g8-s1-w8-p3",  # no BLOCK_K
        "wgmma-128x256x64-g8-s1-w8-p3",  # unknown variant
        "tma-128x256x64-g8-s1-w8-p3-extra",
        " tma-128x256x64-g8-s1-w8-p3",
        "tma-128x256x64-g-1-s1-w8-p3",
        "tma_128x256x64_g8_s1_w8_p3",
    ],
)
def test_from_key_refuses_malformed_keys_naming_the_form(key: str) -> None:
    with pytest.raises(ValueError, match=re.escape(KEY_FORM)):
        TileConfig.from_key(key)


def test_from_key_validates_the_fields_it_parses() -> None:
    with pytest.raises(ValueError, match=r"^block_m=48 is not allowed"):
        TileConfig.from_key("tma-48x256x64-g8-s1-w8-p3")
    with pytest.raises(ValueError, match=r"^num_stages=9 is out of range"):
        TileConfig.from_key("tma-128x256x64-g8-s1-w8-p9")


# --- invalid fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("block_m", 48, "use one of (16, 32, 64, 128, 256)"),
        ("block_m", 512, "use one of (16, 32, 64, 128, 256)"),
        ("block_n", 8, "use one of (16, 32, 64, 128, 256)"),
        ("block_n", 0, "use one of (16, 32, 64, 128, 256)"),
        ("block_k", 8, "use one of (16, 32, 64, 128, 256)"),
        ("block_k", 512, "use one of (16, 32, 64, 128, 256)"),
        ("num_warps", 3, "use one of (1, 2, 4, 8, 16)"),
        ("num_warps", 32, "use one of (1, 2, 4, 8, 16)"),
        ("group_m", 0, "allowed 1..64"),
        ("group_m", 65, "allowed 1..64"),
        ("split_k", 0, "allowed 1..64"),
        ("split_k", -2, "allowed 1..64"),
        ("split_k", 65, "allowed 1..64"),
        ("num_stages", 0, "allowed 1..8"),
        ("num_stages", 9, "allowed 1..8"),
    ],
)
def test_out_of_range_fields_are_refused_naming_field_value_and_allowed(field: str, value: int, allowed: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{field}={value} ")) as info:
        TileConfig(**_fields(**{field: value}))  # type: ignore[arg-type]
    assert allowed in str(info.value)


@pytest.mark.parametrize("field", ["block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages"])
@pytest.mark.parametrize("value", [True, 64.0, "64", None])
def test_non_integer_fields_are_refused_with_a_type_error(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=rf"^{field} must be an int, got {type(value).__name__}"):
        TileConfig(**_fields(**{field: value}))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["wgmma", "", None, 1])
def test_unknown_variants_are_refused_listing_the_allowed_ones(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(f"variant={value!r} is not allowed; use one of 'ptr', 'tma'")):
        TileConfig(**_fields(variant=value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"group_m": 64, "split_k": 64, "num_stages": 8},
        {"group_m": 1, "split_k": 1, "num_stages": 1},
        {"num_warps": 1, "block_k": 16},
        {"num_warps": 16, "block_k": 256},
    ],
)
def test_the_ends_of_each_range_are_valid(changes: dict[str, int]) -> None:
    config = TileConfig(**_fields(**changes))  # type: ignore[arg-type]

    assert all(getattr(config, f) == v for f, v in changes.items())


def test_from_dict_names_every_missing_field() -> None:
    data = _fields()
    del data["split_k"], data["num_stages"]

    with pytest.raises(ValueError, match=r"^config is missing split_k, num_stages$"):
        TileConfig.from_dict(data)


def test_from_dict_accepts_numpy_integers_like_problem_does() -> None:
    data = {f: np.int64(v) if isinstance(v, int) else v for f, v in _fields().items()}

    assert TileConfig.from_dict(data).key == "tma-128x256x64-g8-s1-w8-p3"


# --- a value --------------------------------------------------------------------------------------


def test_a_config_is_frozen_and_hashable() -> None:
    config = TileConfig.from_key("ptr-64x64x32-g1-s2-w4-p3")

    with pytest.raises(dataclasses.FrozenInstanceError):
        config.split_k = 4  # type: ignore[misc]
    assert config.split_k == 2
    assert len({config, TileConfig("ptr", 64, 64, 32, 1, 2, 4, 3)}) == 1


def test_num_threads_is_32_per_warp() -> None:
    assert TileConfig("ptr", 64, 64, 32, num_warps=8).num_threads == 256
    assert TileConfig("ptr", 64, 64, 32, num_warps=2).num_threads == 64
