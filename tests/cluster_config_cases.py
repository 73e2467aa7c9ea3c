"""Bad cluster configurations and nats-server's message for each, shared by
``tests/unit/test_config_cluster.py`` (natsd alone) and
``tests/differential/test_config_cluster.py`` (the same cases run through nats-server)."""

from __future__ import annotations

__all__ = ["FLAG_ERRORS", "PARSE_ERRORS", "VALIDATION_ERRORS"]

# Each: the cluster block and nats-server's message (what `nats-server -t` prints after
# `file:line:col: `; tests/differential/test_config_cluster.py checks them against it).
PARSE_ERRORS: list[tuple[str, str]] = [
    ("cluster: 5", "Expected map to define cluster, got int64"),
    ('cluster { name: "a b" }', "cluster name cannot contain spaces"),
    ("cluster { name: 5 }", "interface conversion: interface {} is int64, not string"),
    ('cluster { port: "x" }', "interface conversion: interface {} is string, not int64"),
    ('cluster { listen: "h" }', 'could not parse address string "h"'),
    ('cluster { listen: "h:x" }', 'could not parse port "x"'),
    ("cluster { listen: true }", "expected port or host:port, got bool"),
    (
        'cluster { routes: "nats://a:1" }',
        "interface conversion: interface {} is string, not []interface {}",
    ),
    ('cluster { routes: ["nats://h:abc"] }', 'error parsing route url ["nats://h:abc"]'),
    ('cluster { routes: ["://x"] }', 'error parsing route url ["://x"]'),
    ('cluster { routes: ["nats://[::1"] }', 'error parsing route url ["nats://[::1"]'),
    ('cluster { routes: ["nats://h:%zz"] }', 'error parsing route url ["nats://h:%zz"]'),
    ('cluster { routes: ["1.2.3.4:5"] }', 'error parsing route url ["1.2.3.4:5"]'),
    ("cluster { authorization { token: x } }", "Cluster authorization does not support tokens"),
    (
        "cluster { authorization { users: [{user: a, password: b}] } }",
        "Cluster authorization does not allow multiple users",
    ),
    (
        'cluster { authorization { timeout: "x" } }',
        "error parsing authorization config, 'timeout' time: invalid duration \"x\"",
    ),
    (
        "cluster { authorization { timeout: true } }",
        "error parsing authorization config, 'timeout' wrong type",
    ),
    (
        "cluster { compression: 5 }",
        'field "compression" should be a boolean or a structure, got int64',
    ),
    ("cluster { compression: { foo: 1 } }", 'unknown field "foo"'),
    (
        'cluster { compression: { mode: s2_auto, rtt: ["10x"] } }',
        'time: unknown unit "x" in duration "10x"',
    ),
    (
        'cluster { compression: { mode: s2_auto, rtt: ["10"] } }',
        'time: missing unit in duration "10"',
    ),
    ("cluster { no_advertise: 1 }", "interface conversion: interface {} is int64, not bool"),
    ("cluster { pool_size: x }", "interface conversion: interface {} is string, not int64"),
]

# nats-server makes these when it creates the server (not under -t); natsd under both.
VALIDATION_ERRORS: list[tuple[str, str]] = [
    ("cluster { port: -1, compression: bogus }", 'unsupported compression mode "bogus"'),
    (
        'cluster { port: -1, compression: { mode: s2_auto, rtt: ["50ms", "10ms"] } }',
        "RTT threshold values [50ms 10ms] should be in ascending order",
    ),
    (
        'cluster { port: -1, compression: { mode: auto, rtt: ["0ms"] } }',
        'compression mode "auto" requires at least one RTT threshold',
    ),
    (
        "cluster { port: -1, compression: { mode: s2_auto,"
        ' rtt: ["1ms", "2ms", "3ms", "4ms", "5ms"] } }',
        'compression mode "s2_auto" should have no more than 4 RTT thresholds:'
        " [1ms 2ms 3ms 4ms 5ms]",
    ),
    (
        "cluster { port: -1, name: c }\njetstream: enabled",
        "jetstream cluster requires `server_name` to be set",
    ),
    (
        "server_name: s1\ncluster { port: -1 }\njetstream: enabled",
        "jetstream cluster requires `cluster.name` to be set",
    ),
]

# Command lines (no file) and nats-server's message.
FLAG_ERRORS: list[tuple[list[str], str]] = [
    (["--routes", "nats://a:1"], "solicited routes require cluster capabilities, e.g. --cluster"),
    (["--cluster", "nats://a"], "address a: missing port in address"),
    (["--cluster", "nats://u@127.0.0.1:-1"], "expected cluster password to be set"),
    (["--cluster", "nats://%zz"], 'parse "nats://%zz": invalid URL escape "%zz"'),
    (
        ["--cluster", "127.0.0.1:x"],
        'parse "127.0.0.1:x": first path segment in URL cannot contain colon',
    ),
    (
        ["--cluster", "nats://127.0.0.1:x"],
        'parse "nats://127.0.0.1:x": invalid port ":x" after host',
    ),
    (
        ["--cluster_name", "a b", "--cluster", "nats://127.0.0.1:-1"],
        "cluster name cannot contain spaces",
    ),
    (["--cluster", "nats://h:"], "EOF"),
    (["--cluster", "nats:foo"], "missing port in address"),
    (["--cluster", "nats://h:1:2"], "address h:1:2: too many colons in address"),
    (["--cluster", "nats://[::1]"], "address [::1]: missing port in address"),
    (["--cluster", "nats://h h:1"], 'parse "nats://h h:1": invalid character " " in host name'),
]
