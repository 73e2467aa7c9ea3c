"""The benchmark's settings: ``Config``, built once from the command line (``build_config``).

Every scenario reads its sizes, durations and windows from here; ``--json`` writes it out
field for field.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .kvload import MB
from .loadgen import FlowConfig


@dataclass
class Config:
    msgs: int
    size: int
    fanout: int
    requests: int
    warm_requests: int
    warm_msgs: int
    repeat: int
    agg: str
    timeout: float
    idle_timeout: float
    setup_timeout: float
    flow: FlowConfig
    js_msgs: int = 1_000_000
    js_sync_msgs: int = 50_000
    js_time: float = 5.0
    js_warm_time: float = 1.0
    js_window: int = 4000
    js_sync_warmup: int = 100
    js_consume_msgs: int = 50_000
    js_e2e_time: float = 1.0
    js_pull_batch: int = 100
    js_push_max_ack_pending: int = 500
    kv_time: float = 1.0
    kv_keys: int = 10_000
    kv_window: int = 256
    kv_sync_ops: int = 50_000
    kv_pipe_ops: int = 1_000_000
    obj_bytes: int = 50 * MB
    obj_window: int = 1
    jscl_storage: str = "file"


def build_config(a: argparse.Namespace) -> Config:
    msgs = a.msgs if a.msgs is not None else (200_000 if a.quick else 1_000_000)
    requests = a.requests if a.requests is not None else (5_000 if a.quick else 20_000)
    warm_req = a.warmup_requests
    if warm_req is None:
        warm_req = 500 if a.quick else 2_000
    warm_msgs = a.warmup_msgs if a.warmup_msgs is not None else max(1_000, msgs // 10)
    for name, v in (
        ("--msgs", msgs),
        ("--requests", requests),
        ("--fanout", a.fanout),
        ("--repeat", a.repeat),
        ("--warmup-msgs", warm_msgs),
    ):
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    if a.size < 0:
        raise SystemExit("--size must be >= 0")
    js_time = a.js_time if a.js_time is not None else (1.0 if a.quick else 3.0)
    js_msgs = a.js_msgs if a.js_msgs is not None else (200_000 if a.quick else 1_000_000)
    js_sync = a.js_sync_msgs
    if js_sync is None:
        js_sync = 10_000 if a.quick else 50_000
    consume = a.js_consume_msgs
    if consume is None:
        consume = 20_000 if a.quick else 50_000
    e2e_time = a.js_e2e_time if a.js_e2e_time is not None else (0.5 if a.quick else 1.0)
    if e2e_time <= 0:
        raise SystemExit("--js-e2e-time must be > 0")
    js_checks = (
        ("--js-msgs", js_msgs),
        ("--js-sync-msgs", js_sync),
        ("--js-window", a.js_window),
        ("--js-consume-msgs", consume),
        ("--js-pull-batch", a.js_pull_batch),
        ("--js-push-max-ack-pending", a.js_push_max_ack_pending),
    )
    for name, v in js_checks:
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    if js_time <= 0:
        raise SystemExit("--js-time must be > 0")
    kv_time = a.kv_time if a.kv_time is not None else (0.5 if a.quick else 1.0)
    kv_sync = a.kv_sync_ops if a.kv_sync_ops is not None else (10_000 if a.quick else 50_000)
    obj_mib = a.obj_size if a.obj_size is not None else (10.0 if a.quick else 50.0)
    if kv_time <= 0 or obj_mib <= 0:
        raise SystemExit("--kv-time and --obj-size must be > 0")
    for name, v in (
        ("--kv-keys", a.kv_keys),
        ("--kv-window", a.kv_window),
        ("--kv-sync-ops", kv_sync),
        ("--obj-window", a.obj_window),
    ):
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    return Config(
        msgs=msgs,
        size=a.size,
        fanout=a.fanout,
        requests=requests,
        warm_requests=max(0, warm_req),
        warm_msgs=warm_msgs,
        repeat=a.repeat,
        agg=a.agg,
        timeout=a.timeout,
        idle_timeout=a.idle_timeout,
        setup_timeout=max(10.0, a.idle_timeout),
        flow=FlowConfig(ping_every=max(1, a.ping_every), sub_window=max(1, a.sub_window)),
        js_msgs=js_msgs,
        js_sync_msgs=js_sync,
        js_time=js_time,
        js_warm_time=max(0.5, js_time / 5),
        js_window=a.js_window,
        js_sync_warmup=100,
        js_consume_msgs=consume,
        js_e2e_time=e2e_time,
        js_pull_batch=a.js_pull_batch,
        js_push_max_ack_pending=a.js_push_max_ack_pending,
        kv_time=kv_time,
        kv_keys=a.kv_keys,
        kv_window=a.kv_window,
        kv_sync_ops=kv_sync,
        kv_pipe_ops=js_msgs,
        obj_bytes=int(obj_mib * MB),
        obj_window=a.obj_window,
        jscl_storage=a.jscl_storage,
    )
