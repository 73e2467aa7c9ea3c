"""The JetStream domain prefix: ``$JS.<domain>.API.>`` reaches this server's JetStream API.

With ``jetstream { domain: X }`` nats-server adds these subject mappings to every JetStream
account (``generateJSMappingTable``), so a client that addresses the domain
(``nc.jetstream(domain="X")``) reaches the local API::

    $JS.X.API.INFO           -> $JS.API.INFO
    $JS.X.API.STREAM.>       -> $JS.API.STREAM.>      (and CONSUMER, DIRECT, META, SERVER,
                                                        ACCOUNT alike)
    $JS.X.API.$KV.>          -> $KV.>                 (KV puts through the domain)
    $JS.X.API.$OBJ.>         -> $OBJ.>

natsd has no general subject mapping in its router, so the engine subscribes to exactly
these patterns in each JetStream account (nothing else under ``$JS.X.API``, which keeps
nats-server's no-responders answer there) and hands each message on under its mapped
subject: API requests to the API callback, ``$KV``/``$OBJ`` publishes into the account as a
client publish would go (to the stream, and to anyone subscribed). Replies go straight to
the requester's reply subject, as with the unprefixed API.
"""

from __future__ import annotations

from collections.abc import Callable

from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = ["domain_subscriptions"]

ApiCallback = Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]

# The API verbs nats-server maps (the first token after "API").
_API_TAILS = (
    b"INFO",
    b"STREAM.>",
    b"CONSUMER.>",
    b"DIRECT.>",
    b"META.>",
    b"SERVER.>",
    b"ACCOUNT.>",
)
_NO_RESPONDERS = b"NATS/1.0 503\r\nNats-Subject: "


def domain_subscriptions(
    domain: str, sublist: Sublist[Subscription], on_api: ApiCallback
) -> list[Subscription]:
    """The internal subscriptions that map ``domain``'s API prefix in one account; the
    caller inserts them into ``sublist``."""
    prefix = b"$JS.%s.API." % domain.encode()
    kv = prefix + b"$KV."
    obj = prefix + b"$OBJ."
    api = b"$JS.API."

    def on_msg(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if subject.startswith(kv):
            _forward(sublist, b"$KV." + subject[len(kv) :], reply, hdr, data)
        elif subject.startswith(obj):
            _forward(sublist, b"$OBJ." + subject[len(obj) :], reply, hdr, data)
        else:
            on_api(sub, api + subject[len(prefix) :], reply, hdr, data)

    patterns = [prefix + tail for tail in _API_TAILS] + [kv + b">", obj + b">"]
    return [
        Subscription(p, None, b"js-domain-%d" % i, callback=on_msg) for i, p in enumerate(patterns)
    ]


def _forward(
    sublist: Sublist[Subscription],
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    data: bytes,
) -> None:
    """Publish under the mapped subject; a request nobody takes gets the no-responders
    status the client would have had without the mapping."""
    if publish(sublist, subject, reply, hdr, data) == 0 and reply:
        publish(sublist, reply, None, _NO_RESPONDERS + subject + b"\r\n\r\n", b"")
