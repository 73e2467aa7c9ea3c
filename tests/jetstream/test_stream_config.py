"""Stream configuration parsing against nats-server 2.15.1.

``CREATE_CASES`` are ``$JS.API.STREAM.CREATE.<name>`` request bodies; ``EXPECTED`` is what
nats-server 2.15.1 (``-js``, standalone) answered to each, recorded with the differential
test below: either ``err(code, err_code, description)`` or ``ok(diff)`` where ``diff`` is the
returned ``config`` minus ``DEFAULT_CONFIG`` (``None`` = field absent). ``_nats.ver`` and
``_nats.level`` (response-only metadata) are left out of the recording.

The unit tests check natsd against the recording; ``test_create_matches_nats_server`` (marked
``differential``) replays every case against the installed nats-server and compares natsd's
answer with the live one, field order included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server
from differential import harness

from natsd.jetstream.config.stream_config import (
    DEFAULT_DUPLICATE_WINDOW,
    Compression,
    DiscardPolicy,
    PersistMode,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamLimits,
    check_update,
    decode_go_json,
    is_valid_name,
    is_valid_subject,
    parse_stream_config,
    parse_stream_config_json,
    required_api_level,
    subject_is_subset_match,
    subjects_collide,
    validate_mapping,
)
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import StoreConfig

Expect = tuple[Any, ...]


def ok(diff: dict[str, Any]) -> Expect:
    return ("ok", diff)


def err(code: int, err_code: int, description: str) -> Expect:
    return ("err", code, err_code, description)


# What nats-server 2.15.1 returns for {"name": "S"} (besides name, subjects and metadata).
DEFAULT_CONFIG: dict[str, Any] = {
    "retention": "limits",
    "max_consumers": -1,
    "max_msgs": -1,
    "max_bytes": -1,
    "max_age": 0,
    "max_msgs_per_subject": -1,
    "max_msg_size": -1,
    "discard": "old",
    "storage": "file",
    "num_replicas": 1,
    "duplicate_window": 120000000000,
    "compression": "none",
    "allow_direct": False,
    "mirror_direct": False,
    "sealed": False,
    "deny_delete": False,
    "deny_purge": False,
    "allow_rollup_hdrs": False,
    "consumer_limits": {},
    "allow_msg_ttl": False,
}


def expected_config(name: str, diff: dict[str, Any]) -> dict[str, Any]:
    """The full config an ``ok(diff)`` stands for (minus response-only metadata)."""
    out: dict[str, Any] = {"name": name, "subjects": [name], **DEFAULT_CONFIG}
    out["metadata"] = {"_nats.req.level": "0"}
    for k, v in diff.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def summarise(cfg: dict[str, Any]) -> Expect:
    """``ok(diff)`` of a full config (the inverse of ``expected_config``)."""
    md = dict(cfg.get("metadata", {}))
    md.pop("_nats.ver", None)
    md.pop("_nats.level", None)
    cfg = {**cfg, "metadata": md}
    diff = {k: v for k, v in cfg.items() if k not in DEFAULT_CONFIG or DEFAULT_CONFIG[k] != v}
    for k in (*DEFAULT_CONFIG, "subjects"):
        if k not in cfg:
            diff[k] = None
    return ok(diff)


S = "S"


def c(case_id: str, body: Any, name: str = S) -> tuple[str, str, Any]:
    return (case_id, name, body)


def s(case_id: str, **fields: Any) -> tuple[str, str, Any]:
    """A case whose body is {"name": "S", **fields}."""
    return (case_id, S, {"name": S, **fields})


def body_bytes(body: Any) -> bytes:
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


# fmt: off
CREATE_CASES: list[tuple[str, str, Any]] = [
    # --- minimal, defaults
    s("minimal"),
    s("subjects_given", subjects=["a.>", "b"]),
    s("empty_subjects", subjects=[]),
    s("null_fields", subjects=None, metadata=None, placement=None, mirror=None, sources=None,
      consumer_limits=None, sealed=None, max_msgs=None),
    s("nats_py_defaults", subjects=["o.>"], discard="old", discard_new_per_subject=False,
      max_msgs_per_subject=-1, max_msg_size=-1, storage="file", no_ack=False, duplicate_window=0,
      sealed=False, deny_delete=False, deny_purge=False, allow_rollup_hdrs=False, max_age=0),
    s("everything", description="d", subjects=["a.>", "c"], retention="interest", max_consumers=4,
      max_msgs=10, max_bytes=1000, max_age=2000000000, max_msgs_per_subject=3, max_msg_size=100,
      discard="new", storage="file", num_replicas=1, no_ack=True, duplicate_window=1000000000,
      placement={"cluster": "c", "tags": ["t"]}, compression="s2", first_seq=5,
      subject_transform={"src": "a.>", "dest": "b.>"},
      republish={"dest": "rp.>", "headers_only": True}, allow_direct=True,
      discard_new_per_subject=True, deny_delete=True, allow_rollup_hdrs=True,
      consumer_limits={"max_ack_pending": 5}, allow_msg_ttl=True,
      subject_delete_marker_ttl=5000000000, persist_mode="async", allow_batched=True,
      metadata={"zz": "1", "Aa": "2", "_x": "3"}),
    s("counter_atomic", allow_msg_counter=True, allow_atomic=True),
    # --- names
    c("mismatch", {"name": "T"}),
    c("no_name", {}),
    c("empty_body", ""),
    c("whitespace_body", "  \n "),
    c("null_body", "null"),
    c("name_star", {"name": "a*"}, "a*"),
    c("name_gt", {"name": "a>"}, "a>"),
    c("name_slash", {"name": "a/b"}, "a/b"),
    c("name_backslash", {"name": "a\\b"}, "a\\b"),
    c("name_255", {"name": "N" * 255}, "N" * 255),
    c("name_256", {"name": "N" * 256}, "N" * 256),
    c("name_multibyte_256", {"name": "ñ" * 128}, "ñ" * 128),
    c("name_unicode", {"name": "ño"}, "ño"),
    c("name_nbsp", {"name": "S\xa0"}, "S\xa0"),
    c("name_case_key", '{"NAME":"S"}'),
    s("description_4096", description="x" * 4096),
    s("description_4097", description="x" * 4097),
    s("metadata_too_big", metadata={"k": "x" * (128 * 1024)}),
    s("metadata_user_nats_keys",
      metadata={"a": "b", "_nats.ver": "9", "_nats.req.level": "7", "_nats.level": "9",
                "_nats.foo": "x"}),
    s("metadata_empty", metadata={}),
    # --- replicas
    s("replicas_2", num_replicas=2),
    s("replicas_5", num_replicas=5),
    s("replicas_6", num_replicas=6),
    s("replicas_neg", num_replicas=-1),
    s("replicas_3_and_bad_age", num_replicas=3, max_age=50000000),
    # --- subjects
    s("subject_empty_token", subjects=["a..b"]),
    s("subject_fwc_middle", subjects=["a.>.b"]),
    s("subject_space", subjects=["a b"]),
    s("subject_empty", subjects=[""]),
    s("subject_duplicate", subjects=["a", "a"]),
    s("subject_overlap_pwc", subjects=["a.*", "a.b"]),
    s("subject_overlap_fwc", subjects=["a.b", "a.>"]),
    s("subject_overlap_two_wildcards", subjects=["a.*.c", "a.b.*"]),
    s("subject_overlap_third", subjects=["a", "b.*", "b.>"]),
    s("subject_no_overlap_fwc_parent", subjects=["a.>", "a"]),
    s("subject_star_prefix_literal", subjects=["*foo.bar", "xfoo.bar"]),
    s("subject_all", subjects=[">"]),
    s("subject_all_no_ack", subjects=[">"], no_ack=True),
    s("subject_all_no_ack_r2", subjects=[">"], no_ack=True, num_replicas=2),
    s("subject_js_api", subjects=["$JS.API.>"]),
    s("subject_js_api_no_ack", subjects=["$JS.API.>"], no_ack=True),
    s("subject_js_all", subjects=["$JS.>"]),
    s("subject_js_event", subjects=["$JS.EVENT.>"]),
    s("subject_js_event_literal", subjects=["$JS.EVENT.x"]),
    s("subject_js_wildcard", subjects=["$JS.*.x"]),
    s("subject_jsc", subjects=["$JSC.x"]),
    s("subject_nrg", subjects=["$NRG.x"]),
    s("subject_sys", subjects=["$SYS.x"]),
    s("subject_sys_wildcard", subjects=["$SYS.*.x"]),
    s("subject_sys_account", subjects=["$SYS.ACCOUNT.x"]),
    s("subject_star", subjects=["*"]),
    s("subject_star_fwc", subjects=["*.>"]),
    s("subject_wildcard_js", subjects=["*.API.>"]),
    s("subject_literal_star_in_token", subjects=["foo*"]),
    s("subject_nbsp", subjects=["a\xa0b"]),
    # --- limits and defaults
    s("limits_below_minus_one", max_msgs=-5, max_bytes=-7, max_msg_size=-3, max_consumers=-9,
      max_msgs_per_subject=-2),
    s("limits_set", max_msgs=10, max_bytes=2048, max_msg_size=512, max_consumers=3,
      max_msgs_per_subject=2),
    s("max_msg_size_int32_max", max_msg_size=2147483647),
    s("max_msg_size_over_int32", max_msg_size=2147483648),
    s("max_msg_size_under_int32", max_msg_size=-2147483649),
    s("max_age_50ms", max_age=50000000),
    s("max_age_negative", max_age=-1),
    s("max_age_100ms", max_age=100000000),
    s("max_age_1h", max_age=3600000000000),
    s("dupe_window_gt_age", max_age=1000000000, duplicate_window=2000000000),
    s("dupe_window_eq_age", max_age=1000000000, duplicate_window=1000000000),
    s("dupe_window_negative", duplicate_window=-1),
    s("dupe_window_50ms", duplicate_window=50000000),
    s("dupe_window_1h", duplicate_window=3600000000000),
    s("first_seq", first_seq=100),
    s("consumer_limits",
      consumer_limits={"inactive_threshold": 5000000000, "max_ack_pending": 10}),
    s("consumer_limits_negative",
      consumer_limits={"inactive_threshold": -5, "max_ack_pending": -10}),
    # --- policies
    s("retention_workqueue", retention="workqueue"),
    s("retention_interest", retention="interest"),
    s("retention_bogus", retention="bogus"),
    s("retention_capitalised", retention="Limits"),
    s("retention_number", retention=1),
    s("retention_null", retention=None),
    c("retention_object", '{"name":"S","retention":{"a": 1}}'),
    c("retention_escaped", '{"name":"S","retention":"\\u006cimits"}'),
    s("discard_new", discard="new"),
    s("discard_upper", discard="NEW"),
    s("discard_bogus", discard="bogus"),
    s("discard_null", discard=None),
    s("storage_memory", storage="memory"),
    s("storage_capitalised", storage="File"),
    s("storage_null", storage=None),
    s("compression_s2", compression="s2"),
    s("compression_s2_memory", compression="s2", storage="memory"),
    s("compression_upper", compression="S2"),
    s("compression_empty", compression=""),
    s("compression_null", compression=None),
    s("compression_number", compression=5),
    c("compression_escaped", '{"name":"S","compression":"\\u0073\\u0032"}'),
    s("wq_discard_new", retention="workqueue", discard="new"),
    s("wq_max_per_subject", retention="workqueue", max_msgs_per_subject=5),
    s("dnps_discard_old", discard_new_per_subject=True),
    s("dnps_no_max_per_subject", discard_new_per_subject=True, discard="new"),
    s("dnps_ok", discard_new_per_subject=True, discard="new", max_msgs_per_subject=1),
    s("dnps_workqueue", discard_new_per_subject=True, discard="new", max_msgs_per_subject=1,
      retention="workqueue"),
    s("rollup_deny_purge", deny_purge=True, allow_rollup_hdrs=True),
    s("deny_flags", deny_delete=True, deny_purge=True),
    s("allow_direct", allow_direct=True, allow_rollup_hdrs=True),
    s("sealed_on_create", sealed=True),
    s("sealed_before_bad_age", sealed=True, max_age=-1),
    s("mirror_direct_without_mirror", mirror_direct=True),
    c("path_separator_before_sealed", {"name": "a/b", "sealed": True}, "a/b"),
    s("no_ack", no_ack=True),
    s("placement_empty", placement={}),
    s("placement_preferred", placement={"preferred": "x"}),
    s("placement_cluster_tags", placement={"cluster": "c1", "tags": ["a", "b"]}),
    s("template_owner_unknown", template_owner="T"),
    # --- TTLs, markers, counters, schedules, batches, persist mode
    s("msg_ttl", allow_msg_ttl=True),
    s("marker_ttl_500ms", subject_delete_marker_ttl=500000000, allow_msg_ttl=True),
    s("marker_ttl_implies_ttl_and_rollup", subject_delete_marker_ttl=1000000000),
    s("marker_ttl_clears_deny_purge", subject_delete_marker_ttl=1000000000, allow_msg_ttl=True,
      deny_purge=True),
    s("marker_ttl_negative", subject_delete_marker_ttl=-1),
    s("marker_ttl_workqueue", subject_delete_marker_ttl=1000000000, retention="workqueue"),
    s("counter", allow_msg_counter=True),
    s("counter_discard_new", allow_msg_counter=True, discard="new"),
    s("counter_ttl", allow_msg_counter=True, allow_msg_ttl=True),
    s("counter_workqueue", allow_msg_counter=True, retention="workqueue"),
    s("counter_schedules", allow_msg_counter=True, allow_msg_schedules=True),
    s("schedules", allow_msg_schedules=True),
    s("schedules_discard_new", allow_msg_schedules=True, discard="new"),
    s("schedules_clear_deny_purge", allow_msg_schedules=True, deny_purge=True),
    s("atomic", allow_atomic=True),
    s("batched", allow_batched=True),
    s("persist_async", persist_mode="async"),
    s("persist_async_memory", persist_mode="async", storage="memory"),
    s("persist_async_atomic", persist_mode="async", allow_atomic=True),
    s("persist_default", persist_mode="default"),
    s("persist_empty", persist_mode=""),
    s("persist_upper", persist_mode="ASYNC"),
    s("persist_null", persist_mode=None),
    # --- pedantic
    s("pedantic_ok", pedantic=True),
    s("pedantic_limit_below_minus_one", pedantic=True, max_msgs=-5),
    s("pedantic_limit_zero", pedantic=True, max_msgs=0),
    s("pedantic_max_consumers", pedantic=True, max_consumers=-3),
    s("pedantic_short_max_age", pedantic=True, max_age=1000000000),
    s("pedantic_long_max_age", pedantic=True, max_age=200000000000),
    s("pedantic_marker_without_ttl", pedantic=True, subject_delete_marker_ttl=1000000000),
    s("pedantic_marker_without_rollup", pedantic=True, subject_delete_marker_ttl=1000000000,
      allow_msg_ttl=True),
    s("pedantic_schedules_without_rollup", pedantic=True, allow_msg_schedules=True),
    s("pedantic_schedules_with_rollup", pedantic=True, allow_msg_schedules=True,
      allow_rollup_hdrs=True),
    s("pedantic_republish_no_src", subjects=["a.>"], republish={"dest": "b.>"}, pedantic=True),
    s("pedantic_not_bool", pedantic="x"),
    # --- mirrors and sources (validated like nats-server; natsd refuses the valid ones)
    s("mirror_ok", mirror={"name": "O"}),
    s("mirror_with_subjects", mirror={"name": "O"}, subjects=["a"]),
    s("mirror_first_seq", mirror={"name": "O"}, first_seq=5),
    s("mirror_with_sources", mirror={"name": "O"}, sources=[{"name": "P"}]),
    s("mirror_counter", mirror={"name": "O"}, allow_msg_counter=True),
    s("mirror_atomic", mirror={"name": "O"}, allow_atomic=True),
    s("mirror_batched", mirror={"name": "O"}, allow_batched=True),
    s("mirror_schedules", mirror={"name": "O"}, allow_msg_schedules=True),
    s("mirror_bad_name", mirror={"name": "a.b"}),
    s("mirror_empty_name", mirror={"name": ""}),
    s("mirror_filter_and_transforms",
      mirror={"name": "O", "filter_subject": "a",
              "subject_transforms": [{"src": "b", "dest": "c"}]}),
    s("mirror_marker_ttl", mirror={"name": "O"}, subject_delete_marker_ttl=1000000000),
    s("mirror_overlapping_transforms",
      mirror={"name": "O", "subject_transforms": [{"src": "a.*", "dest": "b.{{wildcard(1)}}"},
                                                  {"src": "a.b", "dest": "c"}]}),
    s("mirror_transform_bad_src",
      mirror={"name": "O", "subject_transforms": [{"src": "a b", "dest": "c"}]}),
    s("mirror_transform_bad_dest",
      mirror={"name": "O", "subject_transforms": [{"src": "a.*", "dest": "c.{{wildcard(2)}}"}]}),
    s("mirror_consumer_with_start_seq",
      mirror={"name": "O", "opt_start_seq": 1, "consumer": {"name": "c", "deliver_subject": "d"}}),
    s("mirror_consumer_bad_deliver",
      mirror={"name": "O", "consumer": {"name": "c", "deliver_subject": "d.*"}}),
    s("mirror_external_api_overlap",
      mirror={"name": "O", "external": {"api": "$JS.API", "deliver": ""}}),
    s("mirror_external_ok",
      mirror={"name": "O", "external": {"api": "$JS.h.API", "deliver": "dl"}}),
    s("mirror_direct_with_mirror", mirror={"name": "O"}, mirror_direct=True),
    s("mirror_start_time",
      mirror={"name": "O", "opt_start_seq": 5, "opt_start_time": "2020-01-01T00:00:00Z"}),
    c("mirror_start_time_bad", '{"name":"S","mirror":{"name":"O","opt_start_time":"bad"}}'),
    c("mirror_start_time_date_only",
      '{"name":"S","mirror":{"name":"O","opt_start_time":"2020-01-01"}}'),
    c("mirror_start_time_number", '{"name":"S","mirror":{"name":"O","opt_start_time":5}}'),
    c("mirror_string", '{"name":"S","mirror":"x"}'),
    s("source_ok", sources=[{"name": "O"}]),
    s("source_duplicate", sources=[{"name": "O"}, {"name": "O"}]),
    s("source_different_filters",
      sources=[{"name": "O", "filter_subject": "a"}, {"name": "O", "filter_subject": "b"}]),
    s("source_bad_name", sources=[{"name": "a*"}]),
    s("source_null", sources=[None]),
    s("source_schedules", sources=[{"name": "O"}], allow_msg_schedules=True),
    s("source_overlapping_transforms",
      sources=[{"name": "O", "subject_transforms": [{"src": "a.>", "dest": "b.>"},
                                                    {"src": "a.b", "dest": "c"}]}]),
    s("source_transform_bad_src",
      sources=[{"name": "O", "subject_transforms": [{"src": "a b", "dest": "x"}]}]),
    s("source_transform_bad_dest",
      sources=[{"name": "O", "subject_transforms": [{"src": "a.*", "dest": "x.{{wildcard(2)}}"}]}]),
    s("source_api_prefix_wildcard",
      sources=[{"name": "O", "external": {"api": "a.*", "deliver": ""}}]),
    s("source_deliver_prefix_wildcard",
      sources=[{"name": "O", "external": {"api": "x", "deliver": "a.*"}}]),
    s("source_with_subjects", sources=[{"name": "O"}], subjects=["x"]),
    s("source_marker_ttl", subject_delete_marker_ttl=1000000000, sources=[{"name": "O"}]),
    c("source_string_element", '{"name":"S","sources":["x"]}'),
    c("sources_object", '{"name":"S","sources":{}}'),
    # --- republish
    s("republish_cycle", subjects=["a.>"], republish={"dest": "a.x"}),
    s("republish_default_src", subjects=["a.>"], republish={"dest": "b.>"}),
    s("republish_wildcard_fn", subjects=["a.>"],
      republish={"src": "a.*", "dest": "b.{{wildcard(1)}}"}),
    s("republish_index_out_of_range", subjects=["a.>"],
      republish={"src": "a.*", "dest": "b.{{wildcard(2)}}"}),
    s("republish_src_outside_subjects", subjects=["a.>"], republish={"src": "c.>", "dest": "b.>"}),
    s("republish_fwc_to_pwc", subjects=["a.>"], republish={"src": "a.>", "dest": "b.*"}),
    s("republish_empty_dest", subjects=["a.>"], republish={"dest": ""}),
    s("republish_fwc_to_literal", subjects=["a.>"], republish={"dest": "b", "headers_only": True}),
    s("republish_implicit_cycle", subjects=["a"], republish={"src": "a", "dest": ">"},
      subject_transform={"src": "a", "dest": "z"}),
    s("republish_implicit", subjects=["a"], republish={"src": ">", "dest": ">"},
      subject_transform={"src": "a", "dest": "z"}),
    s("republish_src_with_space", subjects=["a.>"], republish={"src": "a b", "dest": "b"}),
    s("republish_fwc_to_wildcard_fn", subjects=["a.>"],
      republish={"src": "a.>", "dest": "b.{{wildcard(1)}}"}),
    c("republish_unknown_field", '{"name":"S","republish":{"dest":"x","bogus":1}}'),
    # --- subject transform (ValidateMapping)
    s("transform_ok", subjects=["a.>"], subject_transform={"src": "a.>", "dest": "b.>"}),
    s("transform_bad_src", subjects=["a.>"], subject_transform={"src": "a b", "dest": "b"}),
    s("transform_index_out_of_range", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{wildcard(2)}}"}),
    s("transform_empty_src", subjects=["a.>"], subject_transform={"src": "", "dest": "b"}),
    s("transform_empty_dest", subjects=["a.>"], subject_transform={"src": "a.*", "dest": ""}),
    s("transform_both_empty", subjects=["a.>"], subject_transform={"src": "", "dest": ""}),
    s("transform_unknown_fn", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{bogus(1)}}"}),
    s("transform_unused_wildcard", subjects=["a.>"],
      subject_transform={"src": "a.*.*", "dest": "b.{{wildcard(1)}}"}),
    s("transform_pwc_in_dest", subjects=["a.>"], subject_transform={"src": "a.*", "dest": "b.*"}),
    s("transform_fwc_to_pwc", subjects=["a.>"], subject_transform={"src": "a.>", "dest": "b.*"}),
    s("transform_pwc_to_fwc", subjects=["a.>"], subject_transform={"src": "a.*", "dest": "b.>"}),
    s("transform_partition", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{partition(3,1)}}"}),
    s("transform_partition_literal_src", subjects=["a.>"],
      subject_transform={"src": "a.b", "dest": "b.{{partition(3)}}"}),
    s("transform_empty_dest_token", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b..c"}),
    s("transform_dollar_index", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.$1"}),
    s("transform_dollar_out_of_range", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.$2"}),
    s("transform_wildcard_no_arg", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{wildcard()}}"}),
    s("transform_wildcard_two_args", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{wildcard(1,2)}}"}),
    s("transform_wildcard_bad_arg", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{wildcard(x)}}"}),
    s("transform_split", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{split(1,-)}}"}),
    s("transform_split_one_arg", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{split(1)}}"}),
    s("transform_split_dot_delim", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{split(1,.)}}"}),
    s("transform_slice_left", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{SliceFromLeft(1,2)}}"}),
    s("transform_split_right_too_many", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{SplitFromRight(1,2,3)}}"}),
    s("transform_left", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{left(1,2)}}"}),
    s("transform_right", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{right(1,2)}}"}),
    s("transform_random", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{random(5)}}"}),
    s("transform_random_literal_src", subjects=["a.>"],
      subject_transform={"src": "a.b", "dest": "b.{{random(5)}}"}),
    s("transform_wildcard_literal_src", subjects=["a.>"],
      subject_transform={"src": "a.b", "dest": "b.{{wildcard(1)}}"}),
    s("transform_spaces_in_fn", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.{{ Wildcard( 1 ) }}"}),
    s("transform_dest_token_with_space", subjects=["a.>"],
      subject_transform={"src": "a.*", "dest": "b.x y.{{wildcard(1)}}"}),
    s("transform_dest_after_fwc", subjects=["a.>"],
      subject_transform={"src": "a.>", "dest": "b.>.c"}),
    c("transform_unknown_field", '{"name":"S","subject_transform":{"src":"a","dest":"b","x":1}}'),
    # --- JSON: types, unknown fields, case, duplicates
    s("unknown_field", bogus=1),
    c("unknown_field_nested", '{"name":"S","consumer_limits":{"bogus":1}}'),
    c("unknown_field_empty_key", '{"":1}'),
    c("unknown_field_before_type_error", '{"name":"S","bogus":1,"max_msgs":"y"}'),
    c("type_error_before_unknown_field", '{"name":"S","max_msgs":"y","bogus":1}'),
    c("type_string_for_int", '{"name":"S","max_msgs":"x"}'),
    c("type_number_for_string", '{"name":5}'),
    c("type_float_for_int", '{"name":"S","max_msgs":1.5}'),
    c("type_float_integral", '{"name":"S","max_msgs":1.0}'),
    c("type_exponent", '{"name":"S","max_msgs":1e3}'),
    c("type_int64_overflow", '{"name":"S","max_msgs":9223372036854775808}'),
    c("type_int_overflow", '{"name":"S","max_consumers":99999999999999999999}'),
    c("type_huge_exponent", '{"name":"S","max_msgs":1e400}'),
    c("type_negative_uint", '{"name":"S","first_seq":-1}'),
    c("type_negative_zero", '{"name":"S","max_msgs":-0}'),
    c("type_number_for_bool", '{"name":"S","sealed":1}'),
    c("type_string_for_bool", '{"name":"S","allow_msg_ttl":"true"}'),
    c("type_bool_for_int", '{"name":"S","num_replicas":true}'),
    c("type_object_for_int", '{"name":"S","max_msgs":{}}'),
    c("type_array_for_int", '{"name":"S","max_msgs":[]}'),
    c("type_string_for_duration", '{"name":"S","max_age":"1h"}'),
    c("type_float_for_duration", '{"name":"S","max_age":1.5}'),
    c("type_array_element", '{"name":"S","subjects":["a",true]}'),
    c("type_string_for_list", '{"name":"S","subjects":"a"}'),
    c("type_object_for_list", '{"name":"S","subjects":{}}'),
    c("type_number_in_map", '{"name":"S","metadata":{"a":1}}'),
    c("type_object_in_map", '{"name":"S","metadata":{"a":{}}}'),
    c("type_null_in_map", '{"name":"S","metadata":{"a":null}}'),
    c("type_array_for_map", '{"name":"S","metadata":[]}'),
    c("type_nested_int", '{"name":"S","consumer_limits":{"max_ack_pending":"x"}}'),
    c("type_number_for_struct", '{"name":"S","consumer_limits":5}'),
    c("type_nested_list_element", '{"name":"S","placement":{"tags":[5]}}'),
    c("type_nested_list", '{"name":"S","placement":{"tags":"a"}}'),
    c("type_source_field", '{"name":"S","sources":[{"name":5}]}'),
    c("type_transform_src", '{"name":"S","mirror":{"name":"O","subject_transforms":[{"src":5}]}}'),
    c("type_republish_dest", '{"name":"S","republish":{"dest":5}}'),
    c("type_top_level_array", "[]"),
    c("type_top_level_string", '"S"'),
    c("type_top_level_number", "5"),
    c("type_top_level_bool", "true"),
    c("case_insensitive_key", '{"name":"S","Max_Msgs":5}'),
    c("duplicate_key_last_wins", '{"name":"S","max_msgs":5,"max_msgs":7}'),
    c("duplicate_key_case_variants", '{"name":"S","subjects":["a"],"Subjects":["b"]}'),
    c("duplicate_metadata_merges", '{"name":"S","metadata":{"a":"b"},"metadata":{"c":"d"}}'),
    c("duplicate_name_mismatch", '{"name":"S","name":"T"}'),
    c("lone_surrogate", '{"name":"S","description":"\\ud800"}'),
    c("surrogate_pair", '{"name":"S","description":"\\ud83d\\ude00"}'),
    c("escapes", '{"name":"S","description":"\\u00e9\\/\\b\\f\\n\\r\\t\\"\\\\"}'),
    c("escaped_nul", '{"name":"S","description":"a\\u0000b"}'),
    # --- JSON syntax
    c("syntax_eof", "{"),
    c("syntax_eof_in_string", '{"name":"S'),
    c("syntax_eof_after_value", '{"name":"S"'),
    c("syntax_eof_after_comma", '{"name":"S",'),
    c("syntax_eof_in_number", '{"name":"S","max_msgs":-'),
    c("syntax_eof_in_literal", '{"name":"S","sealed":tr'),
    c("syntax_trailing_comma", '{"name":"S",}'),
    c("syntax_missing_colon", '{"name" "S"}'),
    c("syntax_missing_comma", '{"name":"S" "x":1}'),
    c("syntax_unquoted_key", '{name:"S"}'),
    c("syntax_bad_value", "x"),
    c("syntax_bad_literal", '{"name":tru}'),
    c("syntax_bad_null", '{"name":nul}'),
    c("syntax_capital_true", '{"name":"S","sealed":True}'),
    c("syntax_literal_suffix", '{"name":"S","sealed":falsey}'),
    c("syntax_array_missing_comma", '{"name":"S","subjects":["a" "b"]}'),
    c("syntax_array_trailing_comma", '{"name":"S","subjects":[1,]}'),
    c("syntax_array_close_mismatch", '{"name":"S"]'),
    c("syntax_bad_escape", '{"name":"S\\x"}'),
    c("syntax_short_unicode_escape", '{"name":"\\u12"}'),
    c("syntax_bad_unicode_escape", '{"name":"\\u12zz"}'),
    c("syntax_tab_in_string", '{"name":"a\tb"}'),
    c("syntax_nul_in_string", '{"name":"S","description":"a\x00b"}'),
    c("syntax_leading_zero", '{"max_msgs":01}'),
    c("syntax_double_zero", '{"name":"S","max_msgs":00}'),
    c("syntax_minus_only", '{"max_msgs":-}'),
    c("syntax_dot_no_digit", '{"name":"S","max_msgs":1.}'),
    c("syntax_leading_dot", '{"name":"S","max_msgs":.5}'),
    c("syntax_plus", '{"name":"S","max_msgs":+1}'),
    c("syntax_exp_no_digit", '{"name":"S","max_msgs":1e}'),
    c("syntax_exp_sign_no_digit", '{"name":"S","max_msgs":1e+}'),
    c("syntax_number_suffix", '{"name":"S","max_msgs":1x}'),
    c("syntax_trailing_garbage", '{"name":"S"} xyz'),
    c("syntax_trailing_brace", '{"name":"S"}}'),
    c("syntax_bom", '\ufeff{"name":"S"}'),
    c("two_values_merge", '{"name":"S"} {"max_msgs":5}'),
    c("two_values_second_bad", '{"name":"S"} 5'),
    c("two_values_second_unknown", '{"name":"S"} {"bogus":1}'),
    c("two_values_second_eof", '{"name":"S"} {'),
    c("two_values_type_error_first", '{"name":"S","max_msgs":"x"} {'),
    c("value_then_null", '{"name":"S"} null'),
    c("surrounding_whitespace", '  {"name":"S"}  \n'),
]
# fmt: on


# fmt: off
EXPECTED: dict[str, Expect] = {
    "minimal": ok({}),
    "subjects_given": ok({"subjects": ["a.>", "b"]}),
    "empty_subjects": ok({}),
    "null_fields": ok({}),
    "nats_py_defaults": ok({"subjects": ["o.>"]}),
    "everything": ok({
        "description": "d", "subjects": ["a.>", "c"], "retention": "interest", "max_consumers": 4,
        "max_msgs": 10, "max_bytes": 1000, "max_age": 2000000000, "max_msgs_per_subject": 3,
        "max_msg_size": 100, "discard": "new", "no_ack": True, "duplicate_window": 1000000000,
        "placement": {"cluster": "c", "tags": ["t"]}, "compression": "s2", "first_seq": 5,
        "subject_transform": {"src": "a.>", "dest": "b.>"},
        "republish": {"src": ">", "dest": "rp.>", "headers_only": True}, "allow_direct": True,
        "discard_new_per_subject": True, "deny_delete": True, "allow_rollup_hdrs": True,
        "consumer_limits": {"max_ack_pending": 5}, "allow_msg_ttl": True,
        "subject_delete_marker_ttl": 5000000000, "persist_mode": "async", "allow_batched": True,
        "metadata": {"Aa": "2", "_nats.req.level": "4", "_x": "3", "zz": "1"},
    }),
    "counter_atomic": ok({
        "allow_msg_counter": True, "allow_atomic": True, "metadata": {"_nats.req.level": "2"},
    }),
    "mismatch": err(400, 10056, "stream name in subject does not match request"),
    "no_name": err(400, 10056, "stream name in subject does not match request"),
    "empty_body": err(400, 10056, "stream name in subject does not match request"),
    "whitespace_body": err(400, 10056, "stream name in subject does not match request"),
    "null_body": err(400, 10056, "stream name in subject does not match request"),
    "name_star": err(500, 10052,
        "stream name is required and can not contain '.', '*', '>', '\\', '/'"
    ),
    "name_gt": err(500, 10052,
        "stream name is required and can not contain '.', '*', '>', '\\', '/'"
    ),
    "name_slash": err(400, 10128, "Stream name can not contain path separators"),
    "name_backslash": err(400, 10128, "Stream name can not contain path separators"),
    "name_255": ok({}),
    "name_256": err(500, 10052, "stream name is too long, maximum allowed is 255"),
    "name_multibyte_256": err(500, 10052, "stream name is too long, maximum allowed is 255"),
    "name_unicode": ok({}),
    "name_nbsp": ok({}),
    "name_case_key": ok({}),
    "description_4096": ok({
        "description": (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxx"
        ),
    }),
    "description_4097": err(500, 10052, "stream description is too long, maximum allowed is 4096"),
    "metadata_too_big": err(500, 10052, "stream metadata exceeds maximum size of 131072 bytes"),
    "metadata_user_nats_keys": ok({
        "metadata": {"_nats.foo": "x", "_nats.req.level": "0", "a": "b"},
    }),
    "metadata_empty": ok({}),
    "replicas_2": err(500, 10074, "replicas > 1 not supported in non-clustered mode"),
    "replicas_5": err(500, 10074, "replicas > 1 not supported in non-clustered mode"),
    "replicas_6": err(500, 10052, "maximum replicas is 5"),
    "replicas_neg": err(400, 10133, "replicas count cannot be negative"),
    "replicas_3_and_bad_age": err(500, 10052, "max age needs to be >= 100ms"),
    "subject_empty_token": err(500, 10052, "invalid subject"),
    "subject_fwc_middle": err(500, 10052, "invalid subject"),
    "subject_space": err(500, 10052, "invalid subject"),
    "subject_empty": err(500, 10052, "invalid subject"),
    "subject_duplicate": err(500, 10052, 'subject "a" overlaps with "a"'),
    "subject_overlap_pwc": err(500, 10052, 'subject "a.*" overlaps with "a.b"'),
    "subject_overlap_fwc": err(500, 10052, 'subject "a.b" overlaps with "a.>"'),
    "subject_overlap_two_wildcards": err(500, 10052, 'subject "a.*.c" overlaps with "a.b.*"'),
    "subject_overlap_third": err(500, 10052, 'subject "b.*" overlaps with "b.>"'),
    "subject_no_overlap_fwc_parent": ok({"subjects": ["a.>", "a"]}),
    "subject_star_prefix_literal": ok({"subjects": ["*foo.bar", "xfoo.bar"]}),
    "subject_all": err(500, 10052, "capturing all subjects requires no-ack to be true"),
    "subject_all_no_ack": ok({"subjects": [">"], "no_ack": True}),
    "subject_all_no_ack_r2": err(500, 10052, "capturing all subjects requires replicas of 1"),
    "subject_js_api": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_js_api_no_ack": ok({"subjects": ["$JS.API.>"], "no_ack": True}),
    "subject_js_all": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_js_event": ok({"subjects": ["$JS.EVENT.>"]}),
    "subject_js_event_literal": ok({"subjects": ["$JS.EVENT.x"]}),
    "subject_js_wildcard": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_jsc": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_nrg": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_sys": err(500, 10052,
        "subjects that overlap with system api require no-ack to be true"
    ),
    "subject_sys_wildcard": err(500, 10052,
        "subjects that overlap with system api require no-ack to be true"
    ),
    "subject_sys_account": ok({"subjects": ["$SYS.ACCOUNT.x"]}),
    "subject_star": ok({"subjects": ["*"]}),
    "subject_star_fwc": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_wildcard_js": err(500, 10052,
        "subjects that overlap with jetstream api require no-ack to be true"
    ),
    "subject_literal_star_in_token": ok({"subjects": ["foo*"]}),
    "subject_nbsp": ok({"subjects": ["a\xa0b"]}),
    "limits_below_minus_one": ok({}),
    "limits_set": ok({
        "max_consumers": 3, "max_msgs": 10, "max_bytes": 2048, "max_msgs_per_subject": 2,
        "max_msg_size": 512,
    }),
    "max_msg_size_int32_max": ok({"max_msg_size": 2147483647}),
    "max_msg_size_over_int32": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 2147483648 into "
            "Go struct field StreamConfigRequest.max_msg_size of type int"
            "32"
        )
    ),
    "max_msg_size_under_int32": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number -2147483649 into"
            " Go struct field StreamConfigRequest.max_msg_size of type in"
            "t32"
        )
    ),
    "max_age_50ms": err(500, 10052, "max age needs to be >= 100ms"),
    "max_age_negative": err(500, 10052, "max age can not be negative"),
    "max_age_100ms": ok({"max_age": 100000000, "duplicate_window": 100000000}),
    "max_age_1h": ok({"max_age": 3600000000000}),
    "dupe_window_gt_age": err(500, 10052, "duplicates window can not be larger then max age"),
    "dupe_window_eq_age": ok({"max_age": 1000000000, "duplicate_window": 1000000000}),
    "dupe_window_negative": err(500, 10052, "duplicates window can not be negative"),
    "dupe_window_50ms": err(500, 10052, "duplicates window needs to be >= 100ms"),
    "dupe_window_1h": ok({"duplicate_window": 3600000000000}),
    "first_seq": ok({"first_seq": 100}),
    "consumer_limits": ok({
        "consumer_limits": {"inactive_threshold": 5000000000, "max_ack_pending": 10},
    }),
    "consumer_limits_negative": ok({
        "consumer_limits": {"inactive_threshold": -5, "max_ack_pending": -10},
    }),
    "retention_workqueue": ok({"retention": "workqueue"}),
    "retention_interest": ok({"retention": "interest"}),
    "retention_bogus": err(400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""'),
    "retention_capitalised": err(400, 10025, 'invalid JSON: can not unmarshal "\\"Limits\\""'),
    "retention_number": err(400, 10025, 'invalid JSON: can not unmarshal "1"'),
    "retention_null": err(400, 10025, 'invalid JSON: can not unmarshal "null"'),
    "retention_object": err(400, 10025, 'invalid JSON: can not unmarshal "{\\"a\\": 1}"'),
    "retention_escaped": err(400, 10025, 'invalid JSON: can not unmarshal "\\"\\\\u006cimits\\""'),
    "discard_new": ok({"discard": "new"}),
    "discard_upper": ok({"discard": "new"}),
    "discard_bogus": err(400, 10025, 'invalid JSON: can not unmarshal "\\"bogus\\""'),
    "discard_null": err(400, 10025, 'invalid JSON: can not unmarshal "null"'),
    "storage_memory": ok({"storage": "memory"}),
    "storage_capitalised": err(400, 10025, 'invalid JSON: can not unmarshal "\\"File\\""'),
    "storage_null": err(400, 10025, 'invalid JSON: can not unmarshal "null"'),
    "compression_s2": ok({"compression": "s2"}),
    "compression_s2_memory": ok({"storage": "memory", "compression": "s2"}),
    "compression_upper": err(400, 10025, "invalid JSON: unknown compression algorithm"),
    "compression_empty": err(400, 10025, "invalid JSON: unknown compression algorithm"),
    "compression_null": err(400, 10025, "invalid JSON: unknown compression algorithm"),
    "compression_number": err(400, 10025,
        "invalid JSON: json: cannot unmarshal number into Go value of type string"
    ),
    "compression_escaped": ok({"compression": "s2"}),
    "wq_discard_new": ok({"retention": "workqueue", "discard": "new"}),
    "wq_max_per_subject": ok({"retention": "workqueue", "max_msgs_per_subject": 5}),
    "dnps_discard_old": err(500, 10052,
        "discard new per subject requires discard new policy to be set"
    ),
    "dnps_no_max_per_subject": err(500, 10052,
        "discard new per subject requires max msgs per subject > 0"
    ),
    "dnps_ok": ok({"max_msgs_per_subject": 1, "discard": "new", "discard_new_per_subject": True}),
    "dnps_workqueue": ok({
        "retention": "workqueue", "max_msgs_per_subject": 1, "discard": "new",
        "discard_new_per_subject": True,
    }),
    "rollup_deny_purge": err(500, 10052, "roll-ups require the purge permission"),
    "deny_flags": ok({"deny_delete": True, "deny_purge": True}),
    "allow_direct": ok({"allow_direct": True, "allow_rollup_hdrs": True}),
    "sealed_on_create": err(500, 10052, "stream configuration for create can not be sealed"),
    "sealed_before_bad_age": err(500, 10052, "stream configuration for create can not be sealed"),
    "mirror_direct_without_mirror": err(500, 10052,
        "stream has no mirror but does have mirror direct"
    ),
    "path_separator_before_sealed": err(400, 10128, "Stream name can not contain path separators"),
    "no_ack": ok({"no_ack": True}),
    "placement_empty": ok({}),
    "placement_preferred": err(500, 10052, "preferred server not permitted in placement"),
    "placement_cluster_tags": ok({"placement": {"cluster": "c1", "tags": ["a", "b"]}}),
    "template_owner_unknown": err(400, 10025,
        'invalid JSON: json: unknown field "template_owner"'
    ),
    "msg_ttl": ok({"allow_msg_ttl": True, "metadata": {"_nats.req.level": "1"}}),
    "marker_ttl_500ms": err(500, 10052, "subject delete marker TTL must be at least 1 second"),
    "marker_ttl_implies_ttl_and_rollup": ok({
        "allow_rollup_hdrs": True, "allow_msg_ttl": True, "subject_delete_marker_ttl": 1000000000,
        "metadata": {"_nats.req.level": "1"},
    }),
    "marker_ttl_clears_deny_purge": ok({
        "allow_rollup_hdrs": True, "allow_msg_ttl": True, "subject_delete_marker_ttl": 1000000000,
        "metadata": {"_nats.req.level": "1"},
    }),
    "marker_ttl_negative": err(500, 10052, "subject delete marker TTL must not be negative"),
    "marker_ttl_workqueue": ok({
        "retention": "workqueue", "allow_rollup_hdrs": True, "allow_msg_ttl": True,
        "subject_delete_marker_ttl": 1000000000, "metadata": {"_nats.req.level": "1"},
    }),
    "counter": ok({"allow_msg_counter": True, "metadata": {"_nats.req.level": "2"}}),
    "counter_discard_new": err(500, 10052, "counter stream cannot use discard new"),
    "counter_ttl": err(500, 10052, "counter stream cannot use message TTLs"),
    "counter_workqueue": err(500, 10052, "counter stream can only use limits retention"),
    "counter_schedules": err(500, 10052, "counter stream cannot use message schedules"),
    "schedules": ok({
        "allow_rollup_hdrs": True, "allow_msg_schedules": True,
        "metadata": {"_nats.req.level": "2"},
    }),
    "schedules_discard_new": err(500, 10052, "message scheduling cannot use discard new"),
    "schedules_clear_deny_purge": ok({
        "allow_rollup_hdrs": True, "allow_msg_schedules": True,
        "metadata": {"_nats.req.level": "2"},
    }),
    "atomic": ok({"allow_atomic": True, "metadata": {"_nats.req.level": "2"}}),
    "batched": ok({"allow_batched": True, "metadata": {"_nats.req.level": "4"}}),
    "persist_async": ok({"persist_mode": "async", "metadata": {"_nats.req.level": "2"}}),
    "persist_async_memory": err(500, 10052,
        "async persist mode is only supported on file storage"
    ),
    "persist_async_atomic": err(500, 10052,
        "async persist mode is not supported with atomic batch publish"
    ),
    "persist_default": ok({}),
    "persist_empty": ok({}),
    "persist_upper": err(400, 10025, 'invalid JSON: can not unmarshal "\\"ASYNC\\""'),
    "persist_null": err(400, 10025, 'invalid JSON: can not unmarshal "null"'),
    "pedantic_ok": ok({}),
    "pedantic_limit_below_minus_one": err(400, 10157, "pedantic mode: max_msgs must be set to -1"),
    "pedantic_limit_zero": ok({}),
    "pedantic_max_consumers": err(400, 10157, "pedantic mode: max_consumers must be set to -1"),
    "pedantic_short_max_age": err(400, 10157,
        "pedantic mode: duplicate window cannot be bigger than max age"
    ),
    "pedantic_long_max_age": ok({"max_age": 200000000000}),
    "pedantic_marker_without_ttl": err(500, 10052,
        "subject delete marker cannot be set if message TTLs are disabled"
    ),
    "pedantic_marker_without_rollup": err(500, 10052,
        "subject delete marker cannot be set if roll-ups are disabled"
    ),
    "pedantic_schedules_without_rollup": err(500, 10052,
        "message scheduling cannot be set if roll-ups are disabled"
    ),
    "pedantic_schedules_with_rollup": ok({
        "allow_rollup_hdrs": True, "allow_msg_schedules": True,
        "metadata": {"_nats.req.level": "2"},
    }),
    "pedantic_republish_no_src": err(400, 10157,
        "pedantic mode: republish source can not be empty"
    ),
    "pedantic_not_bool": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.pedantic of type bool"
        )
    ),
    "mirror_ok": ok({"mirror": {"name": "O"}, "duplicate_window": None, "subjects": None}),
    "mirror_with_subjects": err(400, 10034, "stream mirrors can not contain subjects"),
    "mirror_first_seq": err(400, 10143, "stream mirrors can not have first sequence configured"),
    "mirror_with_sources": err(400, 10031, "stream mirrors can not also contain other sources"),
    "mirror_counter": err(400, 10173, "stream mirrors can not also calculate counters"),
    "mirror_atomic": err(400, 10198, "stream mirrors can not also use atomic publishing"),
    "mirror_batched": err(400, 10209, "stream mirrors can not also use batch publishing"),
    "mirror_schedules": err(400, 10186, "stream mirrors can not also schedule messages"),
    "mirror_bad_name": err(400, 10142, "mirrored stream name is invalid"),
    "mirror_empty_name": err(400, 10142, "mirrored stream name is invalid"),
    "mirror_filter_and_transforms": err(400, 10150,
        "mirror with multiple subject transforms cannot also have a single subject filter"
    ),
    "mirror_marker_ttl": err(500, 10052, "subject delete markers forbidden on mirrors"),
    "mirror_overlapping_transforms": err(400, 10152, "mirror subject filters can not overlap"),
    "mirror_transform_bad_src": err(400, 10151, "mirror transform source: invalid subject a b"),
    "mirror_transform_bad_dest": err(400, 10154,
        (
            "mirror transform: invalid mapping destination: wildcard inde"
            "x out of range in {{wildcard(2)}}: [2]"
        )
    ),
    "mirror_consumer_with_start_seq": err(400, 10213, "stream mirror consumer config is invalid"),
    "mirror_consumer_bad_deliver": err(400, 10213, "stream mirror consumer config is invalid"),
    "mirror_external_api_overlap": err(400, 10021,
        "stream external api prefix $JS.API must not overlap with $JS.API"
    ),
    "mirror_external_ok": ok({
        "mirror": {"name": "O", "external": {"api": "$JS.h.API", "deliver": "dl"}},
        "duplicate_window": None, "subjects": None,
    }),
    "mirror_direct_with_mirror": ok({
        "mirror": {"name": "O"}, "mirror_direct": True, "duplicate_window": None, "subjects": None,
    }),
    "mirror_start_time": ok({
        "mirror": {"name": "O", "opt_start_seq": 5, "opt_start_time": "2020-01-01T00:00:00Z"},
        "duplicate_window": None, "subjects": None,
    }),
    "mirror_start_time_bad": err(400, 10025,
        (
            'invalid JSON: parsing time "bad" as "2006-01-02T15:04:05Z07:'
            '00": cannot parse "bad" as "2006"'
        )
    ),
    "mirror_start_time_date_only": err(400, 10025,
        (
            'invalid JSON: parsing time "2020-01-01" as "2006-01-02T15:04'
            ':05Z07:00": cannot parse "" as "T"'
        )
    ),
    "mirror_start_time_number": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.mirror.opt_start_time of type time."
            "Time"
        )
    ),
    "mirror_string": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.mirror of type server.StreamSource"
        )
    ),
    "source_ok": ok({"sources": [{"name": "O"}], "duplicate_window": None, "subjects": None}),
    "source_duplicate": err(400, 10140, "duplicate source configuration detected"),
    "source_different_filters": ok({
        "sources": [{"name": "O", "filter_subject": "a"}, {"name": "O", "filter_subject": "b"}],
        "duplicate_window": None, "subjects": None,
    }),
    "source_bad_name": err(400, 10141, "sourced stream name is invalid"),
    "source_null": err(400, 10141, "sourced stream name is invalid"),
    "source_schedules": err(400, 10187, "stream source can not also schedule messages"),
    "source_overlapping_transforms": err(400, 10147, "source filters can not overlap"),
    "source_transform_bad_src": err(400, 10145, "source transform source: invalid subject a b"),
    "source_transform_bad_dest": err(400, 10146,
        (
            "source transform: invalid mapping destination: wildcard inde"
            "x out of range in {{wildcard(2)}}: [2]"
        )
    ),
    "source_api_prefix_wildcard": err(500, 10052,
        'stream external api prefix "a.*" must be a valid subject without wildcards'
    ),
    "source_deliver_prefix_wildcard": err(400, 10024,
        "stream external delivery prefix a.* must not contain wildcards"
    ),
    "source_with_subjects": ok({
        "subjects": ["x"], "sources": [{"name": "O"}], "duplicate_window": None,
    }),
    "source_marker_ttl": ok({
        "sources": [{"name": "O"}], "allow_rollup_hdrs": True, "allow_msg_ttl": True,
        "subject_delete_marker_ttl": 1000000000, "metadata": {"_nats.req.level": "1"},
        "duplicate_window": None, "subjects": None,
    }),
    "source_string_element": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into StreamConfi"
            "gRequest.sources.0 of type server.StreamSource"
        )
    ),
    "sources_object": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal object into Go struct f"
            "ield StreamConfigRequest.sources of type []*server.StreamSou"
            "rce"
        )
    ),
    "republish_cycle": err(500, 10052,
        "stream configuration for republish destination forms a cycle"
    ),
    "republish_default_src": ok({"subjects": ["a.>"], "republish": {"src": ">", "dest": "b.>"}}),
    "republish_wildcard_fn": ok({
        "subjects": ["a.>"], "republish": {"src": "a.*", "dest": "b.{{wildcard(1)}}"},
    }),
    "republish_index_out_of_range": err(500, 10052,
        (
            "stream configuration for republish with transform from 'a.*'"
            " to 'b.{{wildcard(2)}}' not valid"
        )
    ),
    "republish_src_outside_subjects": ok({
        "subjects": ["a.>"], "republish": {"src": "c.>", "dest": "b.>"},
    }),
    "republish_fwc_to_pwc": err(500, 10052,
        "stream configuration for republish with transform from 'a.>' to 'b.*' not valid"
    ),
    "republish_empty_dest": ok({"subjects": ["a.>"], "republish": {"src": ">", "dest": ""}}),
    "republish_fwc_to_literal": err(500, 10052,
        "stream configuration for republish with transform from '>' to 'b' not valid"
    ),
    "republish_implicit_cycle": err(500, 10052,
        "stream configuration for republish destination forms a cycle"
    ),
    "republish_implicit": ok({
        "subjects": ["a"], "subject_transform": {"src": "a", "dest": "z"},
        "republish": {"src": "z", "dest": "z"},
    }),
    "republish_src_with_space": ok({
        "subjects": ["a.>"], "republish": {"src": "a b", "dest": "b"},
    }),
    "republish_fwc_to_wildcard_fn": err(500, 10052,
        (
            "stream configuration for republish with transform from 'a.>'"
            " to 'b.{{wildcard(1)}}' not valid"
        )
    ),
    "republish_unknown_field": err(400, 10025, 'invalid JSON: json: unknown field "bogus"'),
    "transform_ok": ok({"subjects": ["a.>"], "subject_transform": {"src": "a.>", "dest": "b.>"}}),
    "transform_bad_src": err(400, 10155, "stream transform source: invalid subject a b"),
    "transform_index_out_of_range": err(400, 10156,
        (
            "stream transform: invalid mapping destination: wildcard inde"
            "x out of range in {{wildcard(2)}}: [2]"
        )
    ),
    "transform_empty_src": err(400, 10156, "stream transform: invalid subject"),
    "transform_empty_dest": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": ""},
    }),
    "transform_both_empty": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "", "dest": ""},
    }),
    "transform_unknown_fn": err(400, 10156,
        "stream transform: invalid mapping destination: unknown function in {{bogus(1)}}"
    ),
    "transform_unused_wildcard": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*.*", "dest": "b.{{wildcard(1)}}"},
    }),
    "transform_pwc_in_dest": err(400, 10156, "stream transform: invalid subject"),
    "transform_fwc_to_pwc": err(400, 10156, "stream transform: invalid subject"),
    "transform_pwc_to_fwc": err(400, 10156, "stream transform: invalid subject"),
    "transform_partition": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{partition(3,1)}}"},
    }),
    "transform_partition_literal_src": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.b", "dest": "b.{{partition(3)}}"},
    }),
    "transform_empty_dest_token": err(400, 10156,
        "stream transform: invalid mapping destination: invalid transform"
    ),
    "transform_dollar_index": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.$1"},
    }),
    "transform_dollar_out_of_range": err(400, 10156,
        "stream transform: invalid mapping destination: wildcard index out of range in $2: [2]"
    ),
    "transform_wildcard_no_arg": err(400, 10156,
        (
            "stream transform: invalid mapping destination: not enough ar"
            "guments passed to the function in {{wildcard()}}"
        )
    ),
    "transform_wildcard_two_args": err(400, 10156,
        (
            "stream transform: invalid mapping destination: too many argu"
            "ments passed to the function in {{wildcard(1,2)}}"
        )
    ),
    "transform_wildcard_bad_arg": err(400, 10156,
        (
            "stream transform: invalid mapping destination: function argu"
            "ment is invalid or in the wrong format in {{wildcard(x)}}"
        )
    ),
    "transform_split": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{split(1,-)}}"},
    }),
    "transform_split_one_arg": err(400, 10156,
        (
            "stream transform: invalid mapping destination: not enough ar"
            "guments passed to the function in {{split(1)}}"
        )
    ),
    "transform_split_dot_delim": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{split(1,.)}}"},
    }),
    "transform_slice_left": ok({
        "subjects": ["a.>"],
        "subject_transform": {"src": "a.*", "dest": "b.{{SliceFromLeft(1,2)}}"},
    }),
    "transform_split_right_too_many": err(400, 10156,
        (
            "stream transform: invalid mapping destination: too many argu"
            "ments passed to the function in {{SplitFromRight(1,2,3)}}"
        )
    ),
    "transform_left": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{left(1,2)}}"},
    }),
    "transform_right": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{right(1,2)}}"},
    }),
    "transform_random": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{random(5)}}"},
    }),
    "transform_random_literal_src": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.b", "dest": "b.{{random(5)}}"},
    }),
    "transform_wildcard_literal_src": err(400, 10156,
        (
            "stream transform: invalid mapping destination: wildcard inde"
            "x out of range in {{wildcard(1)}}"
        )
    ),
    "transform_spaces_in_fn": ok({
        "subjects": ["a.>"], "subject_transform": {"src": "a.*", "dest": "b.{{ Wildcard( 1 ) }}"},
    }),
    "transform_dest_token_with_space": err(400, 10156,
        "stream transform: invalid mapping destination: invalid transform"
    ),
    "transform_dest_after_fwc": err(400, 10156,
        "stream transform: invalid mapping destination: invalid transform in c"
    ),
    "transform_unknown_field": err(400, 10025, 'invalid JSON: json: unknown field "x"'),
    "unknown_field": err(400, 10025, 'invalid JSON: json: unknown field "bogus"'),
    "unknown_field_nested": err(400, 10025, 'invalid JSON: json: unknown field "bogus"'),
    "unknown_field_empty_key": err(400, 10025, 'invalid JSON: json: unknown field ""'),
    "unknown_field_before_type_error": err(400, 10025,
        'invalid JSON: json: unknown field "bogus"'
    ),
    "type_error_before_unknown_field": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_string_for_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_number_for_string": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.name of type string"
        )
    ),
    "type_float_for_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 1.5 into Go stru"
            "ct field StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_float_integral": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 1.0 into Go stru"
            "ct field StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_exponent": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 1e3 into Go stru"
            "ct field StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_int64_overflow": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 9223372036854775"
            "808 into Go struct field StreamConfigRequest.max_msgs of typ"
            "e int64"
        )
    ),
    "type_int_overflow": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 9999999999999999"
            "9999 into Go struct field StreamConfigRequest.max_consumers "
            "of type int"
        )
    ),
    "type_huge_exponent": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 1e400 into Go st"
            "ruct field StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_negative_uint": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number -1 into Go struc"
            "t field StreamConfigRequest.first_seq of type uint64"
        )
    ),
    "type_negative_zero": ok({}),
    "type_number_for_bool": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.sealed of type bool"
        )
    ),
    "type_string_for_bool": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.allow_msg_ttl of type bool"
        )
    ),
    "type_bool_for_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal bool into Go struct fie"
            "ld StreamConfigRequest.num_replicas of type int"
        )
    ),
    "type_object_for_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal object into Go struct f"
            "ield StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_array_for_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal array into Go struct fi"
            "eld StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "type_string_for_duration": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.max_age of type time.Duration"
        )
    ),
    "type_float_for_duration": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number 1.5 into Go stru"
            "ct field StreamConfigRequest.max_age of type time.Duration"
        )
    ),
    "type_array_element": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal bool into StreamConfigR"
            "equest.subjects.1 of type string"
        )
    ),
    "type_string_for_list": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.subjects of type []string"
        )
    ),
    "type_object_for_list": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal object into Go struct f"
            "ield StreamConfigRequest.subjects of type []string"
        )
    ),
    "type_number_in_map": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.metadata.a of type string"
        )
    ),
    "type_object_in_map": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal object into Go struct f"
            "ield StreamConfigRequest.metadata.a of type string"
        )
    ),
    "type_null_in_map": ok({"metadata": {"_nats.req.level": "0", "a": ""}}),
    "type_array_for_map": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal array into Go struct fi"
            "eld StreamConfigRequest.metadata of type map[string]string"
        )
    ),
    "type_nested_int": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.consumer_limits.max_ack_pending of "
            "type int"
        )
    ),
    "type_number_for_struct": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.consumer_limits of type server.Stre"
            "amConsumerLimits"
        )
    ),
    "type_nested_list_element": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into StreamConfi"
            "gRequest.placement.tags.0 of type string"
        )
    ),
    "type_nested_list": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.placement.tags of type []string"
        )
    ),
    "type_source_field": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.sources.0.name of type string"
        )
    ),
    "type_transform_src": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.mirror.subject_transforms.0.src of "
            "type string"
        )
    ),
    "type_republish_dest": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go struct f"
            "ield StreamConfigRequest.republish.dest of type string"
        )
    ),
    "type_top_level_array": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal array into Go value of "
            "type server.StreamConfigRequest"
        )
    ),
    "type_top_level_string": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go value of"
            " type server.StreamConfigRequest"
        )
    ),
    "type_top_level_number": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go value of"
            " type server.StreamConfigRequest"
        )
    ),
    "type_top_level_bool": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal bool into Go value of t"
            "ype server.StreamConfigRequest"
        )
    ),
    "case_insensitive_key": ok({"max_msgs": 5}),
    "duplicate_key_last_wins": ok({"max_msgs": 7}),
    "duplicate_key_case_variants": ok({"subjects": ["b"]}),
    "duplicate_metadata_merges": ok({"metadata": {"_nats.req.level": "0", "a": "b", "c": "d"}}),
    "duplicate_name_mismatch": err(400, 10056, "stream name in subject does not match request"),
    "lone_surrogate": ok({"description": "�"}),
    "surrogate_pair": ok({"description": "😀"}),
    "escapes": ok({"description": 'é/\x08\x0c\n\r\t"\\'}),
    "escaped_nul": ok({"description": "a\x00b"}),
    "syntax_eof": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_eof_in_string": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_eof_after_value": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_eof_after_comma": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_eof_in_number": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_eof_in_literal": err(400, 10025, "invalid JSON: unexpected EOF"),
    "syntax_trailing_comma": err(400, 10025,
        (
            "invalid JSON: invalid character '}' looking for beginning of"
            " object key string at offset 13"
        )
    ),
    "syntax_missing_colon": err(400, 10025,
        'invalid JSON: invalid character \'"\' after object key at offset 9'
    ),
    "syntax_missing_comma": err(400, 10025,
        'invalid JSON: invalid character \'"\' after object key:value pair at offset 13'
    ),
    "syntax_unquoted_key": err(400, 10025,
        (
            "invalid JSON: invalid character 'n' looking for beginning of"
            " object key string at offset 2"
        )
    ),
    "syntax_bad_value": err(400, 10025,
        "invalid JSON: invalid character 'x' looking for beginning of value at offset 1"
    ),
    "syntax_bad_literal": err(400, 10025,
        "invalid JSON: invalid character '}' in literal true (expecting 'e') at offset 12"
    ),
    "syntax_bad_null": err(400, 10025,
        "invalid JSON: invalid character '}' in literal null (expecting 'l') at offset 12"
    ),
    "syntax_capital_true": err(400, 10025,
        "invalid JSON: invalid character 'T' looking for beginning of value at offset 22"
    ),
    "syntax_literal_suffix": err(400, 10025,
        "invalid JSON: invalid character 'y' after object key:value pair at offset 27"
    ),
    "syntax_array_missing_comma": err(400, 10025,
        'invalid JSON: invalid character \'"\' after array element at offset 29'
    ),
    "syntax_array_trailing_comma": err(400, 10025,
        "invalid JSON: invalid character ']' looking for beginning of value at offset 27"
    ),
    "syntax_array_close_mismatch": err(400, 10025,
        "invalid JSON: invalid character ']' after object key:value pair at offset 12"
    ),
    "syntax_bad_escape": err(400, 10025,
        "invalid JSON: invalid escape sequence `\\x` in string at offset 12"
    ),
    "syntax_short_unicode_escape": err(400, 10025,
        'invalid JSON: invalid escape sequence `\\u12"}` in string at offset 15'
    ),
    "syntax_bad_unicode_escape": err(400, 10025,
        "invalid JSON: invalid escape sequence `\\u12zz` in string at offset 15"
    ),
    "syntax_tab_in_string": err(400, 10025,
        "invalid JSON: invalid character '\\t' in string at offset 11"
    ),
    "syntax_nul_in_string": err(400, 10025,
        "invalid JSON: invalid character '\\x00' in string at offset 29"
    ),
    "syntax_leading_zero": err(400, 10025,
        "invalid JSON: invalid character '1' after object key:value pair at offset 14"
    ),
    "syntax_double_zero": err(400, 10025,
        "invalid JSON: invalid character '0' after object key:value pair at offset 25"
    ),
    "syntax_minus_only": err(400, 10025,
        "invalid JSON: invalid character '}' in numeric literal at offset 14"
    ),
    "syntax_dot_no_digit": err(400, 10025,
        "invalid JSON: invalid character '}' in numeric literal at offset 26"
    ),
    "syntax_leading_dot": err(400, 10025,
        "invalid JSON: invalid character '.' looking for beginning of value at offset 24"
    ),
    "syntax_plus": err(400, 10025,
        "invalid JSON: invalid character '+' looking for beginning of value at offset 24"
    ),
    "syntax_exp_no_digit": err(400, 10025,
        "invalid JSON: invalid character '}' in numeric literal at offset 26"
    ),
    "syntax_exp_sign_no_digit": err(400, 10025,
        "invalid JSON: invalid character '}' in numeric literal at offset 27"
    ),
    "syntax_number_suffix": err(400, 10025,
        "invalid JSON: invalid character 'x' after object key:value pair at offset 25"
    ),
    "syntax_trailing_garbage": err(400, 10025,
        "invalid JSON: invalid character 'x' looking for beginning of value at offset 14"
    ),
    "syntax_trailing_brace": err(400, 10025,
        "invalid JSON: invalid character '}' looking for beginning of value at offset 13"
    ),
    "syntax_bom": err(400, 10025,
        "invalid JSON: invalid character '\\ufeff' looking for beginning of value at offset 3"
    ),
    "two_values_merge": ok({"max_msgs": 5}),
    "two_values_second_bad": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal number into Go value of"
            " type server.StreamConfigRequest"
        )
    ),
    "two_values_second_unknown": err(400, 10025, 'invalid JSON: json: unknown field "bogus"'),
    "two_values_second_eof": err(400, 10025, "invalid JSON: unexpected EOF"),
    "two_values_type_error_first": err(400, 10025,
        (
            "invalid JSON: json: cannot unmarshal string into Go struct f"
            "ield StreamConfigRequest.max_msgs of type int64"
        )
    ),
    "value_then_null": ok({}),
    "surrounding_whitespace": ok({}),
}

UPDATE_CASES: list[tuple[str, dict[str, Any], Any, Expect]] = [
    # Created fine, but the second validation pass of an update refuses it (see check_update).
    ("update_counter_with_marker_ttl",
     {"name": "U", "allow_msg_counter": True, "subject_delete_marker_ttl": 1000000000},
     {"name": "U", "allow_msg_counter": True, "subject_delete_marker_ttl": 1000000000},
     err(500, 10052, "counter stream cannot use message TTLs")),
    ("update_same", {"name": "U", "subjects": ["u.>"]}, {"name": "U", "subjects": ["u.>"]},
     ok({"subjects": ["u.>"]})),
    ("update_empty_body", {"name": "U"}, "",
     err(500, 10052, "stream name is required and can not contain '.', '*', '>', '\\', '/'")),
    ("update_name_mismatch", {"name": "U"}, {"name": "V"},
     err(400, 10056, "stream name in subject does not match request")),
    ("update_bad_cfg_before_mismatch", {"name": "U"}, {"name": "V", "max_age": -1},
     err(500, 10052, "max age can not be negative")),
    ("update_storage", {"name": "U"}, {"name": "U", "storage": "memory"},
     err(500, 10052, "stream configuration update can not change storage type")),
    ("update_to_workqueue", {"name": "U"}, {"name": "U", "retention": "workqueue"},
     err(500, 10052,
         "stream configuration update can not change retention policy to/from workqueue"
     )),
    ("update_from_workqueue", {"name": "U", "retention": "workqueue"}, {"name": "U"},
     err(500, 10052,
         "stream configuration update can not change retention policy to/from workqueue"
     )),
    ("update_to_interest", {"name": "U"}, {"name": "U", "retention": "interest"},
     ok({"retention": "interest"})),
    ("update_interest_to_limits", {"name": "U", "retention": "interest"}, {"name": "U"},
     ok({})),
    ("update_max_consumers", {"name": "U"}, {"name": "U", "max_consumers": 5},
     ok({"max_consumers": 5})),
    ("update_replicas", {"name": "U"}, {"name": "U", "num_replicas": 3},
     err(500, 10074, "replicas > 1 not supported in non-clustered mode")),
    ("update_add_mirror", {"name": "U"}, {"name": "U", "mirror": {"name": "O"}},
     err(400, 10055, "stream mirror configuration can not be updated")),
    ("update_enable_ttl", {"name": "U"}, {"name": "U", "allow_msg_ttl": True},
     ok({"allow_msg_ttl": True, "metadata": {"_nats.req.level": "1"}})),
    ("update_disable_ttl", {"name": "U", "allow_msg_ttl": True}, {"name": "U"},
     err(500, 10052, "message TTL status can not be disabled")),
    ("update_enable_counter", {"name": "U"}, {"name": "U", "allow_msg_counter": True},
     err(500, 10052, "stream configuration update can not change message counter setting")),
    ("update_disable_counter", {"name": "U", "allow_msg_counter": True}, {"name": "U"},
     err(500, 10052, "stream configuration update can not change message counter setting")),
    ("update_enable_schedules", {"name": "U"}, {"name": "U", "allow_msg_schedules": True},
     ok({
         "allow_rollup_hdrs": True, "allow_msg_schedules": True,
         "metadata": {"_nats.req.level": "2"},
     })),
    ("update_disable_schedules",
     {"name": "U", "allow_msg_schedules": True},
     {"name": "U", "allow_rollup_hdrs": True},
     err(500, 10052, "message schedules can not be disabled")),
    ("update_persist_mode", {"name": "U"}, {"name": "U", "persist_mode": "async"},
     err(500, 10052, "stream configuration update can not change persist mode")),
    ("update_deny_delete", {"name": "U"}, {"name": "U", "deny_delete": True},
     ok({"deny_delete": True})),
    ("update_cancel_deny_delete", {"name": "U", "deny_delete": True}, {"name": "U"},
     err(500, 10052, "stream configuration update can not cancel deny message deletes")),
    ("update_cancel_deny_purge", {"name": "U", "deny_purge": True}, {"name": "U"},
     err(500, 10052, "stream configuration update can not cancel deny purge")),
    ("update_seal",
     {"name": "U", "max_age": 3600000000000, "allow_rollup_hdrs": True},
     {"name": "U", "max_age": 3600000000000, "allow_rollup_hdrs": True, "sealed": True},
     ok({"discard": "new", "sealed": True, "deny_delete": True, "deny_purge": True})),
    ("update_dnps_needs_discard_new",
     {"name": "U"},
     {"name": "U", "discard_new_per_subject": True},
     err(500, 10052, "discard new per subject requires discard new policy to be set")),
    ("update_subjects_and_limits",
     {"name": "U", "subjects": ["u.>"]},
     {
         "name": "U",
         "subjects": ["u.>", "w"],
         "max_msgs": 10,
         "max_age": 1000000000,
         "description": "x",
         "metadata": {"k": "v"},
     },
     ok({
         "description": "x", "subjects": ["u.>", "w"], "max_msgs": 10, "max_age": 1000000000,
         "duplicate_window": 1000000000, "metadata": {"_nats.req.level": "0", "k": "v"},
     })),
    ("update_compression", {"name": "U"}, {"name": "U", "compression": "s2"},
     ok({"compression": "s2"})),
    ("update_sealed_allowed_in_body", {"name": "U"}, {"name": "U", "sealed": True},
     ok({"discard": "new", "sealed": True, "deny_delete": True, "deny_purge": True})),
    ("update_mirror_direct_without_mirror", {"name": "U"}, {"name": "U", "mirror_direct": True},
     ok({"mirror_direct": True})),
    ("update_marker_ttl", {"name": "U"}, {"name": "U", "subject_delete_marker_ttl": 2000000000},
     ok({
         "allow_rollup_hdrs": True, "allow_msg_ttl": True, "subject_delete_marker_ttl": 2000000000,
         "metadata": {"_nats.req.level": "1"},
     })),
    ("update_atomic", {"name": "U"}, {"name": "U", "allow_atomic": True},
     ok({"allow_atomic": True, "metadata": {"_nats.req.level": "2"}})),
    ("update_batched", {"name": "U"}, {"name": "U", "allow_batched": True},
     ok({"allow_batched": True, "metadata": {"_nats.req.level": "4"}})),
    ("update_first_seq", {"name": "U"}, {"name": "U", "first_seq": 10},
     ok({"first_seq": 10})),
]
# fmt: on


# nats-server accepts these; natsd refuses mirrors and sources until it runs them.
_NO_MIRRORS = err(500, 10052, "stream mirrors are not supported")
_NO_SOURCES = err(500, 10052, "stream sources are not supported")
NATSD_DIFFERS: dict[str, Expect] = {
    "mirror_ok": _NO_MIRRORS,
    "mirror_external_ok": _NO_MIRRORS,
    "mirror_direct_with_mirror": _NO_MIRRORS,
    "mirror_start_time": _NO_MIRRORS,
    "source_ok": _NO_SOURCES,
    "source_different_filters": _NO_SOURCES,
    "source_with_subjects": _NO_SOURCES,
    "source_marker_ttl": _NO_SOURCES,
}
# Lifts every refusal of a config nats-server accepts.
ALLOW_ALL: dict[str, bool] = {
    "allow_mirrors": True,
    "allow_sources": True,
}

# Account limits (max_bytes_required, *_max_stream_bytes) and the server's duplicate window
# limit, as nats-server 2.15.1 answered with LIMITS_SERVER_CONFIG.
LIMITS = StreamLimits(
    max_bytes_required=True, storage_max_stream_bytes=1000, memory_max_stream_bytes=500
)
MAX_DUPLICATE_WINDOW = 30_000_000_000
LIMIT_CASES: list[tuple[str, dict[str, Any], Expect]] = [
    (
        "max_bytes_required",
        {"name": "S"},
        err(400, 10113, "account requires a stream config to have max bytes set"),
    ),
    (
        "max_bytes_unlimited",
        {"name": "S", "max_bytes": -1},
        err(400, 10113, "account requires a stream config to have max bytes set"),
    ),
    (
        "max_bytes_ok",
        {"name": "S", "max_bytes": 1000},
        ok({"max_bytes": 1000, "duplicate_window": 30000000000}),
    ),
    (
        "max_bytes_over_file_limit",
        {"name": "S", "max_bytes": 1001},
        err(400, 10122, "stream max bytes exceeds account limit max stream bytes"),
    ),
    (
        "max_bytes_over_memory_limit",
        {"name": "S", "max_bytes": 501, "storage": "memory"},
        err(400, 10122, "stream max bytes exceeds account limit max stream bytes"),
    ),
    (
        "duplicate_window_default_clamped",
        {"name": "S", "max_bytes": 100},
        ok({"max_bytes": 100, "duplicate_window": 30000000000}),
    ),
    (
        "duplicate_window_over_server_limit",
        {"name": "S", "max_bytes": 100, "duplicate_window": 60000000000},
        err(500, 10052, "duplicates window can not be larger then server limit of 30s"),
    ),
    (
        "duplicate_window_max_age",
        {"name": "S", "max_bytes": 100, "max_age": 10000000000},
        ok({"max_bytes": 100, "max_age": 10000000000, "duplicate_window": 10000000000}),
    ),
    (
        "duplicate_window_pedantic",
        {"name": "S", "max_bytes": 100, "pedantic": True},
        err(400, 10157, "pedantic mode: duplicate window limits are higher than current limits"),
    ),
]
LIMITS_SERVER_CONFIG = """
jetstream {{ store_dir: "{store}", limits {{ duplicate_window: 30s }} }}
accounts {{
  A {{
    jetstream {{ max_bytes_required: true, store_max_stream_bytes: 1000,
                 memory_max_stream_bytes: 500 }}
    users [{{user: a, password: a}}]
  }}
}}
"""


# ------------------------------------------------------------------------------ helpers
def natsd_create(name: str, body: Any, **kw: Any) -> Expect:
    """natsd's answer to a CREATE with the raw body: ("ok", full config) or err(...)."""
    try:
        cfg = parse_stream_config_json(body_bytes(body), name_in_subject=name, **kw)
    except ApiError as e:
        return err(e.code, e.err_code, e.description)
    return ("ok", cfg.to_json())


