"""One entry of a connection's outgoing queue, before the transport asks for it.

A connection queues what it must write as :data:`Pending` entries: which
:class:`~mrtr_sansio.Outgoing` item the message becomes, the encoded bytes, the message they
encode, the id of the peer request it belongs to (None for none), and the fields the item has
beyond :class:`~mrtr_sansio.Outgoing`'s, in order. Byte-stream transports only read the bytes;
:func:`item` builds the typed item only when a transport asks for items.

The entry is a plain tuple of a fixed shape, read by unpacking: every message passes through
the queue, and a ``NamedTuple`` costs about 2% of an exchange more (its constructor and its
attribute reads), measured with ``bench/instructions.py engine-orjson``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._events import Outgoing

__all__ = ["Pending", "item"]

#: (kind, data, message, related request id, extra fields of ``kind``).
Pending = tuple[Callable[..., Outgoing], bytes, Mapping[str, Any], Any, tuple[Any, ...]]


def item(entry: Pending) -> Outgoing:
    """The typed outgoing item ``entry`` becomes."""
    kind, data, message, related, extra = entry
    return kind(data, message, related, *extra)
