"""The layering rule from the design notes: each layer imports only from layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "natsd"

# Lower number = lower layer. A module may import natsd.<pkg> only with rank <= its own.
RANK = {
    "core": 1,
    "protocol": 2,
    "router": 3,
    "security": 3,
    "storage": 4,
    "connection": 5,
    "jetstream": 6,
    "monitor": 7,
    "server": 7,
    "cli": 7,
    "config": 7,
    "reload": 7,
    "confparse": 0,
    "options": 3,
    "logs": 0,
    "version": 0,
    "__init__": 8,
    "__main__": 8,
    "spark": 9,
    "natscli": 9,
}


def _layer(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("natsd"):
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("natsd")]
    return out


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


def test_natscli_imports_nothing_of_the_server() -> None:
    """The ``nats`` command line is a client: it reaches servers over the network only."""
    for path in (SRC / "natscli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                pytest.fail(f"{path} imports from outside natsd.natscli")
        for mod in _imports(path):
            assert mod.split(".")[:2] == ["natsd", "natscli"], f"{path} imports {mod}"


def test_spark_imports_nothing_of_the_server() -> None:
    """The Spark data source is a client: nats-py, pyspark, pyarrow and stdlib only."""
    for path in (SRC / "spark").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                pytest.fail(f"{path} imports from outside natsd.spark")
        for mod in _imports(path):
            assert mod.split(".")[:2] == ["natsd", "spark"], f"{path} imports {mod}"
