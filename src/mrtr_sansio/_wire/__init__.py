"""The JSON-RPC wire: one message classifier and id rule, stream framing, JSON codecs."""
