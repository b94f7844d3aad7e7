"""Retry with exponential back-off and jitter, for transient model failures.

Small and generic on purpose: backends decide *what* is transient (pass
``retry_on`` or a ``should_retry`` predicate); this only decides *when* to try
again. ``sleep`` is injectable so tests don't wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def backoff_delays(attempts: int, base: float = 0.5, cap: float = 8.0,
                   jitter: float = 0.25, rng: random.Random | None = None) -> list[float]:
    """Delays before attempts 2..n: base * 2^k capped at ``cap``, each +/- ``jitter`` fraction.

    Jitter spreads retries of many concurrent callers so they don't hit a
    rate-limited server in lockstep.
    """
    r = rng or random.Random()
    out = []
    for k in range(max(0, attempts - 1)):
        d = min(cap, base * (2**k))
        out.append(max(0.0, d * (1 + jitter * (2 * r.random() - 1))))
    return out


def retry(fn: Callable[[], T], *, attempts: int = 3, base: float = 0.5, cap: float = 8.0,
          retry_on: tuple[type[BaseException], ...] = (Exception,),
          should_retry: Callable[[BaseException], bool] | None = None,
          sleep: Callable[[float], None] = time.sleep,
          on_retry: Callable[[int, BaseException, float], None] | None = None) -> T:
    """Call ``fn`` until it succeeds or ``attempts`` are used; re-raise the last error.

    An exception not in ``retry_on`` (or rejected by ``should_retry``) is raised at once.
    ``on_retry(attempt, error, delay)`` is called before each sleep (for logs / traces).
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    delays = backoff_delays(attempts, base, cap)
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except retry_on as e:
            if attempt == attempts or (should_retry is not None and not should_retry(e)):
                raise
            delay = delays[attempt - 1]
            if on_retry is not None:
                on_retry(attempt, e, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
