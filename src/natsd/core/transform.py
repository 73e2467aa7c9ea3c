"""Subject transforms (nats-server subject_transform.go), the subset streams need.

A transform maps subjects matching ``src`` onto ``dest``. Destination tokens may reference
the source's wildcards as ``$N`` or ``{{wildcard(N)}}`` (1-based); a ``>`` in the
destination takes whatever the source's ``>`` matched. Other mapping functions
(partition, split...) are validated by the stream config and not applied yet.
"""

from __future__ import annotations

import re

__all__ = ["SubjectTransform"]

_WILDCARD_FN = re.compile(r"^\{\{\s*wildcard\s*\(\s*(\d+)\s*\)\s*\}\}$", re.IGNORECASE)


class SubjectTransform:
    def __init__(self, src: str, dest: str) -> None:
        self.src = src or ">"
        self.dest = dest
        self._src_toks = self.src.split(".")
        self._dest_toks = dest.split(".")

    def matches(self, subject: str) -> bool:
        return self.apply(subject) is not None

    def apply(self, subject: str) -> str | None:
        """The transformed subject, or None when ``subject`` does not match ``src``."""
        toks = subject.split(".")
        wild: list[str] = []
        rest = ""
        for i, p in enumerate(self._src_toks):
            if p == ">":
                if i >= len(toks):
                    return None
                rest = ".".join(toks[i:])
                break
            if i >= len(toks):
                return None
            if p == "*":
                wild.append(toks[i])
            elif p != toks[i]:
                return None
        else:
            if len(toks) != len(self._src_toks):
                return None
        out: list[str] = []
        nth = 0
        for t in self._dest_toks:
            m = _WILDCARD_FN.match(t)
            if m is not None or (t.startswith("$") and t[1:].isdigit()):
                n = int(m.group(1)) if m is not None else int(t[1:])
                if n < 1 or n > len(wild):
                    return None
                out.append(wild[n - 1])
            elif t == "*":
                if nth >= len(wild):
                    return None
                out.append(wild[nth])
                nth += 1
            elif t == ">":
                out.append(rest or ">")
            else:
                out.append(t)
        return ".".join(out)
