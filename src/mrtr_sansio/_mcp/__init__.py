"""MCP facts and values: the request envelope, capabilities, MRTR values, subscriptions."""
