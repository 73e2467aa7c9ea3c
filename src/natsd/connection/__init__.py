"""The only layer that touches sockets: asyncio protocols for client connections."""
