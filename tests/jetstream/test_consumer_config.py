"""Consumer config decoding, defaults, validation and update rules, and the pull request
parser and wait queue, without a server. The expected texts and codes are nats-server
2.15.1's (the differential suites check the same against the binary end to end)."""

from __future__ import annotations

import json

import pytest

from natsd.jetstream.config.consumer_config import (
    ACK_WAIT_DEFAULT,
    ConsumerConfig,
    check_config,
    check_update,
    config_from_stored,
    parse_create_request,
    rfc3339_to_ns,
    set_defaults,
    set_static_metadata,
)
from natsd.jetstream.config.stream_types import ConsumerLimits, RetentionPolicy, StreamConfig
from natsd.jetstream.consumer.pull import (
    NextRequest,
    WaitingRequest,
    WaitQueue,
    heartbeat_header,
    parse_next_request,
    pending_status,
)
from natsd.jetstream.wire.errors import ApiError

SEC = 1_000_000_000


def stream(**kw: object) -> StreamConfig:
    cfg = StreamConfig(name="S", subjects=["s.>"])
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def body(**cfg: object) -> bytes:
    return json.dumps({"stream_name": "S", "config": cfg}).encode()


def valid(cfg: ConsumerConfig, scfg: StreamConfig | None = None) -> ConsumerConfig:
    scfg = scfg or stream()
    set_defaults(cfg, scfg, False)
    check_config(cfg, scfg)
    return cfg


def refused(cfg: ConsumerConfig, scfg: StreamConfig | None = None) -> ApiError:
    with pytest.raises(ApiError) as e:
        valid(cfg, scfg)
    return e.value


