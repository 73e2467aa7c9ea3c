"""Fixtures for differential tests (nats-server vs natsd).

Server pairs are module/session scoped so each configuration is started once.
Use :func:`pair_fixture` to declare a new configuration in a test module::

    jetstream_pair = pair_fixture(["-js"], config="jetstream { store_dir: ... }")
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from components import require_nats_server

from .harness import ServerPair, server_pair

MAX_PAYLOAD = 1024

PERMISSIONS_CONFIG = """
authorization {
  users = [
    {
      user: "limited", password: "pw",
      permissions: {
        publish: { allow: [">"], deny: ["secret.>", "forbidden"] }
        subscribe: { allow: [">"], deny: ["private.>", "jobs.* bad", "ro"] }
      }
    }
    {
      user: "allowonly", password: "pw",
      permissions: {
        publish: { allow: ["ok.>", "_INBOX.>"] }
        subscribe: { allow: ["ok.>", "work.* workers", "_INBOX.>"] }
      }
    }
  ]
}
"""


def pair_fixture(args: Sequence[str] = (), *, config: str | None = None, scope: str = "session"):  # type: ignore[no-untyped-def]
    """Build a fixture that yields a :class:`ServerPair` started with ``args``
    and config text ``config``; skips if nats-server is not installed."""

    @pytest.fixture(scope=scope)  # type: ignore[misc]
    def _fixture() -> Iterator[ServerPair]:
        require_nats_server()
        with server_pair(args, config=config) as pair:
            yield pair

    return _fixture


pair = pair_fixture()
small_payload_pair = pair_fixture(config=f"max_payload: {MAX_PAYLOAD}\n")
user_pass_pair = pair_fixture(["--user", "a", "--pass", "b"])
token_pair = pair_fixture(["--auth", "s3cr3t"])
auth_timeout_pair = pair_fixture(
    config='authorization { user: "a", password: "b", timeout: 0.5 }\n'
)
permissions_pair = pair_fixture(config=PERMISSIONS_CONFIG)
