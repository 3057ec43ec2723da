"""Every retry policy fleet uses, in one place, and the two ways to apply one.

Only `TransportError`s with `transient=True` are retried (refused, reset, timed out, EOF): a
bad key, an unknown host key or a failed command is raised at once. Every policy is bounded by
time (checked before each sleep, so no sleep runs past the bound; a running attempt is bounded
by its own timeout), backs off exponentially with jitter, and logs each retry with the host name.

Two ways to apply a policy:

- `retrying(policy, host, fn, idempotent=True)` re-runs `fn` until it succeeds. Only for calls
  that are safe to repeat: reads, probes, `mkdir -p`, an atomic `put`, an rsync.
- `at_most_once(policy, host, action, check)` for a call that must not run twice (start a
  server, launch the agent, reboot). If the link drops while it runs, nobody knows whether it
  ran, so it is never blindly re-run: each attempt first reconnects and runs the idempotent
  `check`, which returns the action's outcome if the action already took effect; only if it
  did not is the action run (again).

`retrying(..., idempotent=False)` refuses, to make the choice explicit at every call site.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from tenacity.stop import stop_base

from fleet.errors import TransportError, without_host

log = logging.getLogger("fleet.retry")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Wait `initial_wait_s`, doubling up to `max_wait_s` (plus up to `jitter_s` random), until
    `max_delay_s` have passed since the first attempt or `max_attempts` were made."""

    name: str
    max_delay_s: float
    initial_wait_s: float
    max_wait_s: float
    jitter_s: float
    max_attempts: int | None = None


# Reaching a host that should be up: covers an sshd restart or a short network blip.
CONNECT = RetryPolicy("connect", max_delay_s=120, initial_wait_s=1, max_wait_s=10, jitter_s=1)
# A host rebooting: BIOS, GPU driver load and sshd can take minutes. Capped at 12 s between
# probes, as Ansible's reboot module does, so a host that is back is noticed quickly.
WAIT_FOR_REBOOT = RetryPolicy("wait_for_reboot", max_delay_s=900, initial_wait_s=2, max_wait_s=12, jitter_s=2)
# rsync/put of results and models: a few attempts; rsync resumes from its partial dir.
TRANSFER = RetryPolicy("transfer", max_delay_s=1800, initial_wait_s=2, max_wait_s=30, jitter_s=2, max_attempts=4)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.transient


class _StopBeforeDeadline(stop_base):
    """Stop when the next sleep would end past the bound (measured on the injected clock)."""

    def __init__(self, max_delay_s: float, clock: Callable[[], float]) -> None:
        self.max_delay_s = max_delay_s
        self.clock = clock
        self.started = clock()

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.clock() - self.started + retry_state.upcoming_sleep >= self.max_delay_s


def retrying(
    policy: RetryPolicy,
    host: str,
    fn: Callable[[], T],
    *,
    idempotent: bool,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> T:
    """Call `fn` until it returns, retrying transient transport errors under `policy`.

    The last error is re-raised when the policy gives up. `sleep`, `clock` and `rng` are for
    tests. `idempotent=False` raises ValueError: use `at_most_once`.
    """
    if not idempotent:
        raise ValueError(
            f"{host}: refusing to retry a non-idempotent call under {policy.name!r}: after a dropped link it may "
            "already have run. Use fleet.retry.at_most_once(policy, host, action, check): reconnect, check state, "
            "then decide."
        )
    stop: stop_base = _StopBeforeDeadline(policy.max_delay_s, clock)
    if policy.max_attempts is not None:
        stop = stop | stop_after_attempt(policy.max_attempts)
    wait = wait_exponential(multiplier=policy.initial_wait_s, max=policy.max_wait_s)
    jitter = rng or random.Random()

    def next_wait(retry_state: RetryCallState) -> float:
        return wait(retry_state) + jitter.uniform(0, policy.jitter_s)

    def log_retry(retry_state: RetryCallState) -> None:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        log.warning(
            "%s: %s attempt %d failed (%s); retrying in %.1fs",
            host,
            policy.name,
            retry_state.attempt_number,
            without_host(host, error) if error is not None else None,
            retry_state.upcoming_sleep,
        )

    retryer = Retrying(
        stop=stop,
        wait=next_wait,
        retry=retry_if_exception(is_transient),
        before_sleep=log_retry,
        sleep=sleep,
        reraise=True,
    )
    return retryer(fn)


def at_most_once(
    policy: RetryPolicy,
    host: str,
    action: Callable[[], T],
    check: Callable[[], T | None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> T:
    """Run a non-idempotent `action` unless `check` shows it already took effect.

    `check` must be idempotent and must see the action's *durable* effect (a unit that exists,
    a marker file, a pid file): it returns the outcome if the action happened, None if not.
    Each attempt runs `check` first, so an action whose link dropped is never run a second time
    after it took effect; it is re-run only when `check` proves it did not happen.
    """

    def check_then_act() -> T:
        outcome = check()
        if outcome is not None:
            return outcome
        return action()

    return retrying(policy, host, check_then_act, idempotent=True, sleep=sleep, clock=clock, rng=rng)
