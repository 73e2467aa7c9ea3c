"""Logging in nats-server's format, written so the server never blocks on its stderr.

Test harnesses start nats-server with stderr on a pipe and read only until
"Server is ready"; if nobody drains the pipe afterwards, a blocking write would freeze the
event loop. Lines that cannot be written at once are dropped and counted instead.

``-l <file>`` logs to a file opened for appending. SIGUSR1 reopens it by name (logrotate
moves the file away, then signals), and a configuration reload may switch level or file:
both build the new handler first, so a file that cannot be opened changes nothing.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import time

__all__ = ["NonBlockingHandler", "install_handler", "open_handler", "setup_logging"]

_LEVELS = {
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
    5: "TRC",
}


class NatsFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = record.created
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t))
        micros = int((t % 1) * 1_000_000)
        lvl = _LEVELS.get(record.levelno, "INF")
        return f"[{os.getpid()}] {stamp}.{micros:06d} [{lvl}] {record.getMessage()}"


class NonBlockingHandler(logging.Handler):
    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.dropped = 0
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.set_blocking(fd, False)
        except OSError:
            pass

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode()
            os.write(self.fd, data)
        except BlockingIOError:
            self.dropped += 1
        except OSError:
            self.dropped += 1


def open_handler(log_file: str = "") -> logging.Handler:
    """The handler for ``log_file`` (stderr when empty); raises OSError if it cannot open."""
    if log_file:
        handler: logging.Handler = logging.FileHandler(log_file)
    else:
        handler = NonBlockingHandler(sys.stderr.fileno())
    handler.setFormatter(NatsFormatter())
    return handler


def install_handler(handler: logging.Handler, debug: bool = False, trace: bool = False) -> None:
    """Make ``handler`` the natsd logger's only handler, closing the one it replaces."""
    logger = logging.getLogger("natsd")
    for old in list(logger.handlers):
        logger.removeHandler(old)
        if isinstance(old, logging.FileHandler):
            old.close()
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(5 if trace else logging.DEBUG if debug else logging.INFO)


def setup_logging(debug: bool = False, trace: bool = False, log_file: str = "") -> None:
    install_handler(open_handler(log_file), debug, trace)