def natsd_update(base: dict[str, Any], update: Any) -> Expect:
    # The base stream is what nats-server created.
    old = parse_stream_config(base, name_in_subject=base["name"])
    try:
        new = parse_stream_config_json(
            body_bytes(update), name_in_subject=base["name"], action="update"
        )
        cfg = check_update(old, new)
    except ApiError as e:
        return err(e.code, e.err_code, e.description)
    return ("ok", cfg.to_json())


def as_expect(name: str, result: Expect) -> Expect:
    return summarise(result[1]) if result[0] == "ok" else result


CASE_IDS = [case[0] for case in CREATE_CASES]


def test_every_case_has_a_recording() -> None:
    assert len(set(CASE_IDS)) == len(CASE_IDS)
    assert set(EXPECTED) == set(CASE_IDS)
    assert set(NATSD_DIFFERS) <= set(CASE_IDS)


# ------------------------------------------------------------------------------ unit tests
@pytest.mark.parametrize(("case_id", "name", "body"), CREATE_CASES, ids=CASE_IDS)
def test_create_matches_recorded_nats_server(case_id: str, name: str, body: Any) -> None:
    want = NATSD_DIFFERS.get(case_id, EXPECTED[case_id])
    got = natsd_create(name, body)
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert got[1] == expected_config(name, want[1])
    else:
        assert got == want


