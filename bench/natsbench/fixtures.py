"""Pre-filled data that the read scenarios share: ``Fixtures``.

Filling (a stream of ``--js-consume-msgs`` messages, a KV bucket, a 50 MiB object) is not
timed and done once per server start: every run that reads it, warm-up included, gets the
same data. A restarted server (new ``starts``) gets new data. After each scenario the phase
drops the fixtures that no later scenario reads (``release``), deleting them on the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .servers import Server

T = TypeVar("T")

#: make() -> (the data, how to delete it from the server)
Maker = Callable[[], tuple[T, Callable[[], None]]]


class Fixtures:
    def __init__(self) -> None:
        # (fixture name, server name, server start) -> (data, delete)
        self._made: dict[tuple[str, str, int], tuple[Any, Callable[[], None]]] = {}

    def get(self, name: str, server: Server, make: Maker[T]) -> T:
        """The fixture ``name`` on this start of ``server``, made now if it is not there."""
        key = (name, server.name, server.starts)
        if key not in self._made:
            self._made[key] = make()
        data: T = self._made[key][0]
        return data

    def release(self, servers: list[Server], keep: set[str]) -> None:
        """Delete every fixture not named in ``keep`` (from servers still on that start)."""
        by_name = {s.name: s for s in servers}
        for key in list(self._made):
            name, server_name, starts = key
            if name in keep:
                continue
            _, delete = self._made.pop(key)
            srv = by_name.get(server_name)
            if srv is not None and srv.starts == starts and srv.alive():
                delete()
