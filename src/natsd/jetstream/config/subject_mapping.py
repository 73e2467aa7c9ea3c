"""Subject validity, overlap and subject-transform mapping validation (nats-server
subject_transform.go), shared by stream and consumer config checks.

Split out of stream_config.py; see that module for the overall flow.
"""

from __future__ import annotations

import re


def _has_ws(t: str) -> bool:
    return any(c in t for c in "\t\n\f\r ")


def is_valid_subject(subject: str) -> bool:
    """nats-server's ``IsValidSubject``: non-empty tokens, ``>`` only last, no whitespace."""
    if not subject:
        return False
    sfwc = False
    for t in subject.split("."):
        if not t or sfwc:
            return False
        if len(t) > 1:
            if _has_ws(t):
                return False
            continue
        if t == ">":
            sfwc = True
        elif t in " \t\n\r\f":
            return False
    return True


def _is_literal(subject: str) -> bool:
    return all(t not in ("*", ">") for t in subject.split("."))


def _is_valid_publish_subject(subject: str) -> bool:
    return is_valid_subject(subject) and _is_literal(subject)


def is_valid_name(name: str) -> bool:
    """``isValidAssetName``: stream, consumer and mirror/source names."""
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>\\/")


def _subset_match_tokens(tokens: list[str], test: list[str]) -> bool:
    for i, t2 in enumerate(test):
        if i >= len(tokens):
            return False
        if not t2:
            return False
        if t2 == ">":
            return True
        t1 = tokens[i]
        if not t1 or t1 == ">":
            return False
        if t1 == "*":
            if t2 != "*":
                return False
            continue
        if t2[0] != "*" and t1 != t2:
            return False
    return len(tokens) == len(test)


def subject_is_subset_match(subject: str, test: str) -> bool:
    """``subjectIsSubsetMatch``: every subject matched by ``subject`` is matched by ``test``."""
    return _subset_match_tokens(subject.split("."), test.split("."))


def subjects_collide(a: str, b: str) -> bool:
    """nats-server's ``SubjectsCollide``: some literal subject matches both."""
    if a == b:
        return True
    ta, tb = a.split("."), b.split(".")
    pwc1, fwc1 = "*" in ta, ">" in ta
    pwc2, fwc2 = "*" in tb, ">" in tb
    l1, l2 = not (pwc1 or fwc1), not (pwc2 or fwc2)
    if l1 and l2:
        return a == b
    if l1 and not l2:
        return _subset_match_tokens(ta, tb)
    if l2 and not l1:
        return _subset_match_tokens(tb, ta)
    if not fwc1 and not fwc2 and len(ta) != len(tb):
        return False
    if len(ta) != len(tb):
        if (len(ta) < len(tb) and not fwc1) or (len(tb) < len(ta) and not fwc2):
            return False
    for t1, t2 in zip(ta, tb, strict=False):
        if not t1 or not t2:
            return False
        if t1[0] in "*>" or t2[0] in "*>":
            continue
        if t1 != t2:
            return False
    return True


# ============================================================================= transforms
_MAPPING_ERR = "invalid mapping destination"
_ERR_BAD_SUBJECT = "invalid subject"
_ERR_DEST_SUBJECT = f"{_MAPPING_ERR}: invalid transform"
_ERR_UNKNOWN_FN = f"{_MAPPING_ERR}: unknown function"
_ERR_INDEX_RANGE = f"{_MAPPING_ERR}: wildcard index out of range"
_ERR_NOT_ENOUGH = f"{_MAPPING_ERR}: not enough arguments passed to the function"
_ERR_INVALID_ARG = f"{_MAPPING_ERR}: function argument is invalid or in the wrong format"
_ERR_TOO_MANY = f"{_MAPPING_ERR}: too many arguments passed to the function"

_S = r"[\t\n\f\r ]*"