@pytest.mark.parametrize(
    ("case_id", "name", "body"),
    [case for case in CREATE_CASES if isinstance(case[2], dict)],
    ids=[case[0] for case in CREATE_CASES if isinstance(case[2], dict)],
)
def test_dict_request_same_as_raw(case_id: str, name: str, body: dict[str, Any]) -> None:
    """The API layer may hand over an already-decoded dict: same answer."""
    raw = natsd_create(name, body)
    try:
        got: Expect = ("ok", parse_stream_config(body, name_in_subject=name).to_json())
    except ApiError as e:
        got = err(e.code, e.err_code, e.description)
    assert got == raw


@pytest.mark.parametrize("case_id", sorted(NATSD_DIFFERS))
def test_refused_features_when_enabled(case_id: str) -> None:
    """With mirrors/sources and the unimplemented features allowed natsd accepts exactly
    what nats-server accepts: the refusal is the only difference."""
    _, name, body = next(case for case in CREATE_CASES if case[0] == case_id)
    got = natsd_create(name, body, **ALLOW_ALL)
    assert got[0] == "ok"
    assert got[1] == expected_config(name, EXPECTED[case_id][1])


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ({"name": "S", "allow_msg_counter": True}, None),
        ({"name": "S", "allow_atomic": True}, None),
        ({"name": "S", "allow_batched": True}, None),
        ({"name": "S", "allow_msg_schedules": True}, None),
        ({"name": "S", "persist_mode": "async"}, None),
        ({"name": "S", "compression": "s2"}, None),
        ({"name": "S", "compression": "s2", "storage": "file"}, None),
        ({"name": "S", "compression": "s2", "storage": "memory"}, None),
        ({"name": "S", "compression": "none"}, None),
        ({"name": "S", "persist_mode": "default"}, None),
        # nats-server's own validation answers first.
        (
            {"name": "S", "allow_msg_counter": True, "discard": "new"},
            err(500, 10052, "counter stream cannot use discard new"),
        ),
        (
            {"name": "S", "persist_mode": "async", "storage": "memory"},
            err(500, 10052, "async persist mode is only supported on file storage"),
        ),
        (
            {"name": "S", "allow_atomic": True, "num_replicas": 3},
            err(500, 10074, "replicas > 1 not supported in non-clustered mode"),
        ),
    ],
)
def test_2_12_features_accepted_on_create(
    body: dict[str, Any], refusal: Expect | None
) -> None:
    got = natsd_create("S", body)
    if refusal is None:
        assert got[0] == "ok", got
    else:
        assert got == refusal


