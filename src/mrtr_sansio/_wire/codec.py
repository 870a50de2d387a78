"""Pluggable JSON codecs: the stdlib one by default, orjson when the ``fast`` extra is installed.

JSON work is most of the per-message cost, so the codec is chosen once per connection and its
bound methods are called directly on the hot path.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

__all__ = ["JsonCodec", "OrjsonCodec", "StdlibJsonCodec", "default_codec"]

_JSON_WHITESPACE = " \t\n\r"  # RFC 8259 ws; str.strip() alone would take more


class JsonCodec(Protocol):
    """What a connection needs from a JSON library.

    ``loads`` takes UTF-8 bytes and raises ``ValueError`` (``UnicodeDecodeError`` and
    ``RecursionError`` are tolerated too) on anything that is not one valid JSON text; ``dumps``
    returns UTF-8 bytes without a trailing newline.
    """

    def loads(self, data: bytes) -> Any:
        """Decode one message from UTF-8 JSON bytes."""
        ...

    def dumps(self, obj: Any) -> bytes:
        """Encode one message as compact UTF-8 JSON bytes, without a newline."""
        ...


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """Parse a JSON number with a fraction or exponent, refusing overflow to infinity.

    The stdlib turns ``1e400`` into ``inf``, a value JSON cannot carry back out (orjson refuses
    it at parse time); refusing it here keeps both codecs in agreement.
    """
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:32]}")
    return value


class StdlibJsonCodec:
    """The standard library's C-accelerated json, strict about what RFC 8259 allows.

    Python's json accepts ``NaN`` and ``Infinity`` by default and turns ``1e400`` into
    infinity; this codec refuses all three. It encodes compactly with non-ASCII escaped so that
    any string (lone surrogates included) serializes.
    """

    __slots__ = ("_decode", "_encode", "_scan", "_write")

    def __init__(self) -> None:
        decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
        encoder = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)
        self._decode = decoder.decode
        self._encode = encoder.encode
        # The public calls wrap the C scanner and encoder in Python layers that cost about as
        # much as a small message: whitespace regexes on decode, a new C encoder per encode.
        # The hot path calls them directly; the output is the same (pinned by tests).
        self._scan = decoder.scan_once  # type: ignore[attr-defined]
        self._write = _c_encoder(encoder)

    def loads(self, data: bytes) -> Any:
        """Decode strictly (no NaN, no infinity); raises ``ValueError`` on invalid input."""
        text = data.decode("utf-8")
        try:
            value, end = self._scan(text, 0)
        except StopIteration:
            return self._decode(text)  # leading whitespace, or the error the public call raises
        if end != len(text) and text[end:].strip(_JSON_WHITESPACE):
            return self._decode(text)  # raises "Extra data"
        return value

    def dumps(self, obj: Any) -> bytes:
        """Encode compactly with non-ASCII escaped; raises ``ValueError`` on NaN or infinity."""
        write = self._write
        if write is None:  # pragma: no cover - not CPython
            return self._encode(obj).encode("ascii")
        return "".join(write(obj, 0)).encode("ascii")


def _c_encoder(encoder: json.JSONEncoder) -> Any:
    """CPython's C encoder set up as ``encoder.encode`` sets it up on every call, or None."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - not CPython
        return None
    try:
        return make(
            None, encoder.default, json.encoder.encode_basestring_ascii, encoder.indent,
            encoder.key_separator, encoder.item_separator, encoder.sort_keys, encoder.skipkeys,
            encoder.allow_nan,
        )  # fmt: skip
    except TypeError:  # pragma: no cover - a future signature
        return None


class OrjsonCodec:
    """orjson: several times faster than the stdlib on both directions (``fast`` extra)."""

    __slots__ = ("dumps", "loads")

    def __init__(self) -> None:
        try:
            import orjson
        except ImportError as exc:
            raise ImportError("OrjsonCodec needs orjson: pip install 'mrtr-sansio[fast]'") from exc
        self.loads = orjson.loads
        self.dumps = orjson.dumps


def default_codec() -> JsonCodec:
    """orjson when it is installed (the ``fast`` extra), else the stdlib codec.

    Called when a config is built without a ``codec``, so ``import mrtr_sansio`` never imports
    orjson. The two differ only at the edges of JSON: orjson reads integers beyond 64 bits as
    floats, refuses lone surrogates and cannot write integers beyond 64 bits (such a result is
    a local error); pass ``codec=StdlibJsonCodec()`` where those matter or where the output
    must be the same on every machine.
    """
    try:
        return OrjsonCodec()
    except ImportError:
        return StdlibJsonCodec()