def overlaps(ours: list[str], theirs: list[str]) -> bool:
    """Whether any subject of ``ours`` collides with any of ``theirs`` (two streams'
    subjects: a publish could belong to both)."""
    return any(subjects_collide(a, b) for a in ours for b in theirs)

def _fn_re(name: str) -> re.Pattern[str]:
    letters = "".join(
        f"[{c.lower()}{c.upper()}]" if c.isupper() or i == 0 else c for i, c in enumerate(name)
    )
    return re.compile(r"\{\{" + _S + letters + _S + r"\((.*)\)" + _S + r"\}\}")


_RE_PARTITION = _fn_re("Partition")
_RE_WILDCARD = _fn_re("Wildcard")
_RE_SPLIT_LEFT = _fn_re("SplitFromLeft")
_RE_SPLIT_RIGHT = _fn_re("SplitFromRight")
_RE_SLICE_LEFT = _fn_re("SliceFromLeft")
_RE_SLICE_RIGHT = _fn_re("SliceFromRight")
_RE_SPLIT = _fn_re("Split")
_RE_LEFT = _fn_re("Left")
_RE_RIGHT = _fn_re("Right")
_RE_RANDOM = _fn_re("Random")
_ALL_FNS = (
    _RE_PARTITION,
    _RE_WILDCARD,
    _RE_SPLIT_LEFT,
    _RE_SPLIT_RIGHT,
    _RE_SLICE_LEFT,
    _RE_SLICE_RIGHT,
    _RE_SPLIT,
    _RE_LEFT,
    _RE_RIGHT,
    _RE_RANDOM,
)
_COMMA = re.compile(r"," + _S)
_ATOI = re.compile(r"[+-]?[0-9]+")

_NO_TRANSFORM, _BAD, _PARTITION, _WILDCARD, _RANDOM, _OTHER_FN = range(6)


def _mapping_err(token: str, err: str) -> str:
    return f"{err} in {token}" if token else err


def _go_atoi(s: str, bits: int = 64) -> int | None:
    if not _ATOI.fullmatch(s):
        return None
    v = int(s)
    lim = 1 << (bits - 1)
    return v if -lim <= v < lim else None


def _fn_args(pattern: re.Pattern[str], token: str) -> list[str] | None:
    m = pattern.search(token)
    if m is None:
        return None
    return _COMMA.split(m.group(1))


