"""The IO-free rules of MCP's Streamable HTTP transport, for transport authors.

A transport reads the request's headers into :class:`HttpRequestFacts` (with
:class:`HeaderReader`, from the raw header list) and hands them to
``ServerConnection.receive_message(..., http=facts)``, which checks the mirror headers
(``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``) against the body. A client sends the headers
:func:`mirrored_params` and :func:`param_headers_for` name, encoded by
:func:`encode_header_value`. Nothing here opens a socket.
"""

from ._facts import HeaderReader, HttpRequestFacts, decode_header_value, encode_header_value
from ._param_headers import mirrored_params, param_headers_for

__all__ = [
    "HeaderReader",
    "HttpRequestFacts",
    "decode_header_value",
    "encode_header_value",
    "mirrored_params",
    "param_headers_for",
]