def test_stored_config_with_unimplemented_feature_is_not_refused() -> None:
    """A config read back from disk (an older natsd accepted it) still loads."""
    cfg = parse_stream_config({"name": "S", "allow_atomic": True}, name_in_subject=None)
    assert cfg.allow_atomic


@pytest.mark.parametrize(
    ("case_id", "base", "update", "want"), UPDATE_CASES, ids=[u[0] for u in UPDATE_CASES]
)
def test_update_matches_recorded_nats_server(
    case_id: str, base: dict[str, Any], update: Any, want: Expect
) -> None:
    got = natsd_update(base, update)
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert got[1] == expected_config(base["name"], want[1])
    else:
        assert got == want


@pytest.mark.parametrize(
    ("case_id", "body", "want"), LIMIT_CASES, ids=[case[0] for case in LIMIT_CASES]
)
def test_account_and_server_limits(case_id: str, body: dict[str, Any], want: Expect) -> None:
    got = natsd_create(S, body, limits=LIMITS, max_duplicate_window=MAX_DUPLICATE_WINDOW)
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert got[1] == expected_config(S, want[1])
    else:
        assert got == want


def test_defaults_of_direct_construction() -> None:
    parsed = parse_stream_config({"name": "S"}, name_in_subject="S")
    built = StreamConfig(name="S", subjects=["S"], metadata={"_nats.req.level": "0"})
    assert parsed == built
    assert parsed.duplicate_window == DEFAULT_DUPLICATE_WINDOW
    assert parsed.retention is RetentionPolicy.LIMITS
    assert parsed.storage is StorageType.FILE and parsed.storage == "file"
    assert parsed.discard is DiscardPolicy.OLD
    assert parsed.compression is Compression.NONE
    assert parsed.persist_mode is PersistMode.DEFAULT


