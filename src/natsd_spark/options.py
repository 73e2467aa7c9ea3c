"""Option parsing for the ``jetstream`` Spark data source (no Spark).

The only I/O: the TLS and nkey files named by the connection options are read here, on the
driver, and their contents travel to the executors inside :class:`ConnectOptions`, so an
executor on another host needs no copy of them.

Spark hands a data source its options as a case-insensitive ``str -> str`` mapping. This
module turns them into small frozen dataclasses that are pickled to the executors, and
answers every bad option with a ``ValueError`` naming the option and what was expected.

Offsets are stream sequences. ``startingOffsets`` is inclusive and ``endingOffsets`` is
exclusive, as in Spark's Kafka source: an offset is "the next sequence to read".

- ``earliest``: the stream's first sequence (batch) or sequence 1 (streaming: stable).
- ``latest``: the stream's last sequence + 1, resolved once when the query is planned.
- an integer ``N`` >= 1: sequence N.
- an RFC 3339 time (``2026-11-22T10:00:00Z``): the first sequence stored at or after it.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from natsd_spark.option_table import keys_for

__all__ = [
    "CONNECT_KEYS",
    "ConnectOptions",
    "Offset",
    "ReadOptions",
    "WriteOptions",
    "bool_option",
    "get_option",
    "int_option",
    "parse_include_headers",
    "parse_offset",
    "parse_read_options",
    "parse_write_options",
]

_TOKEN_OK = re.compile(r"^[^\s.*>]+$")

# The connection options every format takes (lower case, as Spark's options are matched).
CONNECT_KEYS = keys_for("connect")


@dataclass(frozen=True)
class ConnectOptions:
    """How executors and the driver reach the server (picklable)."""

    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    user: str | None = None
    password: str | None = None
    token: str | None = None
    timeout: float = 10.0
    # PEM texts read on the driver (tlsCaFile, tlsCertFile, tlsKeyFile) and TLS first
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_first: bool = False
    # an nkey seed (nkeySeedFile) or a credentials file's text (credsFile)
    nkey_seed: str | None = None
    creds: str | None = None

    def __repr__(self) -> str:
        # Never print a key or a password (Spark logs plans and options).
        return f"ConnectOptions(servers={self.servers!r}, tls={self.tls_context_wanted})"

    @property
    def tls_context_wanted(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_first) or any(
            s.startswith("tls://") for s in self.servers
        )

    def tls_context(self) -> ssl.SSLContext | None:
        """The client's TLS context (None: plaintext), built where the connection is made."""
        if not self.tls_context_wanted:
            return None
        ctx = ssl.create_default_context(cadata=self.tls_ca) if self.tls_ca else (
            ssl.create_default_context()
        )
        if self.tls_cert and self.tls_key:
            # ssl loads a certificate chain from files only: a private temporary copy.
            with tempfile.TemporaryDirectory(prefix="natsd-spark-tls-") as d:
                cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
                for path, text in ((cert, self.tls_cert), (key, self.tls_key)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "w") as f:
                        f.write(text)
                ctx.load_cert_chain(cert, key)
        return ctx


@dataclass(frozen=True)
class Offset:
    """An unresolved offset: ``kind`` is earliest, latest, seq or time."""

    kind: str
    seq: int = 0
    time: str = ""


@dataclass(frozen=True)
class ReadOptions:
    conn: ConnectOptions
    stream: str
    subjects: tuple[str, ...] = ()
    starting: Offset = field(default_factory=lambda: Offset("earliest"))
    ending: Offset = field(default_factory=lambda: Offset("latest"))
    min_partitions: int = 1
    max_partition_size: int = 100_000
    max_messages_per_trigger: int | None = None
    include_headers: bool = False
    fetch_batch: int = 10_000
    fail_on_data_loss: bool = True
    #: direct-get batches in flight per partition (unfiltered reads)
    fetch_depth: int = 2


