"""How a JetStream API answer is made and sent: its ``type``, the error shapes, the
``cluster`` block, the account's API counters and the audit advisory.

The API's handlers (``jetstream/api``) answer every request through :func:`answer`, and so
does a replicated stream's leader when a typed operation it proposed for a request is
applied (``jetstream/cluster/streams.py``): the answer is made in one place, whoever computes
it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.jetstream.engine import JsAccount
from natsd.jetstream.wire.errors import ApiError

__all__ = ["API_TYPE_PREFIX", "ERROR_EXTRAS", "add_cluster_block", "answer"]

API_TYPE_PREFIX: Final = "io.nats.jetstream.api.v1."

# Some error responses carry empty paging fields in nats-server.
ERROR_EXTRAS: Final[dict[str, dict[str, Any]]] = {
    "stream_info_response": {"total": 0, "offset": 0, "limit": 0},
    "stream_purge_response": {"purged": 0},
    "stream_names_response": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "stream_list_response": {"total": 0, "offset": 0, "limit": 0, "streams": []},
    "consumer_names_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_list_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_pause_response": {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    "stream_restore_response": {"deliver_subject": ""},
}

_WITH_CLUSTER: Final = frozenset(
    {
        "stream_create_response",
        "stream_update_response",
        "stream_info_response",
        "consumer_create_response",
        "consumer_info_response",
    }
)


def add_cluster_block(rtype: str, resp: dict[str, Any], block: dict[str, Any]) -> None:
    """On a cluster, stream and consumer infos carry a ``cluster`` block, placed before
    ``ts`` as nats-server orders its fields."""
    if rtype in _WITH_CLUSTER:
        docs = [resp]
    elif rtype in ("stream_list_response", "consumer_list_response"):
        key = "streams" if rtype == "stream_list_response" else "consumers"
        docs = [d for d in resp.get(key) or [] if isinstance(d, dict)]
    else:
        return
    for d in docs:
        ts = d.pop("ts", None)
        d["cluster"] = dict(block)
        if ts is not None:
            d["ts"] = ts


def answer(
    ja: JsAccount,
    subject: bytes,
    reply: bytes | None,
    request: bytes,
    rtype: str,
    resp: dict[str, Any] | ApiError,
    stream: str = "",
    respond: Callable[[bytes], None] | None = None,
    tally: bool = True,
    hdr: bytes | None = None,
) -> bytes:
    """Answer the request on ``subject`` with ``resp`` (an error answers with its JSON and
    the response type's empty fields), count it in the account's API stats, send the audit
    advisory; ``stream``: the stream the request names (its ``cluster`` block, on a
    cluster); ``respond`` takes the answer instead of ``reply``; ``tally`` False: a success
    is not counted (nats-server does not count successful message gets); ``hdr``: the
    headers of a successful answer sent to ``reply``. Returns the answer as sent."""
    api = ja.api
    doc: dict[str, Any]
    if isinstance(resp, ApiError):
        api.total += 1
        api.errors += 1
        doc = {"error": resp.to_json()}
        doc.update(ERROR_EXTRAS.get(rtype, {}))
    else:
        # nats-server reports totals that exclude the request being answered
        if tally:
            api.total += 1
        doc = resp
        if ja.engine.cluster_info is not None:
            alternates = ja.engine.alternates
            if rtype == "stream_info_response" and alternates is not None:
                alts = alternates(ja, stream)
                if alts:
                    doc["alternates"] = alts
            add_cluster_block(rtype, doc, ja.engine.cluster_info(ja, stream))
    out: dict[str, Any] = {"type": API_TYPE_PREFIX + rtype}
    out.update(doc)
    body = orjson.dumps(out)
    if respond is not None:
        respond(body)
    elif reply:
        ja.engine.send(ja, reply, body, hdr if not isinstance(resp, ApiError) else None)
    ja.engine.api_audit(ja, subject, request, body)
    return body
