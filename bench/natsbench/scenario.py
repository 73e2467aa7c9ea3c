"""What a benchmark scenario is: ``Scenario`` (one entry of the table in ``table.py``) and
``Row`` (one line of the result table).

The phase runner calls, for each server column a scenario applies to and each run (a warm-up
first): ``setup`` (untimed preparation, shared across runs through ``Fixtures``), then
``run`` (one run, timed by the workers); ``report`` turns a good run's metrics into the
progress line, and ``rows`` are the scenario's lines in the result table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import Config
from .fixtures import Fixtures
from .harness import RunResult
from .servers import REF_SYNC, Server


@dataclass
class Row:
    label: str
    scenario: str
    metric: str
    kind: str  # "tput" (higher is better) or "lat" (lower is better)
    unit: str = "msg/s"
    decimals: int = 0


class Scenario:
    #: the ``--only`` name
    name: str = ""
    #: other ``--only`` names for it
    aliases: tuple[str, ...] = ()
    #: ``--only`` groups it belongs to
    groups: tuple[str, ...] = ()
    #: "core", "cluster", "publish", "consumer" or "kv": which load line of the header
    #: describes it. Core scenarios run on servers started without JetStream, cluster ones
    #: on two-server clusters without JetStream, the others on JetStream servers.
    family: str = "core"
    #: the server columns it runs on (sync_interval only matters for file storage)
    servers: tuple[str, ...] = ()
    #: left out of the default set (--only, or --js-only, selects it)
    opt_in: bool = False
    #: the fixture ``setup`` reads, kept while a later scenario needs it
    fixture: str | None = None
    #: what ``setup`` does, for the error line when it fails
    setup_what: str = ""

    @property
    def uses_jetstream(self) -> bool:
        return self.family not in ("core", "cluster")

    @property
    def clustered(self) -> bool:
        return self.family == "cluster"

    @property
    def syncs_files(self) -> bool:
        """Runs on the columns that differ only in how file streams are synced."""
        return REF_SYNC in self.servers

    def applies(self, server: str) -> bool:
        return server in self.servers

    def rows(self, cfg: Config) -> list[Row]:
        raise NotImplementedError

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> Any:
        """Untimed preparation (pre-filled data); raises BenchError or OSError on failure."""
        return None

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        raise NotImplementedError

    def report(self, m: dict[str, float]) -> str:
        """The progress line of a good run."""
        raise NotImplementedError
