"""A pool of OpenAI-compatible endpoints (``blendsql.models.pool``).

Three fake servers in threads (``http.server`` on ports the OS picks) answer
``/v1/chat/completions`` with a text derived from the prompt after a small fixed
latency, with a slot limit, and ``/v1/models``. A server can be killed mid-batch
(requests it holds are dropped without an answer, new connections are refused)
and started again on the same port.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import SLOTS, FakeServer, expected

from blendsql.errors import ModelError
from blendsql.models import OpenAI
from blendsql.models.base import Request, Response
from blendsql.models.cache import CachedModel
from blendsql.models.pool import Pool


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    started = [FakeServer() for _ in range(3)]
    yield started
    for s in started:
        s.kill()


def endpoint(url: str, **kw: Any) -> OpenAI:
    opts: dict[str, Any] = {"max_concurrency": SLOTS, "timeout": 5, "max_retries": 1,
                            "backoff": 0.01, "server_kind": "generic", **kw}
    return OpenAI("m", url, **opts)


def pool_of(servers: list[FakeServer], **kw: Any) -> Pool:
    return Pool([endpoint(s.url) for s in servers], **kw)


def batch(n: int, tag: str = "") -> list[Request]:
    return [Request(prompt=f"{tag}q{i:04d}", max_tokens=8) for i in range(n)]


def check_exactly_once(requests: list[Request], out: list[Response],
                       reported: list[int]) -> None:
    """Every request answered once, rightly, in input order; each reported once."""
    assert len(out) == len(requests)
    assert [r.value for r in out] == [expected(q.prompt) for q in requests]
    assert sorted(reported) == list(range(len(requests)))


# ----------------------------------------------------------------------------- construction


def test_a_pool_of_urls_has_an_identity_that_ignores_the_urls() -> None:
    a, b, c = (f"http://127.0.0.1:{p}/v1" for p in (9, 10, 11))
    pool = Pool.from_urls("m", [a, b, c], max_concurrency=3)
    assert isinstance(pool, Pool)
    assert [e.endpoint for e in pool.endpoints] == [a, b, c]
    assert all(e.max_concurrency == 3 and not e.retry_connection_errors for e in pool.endpoints)
    assert pool.identity() == "openai-pool|m|kind=auto"
    assert Pool.from_urls("m", (c, a)).identity() == pool.identity()
    assert Pool([OpenAI("m", b)]).identity() == pool.identity()
    assert Pool.from_urls("m", [a]).identity() != OpenAI("m", a).identity()
    with pytest.raises(ModelError, match="Pool.from_urls"):
        OpenAI("m", base_url=[a, b])  # type: ignore[arg-type]
    assert OpenAI("m", a).identity().startswith("openai-compat:")  # a lone endpoint: unchanged
    assert Pool([OpenAI("m", a, server_kind="vllm")]).identity() == "openai-pool|m|kind=vllm"


def test_a_pool_refuses_mixed_models_repeated_urls_and_no_endpoints() -> None:
    a, b = "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"
    with pytest.raises(ModelError, match="serves one model"):
        Pool([OpenAI("m", a), OpenAI("other", b)])
    with pytest.raises(ModelError, match="twice"):
        Pool.from_urls("m", [a, a + "/"])
    with pytest.raises(ModelError, match="at least one endpoint"):
        Pool.from_urls("m", [])
    with pytest.raises(ModelError, match="not a list of URLs"):
        Pool.from_urls("m", [a, 3])  # type: ignore[list-item]


# ----------------------------------------------------------------------------- spreading


def test_all_up_spreads_by_least_outstanding_work_within_each_endpoints_slots(
        servers: list[FakeServer]) -> None:
    pool = pool_of(servers)
    requests = batch(120)
    reported: list[int] = []
    out = pool.generate_each(requests, lambda i, _r: reported.append(i))
    check_exactly_once(requests, out, reported)
    counts = Counter(r.endpoint for r in out)
    assert set(counts) == {s.url for s in servers}
    assert sum(counts.values()) == 120
    for s in servers:
        assert counts[s.url] == len(s.answered)  # the trace's endpoint is the one that answered
        assert 0.2 * 120 <= counts[s.url] <= 0.47 * 120, counts  # a fair share of 40 each
        assert s.max_in_flight <= SLOTS  # each endpoint's max_concurrency held
    assert max(s.max_in_flight for s in servers) == SLOTS  # ...and used
    assert sum(st["answered"] for st in pool.status()) == 120
    assert pool.failovers == 0


def test_a_bigger_endpoint_takes_a_bigger_share() -> None:
    small, big = FakeServer(slots=1), FakeServer(slots=3)
    try:
        pool = Pool([endpoint(small.url, max_concurrency=1), endpoint(big.url, max_concurrency=3)])
        out = pool.generate(batch(80))
        counts = Counter(r.endpoint for r in out)
        assert counts[small.url] + counts[big.url] == 80
        assert counts[big.url] >= 2 * counts[small.url], counts  # ~3:1
        assert small.max_in_flight == 1 and big.max_in_flight <= 3
    finally:
        small.kill()
        big.kill()


# ----------------------------------------------------------------------------- failover


@pytest.mark.parametrize("kill_at", [3, 30, 55])  # of the ~67 requests the victim gets
def test_a_server_killed_mid_batch_loses_and_duplicates_nothing(
        servers: list[FakeServer], kill_at: int) -> None:
    pool = pool_of(servers, probe_backoff=5.0)  # the dead one stays down for this batch
    victim = servers[1]
    victim.kill_at = kill_at  # it dies while serving its kill_at-th request
    requests = batch(200)
    reported: list[int] = []
    out = pool.generate_each(requests, lambda i, _r: reported.append(i))
    check_exactly_once(requests, out, reported)
    counts = Counter(r.endpoint for r in out)
    assert sum(counts.values()) == 200
    for s in servers:
        assert counts[s.url] == len(s.answered)
    # what the victim took but never answered was answered by the others
    unfinished = set(victim.received) - set(victim.answered)
    assert unfinished, "the kill should catch requests in progress"
    by_prompt = {q.prompt: r for q, r in zip(requests, out, strict=True)}
    assert all(by_prompt[p].endpoint != victim.url for p in unfinished)
    assert pool.failovers >= len(unfinished)
    status = {st["url"]: st for st in pool.status()}
    assert not status[victim.url]["up"] and "127.0.0.1" in status[victim.url]["last_error"]
    assert all(st["in_flight"] == 0 for st in status.values())


def test_a_recovered_endpoint_is_used_again_after_its_backoff(servers: list[FakeServer]) -> None:
    pool = pool_of(servers, probe_backoff=0.05, max_probe_backoff=0.1)
    victim = servers[0]
    victim.kill()
    requests = batch(200)
    reported: list[int] = []
    back: list[float] = []

    def arrived(i: int, _resp: Response) -> None:
        reported.append(i)
        if len(reported) == 20:
            victim.restart()
            back.append(time.monotonic())

    out = pool.generate_each(requests, arrived)
    check_exactly_once(requests, out, reported)
    counts = Counter(r.endpoint for r in out)
    assert counts[victim.url] == len(victim.answered) > 0  # back in the same batch
    assert sum(counts.values()) == 200
    assert {st["url"]: st["up"] for st in pool.status()}[victim.url]
    # and in the next batch from its start
    out2 = pool.generate(batch(60, tag="second"))
    assert Counter(r.endpoint for r in out2)[victim.url] >= 10


def test_every_endpoint_down_fails_with_a_clear_error(servers: list[FakeServer]) -> None:
    pool = pool_of(servers, probe_backoff=5.0)
    reported: list[int] = []

    def arrived(i: int, _resp: Response) -> None:
        reported.append(i)
        if len(reported) == 30:
            for s in servers:
                s.kill()

    t0 = time.monotonic()
    with pytest.raises(ModelError) as info:
        pool.generate_each(batch(200), arrived)
    assert time.monotonic() - t0 < 5
    message = str(info.value)
    assert "every endpoint of the 'm' pool is down" in message and "unanswered" in message
    for s in servers:
        assert s.url in message
    assert "cannot connect" in message or "Connection" in message
    assert len(reported) == len(set(reported)) >= 30
    # a new batch with everything still down fails at once (after one probe round)
    t0 = time.monotonic()
    with pytest.raises(ModelError, match="every endpoint"):
        pool.generate(batch(5))
    assert time.monotonic() - t0 < 3


def test_an_error_of_the_request_is_not_failed_over() -> None:
    refusing = FakeServer(status=401)
    try:
        pool = Pool([endpoint(refusing.url)])
        with pytest.raises(ModelError, match="refused the credentials"):
            pool.generate(batch(3))
        assert pool.failovers == 0 and pool.status()[0]["up"]
    finally:
        refusing.kill()


def test_the_cache_serves_a_rerun_on_other_endpoints(servers: list[FakeServer],
                                                     tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    requests = batch(20)
    first = CachedModel(pool_of(servers[:2]), path).generate(requests)
    assert all(not r.cached and r.endpoint in (servers[0].url, servers[1].url) for r in first)
    servers[2].received.clear()
    rerun = CachedModel(pool_of(servers[2:]), path).generate(requests)
    assert all(r.cached and r.endpoint is None for r in rerun)
    assert [r.value for r in rerun] == [r.value for r in first]
    assert servers[2].received == []


def test_the_trace_says_which_endpoint_answered(servers: list[FakeServer]) -> None:
    import pandas as pd

    from blendsql import BlendSQL

    bsql = BlendSQL({"t": pd.DataFrame({"x": ["a", "b", "c", "d"]})}, model=pool_of(servers), cache=False)
    smoothie = bsql.execute("SELECT t.x, {{LLMMap('Say something', t.x)}} AS y FROM t")
    step = next(s for s in smoothie.trace if s.kind == "ingredient")
    counts = step.details["endpoints"]
    assert set(counts) <= {s.url for s in servers} and sum(counts.values()) == step.model_calls == 4
