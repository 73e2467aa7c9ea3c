"""The layering rule from the design notes: each layer imports only from layers below it."""

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
    "router": 3,
    "security": 3,
    # flags, config file, options, reload rules; what it may import is narrower still
    # (test_config_is_pure)
    "config": 4,
    "storage": 4,
    "connection": 5,
    "jetstream": 6,
    "monitor": 7,
    "server": 7,
    "main": 8,  # the natsd command: flags -> Server, process signals
    "logs": 0,
    "version": 0,
    "__init__": 8,
    "__main__": 8,
}


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
