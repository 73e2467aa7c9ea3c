"""The scenario table: every scenario by name, in the order of the result table, and how
``--only``, ``--js-only`` and ``--no-js`` choose from it.
"""

from __future__ import annotations

from .config import Config
from .scenario import Row, Scenario
from .scenarios.backup import BackupRestore
from .scenarios.consumers import PubToPull, Pull, Push
from .scenarios.core import CrossFanOut, CrossPubSub, FanOut, Publish, PubSub, ReqRep
from .scenarios.jscluster import JsClusterPublish
from .scenarios.kv import KvGet, KvPut, ObjGet, ObjPut
from .scenarios.mirror import MirrorCatchUp, SourceCatchUp, SourceSteady
from .scenarios.publish import JsPublish

TABLE: tuple[Scenario, ...] = (
    Publish(),
    PubSub(),
    FanOut(),
    ReqRep(),
    CrossPubSub(),
    CrossFanOut(),
    JsPublish("async", "file"),
    JsPublish("async", "mem"),
    JsPublish("sync", "file"),
    JsPublish("sync", "mem"),
    # opt-in (by name, --only js-pub or js): a compression: s2 file stream
    JsPublish("async", "file", s2=True),
    # opt-in (by name, --only js-pub or js): one fast-ingest batch into an allow_batched stream
    JsPublish("fast", "file"),
    Pull("js-pull-ack", "memory", acked=True, aliases=("pull-ack",)),
    # the file variant adds little beside js-pull-ack: by name, --only consumers or js
    Pull("js-pull-ack-file", "file", acked=True, aliases=("pull-ack-file",), opt_in=True),
    Pull("js-pull-none", "memory", acked=False, aliases=("pull-none",)),
    Push(),
    # a durable file stream (by name, --only consumers or js, like js-pull-ack-file)
    Push("js-push-file", "file", ("push-file",), opt_in=True),
    PubToPull(),
    MirrorCatchUp(),
    SourceCatchUp(),
    SourceSteady(),
    BackupRestore(),
    KvPut(sync=True),
    KvPut(sync=False),
    KvGet(sync=True),
    KvGet(sync=False),
    ObjPut(),
    ObjGet(),
    # opt-in (--only jscluster): a standalone server + a 3-server JetStream cluster per column
    JsClusterPublish(),
)
SCENARIOS: dict[str, Scenario] = {s.name: s for s in TABLE}
#: ``--only`` groups, in the order the usage error lists them
GROUP_NAMES = (
    "core",
    "cluster",
    "jscluster",
    "js",
    "kv",
    "kv-put",
    "kv-get",
    "obj",
    "js-pub",
    "consumers",
    "consumer",
    "mirror",
)
GROUPS: dict[str, list[str]] = {g: [s.name for s in TABLE if g in s.groups] for g in GROUP_NAMES}
ALIASES: dict[str, str] = {
    **{s.name: s.name for s in TABLE},
    **{a: s.name for s in TABLE for a in s.aliases},
}


def table_rows(cfg: Config) -> list[Row]:
    return [row for s in TABLE for row in s.rows(cfg)]


def select_scenarios(only: str, no_js: bool = False, js_only: bool = False) -> list[str]:
    if sum((bool(only), no_js, js_only)) > 1:
        raise SystemExit("--only, --no-js and --js-only are exclusive")
    if js_only:
        return [s.name for s in TABLE if s.uses_jetstream and s.family != "jscluster"]
    if no_js:
        return [s.name for s in TABLE if not s.uses_jetstream]
    if not only:
        return [s.name for s in TABLE if not s.opt_in]
    chosen: list[str] = []
    for tok in only.split(","):
        tok = tok.strip().lower()
        if not tok:
            continue
        if tok in GROUPS:
            chosen.extend(GROUPS[tok])
            continue
        if tok not in ALIASES:
            raise SystemExit(
                f"unknown scenario {tok!r}; choose from {', '.join(SCENARIOS)}, {', '.join(GROUPS)}"
            )
        chosen.append(ALIASES[tok])
    return [s for s in SCENARIOS if s in chosen]


def applies(scen: str, server: str) -> bool:
    """Which server columns run which scenario."""
    return SCENARIOS[scen].applies(server)