def test_to_json_field_order_and_dynamic_metadata() -> None:
    cfg = parse_stream_config({"name": "S", "metadata": {"b": "1", "A": "2"}}, name_in_subject="S")
    out = cfg.to_json(server_version="2.15.1", api_level=5)
    assert list(out) == [
        "name",
        "subjects",
        *DEFAULT_CONFIG,
        "metadata",
    ]
    assert list(out["metadata"].items()) == [
        ("A", "2"),
        ("_nats.level", "5"),
        ("_nats.req.level", "0"),
        ("_nats.ver", "2.15.1"),
        ("b", "1"),
    ]
    # Response-only keys are never stored.
    assert "_nats.ver" not in cfg.metadata and "_nats.ver" not in cfg.to_json()["metadata"]


def test_stored_config_round_trips() -> None:
    """The engine stores to_json() and re-parses it with name_in_subject=None on restart."""
    cfg = parse_stream_config_json(
        body_bytes(next(case[2] for case in CREATE_CASES if case[0] == "everything")),
        name_in_subject="S",
    )
    stored = cfg.to_json(server_version="2.15.1", api_level=5)
    assert parse_stream_config(stored, name_in_subject=None) == cfg


def test_sealed_config_round_trips() -> None:
    old = parse_stream_config({"name": "S", "max_age": 10**12}, name_in_subject="S")
    update = {**old.to_json(), "sealed": True}
    sealed = check_update(old, parse_stream_config(update, name_in_subject="S", action="update"))
    assert (sealed.sealed, sealed.deny_delete, sealed.deny_purge) == (True, True, True)
    assert (sealed.max_age, sealed.discard) == (0, DiscardPolicy.NEW)
    assert parse_stream_config(sealed.to_json(), name_in_subject=None) == sealed


