"""The system account's ``$SYS.REQ`` services against nats-server: the same requests (as the
Go ``nats`` CLI sends them) get answers of the same shape from one server and from every
server of a three-server cluster; filters that name another server get no answer; an
unknown endpoint, or a user outside the system account, gets no responders; a bad body
gets error 400, an unknown account error 500 with ``"data": null``.

The shapes are compared as nats-server's key sets: natsd may leave out what it does not
have (Go runtime figures, gateways' counters), never add a key nats-server does not send
(its ``natsd_build`` in VARZ aside).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from nats.aio.client import Client
from proc_cluster import ProcCluster

from .harness import ServerProcess, start_server

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

CONFIG = """
server_name: S1
accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP { jetstream: enabled, users: [{user: app, password: app}] }
}
system_account: SYS
"""
ENDPOINTS = ["STATSZ", "VARZ", "SUBSZ", "CONNZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ",
             "JSZ", "HEALTHZ", "RAFTZ"]  # fmt: skip
# Keys natsd adds of its own (documented in the README).
NATSD_ONLY = {"natsd_build"}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerProcess]]:
    require_nats_server()
    tmp = Path(tempfile.mkdtemp(prefix="natsd-sys-"))
    started: dict[str, ServerProcess] = {}
    try:
        conf = tmp / "sys.conf"
        conf.write_text(CONFIG)
        for kind in ("nats-server", "natsd"):
            sd = tmp / f"store-{kind}"
            sd.mkdir()
            started[kind] = start_server(
                kind, ["-js", "-sd", str(sd)], config_path=conf, log_dir=tmp
            )
        yield started
    finally:
        for s in started.values():
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _many(nc: Client, subject: str, body: Any = None, wait: float = 0.3) -> list[Any]:
    """Every answer within ``wait`` (the CLI's request-many); "503" for no responders."""
    inbox = nc.new_inbox()
    got: list[Any] = []

    async def cb(m: Any) -> None:
        if not m.data and m.headers and m.headers.get("Status") == "503":
            got.append("503")
        else:
            got.append(json.loads(m.data))

    sub = await nc.subscribe(inbox, cb=cb)
    payload = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    await nc.publish(subject, payload, reply=inbox, headers={"X": "1"})
    await asyncio.sleep(wait)
    await sub.unsubscribe()
    return got


def _keys(d: Any) -> set[str]:
    return set(d) if isinstance(d, dict) else set()


async def _survey(url: str) -> dict[str, Any]:
    sysc = await nats.connect(url, user="sys", password="sys")
    app = await nats.connect(url, user="app", password="app")
    out: dict[str, Any] = {}
    try:
        await app.jetstream().add_stream(name="S", subjects=["s.>"])
        ping = await _many(sysc, "$SYS.REQ.SERVER.PING")
        out["ping"] = [(_keys(a), _keys(a["server"]), _keys(a["statsz"])) for a in ping]
        sid = ping[0]["server"]["id"]
        seqs = [ping[0]["server"]["seq"]]
        for ep in ENDPOINTS:
            ans = await _many(sysc, f"$SYS.REQ.SERVER.PING.{ep}")
            assert len(ans) == 1, (ep, ans)
            a = ans[0]
            seqs.append(a["server"]["seq"])
            body = a.get("statsz") if ep == "STATSZ" else a.get("data")
            out[ep] = (_keys(a), _keys(a["server"]), _keys(body))
            direct = await _many(sysc, f"$SYS.REQ.SERVER.{sid}.{ep}")
            out[f"direct {ep}"] = [_keys(d) for d in direct]
        out["seq increases"] = seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        idz = await _many(sysc, "$SYS.REQ.SERVER.PING.IDZ", {"server_name": "zzz"})
        out["idz"] = [_keys(a) for a in idz]
        for label, f in (("name", {"server_name": "zzz"}), ("cluster", {"cluster": "x"}),
                         ("tags", {"tags": ["nope"]}), ("substring", {"server_name": "1"}),
                         ("exact", {"server_name": "1", "exact_match": True})):  # fmt: skip
            out[f"filter {label}"] = len(await _many(sysc, "$SYS.REQ.SERVER.PING.VARZ", f))
        out["unknown endpoint"] = await _many(sysc, "$SYS.REQ.SERVER.PING.NOSUCH")
        out["app user"] = await _many(app, "$SYS.REQ.SERVER.PING")
        bad = await _many(sysc, "$SYS.REQ.SERVER.PING.VARZ", b"{bad")
        out["bad body"] = [(_keys(a), a["error"]["code"]) for a in bad]
        info = await _many(sysc, "$SYS.REQ.ACCOUNT.APP.INFO")
        out["account info"] = [(_keys(a), a["data"]["account_name"]) for a in info]
        nope = await _many(sysc, "$SYS.REQ.ACCOUNT.NOPE.INFO")
        out["unknown account"] = [(_keys(a), a["data"], a["error"]["code"]) for a in nope]
        jsz = await _many(sysc, "$SYS.REQ.ACCOUNT.APP.JSZ")
        out["account jsz"] = [_keys(a["data"]) for a in jsz]
        connz = await _many(sysc, "$SYS.REQ.ACCOUNT.APP.CONNZ")
        out["account connz"] = [len(a["data"]["connections"]) for a in connz]
        # account statistics: the account's, every account's with connections, none for
        # an account that has none here; the connections event on request
        for label, subject, body in (
            ("account statz", "$SYS.REQ.ACCOUNT.APP.STATZ", {}),
            ("ping statz", "$SYS.REQ.ACCOUNT.PING.STATZ", {"accounts": ["APP"]}),
            ("ping statz all", "$SYS.REQ.ACCOUNT.PING.STATZ", {}),
            ("ping statz unused", "$SYS.REQ.ACCOUNT.PING.STATZ", {"accounts": ["NOPE", "APP"]}),
        ):
            got = await _many(sysc, subject, body)
            out[label] = [
                (_keys(a["data"]), sorted((st["acc"], _keys(st), _keys(st["sent"]), st["conns"])
                                           for st in a["data"]["account_statz"]))
                for a in got
            ]  # fmt: skip
        out["statz without connections"] = await _many(sysc, "$SYS.REQ.ACCOUNT.NOPE.STATZ")
        conns = await _many(sysc, "$SYS.REQ.ACCOUNT.APP.CONNS")
        out["account conns"] = [(_keys(a), a["acc"], a["conns"], a["type"]) for a in conns]
        # through the imports every account has: its own connections and statistics only
        for label, subject in (
            ("app ping connz", "$SYS.REQ.SERVER.PING.CONNZ"),
            ("app account ping connz", "$SYS.REQ.ACCOUNT.PING.CONNZ"),
        ):
            got = await _many(app, subject, {"auth": True})
            out[label] = [
                (_keys(a), sorted({c.get("account", "?") for c in a["data"]["connections"]}),
                 len(a["data"]["connections"]))
                for a in got
            ]  # fmt: skip
        bad = await _many(app, "$SYS.REQ.SERVER.PING.CONNZ", b"{bad")
        out["app bad body"] = [(_keys(a), a["error"]["code"]) for a in bad]
        got = await _many(app, "$SYS.REQ.ACCOUNT.PING.STATZ", {"accounts": ["SYS"]})
        out["app ping statz"] = [[st["acc"] for st in a["data"]["account_statz"]] for a in got]
        events: dict[str, Any] = {}

        conns_events: list[tuple[str, Any]] = []

        async def on_event(m: Any) -> None:
            kind = m.subject.rsplit(".", 1)[-1]
            if kind not in ("CONNECT", "DISCONNECT", "CONNS", "STATSZ"):
                return  # (the requests themselves, this survey's among them)
            if kind in ("CONNECT", "DISCONNECT", "CONNS") and ".APP." not in m.subject:
                return
            if kind == "CONNS":
                conns_events.append((m.subject, json.loads(m.data)))
            events.setdefault(kind, json.loads(m.data))

        esub = await sysc.subscribe("$SYS.>", cb=on_event)
        await sysc.flush()
        other = await nats.connect(url, user="app", password="app", name="leaver")
        await other.close()
        await sysc.publish("$SYS.REQ.SERVER.PING", b"")  # (no reply: the broadcast)
        await asyncio.sleep(0.5)
        await esub.unsubscribe()
        out["events"] = {k: (_keys(v), _keys(v.get("client")), _keys(v.get("server")))
                         for k, v in events.items()
                         if k in ("CONNECT", "DISCONNECT", "STATSZ")}  # fmt: skip
        out["disconnect reason"] = events.get("DISCONNECT", {}).get("reason")
        # at the connect and at the disconnect, on both subjects
        out["conns events"] = [(subj, _keys(ev), ev["conns"]) for subj, ev in conns_events]
        acc = await _many(sysc, "$SYS.REQ.SERVER.PING.JSZ", {"accounts": True})
        out["jsz accounts"] = [sorted(d["name"] for d in a["data"]["account_details"]) for a in acc]
        # each stream's detail with its consumers and config (what the console reads)
        await app.jetstream().add_consumer("S", durable_name="D", ack_policy="explicit")
        opts = {"streams": True, "consumer": True, "config": True}
        for label, body in (("jsz detail", opts), ("jsz streams only", {"streams": True})):
            (a,) = await _many(sysc, "$SYS.REQ.SERVER.PING.JSZ", body)
            (app_acc,) = [d for d in a["data"]["account_details"] if d["name"] == "APP"]
            (sd,) = app_acc["stream_detail"]
            cd = sd.get("consumer_detail") or []
            out[label] = (
                (_keys(sd), _keys(sd.get("cluster")), _keys(sd.get("config"))),
                [_keys(c) for c in cd],
                [(c["name"], c["num_pending"]) for c in cd],
            )
    finally:
        await app.jetstream().delete_stream("S")
        await sysc.close()
        await app.close()
    return out


def _within(impl: Any, ref: Any, path: str = "") -> None:
    """natsd's key sets are nats-server's, or fewer (never a key it does not send)."""
    if isinstance(ref, dict) and isinstance(impl, dict):
        assert impl.keys() == ref.keys(), (path, impl.keys() ^ ref.keys())
        for k in ref:
            _within(impl[k], ref[k], f"{path}.{k}")
        return
    if isinstance(ref, set) and isinstance(impl, set):
        extra = impl - ref - NATSD_ONLY
        assert not extra, f"{path}: natsd sends keys nats-server does not: {sorted(extra)}"
        return
    if isinstance(ref, (list, tuple)) and isinstance(impl, (list, tuple)):
        assert len(ref) == len(impl), (path, ref, impl)
        for i, (a, b) in enumerate(zip(impl, ref, strict=True)):
            _within(a, b, f"{path}[{i}]")
        return
    assert impl == ref, (path, impl, ref)


# What natsd must send of each answer (nats-server sends these too).
REQUIRED = {
    "server": {"name", "host", "id", "ver", "jetstream", "flags", "seq", "time"},
    "statsz": {
        "start",
        "mem",
        "cores",
        "cpu",
        "connections",
        "total_connections",
        "active_accounts",
        "subscriptions",
        "sent",
        "received",
        "slow_consumers",
        "active_servers",
        "jetstream",
    },
    "VARZ": {
        "server_id",
        "server_name",
        "version",
        "connections",
        "in_msgs",
        "out_msgs",
        "subscriptions",
        "jetstream",
        "system_account",
        "uptime",
    },
    "JSZ": {"server_id", "memory", "storage", "streams", "consumers", "messages", "api"},
    "CONNZ": {"server_id", "num_connections", "connections"},
}


def test_system_services_answer_as_nats_server(servers: dict[str, ServerProcess]) -> None:
    ref = asyncio.run(_survey(servers["nats-server"].url))
    impl = asyncio.run(_survey(servers["natsd"].url))
    _within(impl, ref)
    assert REQUIRED["server"] <= impl["ping"][0][1] and REQUIRED["statsz"] <= impl["ping"][0][2]
    for ep in ("VARZ", "JSZ", "CONNZ"):
        assert REQUIRED[ep] <= impl[ep][2], (ep, REQUIRED[ep] - impl[ep][2])
    assert impl["seq increases"] and ref["seq increases"]
    assert impl["filter name"] == impl["filter cluster"] == impl["filter tags"] == 0
    assert impl["filter substring"] == 1 and impl["filter exact"] == 0
    assert impl["unknown endpoint"] == impl["app user"] == ["503"]
    assert impl["account info"] == [({"server", "data"}, "APP")]
    assert impl["jsz accounts"] == [["APP"]]
    assert sorted(impl["events"]) == ["CONNECT", "DISCONNECT", "STATSZ"]
    assert impl["disconnect reason"] == "Client Closed"
    app_stat = ("APP", impl["account statz"][0][1][0][1], impl["account statz"][0][1][0][2], 1)
    assert impl["account statz"] == [({"server_id", "now", "account_statz"}, [app_stat])]
    assert impl["ping statz"] == impl["account statz"]
    assert [st[0] for st in impl["ping statz all"][0][1]] == ["APP", "SYS"]
    assert impl["statz without connections"] == []
    assert impl["account conns"][0][1:] == (
        "APP",
        1,
        "io.nats.server.advisory.v1.account_connections",
    )
    assert impl["app ping connz"] == impl["app account ping connz"]
    assert impl["app ping connz"][0][1:] == (["APP"], 1)
    assert impl["app ping statz"] == [["APP"]]
    assert impl["app bad body"] == [({"server", "error"}, 400)]
    assert [(subj, n) for subj, _, n in impl["conns events"]] == [
        ("$SYS.SERVER.ACCOUNT.APP.CONNS", 2),
        ("$SYS.ACCOUNT.APP.SERVER.CONNS", 2),
        ("$SYS.SERVER.ACCOUNT.APP.CONNS", 1),
        ("$SYS.ACCOUNT.APP.SERVER.CONNS", 1),
    ]


async def _cluster_survey(tmp: Path, kind: str) -> dict[str, Any]:
    cluster = ProcCluster(tmp, 3, kinds=kind, auth=True, system_account=True)
    await cluster.start(wait="js")
    try:
        nc = await cluster.connect(0, system=True)
        try:
            out: dict[str, Any] = {}
            for _ in range(50):  # (until every server's interest has crossed the routes)
                ping = await _many(nc, "$SYS.REQ.SERVER.PING")
                if len(ping) == 3:
                    break
                await asyncio.sleep(0.2)
            out["ping"] = sorted(a["server"]["name"] for a in ping)
            ping_names = [cluster[0].name]
            out["clusters"] = {a["server"].get("cluster") for a in ping}
            out["active_servers"] = {a["statsz"]["active_servers"] for a in ping}
            jsz = await _many(nc, "$SYS.REQ.SERVER.PING.JSZ")
            out["jsz"] = len(jsz)
            out["meta"] = all("meta_cluster" in a["data"] for a in jsz)
            lead = await _many(nc, "$SYS.REQ.SERVER.PING.JSZ", {"leader_only": True})
            out["leader only"] = len(lead)
            one = await _many(
                nc,
                "$SYS.REQ.SERVER.PING.STATSZ",
                {"server_name": ping[1]["server"]["name"], "exact_match": True},
            )
            out["one server"] = [a["server"]["name"] for a in one] == [ping[1]["server"]["name"]]
            # an account's user on server 0: through its imports every server answers with
            # its own connections of that account; account statistics come from the server
            # that has them
            app = await cluster.connect(0)
            try:
                acc = (await _many(app, "$SYS.REQ.USER.INFO", wait=0.5))[0]["data"]["account"]
                connz = await _many(app, "$SYS.REQ.SERVER.PING.CONNZ", wait=0.5)
                out["app connz"] = sorted(len(a["data"]["connections"]) for a in connz)
                statz = await _many(app, "$SYS.REQ.ACCOUNT.PING.STATZ", wait=0.5)
                out["app statz"] = [
                    (a["server"]["name"] == ping_names[0],
                     [(st["acc"] == acc, st["conns"]) for st in a["data"]["account_statz"]])
                    for a in statz
                ]  # fmt: skip
                conns = await _many(nc, f"$SYS.REQ.ACCOUNT.{acc}.CONNS", wait=0.5)
                out["conns"] = [(a["conns"], a["server"]["name"] == ping_names[0]) for a in conns]
            finally:
                await app.close()
            return out
        finally:
            await nc.close()
    finally:
        await cluster.close()


def test_each_server_of_a_cluster_answers_for_itself(tmp_path: Path) -> None:
    require_nats_server()
    ref = asyncio.run(_cluster_survey(tmp_path / "ref", "nats-server"))
    impl = asyncio.run(_cluster_survey(tmp_path / "impl", "natsd"))
    assert len(ref["ping"]) == 3 and ref["leader only"] == 1, ref
    for r in (ref, impl):
        r["ping"] = len(r["ping"])
        r["clusters"] = len(r["clusters"])
    assert impl == ref
    assert impl["app connz"] == [0, 0, 1]
    assert impl["app statz"] == [(True, [(True, 1)])] and impl["conns"] == [(1, True)]


USER_INFO_CONFIG = """
server_name: U1
accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP {
    users: [
      {user: app, password: app,
       permissions: {publish: {allow: ["a.>", "$SYS.REQ.USER.INFO", "_INBOX.>"]},
                     subscribe: {deny: ["secret.>"]}}},
      {user: resp, password: resp,
       permissions: {publish: {deny: ["x.>"]}, allow_responses: {max: 3, expires: "5s"}}},
      {user: denied, password: denied, permissions: {publish: {allow: ["a.>"]}}}
    ]
  }
}
system_account: SYS
no_auth_user: app
"""


async def _user_info(url: str, user: str | None) -> Any:
    creds = {} if user is None else {"user": user, "password": user}
    nc = await nats.connect(url, **creds)
    try:
        msg = await nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)
        doc = json.loads(msg.data)
        # (nats-server lists a permission's subjects in its sublist's order, not the config's)
        for part in ((doc.get("data") or {}).get("permissions") or {}).values():
            for k in ("allow", "deny"):
                if isinstance(part, dict) and k in part:
                    part[k] = sorted(part[k])
        return {"server keys": _keys(doc.get("server")) >= REQUIRED["server"],
                "data": doc.get("data"), "error": doc.get("error")}  # fmt: skip
    except Exception as e:  # a refused publish: no answer, the permissions error
        return type(e).__name__
    finally:
        await nc.close()


def test_user_info_answers_as_nats_server(tmp_path: Path) -> None:
    """``$SYS.REQ.USER.INFO`` from each kind of user (system account, permissions,
    allow_responses, no_auth_user, one not allowed to publish there): the same data."""
    require_nats_server()
    conf = tmp_path / "user-info.conf"
    conf.write_text(USER_INFO_CONFIG)
    answers: dict[str, Any] = {}
    for kind in ("nats-server", "natsd"):
        srv = start_server(kind, [], config_path=conf, log_dir=tmp_path)
        try:
            answers[kind] = {
                who: asyncio.run(_user_info(srv.url, who))
                for who in ("app", "resp", "sys", None, "denied")
            }
        finally:
            srv.stop()
    assert answers["natsd"] == answers["nats-server"]
    assert answers["natsd"]["app"]["data"]["permissions"]["subscribe"] == {"deny": ["secret.>"]}