# ---------------------------------------------------------------------- decoding
@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"{", "invalid JSON: unexpected EOF"),
        (
            body(ack_wait="x"),
            "invalid JSON: json: cannot unmarshal string into Go struct field "
            "CreateConsumerRequest.config.ack_wait of type time.Duration",
        ),
        (body(bogus=1), 'invalid JSON: json: unknown field "bogus"'),
        (body(deliver_policy="bogus"), 'invalid JSON: can not unmarshal "\\"bogus\\""'),
        (body(ack_policy="bogus"), 'invalid JSON: can not unmarshal "\\"bogus\\""'),
        (
            b'{"stream_name":"S","action":"bogus"}',
            'invalid JSON: unknown consumer action: "bogus"',
        ),
        (
            b"[]",
            "invalid JSON: json: cannot unmarshal array into Go value of type "
            "server.CreateConsumerRequest",
        ),
    ],
)
def test_decode_errors_have_go_texts(data: bytes, text: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_create_request(data)
    assert (e.value.err_code, e.value.description) == (10025, text)


def test_decode_request_fields() -> None:
    req = parse_create_request(
        b'{"stream_name":"S","action":"create","pedantic":true,"config":'
        b'{"Durable_Name":"D","deliver_policy":"undefined","backoff":[1,2],'
        b'"opt_start_time":"2020-01-01T00:00:00+00:00","metadata":{"a":"b"}}}'
    )
    assert (req.stream_name, req.action, req.pedantic) == ("S", "create", True)
    cfg = req.config
    assert cfg.durable_name == "D"  # keys match ignoring case, as in Go
    assert cfg.deliver_policy == "all"
    assert cfg.backoff == [1, 2]
    assert cfg.opt_start_time == "2020-01-01T00:00:00Z"
    assert cfg.metadata == {"a": "b"}
    assert parse_create_request(b"").config == ConsumerConfig()


# ---------------------------------------------------------------------- defaults
def test_defaults_pull_explicit() -> None:
    cfg = valid(ConsumerConfig(durable_name="D", ack_policy="explicit"))
    assert cfg.max_deliver == -1
    assert cfg.max_waiting == 512
    assert cfg.ack_wait == ACK_WAIT_DEFAULT
    assert cfg.max_ack_pending == 1000
    set_static_metadata(cfg)
    assert cfg.to_json() == {
        "durable_name": "D",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": 30 * SEC,
        "max_deliver": -1,
        "replay_policy": "instant",
        "max_waiting": 512,
        "max_ack_pending": 1000,
        "num_replicas": 0,
        "metadata": {"_nats.req.level": "0"},
    }


def test_defaults_push_ack_none_and_negatives() -> None:
    cfg = valid(
        ConsumerConfig(
            deliver_subject="d",
            max_deliver=-5,
            max_ack_pending=-9,
            max_batch=-1,
            inactive_threshold=-1,
        )
    )
    assert (cfg.max_deliver, cfg.max_ack_pending, cfg.max_waiting) == (-1, -1, 0)
    assert (cfg.max_batch, cfg.inactive_threshold, cfg.ack_wait) == (0, 0, 0)


def test_defaults_backoff_and_stream_limits() -> None:
    scfg = stream(consumer_limits=ConsumerLimits(inactive_threshold=10 * SEC, max_ack_pending=50))
    cfg = valid(
        ConsumerConfig(ack_policy="explicit", backoff=[2 * SEC, 4 * SEC], max_deliver=3), scfg
    )
    assert cfg.ack_wait == 2 * SEC
    assert (cfg.max_ack_pending, cfg.inactive_threshold) == (50, 10 * SEC)
    assert refused(ConsumerConfig(max_ack_pending=60, ack_policy="all"), scfg).err_code == 10121


def test_pedantic_refuses_instead_of_fixing() -> None:
    with pytest.raises(ApiError) as e:
        set_defaults(ConsumerConfig(max_deliver=-3), stream(), True)
    assert (e.value.err_code, e.value.description) == (
        10157,
        "pedantic mode: max_deliver must be set to -1",
    )


def test_pause_until_needs_api_level_1() -> None:
    cfg = ConsumerConfig(pause_until="2099-01-01T00:00:00Z")
    set_static_metadata(cfg)
    assert cfg.metadata["_nats.req.level"] == "1"
    assert rfc3339_to_ns("1970-01-01T00:00:01Z") == SEC
    assert rfc3339_to_ns("1970-01-01T01:00:01+01:00") == SEC


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("cfg", "code"),
    [
        (ConsumerConfig(name="a.b"), 10052),
        (ConsumerConfig(num_replicas=3), 10126),
        (ConsumerConfig(deliver_subject="s.x"), 10081),
        (ConsumerConfig(deliver_subject="d.*"), 10079),
        (ConsumerConfig(deliver_subject="d", max_waiting=3), 10080),
        (ConsumerConfig(deliver_subject="d", idle_heartbeat=1000), 10083),
        (ConsumerConfig(deliver_subject="d", flow_control=True), 10108),
        (ConsumerConfig(deliver_subject="d", max_ack_pending=5), 10082),
        (ConsumerConfig(idle_heartbeat=SEC), 10088),
        (ConsumerConfig(flow_control=True), 10089),
        (ConsumerConfig(rate_limit_bps=8), 10086),
        (ConsumerConfig(max_expires=100), 10115),
        (ConsumerConfig(ack_policy="explicit", backoff=[SEC, SEC], max_deliver=1), 10116),
        (ConsumerConfig(filter_subject="s.a", filter_subjects=["s.b"]), 10136),
        (ConsumerConfig(filter_subjects=["s.a", "s.>"]), 10138),
        (ConsumerConfig(filter_subjects=[""]), 10139),
        (ConsumerConfig(deliver_policy="by_start_sequence"), 10094),
        (ConsumerConfig(deliver_policy="last_per_subject"), 10094),
        (ConsumerConfig(opt_start_seq=3), 10094),
        (ConsumerConfig(sample_freq="abc"), 10095),
        (ConsumerConfig(name="a", durable_name="b"), 10132),
        (ConsumerConfig(priority_groups=["A"]), 10196),
        (ConsumerConfig(description="x" * 5000), 10107),
    ],
)
def test_check_config_errors(cfg: ConsumerConfig, code: int) -> None:
    assert refused(cfg).err_code == code


def test_workqueue_pull_needs_acks() -> None:
    wq = stream(retention=RetentionPolicy.WORKQUEUE)
    assert refused(ConsumerConfig(), wq).err_code == 10084


def test_priority_groups() -> None:
    cfg = valid(ConsumerConfig(priority_policy="pinned_client", priority_groups=["G"]))
    assert cfg.priority_timeout == 120 * SEC
    set_static_metadata(cfg)
    assert cfg.metadata["_nats.req.level"] == "1"
    assert refused(ConsumerConfig(priority_policy="overflow")).err_code == 10159
    assert refused(
        ConsumerConfig(priority_policy="overflow", priority_groups=["a.b"])
    ).err_code == (10162)