def test_to_store_config() -> None:
    cfg = parse_stream_config(
        {
            "name": "S",
            "subjects": ["a.>", "b"],
            "max_msgs": 10,
            "max_bytes": 2048,
            "max_age": 5_000_000_000,
            "max_msgs_per_subject": 2,
            "max_msg_size": 512,
            "discard": "new",
            "discard_new_per_subject": True,
            "first_seq": 7,
            "allow_msg_ttl": True,
        },
        name_in_subject="S",
    )
    assert cfg.to_store_config() == StoreConfig(
        name="S",
        subjects=["a.>", "b"],
        max_msgs=10,
        max_bytes=2048,
        max_age_ns=5_000_000_000,
        max_msgs_per_subject=2,
        max_msg_size=512,
        discard=DiscardPolicy.NEW,
        discard_new_per_subject=True,
        first_seq=7,
        allow_msg_ttl=True,
    )
    assert parse_stream_config({"name": "S"}, name_in_subject="S").to_store_config() == (
        StoreConfig(name="S", subjects=["S"])
    )


@pytest.mark.parametrize(
    ("fields", "level"),
    [
        ({}, 0),
        ({"allow_msg_ttl": True}, 1),
        ({"subject_delete_marker_ttl": 1_000_000_000}, 1),
        ({"allow_msg_counter": True}, 2),
        ({"allow_atomic": True}, 2),
        ({"allow_msg_schedules": True}, 2),
        ({"persist_mode": PersistMode.ASYNC}, 2),
        ({"allow_batched": True, "allow_msg_ttl": True}, 4),
    ],
)
def test_required_api_level(fields: dict[str, Any], level: int) -> None:
    assert required_api_level(StreamConfig(name="S", **fields)) == level


