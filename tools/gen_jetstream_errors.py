#!/usr/bin/env python3
"""Generate jetstream/wire/errors_generated.py from jetstream/wire/errors.json (in src/natsd/).

The flow nats-server uses (server/errors.json -> server/errors_gen.go ->
jetstream_errors_generated.go): the JSON file is the data, this script the generator, the
output a "do not edit" module with one typed constant per entry and the tables by name and by
err_code. Run it after replacing errors.json with a newer nats-server's copy:

    .venv/bin/python tools/gen_jetstream_errors.py          # rewrite the module
    .venv/bin/python tools/gen_jetstream_errors.py --check  # exit 1 when it is stale

tests/jetstream/test_errors.py renders the module in memory and fails when the file differs.
Standard library only, so the test (and a fresh checkout) can run it without natsd installed.
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "natsd" / "jetstream" / "wire" / "errors.json"
OUT = ROOT / "src" / "natsd" / "jetstream" / "wire" / "errors_generated.py"

HEADER = '''\
# Generated code, do not edit. See errors.json and run
# `.venv/bin/python tools/gen_jetstream_errors.py` to update.
# ruff: noqa: E501
"""nats-server's JetStream API errors: one typed constant per entry of errors.json.

errors.json is nats-server's ``server/errors.json`` (Apache-2.0, see NOTICE next to it). Each
constant is an :class:`~natsd.jetstream.wire.api_error.ErrorDef`; call it to get the ApiError to
raise (``JSStreamWrongLastSequenceErrF(seq=41)``). Import the constants through
``natsd.jetstream.wire.errors``.
"""

from __future__ import annotations

from typing import Final

from natsd.jetstream.wire.api_error import ErrorDef

'''


def _string(text: str) -> str:
    # A JSON string literal is a valid Python one (same escapes), in double quotes as ruff wants.
    return json.dumps(text, ensure_ascii=False)


def _validate(entries: Sequence[dict[str, Any]]) -> None:
    names: set[str] = set()
    codes: set[int] = set()
    for e in entries:
        name, code = e["constant"], e["error_code"]
        if not (name.isidentifier() and name.startswith("JS")) or keyword.iskeyword(name):
            raise ValueError(f"bad constant name {name!r}")
        if name in names or code in codes:
            raise ValueError(f"duplicate constant or error_code: {name} {code}")
        if not isinstance(e["code"], int) or not isinstance(code, int):
            raise ValueError(f"{name}: code and error_code must be integers")
        names.add(name)
        codes.add(code)


def render(entries: Sequence[dict[str, Any]]) -> str:
    """The text of errors_generated.py for the entries of errors.json."""
    _validate(entries)
    rows = sorted(entries, key=lambda e: str(e["constant"]))
    out = [HEADER]
    out.append("__all__ = [\n")
    out.append('    "API_ERRORS",\n    "BY_ERR_CODE",\n')
    out += [f'    "{e["constant"]}",\n' for e in rows]
    out.append("]\n\n")
    for e in rows:
        name = e["constant"]
        if e.get("comment"):
            out.append(f"# {e['comment']}\n")
        args = [_string(name), str(e["code"]), str(e["error_code"]), _string(e["description"])]
        if e.get("deprecates"):
            args.append(f"deprecates={_string(e['deprecates'])}")
        out.append(f"{name}: Final[ErrorDef] = ErrorDef({', '.join(args)})\n")
    out.append("\nAPI_ERRORS: Final[dict[str, ErrorDef]] = {\n")
    out += [f'    "{e["constant"]}": {e["constant"]},\n' for e in rows]
    out.append("}\n")
    out.append('"""Every error by its nats-server constant name."""\n')
    out.append("\nBY_ERR_CODE: Final[dict[int, ErrorDef]] = {\n")
    by_code = sorted(rows, key=lambda e: int(e["error_code"]))
    out += [f"    {e['error_code']}: {e['constant']},\n" for e in by_code]
    out.append("}\n")
    out.append('"""Every error by its ``err_code``."""\n')
    return "".join(out)


def load(path: Path = DATA) -> list[dict[str, Any]]:
    entries = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a JSON array")
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the module is stale")
    args = parser.parse_args(argv)
    text = render(load())
    current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if args.check:
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