def test_flow_control_ack_policy_needs_level_4() -> None:
    cfg = valid(
        ConsumerConfig(
            ack_policy="flow_control",
            deliver_subject="d",
            max_ack_pending=10,
            max_deliver=-1,
            flow_control=True,
            idle_heartbeat=1_000_000_000,
        )
    )
    set_static_metadata(cfg)
    assert cfg.metadata["_nats.req.level"] == "4"


# ---------------------------------------------------------------------- updates
def test_update_rules() -> None:
    old = valid(ConsumerConfig(durable_name="D", ack_policy="explicit"))
    new = old.copy()
    new.description = "ok"
    new.max_ack_pending = 5
    check_update(old, new, False)
    for field, value, text in (
        ("ack_policy", "all", "ack policy can not be updated"),
        ("deliver_policy", "new", "deliver policy can not be updated"),
        ("max_waiting", 3, "max waiting can not be updated"),
        ("deliver_subject", "x", "can not update pull consumer to push based"),
    ):
        bad = old.copy()
        setattr(bad, field, value)
        with pytest.raises(ApiError) as e:
            check_update(old, bad, False)
        assert (e.value.err_code, e.value.description) == (10012, text)
    push = valid(ConsumerConfig(durable_name="P", deliver_subject="d1"))
    moved = push.copy()
    moved.deliver_subject = "d2"
    check_update(push, moved, False)
    with pytest.raises(ApiError) as e:
        check_update(push, moved, True)
    assert e.value.err_code == 10013


def test_stored_config_round_trip() -> None:
    cfg = valid(
        ConsumerConfig(
            durable_name="D",
            ack_policy="explicit",
            backoff=[SEC, 2 * SEC],
            max_deliver=4,
            filter_subjects=["s.a", "s.b"],
            metadata={"k": "v"},
        )
    )
    set_static_metadata(cfg)
    assert config_from_stored(cfg.to_json()) == cfg


# ---------------------------------------------------------------------- pull requests
def test_parse_next_request() -> None:
    assert parse_next_request(b"") == NextRequest()
    assert parse_next_request(b" 7 ").batch == 7
    assert parse_next_request(b"junk").batch == 1
    req = parse_next_request(
        b'{"batch":5,"expires":2000000000,"no_wait":true,"max_bytes":9,'
        b'"idle_heartbeat":500000000,"unknown":1}'
    )
    assert (req.batch, req.expires, req.no_wait, req.max_bytes) == (5, 2 * SEC, True, 9)
    assert req.heartbeat == SEC // 2
    for data, text in (
        (b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (b"{", "unexpected end of JSON input"),
        (b'{"idle_heartbeat":1000}', "heartbeat value too large"),
        (
            b'{"batch":"x"}',
            "json: cannot unmarshal string into Go struct field "
            "JSApiConsumerGetNextRequest.batch of type int",
        ),
    ):
        with pytest.raises(ValueError) as e:
            parse_next_request(data)
        assert str(e.value) == text


def test_wait_queue_round_robin_and_limit() -> None:
    wq = WaitQueue(2)
    a = WaitingRequest(b"a", NextRequest(batch=2), 0.0)
    b = WaitingRequest(b"b", NextRequest(batch=1), 0.0)
    assert wq.add(a) and wq.add(b)
    assert not wq.add(WaitingRequest(b"c", NextRequest(), 0.0))
    # Head takes one and moves behind the others while it wants more.
    assert wq.pop() is a and [w.reply for w in wq.q] == [b"b", b"a"]
    assert wq.pop() is b and [w.reply for w in wq.q] == [b"a"]
    assert wq.pop() is a and not wq.q
    assert (a.d, a.n) == (2, 0)


def test_status_headers() -> None:
    assert pending_status(408, "Request Timeout", 3, 0) == (
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n"
    )
    assert heartbeat_header(2, 5, b"$JS.FC.S.C.ab12") == (
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 5\r\n"
        b"Nats-Consumer-Stalled: $JS.FC.S.C.ab12\r\n\r\n"
    )
