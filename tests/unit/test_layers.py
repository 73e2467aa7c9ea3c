"""The layering rule from the design notes: each layer imports only from layers below it,
and inside jetstream each subpackage only from the ones below it; no import hides from the
rule in an ``if TYPE_CHECKING:`` block or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "src"
SRC = ROOT / "natsd"
# The client products shipped in the same distribution: top-level packages that talk to a
# server over the network only.
PRODUCTS = ("natscli", "natsd_spark")

# Lower number = lower layer. A module may import natsd.<pkg> only with rank <= its own.
RANK = {
    "core": 1,
    "protocol": 2,
    "raft": 2,  # the consensus engine: pure, imports natsd.core at most
    "router": 3,
    "security": 3,
    # flags, config file, options, reload rules; what it may import is narrower still
    # (test_config_is_pure)
    "config": 4,
    "storage": 4,
    "connection": 5,
    "cluster": 6,  # the route mesh and the publish path across it
    "jetstream": 7,
    "monitor": 8,
    "server": 8,
    "server_usage": 8,  # the server's report to the monitor (routes, JetStream accounts)
    "main": 9,  # the natsd command: flags -> Server, process signals
    "workers": 9,  # natsd --workers: the supervisor of N server processes
    "testing": 10,  # natsd.testing: servers for a user's tests, and the pytest plugin
    "logs": 0,
    "version": 0,
    "hotpath": 0,  # compiled or pure: runs first, from natsd/__init__.py
    "__init__": 9,
    "__main__": 9,
}


# Ranks inside jetstream, the same rule one level down: a subpackage imports only its own rank
# or lower. The API decodes and calls the engine's verbs; the engine builds streams and
# consumers; a consumer reads its stream; a stream needs config and wire only, and reaches
# the engine through its StreamContext.
JETSTREAM_RANK = {
    "__init__": 0,  # the package's docstring; it imports nothing
    "wire": 1,  # Go JSON, generated errors, API level
    "config": 2,  # stream / consumer config decoding and checks, account limits
    "stream": 3,  # Stream, group commit, retention, StreamContext / StreamListener
    "consumer": 4,  # Consumer and its modules
    "engine": 5,  # JetStream, JsAccount, the verbs (add_stream, add_consumer, ...)
    "answer": 5,  # how an API answer is made and sent (the API's and a stream leader's)
    # clustered JetStream: the meta driver, stream groups, catch-up, membership, hand-over,
    # replicated consumers; it applies typed entries with plain calls, never the API
    "cluster": 6,
    "backup": 6,  # stream backups: the archive written from a stream, a stream made from one
    "api": 7,  # $JS.API route table and handlers, direct get, routing on a cluster
}

# Where function-local imports may choose what to load (the composition roots): the
# server, the natsd command, the package's lazy ``natsd.Server`` attribute, and the pytest
# plugin, which pytest loads in every session where natsd is installed and which loads the
# server only when a test uses one of its fixtures.
COMPOSITION_ROOTS = {"server.py", "main.py", "__init__.py", "testing/plugin.py"}


def _layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _all_imports(path: Path) -> list[str]:
    """Every absolute module name ``path`` imports (function-local imports included)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _imports(path: Path) -> list[str]:
    """The natsd server modules ``path`` imports."""
    return [m for m in _all_imports(path) if m.split(".")[0] == "natsd"]


