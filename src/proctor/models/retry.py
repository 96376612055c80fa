"""The one retry policy: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC


class RetryableError(Exception):
    """A failure worth retrying: 429, 5xx, timeout, connection error, truncated or malformed body."""

    def __init__(
        self, message: str, *, cause: str, status: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.cause = cause
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_after_s: float = 120.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        if retry_after is not None and retry_after >= 0:
            # The server said when; add a little jitter so concurrent callers do not stampede.
            return min(retry_after, self.max_retry_after_s) + random.uniform(0, 0.1)
        backoff = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        return backoff * random.uniform(0.5, 1.0) + random.uniform(0, 0.05)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from datetime import datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
