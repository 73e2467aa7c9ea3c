"""Entry builders of upstream's log_test.go (``index(i).terms(...)``, ``index(i).termRange``)
and a logger that keeps its lines, shared by the raft log, unstable and storage tests."""

from __future__ import annotations

from typing import NoReturn

from natsd.raft.logger import RaftPanic, go_sprint, go_sprintf
from natsd.raft.types import Entry, Snapshot, SnapshotMetadata


def terms(index: int, *terms: int) -> list[Entry]:
    """index(index).terms(terms...): entries at [index, index+len(terms)) with the given
    terms."""
    return [Entry(term=t, index=index + k) for k, t in enumerate(terms)]


def term_range(index: int, lo: int, hi: int) -> list[Entry]:
    """index(index).termRange(lo, hi): hi-lo entries at consecutive indexes from index, with
    consecutive terms in [lo, hi)."""
    return [Entry(term=t, index=index + k) for k, t in enumerate(range(lo, hi))]


def snap(index: int, term: int = 0) -> Snapshot:
    return Snapshot(metadata=SnapshotMetadata(index=index, term=term))


class CaptureLogger:
    """Keeps every line as ``LEVEL text`` (the interaction scripts' form); panics raise."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _f(self, lvl: str, format: str, *v: object) -> None:
        self.lines.append(f"{lvl} {go_sprintf(format, *v)}")

    def debug(self, *v: object) -> None:
        self.lines.append("DEBUG " + go_sprint(*v))

    def debugf(self, format: str, *v: object) -> None:
        self._f("DEBUG", format, *v)

    def info(self, *v: object) -> None:
        self.lines.append("INFO " + go_sprint(*v))

    def infof(self, format: str, *v: object) -> None:
        self._f("INFO", format, *v)

    def warning(self, *v: object) -> None:
        self.lines.append("WARN " + go_sprint(*v))

    def warningf(self, format: str, *v: object) -> None:
        self._f("WARN", format, *v)

    def error(self, *v: object) -> None:
        self.lines.append("ERROR " + go_sprint(*v))

    def errorf(self, format: str, *v: object) -> None:
        self._f("ERROR", format, *v)

    def fatal(self, *v: object) -> NoReturn:
        raise RaftPanic(go_sprint(*v))

    def fatalf(self, format: str, *v: object) -> NoReturn:
        raise RaftPanic(go_sprintf(format, *v))

    def panic(self, *v: object) -> NoReturn:
        raise RaftPanic(go_sprint(*v))

    def panicf(self, format: str, *v: object) -> NoReturn:
        self._f("FATAL", format, *v)
        raise RaftPanic(go_sprintf(format, *v))