def test_update_requires_same_name() -> None:
    old = parse_stream_config({"name": "S"}, name_in_subject="S")
    new = parse_stream_config({"name": "T"}, name_in_subject="T", action="update")
    with pytest.raises(ApiError) as e:
        check_update(old, new)
    assert e.value.to_json() == {
        "code": 500,
        "err_code": 10052,
        "description": "stream configuration name must match original",
    }


def test_restore_skips_request_checks() -> None:
    # A stored sealed config is not a "create" request: no sealed / subject checks.
    cfg = parse_stream_config({"name": "S", "sealed": True}, name_in_subject=None)
    assert cfg.sealed
    with pytest.raises(ApiError):
        parse_stream_config({"name": "S", "sealed": True}, name_in_subject="S")


@pytest.mark.parametrize(
    ("a", "b", "collide"),
    [
        ("a", "a", True),
        ("a", "b", False),
        ("a.*", "a.b", True),
        ("a.b", "a.>", True),
        ("a.>", "a", False),
        ("a.*.c", "a.b.*", True),
        ("a.*", "b.*", False),
        ("a.*", "a.*.c", False),
        ("*.>", "$JS.>", True),
        ("*", "$JS.>", False),
        ("*foo.bar", "xfoo.bar", False),
        (">", "anything.at.all", True),
    ],
)
def test_subjects_collide(a: str, b: str, collide: bool) -> None:
    assert subjects_collide(a, b) is collide
    assert subjects_collide(b, a) is collide


