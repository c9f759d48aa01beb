"""When and how long to retry: exponential backoff with full jitter, the
server's ``Retry-After``, and a total budget. Pure: no I/O, no sleeping."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import Callable, Optional

#: Statuses worth another attempt with the same request (the Rust client's ``transient``).
def is_transient(status: int) -> bool:
    return status in (408, 409, 425, 429) or 500 <= status <= 599


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries. Every retry of a call sends the same key and the
    same body bytes; only the timing is chosen here. Durations in seconds.

    The wait before attempt *n+1* is uniform in ``[0, min(max_delay,
    base_delay * 2**(n-1))]`` (full jitter), but never shorter than the
    server's ``Retry-After``. When the next attempt could not start within the
    budget the call stops; a payment whose outcome is then unknown is
    :class:`~chargeonce.Uncertain`, never an error.
    """

    budget: float = 60.0
    attempt_timeout: float = 20.0
    base_delay: float = 0.1
    max_delay: float = 5.0
    max_attempts: int = 20
    #: ``Prefer: wait=N`` on payments; ``None`` sends no ``Prefer``.
    prefer_wait: Optional[float] = 10.0

    @classmethod
    def no_retries(cls) -> "RetryPolicy":
        return cls(max_attempts=1)

    def with_(self, **changes: object) -> "RetryPolicy":
        return replace(self, **changes)  # type: ignore[arg-type]

    def ceiling(self, failed: int) -> float:
        """The backoff ceiling after ``failed`` failures (1-based)."""
        exponent = min(max(failed - 1, 0), 30)
        return min(self.base_delay * (1 << exponent), self.max_delay)

    def delay(
        self,
        failed: int,
        retry_after: Optional[float],
        rng: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Full jitter under the ceiling, but at least ``retry_after``."""
        jittered = rng(0.0, self.ceiling(failed))
        return max(jittered, retry_after or 0.0)

    def prefer_seconds(self, attempt: float) -> Optional[int]:
        """``Prefer: wait=N`` for an attempt limited to ``attempt`` seconds: at most
        the policy's wait and one second less than the attempt may take."""
        if self.prefer_wait is None:
            return None
        wanted = int(self.prefer_wait)
        fits = max(int(attempt) - 1, 0)
        seconds = min(wanted, fits)
        return seconds if seconds > 0 else None


def parse_retry_after(value: str, now: float) -> Optional[float]:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3).
    ``now`` is a Unix time."""
    value = value.strip()
    if value and value.isascii() and value.isdigit():
        return float(int(value))
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if at is None:
        return None
    return max(at.timestamp() - now, 0.0)
