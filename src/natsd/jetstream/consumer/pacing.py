"""When a consumer's next message may go: pause, replay at original speed, rate limit.

Rules kept here (:class:`Pacing`), all on the event loop:

* ``pause_until`` (config): nothing is delivered before it; a timer rings the delivery loop
  and sends the ``PAUSE`` advisory (paused: false) when it passes.
* ``replay_policy: original``: messages go out spaced as they were stored, until the
  consumer catches up with what the stream held when it started (``caught_up``).
* ``rate_limit_bps``: a token bucket in bytes, ``max_msg_size`` (or 1 MB) deep.
* A message held back by either is kept here (``held``) with the timer that releases it;
  the delivery loop takes it first on its next run. Fields are written only here; ``stop()``
  cancels both timers.
"""

from __future__ import annotations

from collections.abc import Callable

from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import ConsumerConfig, ReplayPolicy, rfc3339_to_ns
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.shared import Doorbell
from natsd.jetstream.stream.stream import Stream
from natsd.storage.store import StoredMsg

__all__ = ["Pacing"]


class Pacing:
    """Pause, replay timing and rate limit of one consumer."""

    def __init__(
        self, cfg: ConsumerConfig, stream: Stream, adv: Advisories, bell: Doorbell
    ) -> None:
        self.cfg = cfg
        self._stream = stream
        self._adv = adv
        self._bell = bell
        self._sched = stream.scheduler
        self._now_ns: Callable[[], int] = stream.clock.time_ns
        self._mono: Callable[[], float] = stream.clock.monotonic
        # True while replay or the rate limit may hold a message (the loop asks only then).
        self.on = False
        self._held: tuple[StoredMsg, int] | None = None
        self._run_tmr: Cancellable | None = None
        self._uptmr: Cancellable | None = None
        self._stopped = False
        self._replay = cfg.replay_policy == ReplayPolicy.ORIGINAL
        self._replay_lseq = 0
        self._replay_lts = 0
        self._rl_rate = 0.0
        self._rl_burst = 0.0
        self._rl_tokens = 0.0
        self._rl_ts = 0.0
        self.configure(cfg)

    def configure(self, cfg: ConsumerConfig) -> None:
        """The consumer's config, at creation and after an update (the rate limit)."""
        self.cfg = cfg
        if cfg.rate_limit_bps:
            self._rl_rate = cfg.rate_limit_bps / 8.0
            burst = self._stream.cfg.max_msg_size
            self._rl_burst = float(burst if burst > 0 else 1024 * 1024)
            self._rl_tokens = self._rl_burst
            self._rl_ts = self._mono()
        else:
            self._rl_rate = 0.0
        self.on = self._replay or bool(self._rl_rate)

    def start(self) -> None:
        self.update_pause_timer()
        if self._replay:
            self._replay_lseq = self._stream.store.state().last_seq

    def stop(self) -> None:
        self._stopped = True
        for t in (self._run_tmr, self._uptmr):
            if t is not None:
                t.cancel()
        self._run_tmr = self._uptmr = None

    # ------------------------------------------------------------------ pause
    def paused_until(self) -> int:
        return rfc3339_to_ns(self.cfg.pause_until)

    def is_paused(self) -> bool:
        pu = self.cfg.pause_until
        return pu is not None and rfc3339_to_ns(pu) > self._now_ns()

    def update_pause_timer(self) -> None:
        """``pause_until`` was set or changed: (re)arm the timer that ends the pause."""
        if self._uptmr is not None:
            self._uptmr.cancel()
            self._uptmr = None
        until = self.paused_until()
        now = self._now_ns()
        if until > now:
            self._uptmr = self._sched.call_later((until - now) / 1e9, self._unpause)

    def _unpause(self) -> None:
        self._uptmr = None
        if self._stopped:
            return
        self._adv.pause(False, self.cfg.pause_until or "")
        self._bell.ring()

    # ------------------------------------------------------------------ holding back
    def take_held(self) -> tuple[StoredMsg, int] | None:
        """The message held back last run (and its delivery count), now due."""
        held = self._held
        if held is not None:
            self._held = None
        return held

    def hold(self, m: StoredMsg, dc: int) -> bool:
        """Whether ``m`` must wait (only asked while ``on``); if so it is kept and the
        loop rung when it may go."""
        wait = self._pace(m)
        if wait > 0:
            self._held = (m, dc)
            self._run_tmr = self._sched.call_later(wait, self._resume)
            return True
        return False

    def caught_up(self, sseq: int) -> None:
        """The loop ran out of messages at ``sseq``: replay ends past the start's last."""
        if self._replay and sseq > self._replay_lseq:
            self._replay = False
            self.on = bool(self._rl_rate)

    def _resume(self) -> None:
        self._run_tmr = None
        self._bell.ring()

    def _pace(self, m: StoredMsg) -> float:
        """Seconds to hold ``m`` for replay-original timing and the rate limit."""
        wait = 0.0
        if self._replay:
            if self._replay_lts:
                d = (m.ts - self._replay_lts) / 1e9
                if d > 0.001:
                    wait = d
            self._replay_lts = m.ts
        if self._rl_rate:
            now = self._mono()
            self._rl_tokens = min(
                self._rl_burst, self._rl_tokens + (now - self._rl_ts) * self._rl_rate
            )
            self._rl_ts = now
            self._rl_tokens -= len(m.subject) + len(m.data) + (len(m.hdr) if m.hdr else 0)
            if self._rl_tokens < 0:
                wait = max(wait, -self._rl_tokens / self._rl_rate)
        return wait