def test_subset_match_and_validity() -> None:
    assert subject_is_subset_match("$JS.EVENT.x", "$JS.EVENT.>")
    assert not subject_is_subset_match("$JS.*.x", "$JS.EVENT.>")
    assert subject_is_subset_match("a.b", "a.*")
    assert not subject_is_subset_match("a.*", "a.b")
    assert is_valid_subject("a.*.>") and is_valid_subject("foo*")
    assert not is_valid_subject("a..b") and not is_valid_subject("a.>.b")
    assert not is_valid_subject("") and not is_valid_subject("a b")
    assert is_valid_name("ORDERS") and not is_valid_name("a.b") and not is_valid_name("a/b")


@pytest.mark.parametrize(
    ("src", "dest", "error"),
    [
        ("a.*", "b.{{wildcard(1)}}", None),
        ("a.*", "", None),
        ("a.>", "b.>", None),
        ("a.*", "b.{{partition(3,1)}}", None),
        ("a.*", "b.$1", None),
        ("", "b", "invalid subject"),
        ("a.*", "b.*", "invalid subject"),
        ("a.*", "b..c", "invalid mapping destination: invalid transform"),
        ("a.>", "b.>.c", "invalid mapping destination: invalid transform in c"),
        ("a.*", "b.{{bogus(1)}}", "invalid mapping destination: unknown function in {{bogus(1)}}"),
        (
            "a.*",
            "b.{{wildcard(2)}}",
            "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]",
        ),
        (
            "a.b",
            "b.{{wildcard(1)}}",
            "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}",
        ),
    ],
)
def test_validate_mapping(src: str, dest: str, error: str | None) -> None:
    assert validate_mapping(src, dest) == error


def test_decode_go_json() -> None:
    assert list(decode_go_json(b' {"a": [1, 2.5, "x", null, true]} {"b": {}} ')) == [
        {"a": [1, 2.5, "x", None, True]},
        {"b": {}},
    ]
    with pytest.raises(ApiError) as e:
        list(decode_go_json(b'{"a":1,}'))
    assert e.value.description == (
        "invalid JSON: invalid character '}' looking for beginning of object key string at offset 8"
    )


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ApiError) as e:
        parse_stream_config_json(b'{"name":' + b"[" * 5000, name_in_subject="S")
    assert e.value.err_code == 10025


# ------------------------------------------------------------------------------ differential
def _start(args: list[str], config: str | None = None) -> Any:
    require_nats_server()
    config_path = harness.write_config(config) if config is not None else None
    return harness.start_server("nats-server", args, config_path=config_path)


async def _requests(url: str, items: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        out = []
        for subject, data in items:
            msg = await nc.request(subject, data, timeout=5)
            out.append(json.loads(msg.data))
        return out
    finally:
        await nc.close()


async def _run_creates(url: str) -> dict[str, dict[str, Any]]:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    results: dict[str, dict[str, Any]] = {}
    try:
        for case_id, name, body in CREATE_CASES:
            for _ in range(5):
                msg = await nc.request("$JS.API.STREAM.CREATE." + name, body_bytes(body), timeout=5)
                resp = json.loads(msg.data)
                # nats-server removes a deleted stream's directory in the background; a
                # create of the same name right after can race it ("error creating store
                # for stream", seen once under load). Asked again, it answers for the
                # config. A name the file system refuses gets that error every time.
                if resp.get("error", {}).get("description") != "error creating store for stream":
                    break
                await asyncio.sleep(0.2)
            results[case_id] = resp
            if "config" in resp:
                await nc.request("$JS.API.STREAM.DELETE." + resp["config"]["name"], b"", timeout=5)
        for case_id, base, update, _ in UPDATE_CASES:
            name = base["name"]
            msg = await nc.request("$JS.API.STREAM.CREATE." + name, body_bytes(base), timeout=5)
            assert "config" in json.loads(msg.data), case_id
            msg = await nc.request("$JS.API.STREAM.UPDATE." + name, body_bytes(update), timeout=5)
            results["update:" + case_id] = json.loads(msg.data)
            await nc.request("$JS.API.STREAM.DELETE." + name, b"", timeout=5)
    finally:
        await nc.close()
    return results


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    store = tmp_path_factory.mktemp("js")
    server = _start(["-js", "-sd", str(store)])
    try:
        yield asyncio.run(_run_creates(server.url))
    finally:
        server.stop()


def _compare_live(natsd: Expect, resp: dict[str, Any]) -> None:
    if "error" in resp:
        assert natsd == err(
            **{k: resp["error"][k] for k in ("code", "err_code")},
            description=resp["error"]["description"],
        )
        return
    live_cfg = resp["config"]
    assert natsd[0] == "ok", f"nats-server accepted: {live_cfg}"
    md = live_cfg.get("metadata", {})
    full = natsd[1]
    if "_nats.ver" in md:
        # Re-render with the live server's response-only metadata.
        full = dict(full)
        full["metadata"] = {
            **full.get("metadata", {}),
            "_nats.ver": md["_nats.ver"],
            "_nats.level": md["_nats.level"],
        }
        full["metadata"] = {k: full["metadata"][k] for k in sorted(full["metadata"])}
    assert full == live_cfg
    assert list(full) == list(live_cfg)  # same field order


@pytest.mark.differential
@pytest.mark.parametrize(("case_id", "name", "body"), CREATE_CASES, ids=CASE_IDS)
def test_create_matches_nats_server(
    live: dict[str, dict[str, Any]], case_id: str, name: str, body: Any
) -> None:
    resp = live[case_id]
    if case_id in NATSD_DIFFERS:
        assert "config" in resp, resp
        assert natsd_create(name, body) == NATSD_DIFFERS[case_id]
        _compare_live(natsd_create(name, body, **ALLOW_ALL), resp)
        return
    _compare_live(natsd_create(name, body), resp)


@pytest.mark.differential
@pytest.mark.parametrize(
    ("case_id", "base", "update", "want"), UPDATE_CASES, ids=[u[0] for u in UPDATE_CASES]
)
def test_update_matches_nats_server(
    live: dict[str, dict[str, Any]], case_id: str, base: dict[str, Any], update: Any, want: Expect
) -> None:
    resp = live["update:" + case_id]
    _compare_live(natsd_update(base, update), resp)


@pytest.mark.differential
def test_limits_match_nats_server(tmp_path: Path) -> None:
    server = _start([], LIMITS_SERVER_CONFIG.format(store=tmp_path))
    try:
        url = server.url.replace("nats://", "nats://a:a@")
        items: list[tuple[str, bytes]] = []
        for _, body, _ in LIMIT_CASES:
            items.append(("$JS.API.STREAM.CREATE.S", body_bytes(body)))
            items.append(("$JS.API.STREAM.DELETE.S", b""))
        responses = asyncio.run(_requests(url, items))[::2]
    finally:
        server.stop()
    for (case_id, body, _), resp in zip(LIMIT_CASES, responses, strict=True):
        got = natsd_create(S, body, limits=LIMITS, max_duplicate_window=MAX_DUPLICATE_WINDOW)
        try:
            _compare_live(got, resp)
        except AssertionError as e:
            raise AssertionError(f"{case_id}: {e}") from e
