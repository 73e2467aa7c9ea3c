"""Pages generated when the site is built (``docs/conf.py`` calls :func:`write`), from the
code that decides what they describe, so they cannot drift from it:

* ``reference/configuration.md``: every configuration key natsd reads, from the tables
  ``natsd.config.policy`` consults when it reads a file;
* ``reference/spark-options.md``: every option of the Spark formats, from the table
  ``natsd_spark.option_table`` the option parsers accept.
"""

from __future__ import annotations

from pathlib import Path

from natsd.config.policy import LEVELS
from natsd_spark.option_table import OPTIONS


def _keys(keys: frozenset[str]) -> str:
    return ", ".join(f"`{k}`" for k in sorted(keys)) or "—"


def configuration() -> str:
    out = [
        "# Configuration keys",
        "",
        "Each map of a configuration file, and what natsd does with each key nats-server "
        "knows in it (keys are case-insensitive). **Supported**: natsd does what the key "
        "says. **Cosmetic**: it changes nothing a client or the stored data could observe; "
        "one warning line, and the server starts. **Checked, refused**: natsd makes "
        "nats-server's checks on it, then refuses it. **Refused**: a start-up error naming "
        "the key. A key nats-server does not know either is an error too "
        '(`unknown field "foo"`). See [Configuration](../configuration.md).',
        "",
    ]
    for level in LEVELS:
        out += [f"## {level.name}", "", "| | keys |", "|---|---|"]
        out.append(f"| supported | {_keys(level.supported)} |")
        if level.natsd_only:
            out.append(f"| supported (natsd's spellings; nats-server refuses them) | "
                       f"{_keys(level.natsd_only)} |")  # fmt: skip
        if level.cosmetic:
            out.append(f"| cosmetic (a warning) | {_keys(level.cosmetic)} |")
        if level.checked:
            out.append(f"| checked, refused | {_keys(level.checked)} |")
        if level.refused:
            out.append(f"| refused | {_keys(level.refused)} |")
        out.append("")
    return "\n".join(out)


def spark_options() -> str:
    out = [
        "# Spark options",
        "",
        'Every option of `format("jetstream")` (read and write) and '
        '`format("jetstream-kv")` (the KV sink). Names match in any case; any other '
        "option is refused by name. See [the Spark connector](../spark.md).",
        "",
        "| option | read | write | kv | default | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        every = "connect" in o.formats
        marks = ["✓" if every or f in o.formats else "" for f in ("read", "write", "kv")]
        default = f"`{o.default}`" if o.default and " " not in o.default else o.default
        out.append(f"| `{o.name}` | {' | '.join(marks)} | {default} | {o.text} |")
    return "\n".join(out) + "\n"


def write(docs: Path) -> None:
    """Write the generated pages under ``docs/reference`` (ignored by git)."""
    out = docs / "reference"
    out.mkdir(exist_ok=True)
    (out / "configuration.md").write_text(configuration())
    (out / "spark-options.md").write_text(spark_options())
