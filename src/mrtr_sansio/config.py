"""How a connection is configured: the role configs, the limits, and the JSON codecs.

:class:`ServerConfig`, :class:`ClientConfig` and :class:`Limits` are also at the front door;
the codecs (``ServerConfig(codec=OrjsonCodec())``) are here for those who pick one.
"""

from ._config import ClientConfig, Limits, ServerConfig
from ._wire.codec import JsonCodec, OrjsonCodec, StdlibJsonCodec, default_codec

__all__ = [
    "ClientConfig",
    "JsonCodec",
    "Limits",
    "OrjsonCodec",
    "ServerConfig",
    "StdlibJsonCodec",
    "default_codec",
]