def _index_placeholders(token: str) -> tuple[int, list[int], str | None]:
    """(kind, source wildcard indexes, error) of one destination token."""
    n = len(token)
    if n <= 1:
        return _NO_TRANSFORM, [], None
    if token[0] == "$":
        tp = _go_atoi(token[1:])
        if tp is None:
            return _NO_TRANSFORM, [], None
        return _WILDCARD, [tp], None
    if n <= 4 or not (token.startswith("{{") and token.endswith("}}")):
        return _NO_TRANSFORM, [], None

    args = _fn_args(_RE_WILDCARD, token)
    if args is not None:
        if len(args) == 1 and args[0] == "":
            return _BAD, [], _mapping_err(token, _ERR_NOT_ENOUGH)
        if len(args) > 1:
            return _BAD, [], _mapping_err(token, _ERR_TOO_MANY)
        idx = _go_atoi(args[0].strip(" "))
        if idx is None:
            return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
        return _WILDCARD, [idx], None

    args = _fn_args(_RE_PARTITION, token)
    if args is not None:
        if len(args) < 1:
            return _BAD, [], _mapping_err(token, _ERR_NOT_ENOUGH)
        if _go_atoi(args[0].strip(" "), 32) is None:
            return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
        idxs: list[int] = []
        for a in args[1:]:
            i = _go_atoi(a.strip(" "))
            if i is None:
                return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
            idxs.append(i)
        return _PARTITION, idxs, None

    for pattern in (
        _RE_SPLIT_LEFT,
        _RE_SPLIT_RIGHT,
        _RE_SLICE_LEFT,
        _RE_SLICE_RIGHT,
        _RE_RIGHT,
        _RE_LEFT,
    ):
        args = _fn_args(pattern, token)
        if args is not None:
            if len(args) < 2:
                return _BAD, [], _mapping_err(token, _ERR_NOT_ENOUGH)
            if len(args) > 2:
                return _BAD, [], _mapping_err(token, _ERR_TOO_MANY)
            idx = _go_atoi(args[0].strip(" "))
            if idx is None or _go_atoi(args[1].strip(" "), 32) is None:
                return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
            return _OTHER_FN, [idx], None

    args = _fn_args(_RE_SPLIT, token)
    if args is not None:
        if len(args) < 2:
            return _BAD, [], _mapping_err(token, _ERR_NOT_ENOUGH)
        if len(args) > 2:
            return _BAD, [], _mapping_err(token, _ERR_TOO_MANY)
        idx = _go_atoi(args[0].strip(" "))
        if idx is None or " " in args[1] or "." in args[1]:
            return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
        return _OTHER_FN, [idx], None

    args = _fn_args(_RE_RANDOM, token)
    if args is not None:
        if len(args) != 1:
            return _BAD, [], _mapping_err(token, _ERR_NOT_ENOUGH)
        if _go_atoi(args[0].strip(" "), 32) is None:
            return _BAD, [], _mapping_err(token, _ERR_INVALID_ARG)
        return _RANDOM, [], None

    return _BAD, [], _mapping_err(token, _ERR_UNKNOWN_FN)


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    if not subject:
        return False, [], 0, False
    npwcs = 0
    sfwc = False
    tokens = subject.split(".")
    for t in tokens:
        if not t or sfwc:
            return False, [], 0, False
        if len(t) > 1:
            continue
        if t == ">":
            sfwc = True
        elif t == "*":
            npwcs += 1
    return True, tokens, npwcs, sfwc


def _subject_transform_error(src: str, dest: str) -> str | None:
    """The error of nats-server's non-strict ``NewSubjectTransform(src, dest)``, or None."""
    if not dest:
        return None
    if not src:
        src = ">"
    sv, _, npwcs, has_fwc = _subject_info(src)
    dv, dtokens, dnpwcs, dhas_fwc = _subject_info(dest)
    if not sv or not dv or dnpwcs > 0 or has_fwc != dhas_fwc:
        return _ERR_BAD_SUBJECT
    if npwcs > 0 or has_fwc:
        for token in dtokens:
            kind, idxs, e = _index_placeholders(token)
            if e is not None:
                return e
            if kind in (_NO_TRANSFORM, _RANDOM):
                continue
            for wi in idxs:
                if wi > npwcs:
                    return _mapping_err(f"{token}: [{wi}]", _ERR_INDEX_RANGE)
        return None
    for token in dtokens:
        kind, _, e = _index_placeholders(token)
        if e is not None:
            return e
        if kind not in (_NO_TRANSFORM, _RANDOM, _PARTITION):
            return _mapping_err(token, _ERR_INDEX_RANGE)
    return None


def validate_mapping(src: str, dest: str) -> str | None:
    """nats-server's ``ValidateMapping``: None when ``src -> dest`` is a valid subject
    transform, else the error text (e.g. "invalid mapping destination: unknown function in
    {{foo(1)}}")."""
    if not dest:
        return None
    sfwc = False
    for t in dest.split("."):
        n = len(t)
        if n == 0 or sfwc:
            return _mapping_err(t, _ERR_DEST_SUBJECT)
        if n > 4 and t.startswith("{{") and t.endswith("}}"):
            if not any(p.search(t) for p in _ALL_FNS):
                return _mapping_err(t, _ERR_UNKNOWN_FN)
            continue
        if t == ">":
            sfwc = True
        elif _has_ws(t):
            return _ERR_DEST_SUBJECT
    return _subject_transform_error(src, dest)


# ============================================================================= validation
