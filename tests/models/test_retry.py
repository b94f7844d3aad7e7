"""The generic retry / back-off helper."""

from __future__ import annotations

import random

import pytest

from blendsql.models.retry import backoff_delays, retry


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter():
    d = backoff_delays(6, base=0.5, cap=4.0, jitter=0.0)
    assert d == [0.5, 1.0, 2.0, 4.0, 4.0]
    jittered = backoff_delays(6, base=0.5, cap=4.0, jitter=0.25, rng=random.Random(1))
    for plain, j in zip(d, jittered, strict=True):
        assert 0.75 * plain <= j <= 1.25 * plain
    assert backoff_delays(1) == []


def test_retry_until_success_sleeping_between_attempts():
    calls: list[int] = []
    slept: list[float] = []
    seen: list[tuple[int, str]] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "ok"

    out = retry(flaky, attempts=5, base=0.1, sleep=slept.append,
                on_retry=lambda a, e, d: seen.append((a, type(e).__name__)))
    assert out == "ok" and len(calls) == 3 and len(slept) == 2
    assert seen == [(1, "ConnectionError"), (2, "ConnectionError")]


def test_retry_gives_up_and_reraises_the_last_error():
    slept: list[float] = []
    with pytest.raises(TimeoutError):
        retry(lambda: (_ for _ in ()).throw(TimeoutError("slow")), attempts=3, sleep=slept.append)
    assert len(slept) == 2


def test_non_retryable_errors_are_raised_at_once():
    slept: list[float] = []
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        retry(bad, attempts=4, retry_on=(ConnectionError,), sleep=slept.append)
    with pytest.raises(ValueError):
        retry(bad, attempts=4, should_retry=lambda e: False, sleep=slept.append)
    assert calls == [1, 1] and slept == []


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        retry(lambda: 1, attempts=0)
