"""Which models travel to Spark's executors is the Spark backend's decision, by type
(``blendsql.db.spark_models``), not a member of ``Model``. No Spark session needed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from blendsql.db.spark_models import for_executors, register_shippable, shippable
from blendsql.models.base import FunctionModel, Model, Request, Response
from blendsql.models.cache import CachedModel
from blendsql.models.guard import GuardedModel
from blendsql.models.openai_compat import OpenAI
from blendsql.models.pool import Pool


def client(concurrency: int = 8, port: int = 9) -> OpenAI:
    return OpenAI("m", f"http://127.0.0.1:{port}/v1", max_concurrency=concurrency,
                  server_kind="generic")


class Echo(Model):
    """A model of the user's own type."""

    name = "echo"

    def __init__(self, tasks: int = 1) -> None:
        self.tasks = tasks

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [Response(r.prompt, r.prompt) for r in requests]


def test_model_has_no_spark_members() -> None:
    assert not hasattr(Model, "shippable") and not hasattr(Model, "for_executors")


def test_server_clients_ship_and_local_models_stay(tmp_path: Path) -> None:
    assert shippable(client()) and shippable(Pool([client(), client(port=10)]))
    assert not shippable(FunctionModel(lambda r: "x")) and not shippable(Echo())
    # wrappers ship as their inner model does
    assert shippable(GuardedModel(CachedModel(client(), tmp_path / "c.sqlite")))
    assert not shippable(GuardedModel(FunctionModel(lambda r: "x")))


def test_a_copy_divides_the_requests_in_flight_among_the_tasks() -> None:
    copy = for_executors(client(8), 3)
    assert isinstance(copy, OpenAI) and copy.max_concurrency == 3  # 8 / 3, rounded up
    guarded = for_executors(GuardedModel(client(8)), 4)
    assert isinstance(guarded, GuardedModel) and isinstance(guarded.inner, OpenAI)
    assert guarded.inner.max_concurrency == 2
    pool = for_executors(Pool([client(4), client(6, port=10)]), 2)
    assert isinstance(pool, Pool)
    assert [e.model.max_concurrency for e in pool._eps] == [2, 3]
    local = FunctionModel(lambda r: "x")
    assert for_executors(local, 4) is local  # shipped as it pickles ('on')


def test_a_users_type_registers_how_it_ships(monkeypatch: pytest.MonkeyPatch) -> None:
    from blendsql.db import spark_models

    monkeypatch.setattr(spark_models, "_COPIERS", dict(spark_models._COPIERS))
    register_shippable(Echo, lambda m, share: Echo(share))

    class Louder(Echo):
        pass

    assert shippable(Louder()) and for_executors(Louder(), 5).tasks == 5  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        register_shippable("Echo", lambda m, share: m)  # type: ignore[arg-type]