MODULES = sorted(p for p in SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_imports_only_lower_layers(path: Path) -> None:
    mine = _layer(path)
    assert mine in RANK, f"{mine} has no rank; add it to RANK"
    for mod in _imports(path):
        parts = mod.split(".")
        if len(parts) == 1:
            continue
        target = parts[1]
        assert target in RANK, f"{path.name} imports unknown layer {mod}"
        if target == mine:
            continue
        assert RANK[target] <= RANK[mine], f"{path.relative_to(SRC)} imports {mod} (a higher layer)"


def _rank(module: str) -> tuple[int, int]:
    """(layer rank, rank inside jetstream) of a module path ``natsd.<layer>[.<sub>...]``."""
    parts = module.split(".")
    layer = parts[1] if len(parts) > 1 else "__init__"
    sub = 0
    if layer == "jetstream":
        name = parts[2] if len(parts) > 2 else "__init__"
        sub = JETSTREAM_RANK.get(name, 99)
    return RANK.get(layer, 99), sub


def _module_of(rel: str) -> str:
    """``jetstream/stream/stream.py`` -> ``natsd.jetstream.stream.stream``."""
    return ".".join(["natsd", *Path(rel).with_suffix("").parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The natsd modules an import statement loads (``from natsd.jetstream import api`` is
    ``natsd.jetstream.api``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.module is None or node.level:
        return []
    elif node.module.count(".") <= 1:
        names = [f"{node.module}.{a.name}" for a in node.names]
    else:
        names = [node.module]
    return [n for n in names if n.split(".")[0] == "natsd"]


def import_violations(rel: str, source: str) -> list[str]:
    """What is wrong with the imports of module ``rel`` (its path under ``src/natsd``):
    an import of a higher rank (layers, and subpackages inside jetstream), including one
    hidden in an ``if TYPE_CHECKING:`` block; and, outside the composition roots, a
    function-local ``import natsd...``. Both hiding places exist only to dodge an import
    cycle, i.e. a dependency pointing the wrong way: turn it around with a Protocol or a
    callback instead (``StreamContext``, ``ClientHost``, ``register_updates``)."""
    me = _module_of(rel)
    mine = _rank(me)
    root = rel in COMPOSITION_ROOTS
    out: list[str] = []

    def visit(node: ast.AST, in_function: bool, in_type_checking: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node):
                where = " (in `if TYPE_CHECKING:`)" if in_type_checking else ""
                if target != me and _rank(target) > mine:
                    out.append(f"{rel} imports {target}, a higher rank{where}")
                if in_function and not root:
                    out.append(f"{rel} imports {target} inside a function")
            return
        for child in ast.iter_child_nodes(node):
            func = in_function or isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            tc = in_type_checking or (
                isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body
            )
            visit(child, func, tc)

    visit(ast.parse(source), False, False)
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_import_points_up_or_hides(path: Path) -> None:
    """Ranks (inside jetstream too), no cycle dodged by a TYPE_CHECKING block or a
    function-local import (see ``import_violations``)."""
    rel = str(path.relative_to(SRC))
    assert import_violations(rel, path.read_text()) == []


def test_every_jetstream_part_has_a_rank() -> None:
    js = SRC / "jetstream"
    parts = {p.stem if p.is_file() else p.name for p in js.iterdir() if p.name != "__pycache__"}
    parts = {p for p in parts if not p.startswith(".") and p not in ("NOTICE",)}
    assert parts == set(JETSTREAM_RANK), parts ^ set(JETSTREAM_RANK)


@pytest.mark.parametrize(
    ("rel", "source", "problem"),
    [
        # The cycle this package had: the stream reaching up to the engine for its types.
        (
            "jetstream/stream/stream.py",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from natsd.jetstream.engine import JsAccount\n",
            "jetstream/stream/stream.py imports natsd.jetstream.engine, a higher rank"
            " (in `if TYPE_CHECKING:`)",
        ),
        # ... and to the consumers from inside a method.
        (
            "jetstream/stream/stream.py",
            "class Stream:\n"
            "    def notify(self) -> None:\n"
            "        from natsd.jetstream.consumer.consumer import Consumer\n",
            "jetstream/stream/stream.py imports natsd.jetstream.consumer.consumer inside a"
            " function",
        ),
        # The engine importing the API to subscribe it (now the server wires it in).
        (
            "jetstream/engine.py",
            "from natsd.jetstream import api\n",
            "jetstream/engine.py imports natsd.jetstream.api, a higher rank",
        ),
        # A lazy import of a lower module is still a hidden dependency.
        (
            "jetstream/consumer/ack.py",
            "def f() -> None:\n    import natsd.core.clock\n",
            "jetstream/consumer/ack.py imports natsd.core.clock inside a function",
        ),
        # Across layers too: the router looking up at JetStream.
        (
            "router/publish.py",
            "import typing\n"
            "if typing.TYPE_CHECKING:\n"
            "    from natsd.jetstream.stream import Stream\n",
            "router/publish.py imports natsd.jetstream.stream, a higher rank"
            " (in `if TYPE_CHECKING:`)",
        ),
    ],
)
def test_the_check_fails_on_a_reintroduced_cycle(rel: str, source: str, problem: str) -> None:
    assert problem in import_violations(rel, source)


def test_the_check_allows_what_the_rules_allow() -> None:
    ok = (
        "from typing import TYPE_CHECKING\n"
        "from natsd.jetstream.stream.stream import Stream\n"
        "from natsd.jetstream.config.consumer_config import AckPolicy\n"
        "from natsd.router.publish import publish\n"
        "if TYPE_CHECKING:\n"
        "    from natsd.jetstream.consumer.consumer import Consumer\n"  # same rank
    )
    assert import_violations("jetstream/consumer/ack.py", ok) == []
    lazy = "def _prepare() -> None:\n    from natsd.jetstream.engine import JetStream\n"
    assert import_violations("server.py", lazy) == []  # the composition root chooses


def test_jetstream_never_imports_connection_or_file_storage() -> None:
    js = SRC / "jetstream"
    assert js.is_dir(), js
    for path in js.rglob("*.py"):
        for mod in _imports(path):
            assert not mod.startswith("natsd.connection"), f"{path} imports {mod}"
            assert not mod.startswith("natsd.storage.file"), f"{path} imports {mod}"


def test_config_is_pure() -> None:
    """Configuration turns text into ServerOptions: it reads core, security and version only,
    never anything that runs (router, storage, connections, JetStream, the server)."""
    allowed = {"config", "core", "security", "version"}
    files = sorted((SRC / "config").rglob("*.py"))
    assert files
    for path in files:
        for mod in _imports(path):
            parts = mod.split(".")
            assert len(parts) > 1 and parts[1] in allowed, f"{path.relative_to(SRC)} imports {mod}"


def test_monitor_reads_through_its_protocol() -> None:
    """The monitor reads the server through ``monitor.source.MonitorSource``: it imports
    neither the server nor the JetStream engine nor the connections it reports on."""
    allowed = {"monitor", "config", "core", "router", "version"}
    files = sorted((SRC / "monitor").rglob("*.py"))
    assert files
    for path in files:
        for mod in _imports(path):
            parts = mod.split(".")
            assert len(parts) > 1 and parts[1] in allowed, f"{path.relative_to(SRC)} imports {mod}"


@pytest.mark.parametrize("product", PRODUCTS)
def test_products_import_nothing_of_the_server(product: str) -> None:
    """``nats`` and the Spark connector are clients: they reach servers over the network only,
    so neither imports the server package nor the other product."""
    pkg = ROOT / product
    files = sorted(pkg.rglob("*.py"))
    assert files, pkg
    for path in files:
        depth = len(path.relative_to(pkg).parts)  # 1 = a module at the package's top
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= depth + 1:
                pytest.fail(f"{path} imports from outside {product}")
        for mod in _all_imports(path):
            top = mod.split(".")[0]
            if top == "natsd" or top in PRODUCTS:
                assert top == product, f"{path} imports {mod}"


def test_server_imports_no_product() -> None:
    """The server never loads a client product, not even lazily inside a function."""
    for path in sorted(SRC.rglob("*.py")):
        for mod in _all_imports(path):
            assert mod.split(".")[0] not in PRODUCTS, f"{path} imports {mod}"


def test_raft_is_pure() -> None:
    """The Raft engine is sans-I/O and deterministic: it imports natsd.core at most, and no
    module that reaches sockets, the event loop, files, clocks or the logging module."""
    allowed = {"raft", "core"}
    forbidden = {
        "asyncio", "socket", "selectors", "ssl", "os", "io", "pathlib", "shutil", "tempfile",
        "time", "datetime", "logging", "threading", "multiprocessing", "subprocess",
    }  # fmt: skip
    files = sorted((SRC / "raft").rglob("*.py"))
    assert files
    for path in files:
        for mod in _all_imports(path):
            parts = mod.split(".")
            if parts[0] == "natsd":
                assert len(parts) > 1 and parts[1] in allowed, (
                    f"{path.relative_to(SRC)} imports {mod}"
                )
            else:
                assert parts[0] not in forbidden, f"{path.relative_to(SRC)} imports {mod}"


def test_clustered_jetstream_has_its_own_package() -> None:
    """The API is the request surface: clustered JetStream (meta driver, stream groups,
    catch-up, membership, hand-over, replicated consumers) lives in ``jetstream/cluster``,
    which ranks below the API, so no replica can apply an entry through the API's handler
    table (test_module_imports_only_lower_layers keeps it from importing the API)."""
    api = SRC / "jetstream" / "api"
    assert not [p.name for p in api.glob("cluster*.py")]
    assert JETSTREAM_RANK["cluster"] < JETSTREAM_RANK["api"]
    for path in (SRC / "jetstream" / "cluster").glob("*.py"):
        assert not [m for m in _all_imports(path) if m.startswith("natsd.jetstream.api")], path


def test_nothing_outside_raft_reads_the_engine_inside_a_node() -> None:
    """etcd keeps ``RawNode.raft`` private and offers Status()/BasicStatus(); natsd's code
    asks a node through its methods (``is_leader``, ``leader``, ``matches``, ...), never
    through its ``raft`` field."""
    readers = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "raft"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "raft"
                and isinstance(node.value, ast.Attribute | ast.Name)
                and (node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id)
                == "node"
            ):
                readers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert readers == []
