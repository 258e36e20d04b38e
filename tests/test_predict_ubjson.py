"""The UBJSON reader: the spec's markers by hand, XGBoost's own UBJSON against its JSON, and what it refuses."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from tilecost.predict import ubjson


def _key(text: str) -> bytes:
    raw = text.encode()
    return b"U" + bytes([len(raw)]) + raw


def test_scalars_of_every_marker() -> None:
    cases = [
        (b"Z", None),
        (b"T", True),
        (b"F", False),
        (b"i\xff", -1),
        (b"U\xff", 255),
        (b"I" + struct.pack(">h", -300), -300),
        (b"l" + struct.pack(">i", 70_000), 70_000),
        (b"L" + struct.pack(">q", 2**40), 2**40),
        (b"d" + struct.pack(">f", 1.5), 1.5),
        (b"D" + struct.pack(">d", 0.1), 0.1),
        (b"Cx", "x"),
        (b"S" + _key("héllo"), "héllo"),
        (b"H" + _key("3.14"), "3.14"),
        (b"NNT", True),  # no-ops before a value are skipped
    ]
    for data, expected in cases:
        assert ubjson.loads(data) == expected, data


def test_containers_plain_counted_and_typed() -> None:
    plain = b"{" + _key("a") + b"[U\x01Si\x01xZ]" + _key("b") + b"{}" + b"}"
    assert ubjson.loads(plain) == {"a": [1, "x", None], "b": {}}

    counted = b"[#U\x02U\x07SU\x02ok"
    assert ubjson.loads(counted) == [7, "ok"]

    floats = struct.pack(">3f", 1.0, -2.5, 3.25)
    typed = ubjson.loads(b"[$d#U\x03" + floats)
    assert isinstance(typed, np.ndarray) and typed.tolist() == [1.0, -2.5, 3.25]
    ints = ubjson.loads(b"[$l#I" + struct.pack(">h", 2) + struct.pack(">2i", -1, 5))
    assert ints.tolist() == [-1, 5] and not ints.flags.writeable  # a view of the bytes

    typed_object = b"{$U#U\x02" + _key("x") + b"\x01" + _key("y") + b"\x02"
    assert ubjson.loads(typed_object) == {"x": 1, "y": 2}
    assert ubjson.loads(b"[$S#U\x02U\x01aU\x02bc") == ["a", "bc"]  # a typed array of a non-numeric type


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"Q", "unknown marker b'Q' at offset 0"),
        (b"[U\x01", "ends at offset 3"),
        (b"l\x00\x00", "ends at offset 3"),
        (b"SU\x05abc", "5 bytes wanted"),
        (b"Si\xff", "negative length -1"),
        (b"Sd\x00\x00\x00\x00", "a length must be an integer"),
        (b"[$d" + struct.pack(">f", 1.0), "needs a count"),
        (b"TT", "1 bytes after the value at offset 1"),
    ],
)
def test_bad_data_is_refused_with_the_offset(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ubjson.loads(data)


def _same(ours: object, theirs: object) -> None:
    """``ours`` (decoded UBJSON) holds what ``theirs`` (decoded JSON) does; arrays compared in float32, the
    precision XGBoost stores them in."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys()
        for key in theirs:
            _same(ours[key], theirs[key])
    elif isinstance(ours, np.ndarray):
        np.testing.assert_array_equal(ours.astype(np.float32), np.asarray(theirs, dtype=np.float32))
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
    else:
        assert ours == theirs


def test_xgboosts_ubjson_holds_what_its_json_does() -> None:
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    y = x[:, 0] * 2 + rng.normal(size=400)
    x[rng.random(x.shape) < 0.1] = np.nan  # so that default directions vary
    booster = xgb.train({"max_depth": 4, "nthread": 1}, xgb.DMatrix(x, y), 12)

    _same(ubjson.loads(booster.save_raw("ubj")), json.loads(booster.save_raw("json")))

    # The first two bytes tell the two formats apart (what the artifact's booster_format reads).
    assert ubjson.opens_object(booster.save_raw("ubj"))
    assert not ubjson.opens_object(booster.save_raw("json"))


@pytest.mark.parametrize(
    ("head", "is_object"),
    [(b"{U\x04name", True), (b"{$U#i\x01", True), (b"{#i\x01", True), (b"{}", True), (b'{"a": 1}', False),
     (b"{\n", False), (b"{ ", False), (b"[U", False), (b"{", False), (b"", False)],
)  # fmt: skip
def test_opens_object_reads_the_marker_after_the_brace(head: bytes, is_object: bool) -> None:
    assert ubjson.opens_object(head) is is_object