@dataclass(frozen=True)
class WriteOptions:
    conn: ConnectOptions
    write_id: str | None = None
    #: publishes awaiting their PubAck (or, in fast batches, sent beyond the last flow ack);
    #: large, because a durable server answers after the fsync that covers a message
    #: (natsd by default), and a small window idles the connection during each one
    max_pending_acks: int = 4096
    stream: str | None = None
    #: ``fastBatch``: "auto" (fast-ingest batches when ``stream`` names a stream with
    #: ``allow_batched``), "true" (required: refused otherwise), "false" (a PubAck each)
    fast_batch: str = "auto"
    #: decided on the driver from the stream's config (``source.resolve_fast_batch``)
    use_fast: bool = False


def get_option(opts: Mapping[str, str], name: str) -> str | None:
    """The option ``name`` (any case) as a string, or None."""
    # Spark passes a CaseInsensitiveDict; plain dicts (unit tests) are matched by lower case.
    for k, v in opts.items():
        if k.lower() == name.lower():
            return str(v)
    return None


def int_option(opts: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """An integer option, ``default`` when absent; a clear error when malformed or low."""
    raw = get_option(opts, name)
    if raw is None:
        return default
    try:
        val = int(raw.strip())
    except ValueError:
        raise ValueError(f"jetstream option {name!r} must be an integer, got {raw!r}") from None
    if val < minimum:
        raise ValueError(f"jetstream option {name!r} must be >= {minimum}, got {val}")
    return val


def choice_option(
    opts: Mapping[str, str], name: str, choices: tuple[str, ...], default: str
) -> str:
    """One of ``choices`` (any case), ``default`` when absent; a clear error otherwise."""
    raw = get_option(opts, name)
    if raw is None:
        return default
    low = raw.strip().lower()
    if low not in choices:
        raise ValueError(
            f"jetstream option {name!r} must be one of {', '.join(choices)}, got {raw!r}")
    return low


def bool_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false option, ``default`` when absent; a clear error otherwise."""
    raw = get_option(opts, name)
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError(f"jetstream option {name!r} must be true or false, got {raw!r}")


def parse_connect(opts: Mapping[str, str]) -> ConnectOptions:
    raw = get_option(opts, "servers")
    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    if raw is not None:
        parts = [s.strip() for s in raw.split(",") if s.strip()]
        if not parts:
            raise ValueError("jetstream option 'servers' is empty")
        servers = tuple(p if "://" in p else f"nats://{p}" for p in parts)
    user, password = get_option(opts, "user"), get_option(opts, "password")
    token = get_option(opts, "token")
    if (user is None) != (password is None):
        raise ValueError("jetstream options 'user' and 'password' must be given together")
    if token is not None and user is not None:
        raise ValueError("jetstream options 'token' and 'user'/'password' are exclusive")
    timeout = get_option(opts, "timeout")
    try:
        t = float(timeout) if timeout is not None else 10.0
    except ValueError:
        raise ValueError(f"jetstream option 'timeout' must be seconds, got {timeout!r}") from None
    cert, key = _file(opts, "tlsCertFile"), _file(opts, "tlsKeyFile")
    if (cert is None) != (key is None):
        raise ValueError("jetstream options 'tlsCertFile' and 'tlsKeyFile' must be given together")
    nkey, creds = _file(opts, "nkeySeedFile"), _file(opts, "credsFile")
    if sum(x is not None for x in (nkey, creds, user, token)) > 1:
        raise ValueError(
            "jetstream options 'nkeySeedFile', 'credsFile', 'user'/'password' and 'token'"
            " are exclusive"
        )
    if nkey is not None and not nkey.strip().startswith("SU"):
        raise ValueError("jetstream option 'nkeySeedFile' does not hold a user nkey seed (SU...)")
    conn = ConnectOptions(
        servers,
        user,
        password,
        token,
        t,
        tls_ca=_file(opts, "tlsCaFile"),
        tls_cert=cert,
        tls_key=key,
        tls_first=bool_option(opts, "tlsFirst", False),
        nkey_seed=nkey.strip() if nkey is not None else None,
        creds=creds,
    )
    try:
        conn.tls_context()  # a bad certificate or key is the option's error, here
    except (ssl.SSLError, ValueError) as e:
        raise ValueError(f"jetstream TLS options: cannot use the files given: {e}") from None
    return conn


def _file(opts: Mapping[str, str], name: str) -> str | None:
    """The text of the file option ``name`` names (read on the driver)."""
    path = get_option(opts, name)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"jetstream option {name!r}: cannot read {path!r}: {e.strerror}") from None


def parse_offset(raw: str, name: str, *, allow_latest: bool = True) -> Offset:
    text = raw.strip()
    low = text.lower()
    if low == "earliest":
        return Offset("earliest")
    if low == "latest":
        if not allow_latest:
            raise ValueError(f"jetstream option {name!r} cannot be 'latest'")
        return Offset("latest")
    if re.fullmatch(r"\d+", text):
        seq = int(text)
        if seq < 1:
            raise ValueError(f"jetstream option {name!r}: sequences start at 1, got {seq}")
        return Offset("seq", seq=seq)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"jetstream option {name!r} must be 'earliest', 'latest', a stream sequence "
            f"or an RFC 3339 time, got {raw!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    iso = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return Offset("time", time=iso)


def _stream(opts: Mapping[str, str]) -> str:
    stream = get_option(opts, "stream")
    if not stream:
        raise ValueError("jetstream option 'stream' is required")
    if not _TOKEN_OK.match(stream):
        raise ValueError(f"jetstream option 'stream' is not a valid stream name: {stream!r}")
    return stream


def parse_include_headers(opts: Mapping[str, str]) -> bool:
    return bool_option(opts, "includeHeaders", False)


def parse_read_options(opts: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    known = keys_for("read")
    unknown = sorted(k for k in opts if k.lower() not in known)
    if unknown:
        raise ValueError(f"unknown jetstream read option(s): {', '.join(unknown)}")
    stream = _stream(opts)
    subjects: tuple[str, ...] = ()
    raw_subj = get_option(opts, "subjects")
    if raw_subj is not None:
        subjects = tuple(s.strip() for s in raw_subj.split(",") if s.strip())
        for s in subjects:
            if any(not t or (">" in t and t != ">") or ("*" in t and t != "*")
                   for t in s.split(".")) or ">" in s.split(".")[:-1]:
                raise ValueError(f"jetstream option 'subjects': invalid subject filter {s!r}")
    start_default = "latest" if streaming else "earliest"
    starting = parse_offset(get_option(opts, "startingOffsets") or start_default, "startingOffsets")
    ending_raw = get_option(opts, "endingOffsets")
    if streaming and ending_raw is not None:
        raise ValueError("jetstream option 'endingOffsets' is for batch queries only")
    ending = parse_offset(ending_raw or "latest", "endingOffsets")
    if ending.kind == "earliest":
        raise ValueError("jetstream option 'endingOffsets' cannot be 'earliest'")
    mmpt = get_option(opts, "maxMessagesPerTrigger")
    if mmpt is not None and not streaming:
        raise ValueError("jetstream option 'maxMessagesPerTrigger' is for streaming queries only")
    return ReadOptions(
        conn=parse_connect(opts),
        stream=stream,
        subjects=subjects,
        starting=starting,
        ending=ending,
        min_partitions=int_option(opts, "minPartitions", 1, 1),
        max_partition_size=int_option(opts, "maxPartitionSize", 100_000, 1),
        max_messages_per_trigger=(
            int_option(opts, "maxMessagesPerTrigger", 0, 1) if mmpt is not None else None
        ),
        include_headers=bool_option(opts, "includeHeaders", False),
        fetch_batch=int_option(opts, "fetchBatch", 10_000, 1),
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        fetch_depth=int_option(opts, "fetchDepth", 2, 1),
    )


def parse_write_options(opts: Mapping[str, str]) -> WriteOptions:
    known = keys_for("write")
    unknown = sorted(k for k in opts if k.lower() not in known)
    if unknown:
        raise ValueError(f"unknown jetstream write option(s): {', '.join(unknown)}")
    write_id = get_option(opts, "writeId")
    if write_id is not None and not write_id.strip():
        raise ValueError("jetstream option 'writeId' must not be empty")
    stream = get_option(opts, "stream")
    return WriteOptions(
        conn=parse_connect(opts),
        write_id=write_id,
        max_pending_acks=int_option(opts, "maxPendingAcks", 4096, 1),
        stream=_stream(opts) if stream is not None else None,
        fast_batch=choice_option(opts, "fastBatch", ("auto", "true", "false"), "auto"),
    )
