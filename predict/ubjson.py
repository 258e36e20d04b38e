"""A reader of Universal Binary JSON, the subset XGBoost writes for ``Booster.save_model("model.ubj")``.

The predictor reads boosters with numpy alone (no xgboost import: FACTS.md, 0.26-1.25 s). XGBoost's UBJSON
(draft 12, big-endian) holds each tree's node fields as *typed arrays* (``[$d#L<count>`` then the raw
float32s), which decode here as read-only numpy views of the bytes, without a Python object per node: the
shipped depth-10 booster is 16.2 MB as UBJSON against 28.7 MB of JSON, and decodes in milliseconds instead of
the JSON parser's half second.

Values decode as JSON's would: objects to ``dict`` (keys are strings), arrays to ``list``, except typed arrays
of a numeric type, which become 1-d numpy arrays (big-endian, as stored). Markers (the spec's): ``Z`` null,
``N`` no-op, ``T``/``F``, ``i`` int8, ``U`` uint8, ``I`` int16, ``l`` int32, ``L`` int64, ``d`` float32, ``D``
float64, ``C`` char, ``S`` string, ``H`` high-precision number (as a string), ``[``/``]``, ``{``/``}``, with
the optimised ``$`` (type) and ``#`` (count) headers. Anything else, or data that ends early, raises
:class:`ValueError` with the offset.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

__all__ = ["loads", "opens_object"]

# Fixed-size numeric markers: (struct format, numpy dtype), big-endian as the spec requires.
_NUMBERS = {
    b"i": (">b", ">i1"),
    b"U": (">B", ">u1"),
    b"I": (">h", ">i2"),
    b"l": (">i", ">i4"),
    b"L": (">q", ">i8"),
    b"d": (">f", ">f4"),
    b"D": (">d", ">f8"),
}
_SIZES = {marker: struct.calcsize(fmt) for marker, (fmt, _) in _NUMBERS.items()}
_CONSTANTS = {b"Z": None, b"T": True, b"F": False}
# The integer markers: a length (of a string, a key, or an optimised container's count) must use one of them.
_INTEGERS = frozenset({b"i", b"U", b"I", b"l", b"L"})


def opens_object(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` starts like a UBJSON object: ``{``, then a key's length marker, an optimised ``$``/``#``
    header or ``}``. (A JSON object opens with ``{`` and whitespace or a quote, so this tells XGBoost's two model
    formats apart from their first two bytes.)"""
    head = bytes(data[:2])
    return len(head) == 2 and head[:1] == b"{" and (head[1:] in _INTEGERS or head[1:] in (b"$", b"#", b"}"))


def loads(data: bytes | bytearray | memoryview) -> Any:
    """The value ``data`` encodes (one value; trailing bytes other than no-ops are an error)."""
    reader = _Reader(memoryview(data).cast("B"))
    value = reader.value()
    while reader.pos < len(reader.buf) and reader.peek() == b"N":
        reader.pos += 1
    if reader.pos != len(reader.buf):
        raise ValueError(f"UBJSON: {len(reader.buf) - reader.pos} bytes after the value at offset {reader.pos}")
    return value


class _Reader:
    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def peek(self) -> bytes:
        if self.pos >= len(self.buf):
            raise ValueError(f"UBJSON: the data ends at offset {self.pos}, inside a value")
        return bytes(self.buf[self.pos : self.pos + 1])

    def take(self, size: int) -> memoryview:
        end = self.pos + size
        if size < 0 or end > len(self.buf):
            raise ValueError(f"UBJSON: the data ends at offset {len(self.buf)}, {size} bytes wanted at {self.pos}")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def marker(self) -> bytes:
        while True:
            m = bytes(self.take(1))
            if m != b"N":
                return m

    def number(self, marker: bytes) -> int | float:
        fmt = _NUMBERS[marker][0]
        value: int | float = struct.unpack(fmt, self.take(_SIZES[marker]))[0]
        return value

    def length(self, marker: bytes | None = None) -> int:
        marker = marker or self.marker()
        if marker not in _INTEGERS:
            raise ValueError(f"UBJSON: a length must be an integer, found marker {marker!r} at offset {self.pos - 1}")
        n = int(self.number(marker))
        if n < 0:
            raise ValueError(f"UBJSON: negative length {n} at offset {self.pos}")
        return n

    def string(self) -> str:
        return str(self.take(self.length()), "utf-8")

    def value(self, marker: bytes | None = None) -> Any:
        marker = marker or self.marker()
        if marker in _NUMBERS:
            return self.number(marker)
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        if marker in (b"S", b"H"):
            return self.string()
        if marker == b"C":
            return str(self.take(1), "ascii")
        if marker == b"[":
            return self.array()
        if marker == b"{":
            return self.object()
        raise ValueError(f"UBJSON: unknown marker {marker!r} at offset {self.pos - 1}")

    def header(self) -> tuple[bytes | None, int | None]:
        """The optimised container header (``$`` type, ``#`` count), each None when absent."""
        kind = count = None
        if self.peek() == b"$":
            self.pos += 1
            kind = bytes(self.take(1))
            if self.peek() != b"#":
                raise ValueError(f"UBJSON: a typed container needs a count ('#') at offset {self.pos}")
        if self.peek() == b"#":
            self.pos += 1
            count = self.length()
        return kind, count

    def array(self) -> list[Any] | np.ndarray:
        kind, count = self.header()
        if kind in _NUMBERS and count is not None:
            return np.frombuffer(self.take(count * _SIZES[kind]), dtype=_NUMBERS[kind][1])
        if count is not None:
            return [self.value(kind) for _ in range(count)]
        items = []
        while (m := self.marker()) != b"]":
            items.append(self.value(m))
        return items

    def object(self) -> dict[str, Any]:
        kind, count = self.header()
        if count is not None:
            return {self.string(): self.value(kind) for _ in range(count)}
        out = {}
        while (m := self.marker()) != b"}":
            key = str(self.take(self.length(m)), "utf-8")
            out[key] = self.value()
        return out
