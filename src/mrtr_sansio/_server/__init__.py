"""The server role: its connection machine and the pure parts it consults."""
