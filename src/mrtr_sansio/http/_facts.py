"""Streamable HTTP facts a transport hands to the core, and the mirror-header rules.

Modern HTTP requests mirror parts of the body in headers: ``MCP-Protocol-Version`` must equal the
envelope's version, ``Mcp-Method`` the method, and ``Mcp-Name`` the tool or prompt name or the
resource URI (on ``tools/call``, ``prompts/get``, ``resources/read``) or the task id (on
``tasks/get``, ``tasks/update``, ``tasks/cancel``). Values that are not plain
header-safe ASCII travel as ``=?base64?<base64 of UTF-8>?=`` (``Mcp-Name`` and
``Mcp-Param-*`` only: the version and the method are plain ASCII, compared as sent). Any
violation is -32020 with HTTP status 400. Tool arguments a tool marks with ``x-mcp-header``
are mirrored too, in ``Mcp-Param-{Name}`` headers (see :mod:`._param_headers`).

A mirror header sent twice is refused like a mismatch: an intermediary that routes or authorizes
on one copy would otherwise see a different request than the one served. Transports should
build the facts from the raw header list (:meth:`HttpRequestFacts.from_header_list`), where a
repeat is still visible, not from a mapping that keeps one copy.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from mrtr_sansio._errors import ErrorCode, JsonRpcError, RemoteProtocolError
from mrtr_sansio._mcp.methods import NAME_FIELDS

from ._names import (
    MCP_HEADERS,
    METHOD_DISPLAY,
    METHOD_HEADER,
    NAME_DISPLAY,
    NAME_HEADER,
    PARAM_DISPLAY,
    PARAM_PREFIX,
    VERSION_DISPLAY,
    VERSION_HEADER,
)

__all__ = ["HeaderReader", "HttpRequestFacts", "decode_header_value", "encode_header_value"]

PARAM_PREFIX_BYTES = PARAM_PREFIX.encode()
#: How each checked header is named in error messages.
_DISPLAY = {
    VERSION_HEADER: VERSION_DISPLAY,
    METHOD_HEADER: METHOD_DISPLAY,
    NAME_HEADER: NAME_DISPLAY,
}


@attrs.frozen
class HttpRequestFacts:
    """The MCP headers of one HTTP POST, as received (None when a header was absent).

    ``params`` holds the ``Mcp-Param-{Name}`` headers by lower-case ``{Name}``; ``repeated``
    the lower-case names of those MCP headers that arrived more than once (a modern request
    with any is refused, -32020).
    """

    protocol_version: str | None = None
    method: str | None = None
    name: str | None = None
    params: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    repeated: frozenset[str] = frozenset()

    @classmethod
    def from_header_list(
        cls, headers: Iterable[tuple[bytes | str, bytes | str]]
    ) -> HttpRequestFacts:
        """Pick the MCP headers out of a raw header list (an ASGI scope's ``headers``).

        Names match case-insensitively; bytes are read as Latin-1, as HTTP/1.1 delivers them
        (a byte outside visible ASCII then fails the character check). A header that appears
        more than once is recorded in ``repeated``. (:class:`HeaderReader` reads the same
        list once for these facts and for a transport's own headers.)
        """
        return _MCP_ONLY.read(headers)[0]

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> HttpRequestFacts:
        """Pick the MCP headers out of a mapping with lower-case names (one value each: a
        repeat cannot be seen here; transports should prefer :meth:`from_header_list`)."""
        return cls._from(headers, frozenset())

    @classmethod
    def _from(cls, headers: Mapping[str, str], repeated: frozenset[str]) -> HttpRequestFacts:
        n = len(PARAM_PREFIX)
        params = {k[n:]: v for k, v in headers.items() if k.startswith(PARAM_PREFIX)}
        return cls(
            headers.get(VERSION_HEADER),
            headers.get(METHOD_HEADER),
            headers.get(NAME_HEADER),
            params,
            repeated,
        )


class HeaderReader:
    """Reads a raw header list (an ASGI scope's ``headers``) in one pass: the MCP headers as
    :class:`HttpRequestFacts`, and the headers a transport names for itself.

    A transport needs a few headers of its own (``Host``, ``Content-Type``...) beside the MCP
    ones, and must see a repeated header, which a mapping that keeps one copy hides; one pass
    over the list serves both. For each header it was made for, :meth:`read` keeps the first
    copy and records a repeat, except that the copies of a ``lists`` header are joined with
    ``", "`` (RFC 9110 section 5.3: a list-valued field may be split over several lines).
    Every other header is skipped without being decoded.
    """

    __slots__ = ("_lists", "_names")

    def __init__(self, transport: Iterable[str] = (), *, lists: Iterable[str] = ()) -> None:
        wanted = {*MCP_HEADERS, *(name.lower() for name in transport)}
        # Looked up by the raw name as it comes (bytes from ASGI servers, which lower-case
        # them), and by its decoded lower-case form for a server that does not.
        self._names: dict[bytes | str, str] = {name: name for name in wanted}
        self._names.update({name.encode("latin-1"): name for name in wanted})
        self._lists = frozenset(name.lower() for name in lists) - MCP_HEADERS

    def read(
        self, headers: Iterable[tuple[bytes | str, bytes | str]]
    ) -> tuple[HttpRequestFacts, dict[str, str], tuple[str, ...]]:
        """The MCP facts; every header read (MCP and transport ones), by lower-case name; and
        the transport headers that came more than once (not ``lists`` ones), in the order of
        their repeats (repeated MCP headers are in the facts' ``repeated``)."""
        names = self._names
        found: dict[str, str] = {}
        repeats: list[tuple[str, str]] | None = None
        params = False
        for raw_name, raw_value in headers:
            name = names.get(raw_name)
            if name is None:
                if isinstance(raw_name, bytes):
                    if raw_name.islower() and not raw_name.startswith(PARAM_PREFIX_BYTES):
                        continue  # the usual case: a header nobody here reads
                    text = raw_name.decode("latin-1").lower()
                else:
                    text = raw_name.lower()
                name = names.get(text)
                if name is None:
                    if not text.startswith(PARAM_PREFIX):
                        continue
                    name = text
                    params = True
            value = raw_value.decode("latin-1") if isinstance(raw_value, bytes) else raw_value
            if name not in found:
                found[name] = value
            elif repeats is None:
                repeats = [(name, value)]
            else:
                repeats.append((name, value))
        if repeats is None and not params:  # the usual case
            facts = HttpRequestFacts(
                found.get(VERSION_HEADER),
                found.get(METHOD_HEADER),
                found.get(NAME_HEADER),
                {},
                _NONE,
            )
            return facts, found, ()
        repeated: list[str] = []
        mcp_repeated = _NONE if repeats is None else self._repeats(repeats, found, repeated)
        n = len(PARAM_PREFIX)
        facts = HttpRequestFacts(
            found.get(VERSION_HEADER),
            found.get(METHOD_HEADER),
            found.get(NAME_HEADER),
            {k[n:]: v for k, v in found.items() if k.startswith(PARAM_PREFIX)},
            mcp_repeated,
        )
        return facts, found, tuple(repeated)

    def _repeats(
        self, repeats: list[tuple[str, str]], found: dict[str, str], repeated: list[str]
    ) -> frozenset[str]:
        """Sort the second (and later) copies: a ``lists`` header's are joined to the first,
        transport headers go to ``repeated``; returns the repeated MCP headers."""
        mcp: set[str] = set()
        for name, value in repeats:
            if name in MCP_HEADERS or name.startswith(PARAM_PREFIX):
                mcp.add(name)
            elif name in self._lists:
                found[name] += ", " + value
            elif name not in repeated:
                repeated.append(name)
        return frozenset(mcp)


_MCP_ONLY = HeaderReader()
_NONE: frozenset[str] = frozenset()


def is_field_value(value: str) -> bool:
    """Whether ``value`` holds only visible ASCII, space and horizontal tab: what a plain
    mirror-header value may hold (an ASCII character is printable exactly when it is visible
    or a space)."""
    return value.isascii() and value.replace("\t", " ").isprintable()


# RFC 3986 reg-name (unreserved, pct-encoded, sub-delims), then an optional numeric port.
_REG_NAME_PORT = re.compile(
    r"((?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+)(?::([0-9]{1,5}))?", re.ASCII
)
_IP_LITERAL_PORT = re.compile(r"\[([0-9A-Fa-f:.]+)\](?::([0-9]{1,5}))?", re.ASCII)


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header value (``uri-host [":" port]``), lower-cased, or None
    when the value is not exactly that.

    An IPv6 literal comes back in brackets (``"[::1]"``). Anything after the host other than
    a numeric port (``[::1]evil.example``, ``localhost:evil``) makes the value invalid, so a
    check of the host against an allowed list cannot be steered by what follows it.
    """
    match = _IP_LITERAL_PORT.fullmatch(value)
    if match is not None:
        try:
            ipaddress.IPv6Address(match[1])
        except ValueError:
            return None
        name = f"[{match[1].lower()}]"
    else:
        match = _REG_NAME_PORT.fullmatch(value)
        if match is None:
            return None
        name = match[1].lower()
    port = match[2]
    return name if port is None or int(port) <= 65535 else None


def origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` header value (``scheme "://" host [":" port]``), as
    :func:`host_name` gives it, or None (``null``, a path, anything malformed)."""
    scheme, sep, rest = origin.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return None
    return host_name(rest)


def decode_header_value(value: str) -> str:
    """Undo the ``=?base64?...?=`` form; plain values come back unchanged.

    Raises ``ValueError`` for a malformed encoded value.
    """
    if value.startswith("=?base64?") and value.endswith("?="):
        payload = value[9:-2]
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except ValueError as exc:  # binascii.Error, UnicodeDecodeError, non-ASCII payload
            raise ValueError("malformed base64 header value") from exc
    return value


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable() and value == value.strip()


def encode_header_value(value: str) -> str:
    """The header form of ``value``: itself when plain printable ASCII, else base64-wrapped."""
    if _header_safe(value) and not value.startswith("=?"):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _mismatch(message: str, request_id: Any) -> RemoteProtocolError:
    return RemoteProtocolError(JsonRpcError(ErrorCode.HEADER_MISMATCH, message), request_id)


def header_display_name(name: str) -> str:
    """How a lower-case MCP header name is written in error messages."""
    if name.startswith(PARAM_PREFIX):
        return PARAM_DISPLAY + name[len(PARAM_PREFIX) :]
    return _DISPLAY.get(name, name)


def _plain(value: str, header: str, request_id: Any) -> str:
    """``value`` stripped, after refusing characters a header value may not carry as is."""
    if not is_field_value(value):
        raise _mismatch(f"Header {header} has invalid characters", request_id)
    return value.strip()


def check_headers(
    facts: HttpRequestFacts,
    request_id: Any,
    method: str,
    params: Mapping[str, Any] | None,
    body_version: Any,
) -> None:
    """Raise -32020 when a required mirror header is missing or disagrees with the body.

    ``body_version`` is the envelope's version, or None when the body has none (then the
    missing envelope is reported by the envelope check, as -32602). Any repeated MCP header
    (``Mcp-Param-*`` included) is refused first; a value with a character outside visible
    ASCII, space and tab is refused as invalid. ``MCP-Protocol-Version`` and ``Mcp-Method``
    are compared as they are sent; only ``Mcp-Name`` may use the base64 form.
    """
    if facts.repeated:
        names = ", ".join(header_display_name(n) for n in sorted(facts.repeated))
        raise _mismatch(f"Header sent more than once: {names}", request_id)
    if facts.protocol_version is None:
        raise _mismatch("Missing required header MCP-Protocol-Version", request_id)
    version = _plain(facts.protocol_version, VERSION_DISPLAY, request_id)
    if body_version is not None and version != body_version:
        raise _mismatch(
            f"Header mismatch: MCP-Protocol-Version header value '{facts.protocol_version}' "
            f"does not match body value '{body_version}'",
            request_id,
        )
    _check_mirror(facts.method, METHOD_DISPLAY, method, request_id, encoded=False)
    field = NAME_FIELDS.get(method)
    if field is None:
        return
    body_name = params.get(field) if params is not None else None
    _check_mirror(facts.name, NAME_DISPLAY, body_name, request_id)


def _check_mirror(
    raw: str | None, header: str, body_value: Any, request_id: Any, *, encoded: bool = True
) -> None:
    """-32020 unless the mirror header ``raw`` equals the body's value: decoded first when
    ``encoded`` (the base64 form is for ``Mcp-Name`` and ``Mcp-Param-*`` only), else as is."""
    if raw is None:
        raise _mismatch(f"Missing required header {header}", request_id)
    value = _plain(raw, header, request_id)
    if encoded:
        try:
            value = decode_header_value(value)
        except ValueError:
            raise _mismatch(f"Malformed {header} header", request_id) from None
    elif value.startswith("=?base64?"):
        # A gateway that routes or filters on the header reads it as it is: so must we.
        raise _mismatch(
            f"Header {header} must be sent as is: the =?base64?...?= form is only for "
            "Mcp-Name and Mcp-Param-* headers",
            request_id,
        )
    if value != body_value:
        raise _mismatch(
            f"Header mismatch: {header} header value '{value}' does not match "
            f"body value '{body_value}'",
            request_id,
        )
