"""``nats pub``, ``nats sub``, ``nats request`` and ``nats reply``.

Bodies, subjects and header values are templates as in the Go CLI: ``{{Count}}`` (also
``{{Cnt}}``), ``{{ID}}``, ``{{Time}}``, ``{{TimeStamp}}``, ``{{Unix}}``, ``{{UnixNano}}``,
``{{Random 10 100}}`` and, for ``reply``, ``{{Request}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import secrets
import string
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from .conn import ApiError, Session
from .output import CliError, console, human_duration, info, parse_duration, progress_bar

__all__ = ["parse_headers", "register", "render_template"]

Handler = Callable[[Session, argparse.Namespace], Any]

_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z]+)((?:\s+[^\s}]+)*)\s*\}\}")
_ALPHABET = string.ascii_letters + string.digits


def render_template(text: str, count: int, request: str = "") -> str:
    """Expand ``{{Count}}`` and the other template functions of the Go CLI."""

    def sub(m: re.Match[str]) -> str:
        fn = m.group(1)
        args = m.group(2).split()
        now = datetime.now(UTC)
        if fn in ("Count", "Cnt"):
            return str(count)
        if fn == "ID":
            return secrets.token_hex(11).upper()
        if fn == "TimeStamp":
            return now.isoformat().replace("+00:00", "Z")
        if fn == "Time":
            return datetime.now().strftime("%-I:%M:%S%p")
        if fn == "Unix":
            return str(int(time.time()))
        if fn == "UnixNano":
            return str(time.time_ns())
        if fn == "Request":
            return request
        if fn == "Random":
            try:
                lo, hi = (int(args[0]), int(args[1])) if len(args) >= 2 else (10, 10)
            except ValueError:
                return m.group(0)
            n = random.randint(min(lo, hi), max(lo, hi))
            return "".join(random.choice(_ALPHABET) for _ in range(n))
        return m.group(0)

    return _TEMPLATE.sub(sub, text)


def parse_headers(
    values: list[str] | None, count: int = 1, templates: bool = True
) -> dict[str, str]:
    """``-H K:V`` (also ``K=V``) values as a header dict."""
    out: dict[str, str] = {}
    for v in values or []:
        k, sep, val = v.partition(":")
        if not sep:
            k, sep, val = v.partition("=")
        k = k.strip()
        if not sep or not k:
            raise CliError(f"invalid header {v!r}, expected Key:Value")
        val = val.strip()
        out[k] = render_template(val, count) if templates else val
    return out


def _read_stdin() -> str:
    if sys.stdin.isatty():
        info("Reading payload from STDIN")
    return sys.stdin.read()


# --------------------------------------------------------------------------- register
def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    bo = argparse.BooleanOptionalAction

    def cmd(name: str, fn: Handler, help: str, aliases: list[str] | None = None) -> Any:
        p = sub.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd("pub", publish, "Publish messages", ["publish"])
    p.add_argument("subject", help="Subject to publish to")
    p.add_argument("body", nargs="?", help="Message body (stdin when not given)")
    p.add_argument("--reply", help="A reply subject")
    p.add_argument("-H", "--header", action="append", help="A header Key:Value (repeatable)")
    p.add_argument("--count", type=int, default=1, help="Publish this many messages")
    p.add_argument("--sleep", help="Sleep between messages, e.g. 100ms")
    p.add_argument("--force-stdin", action="store_true", help="Read the body from stdin")
    p.add_argument(
        "-J", "--jetstream", action="store_true", help="Publish to JetStream, wait for acks"
    )
    p.add_argument(
        "--send-on", choices=["eof", "newline"], default="eof", help="stdin: when to send"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="Print nothing")
    p.add_argument("--templates", action=bo, default=True, help="Expand templates (default)")

    p = cmd("sub", subscribe, "Subscribe to messages", ["subscribe"])
    p.add_argument("subject", nargs="?", help="Subject to subscribe to")
    p.add_argument("--queue", help="Queue group")
    p.add_argument("-r", "--raw", action="store_true", help="Show only the message bodies")
    p.add_argument("--count", type=int, default=0, help="Exit after this many messages")
    p.add_argument("--headers-only", action="store_true", help="Show only the headers")
    p.add_argument("--subjects-only", action="store_true", help="Show only the subjects")
    p.add_argument("--inbox", action="store_true", help="Subscribe to a new inbox")
    p.add_argument("--ack", action=bo, default=None, help="Acknowledge JetStream messages")
    p.add_argument("--stream", help="Subscribe to this stream (an ordered consumer)")
    p.add_argument("--jetstream", action="store_true", help="Find the stream for the subject")
    p.add_argument("--all", action="store_true", help="JetStream: deliver all messages")
    p.add_argument("--new", action="store_true", help="JetStream: only new messages")
    p.add_argument("--last", action="store_true", help="JetStream: start with the last message")
    p.add_argument("--last-per-subject", action="store_true", help="JetStream: last per subject")
    p.add_argument("--start-sequence", type=int, help="JetStream: start at this sequence")
    p.add_argument("--since", help="JetStream: messages since a duration ago, e.g. 1h")
    p.add_argument("--wait", help="Exit after this long, e.g. 10s")

    p = cmd("request", request, "Send a request and wait for replies", ["req"])
    p.add_argument("subject", help="Subject to send the request to")
    p.add_argument("body", nargs="?", help="Request body (stdin when not given)")
    p.add_argument("-H", "--header", action="append", help="A header Key:Value (repeatable)")
    p.add_argument("--count", type=int, default=1, help="Send this many requests")
    p.add_argument("--replies", type=int, default=1, help="Wait for this many replies (0: all)")
    p.add_argument("--reply-timeout", default="300ms", help="Time to wait for further replies")
    p.add_argument("-r", "--raw", action="store_true", help="Show only the reply bodies")
    p.add_argument("--sleep", help="Sleep between requests")
    p.add_argument("--templates", action=bo, default=True, help="Expand templates (default)")

    p = cmd("reply", reply, "Answer requests on a subject")
    p.add_argument("subject", help="Subject to answer on")
    p.add_argument("body", nargs="?", default="", help="Reply body ({{Request}} is the request)")
    p.add_argument("--echo", action="store_true", help="Echo the request back with its headers")
    p.add_argument("--queue", default="NATS-RPLY-22", help="Queue group (default NATS-RPLY-22)")
    p.add_argument("--count", type=int, default=0, help="Exit after this many requests")
    p.add_argument("-H", "--header", action="append", help="A reply header Key:Value")
    p.add_argument("--sleep", help="Sleep before replying")
    p.add_argument("--command", help="Reply with the output of this shell command")
    p.add_argument("-q", "--quiet", action="store_true", help="Print nothing")


def _flush_timeout(s: Session) -> int:
    return max(1, round(s.opts.timeout))


# --------------------------------------------------------------------------- pub
async def publish(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    bodies: list[str]
    if a.body is not None and not a.force_stdin:
        bodies = [a.body]
    else:
        data = _read_stdin()
        bodies = data.splitlines() if a.send_on == "newline" else [data]
    sleep = parse_duration(a.sleep) / 1e9 if a.sleep else 0.0
    count = a.count if a.count > 0 else 32767
    quiet = a.quiet
    total = count * len(bodies)
    with progress_bar(total, "Publishing", enabled=total > 20 and not quiet, unit="msgs") as bar:
        task = bar.add_task("Publishing", total=total)
        show_each = not quiet and bar.disable
        for body_t in bodies:
            for i in range(1, count + 1):
                body = render_template(body_t, i) if a.templates else body_t
                subj = render_template(a.subject, i) if a.templates else a.subject
                hdrs = parse_headers(a.header, i) or None
                payload = body.encode()
                if a.jetstream:
                    await _js_publish(s, subj, payload, hdrs, show_each)
                else:
                    await nc.publish(subj, payload, reply=a.reply or "", headers=hdrs)
                    await nc.flush(timeout=_flush_timeout(s))
                    if show_each:
                        info(f'Published {len(payload)} bytes to "{subj}"')
                bar.advance(task)
                if sleep and i < count:
                    await asyncio.sleep(sleep)


async def _js_publish(
    s: Session, subj: str, payload: bytes, hdrs: dict[str, str] | None, show: bool
) -> None:
    nc = await s.nc()
    try:
        resp = await nc.request(subj, payload, timeout=s.opts.timeout, headers=hdrs)
    except NoRespondersError as e:
        raise CliError(f"no stream is listening on {subj!r}") from e
    except NatsTimeout as e:
        raise CliError(f"no acknowledgement for the publish to {subj!r}") from e
    try:
        ack = json.loads(resp.data)
    except ValueError as e:
        raise CliError(f"invalid publish acknowledgement: {resp.data[:200]!r}") from e
    err = ack.get("error")
    if isinstance(err, dict):
        raise ApiError(
            int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description"))
        )
    if show:
        line = f"Stored in Stream: {ack.get('stream')} Sequence: {ack.get('seq'):,}"
        if ack.get("domain"):
            line += f' Domain: "{ack["domain"]}"'
        if ack.get("duplicate"):
            line += " Duplicate: true"
        info(line)


# --------------------------------------------------------------------------- sub
def _print_msg(n: int, m: Msg, a: argparse.Namespace) -> None:
    data = m.data.decode(errors="replace")
    if a.raw:
        console.file.write(data + "\n")
        console.file.flush()
        return
    if a.subjects_only:
        console.print(m.subject, markup=False)
        return
    js_meta = None
    if m.reply and m.reply.startswith("$JS.ACK."):
        try:
            js_meta = m.metadata
        except Exception:
            js_meta = None
    if js_meta is not None:
        ts = (
            js_meta.timestamp.astimezone().strftime("%Y-%m-%d %H:%M:%S")
            if js_meta.timestamp
            else ""
        )
        head = (
            f"[#{n}] Received JetStream message: stream: {js_meta.stream} "
            f"seq {js_meta.sequence.stream} / subject: {m.subject} / time: {ts}"
        )
    else:
        head = f'[#{n}] Received on "{m.subject}"'
        if m.reply:
            head += f' with reply "{m.reply}"'
    console.print(head, markup=False)
    if m.headers:
        for k, v in m.headers.items():
            console.print(f"{k}: {v}", markup=False)
        console.print()
    if not a.headers_only:
        console.file.write(data + "\n")
        console.print()
    console.file.flush()


async def subscribe(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    js_mode = bool(
        a.stream
        or a.jetstream
        or a.all
        or a.new
        or a.last
        or a.last_per_subject
        or a.start_sequence
        or a.since
    )
    subject = a.subject
    if a.inbox:
        subject = nc.new_inbox()
    if not subject and not a.stream:
        raise CliError("a subject is required")
    done = asyncio.Event()
    received = 0
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_msg(m: Msg) -> None:
        await queue.put(m)

    if js_mode:
        sub = await _js_subscribe(s, a, subject, on_msg)
        what = f"JetStream {'stream ' + a.stream if a.stream else subject}"
    else:
        sub = await nc.subscribe(subject, queue=a.queue or "", cb=on_msg)
        what = subject
    await nc.flush(timeout=_flush_timeout(s))
    q = f" in queue group {a.queue}" if a.queue else ""
    info(f"Subscribing on {what}{q}")  # stderr, so --raw output stays clean
    deadline = parse_duration(a.wait) / 1e9 if a.wait else None

    async def consume() -> None:
        nonlocal received
        while True:
            m = await queue.get()
            received += 1
            _print_msg(received, m, a)
            if js_mode and m.reply and a.ack is not False:
                try:
                    await m.ack()
                except Exception:
                    pass
            if a.count and received >= a.count:
                done.set()
                return

    task = asyncio.create_task(consume())
    try:
        if deadline:
            try:
                await asyncio.wait_for(done.wait(), deadline)
            except TimeoutError:
                pass
        else:
            await done.wait()
    finally:
        task.cancel()
        try:
            await sub.unsubscribe()
        except Exception:
            pass


async def _js_subscribe(
    s: Session, a: argparse.Namespace, subject: str | None, cb: Callable[[Msg], Any]
) -> Any:
    from nats.js.api import ConsumerConfig, DeliverPolicy

    nc = await s.nc()
    api = await s.api()
    stream = a.stream
    if not stream:
        names = await api.stream_names(subject)
        if not names:
            raise CliError(f"no stream holds subject {subject}")
        stream = names[0]
    policy = DeliverPolicy.NEW if a.new else DeliverPolicy.ALL
    kwargs: dict[str, Any] = {}
    if a.last:
        policy = DeliverPolicy.LAST
    elif a.last_per_subject:
        policy = DeliverPolicy.LAST_PER_SUBJECT
    elif a.start_sequence:
        policy = DeliverPolicy.BY_START_SEQUENCE
        kwargs["opt_start_seq"] = a.start_sequence
    elif a.since:
        policy = DeliverPolicy.BY_START_TIME
        since = datetime.now(UTC).timestamp() - parse_duration(a.since) / 1e9
        kwargs["opt_start_time"] = (
            datetime.fromtimestamp(since, UTC).isoformat().replace("+00:00", "Z")
        )
    elif not (a.all or a.stream or a.jetstream):
        policy = DeliverPolicy.NEW
    await require_consumers(s, stream)
    js = nc.jetstream(prefix=api.prefix, timeout=s.opts.timeout)
    cfg = ConsumerConfig(deliver_policy=policy, **kwargs)
    try:
        return await js.subscribe(
            subject or ">", stream=stream, cb=cb, ordered_consumer=True, config=cfg
        )
    except Exception as e:
        raise CliError(f"could not subscribe to stream {stream}: {e}") from e


async def require_consumers(s: Session, stream: str) -> None:
    """Fail clearly when the server does not answer the consumer API."""
    api = await s.api()
    try:
        await api.request(f"CONSUMER.NAMES.{stream}", {}, timeout=min(s.opts.timeout, 2.0))
    except ApiError:
        return
    except CliError as e:
        if "timed out" in str(e):
            raise CliError("this server does not support JetStream consumers") from e
        raise


# --------------------------------------------------------------------------- req
async def request(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    body_t = a.body if a.body is not None else _read_stdin()
    sleep = parse_duration(a.sleep) / 1e9 if a.sleep else 0.0
    reply_timeout = parse_duration(a.reply_timeout) / 1e9
    for i in range(1, max(a.count, 1) + 1):
        body = render_template(body_t, i) if a.templates else body_t
        subj = render_template(a.subject, i) if a.templates else a.subject
        hdrs = parse_headers(a.header, i) or None
        inbox = nc.new_inbox()
        replies: asyncio.Queue[Msg] = asyncio.Queue()

        async def on_reply(m: Msg, q: asyncio.Queue[Msg] = replies) -> None:
            await q.put(m)

        sub = await nc.subscribe(inbox, cb=on_reply)
        if not a.raw:
            info(f'Sending request on "{subj}"')
        start = time.monotonic()
        await nc.publish(subj, body.encode(), reply=inbox, headers=hdrs)
        await nc.flush(timeout=_flush_timeout(s))
        got = 0
        timeout = s.opts.timeout
        rtt_sum = 0.0
        try:
            while True:
                try:
                    m = await asyncio.wait_for(replies.get(), timeout)
                except TimeoutError:
                    if got == 0:
                        raise CliError(
                            f"no reply to the request on {subj!r} within "
                            f"{human_duration(s.opts.timeout * 1e9)}"
                        ) from None
                    break
                if m.headers and m.headers.get("Status") == "503" and not m.data:
                    raise CliError(f"no responders are available for {subj!r}")
                rtt = time.monotonic() - start
                got += 1
                if a.raw:
                    console.file.write(m.data.decode(errors="replace") + "\n")
                    console.file.flush()
                else:
                    info(f"Received with rtt {human_duration(rtt * 1e9)}")
                    if m.headers:
                        for k, v in m.headers.items():
                            info(f"{k}: {v}")
                    console.file.write(m.data.decode(errors="replace") + "\n")
                    console.print()
                if a.replies and got >= a.replies:
                    break
                if a.replies == 0:
                    timeout = max(s.opts.timeout - (time.monotonic() - start), 0.001)
                else:
                    rtt_sum += rtt
                    timeout = rtt_sum / got + reply_timeout
        finally:
            await sub.unsubscribe()
        if sleep and i < a.count:
            await asyncio.sleep(sleep)


# --------------------------------------------------------------------------- reply
async def reply(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    if not a.body and not a.echo and not a.command:
        raise CliError("a reply body, --echo or --command is required")
    sleep = parse_duration(a.sleep) / 1e9 if a.sleep else 0.0
    done = asyncio.Event()
    n = 0

    async def on_req(m: Msg) -> None:
        nonlocal n
        n += 1
        i = n
        req_body = m.data.decode(errors="replace")
        if not a.quiet:
            console.print(f'[#{i}] Received on subject "{m.subject}":', markup=False)
            if m.headers:
                for k, v in m.headers.items():
                    console.print(f"{k}: {v}", markup=False)
                console.print()
            console.file.write(req_body + "\n")
            console.print()
        if sleep:
            await asyncio.sleep(sleep)
        hdrs = parse_headers(a.header, i) or None
        if a.echo:
            out = m.data
            hdrs = dict(m.headers or {})
            hdrs["NATS-Request-Info"] = json.dumps({"subject": m.subject})
        elif a.command:
            proc = await asyncio.create_subprocess_shell(
                render_template(a.command, i, req_body),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await proc.communicate(m.data)
        else:
            out = render_template(a.body, i, req_body).encode()
        if m.reply:
            await nc.publish(m.reply, out, headers=hdrs)
        if a.count and i >= a.count:
            await nc.flush()
            done.set()

    sub = await nc.subscribe(a.subject, queue=a.queue or "", cb=on_req)
    await nc.flush(timeout=_flush_timeout(s))
    if not a.quiet:
        info(f'Listening on "{a.subject}" in group "{a.queue}"')
    try:
        await done.wait()
    finally:
        await sub.unsubscribe()
