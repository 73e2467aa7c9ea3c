"""Users, passwords and permissions. Pure: no sockets, no event loop."""
