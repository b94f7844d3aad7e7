"""benchmarks/sembench_peers.py, the parts that need no peer venv and no model.

What each peer is sent (no label column; blendsql 0.1.28's SQL, checked by running it
through this engine with a scripted oracle on the made-up data of test_sembench), how a
peer's answer is scored, the metering proxy (a fake upstream server) and the
llama-server start / stop helper (a fake binary that serves, one that exits, one that
never answers).
"""

from __future__ import annotations

import http.server
import json
import sys
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from test_sembench import SEED, SIZES, value_of, write_data  # noqa: E402

from benchmarks import sembench as sb  # noqa: E402
from benchmarks import sembench_peers as peers  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.models import FunctionModel  # noqa: E402
from blendsql.models.base import Request  # noqa: E402
from blendsql.models.constraints import Bool  # noqa: E402


@pytest.fixture
def data(tmp_path: Path) -> sb.Data:
    return sb.load(write_data(tmp_path / "sembench"))


def report(data: sb.Data) -> list[sb.Instance]:
    return sb.instances(data, "report", SEED, SIZES)


# ---------------------------------------------------------------- what the peers get


def test_peers_are_sent_no_label_column(data: sb.Data) -> None:
    insts = report(data)
    request = peers.runner_request("lotus", data, insts, "http://127.0.0.1:1/v1", "m")
    assert {c for r in request["reviews"] for c in r} == {"id", "reviewId", "reviewText"}
    assert [i["key"] for i in request["instances"]] == [i.key for i in insts]
    sent = {r["reviewId"] for r in request["reviews"]}
    assert sent == {r.review_id for i in insts for r in sb.scope(data, i)}


def test_blendsql_0128_sql_names_no_label_and_means_the_query(data: sb.Data, tmp_path: Path) -> None:
    """0.1.28's SQL runs on this engine too (its dialect is a subset): with an oracle it
    must score perfectly, so each adapted query asks what SemBench's query asks."""
    truth = {r.text: r for r in data.reviews}

    def oracle(req: Request) -> Any:
        r = truth[value_of(req)]
        if isinstance(req.constraint, Bool):
            return r.sentiment == sb.POSITIVE
        return 3 if r.score is None else sb.to_scale(r.score)

    db = peers.write_0128_database(data, tmp_path / "reviews.sqlite")
    bsql = BlendSQL(str(db), model=FunctionModel(oracle), cache=False)
    assert sb.visible_columns(bsql) == {"reviews": ["id", "reviewId", "reviewText"]}
    for inst in report(data):
        sql = peers.sql_0128(inst)
        assert sb.label_names(sql) == [] and "return_type=" in sql
        row = peers.score_peer(data, inst, "blendsql-0.1.28", {"columns": [], "rows": None}, {})
        worst = {"f1": 0.0, "relative_error": 1.0, "spearman": 0.0}[row["metric"]]
        assert row[row["metric"]] == worst  # no rows: SemBench's failure value
        df = bsql.execute(sql).df
        scored = sb.score_result(data, inst, df)
        best = {"f1": 1.0, "relative_error": 0.0, "spearman": 1.0}[scored["metric"]]
        assert scored[scored["metric"]] == best, (inst.key, sql, scored)


def test_a_peer_answer_is_scored_by_position(data: sb.Data) -> None:
    inst = next(i for i in report(data) if i.query == "Q7")
    reviews = sb.scope(data, inst)
    opposite = [(a, b) for a in reviews for b in reviews
                if a.review_id < b.review_id and a.sentiment != b.sentiment]
    lotus_like = {"columns": ["id:left", "reviewId:left", "reviewId:right"],  # both orders, as a self-join
                  "rows": [[a.movie, x, y] for a, b in opposite
                           for x, y in ((a.review_id, b.review_id), (b.review_id, a.review_id))],
                  "seconds": 1.0, "error": None}
    row = peers.score_peer(data, inst, "lotus", lotus_like, {"model_calls": 36})
    assert row["f1"] == 1.0 and row["model_calls"] == 36 and row["pairs"] == 15
    failed = peers.score_peer(data, inst, "lotus", {"error": "boom"}, {"model_calls": 0})
    assert failed["f1"] == 0.0 and failed["error"] == "boom"
    q3 = next(i for i in report(data) if i.query == "Q3")
    pos = sum(r.sentiment == sb.POSITIVE for r in sb.scope(data, q3))
    assert peers.score_peer(data, q3, "palimpzest", {"columns": ["count"], "rows": [[pos]]},
                            {})["relative_error"] == 0.0


def test_a_query_the_peer_cannot_express_is_not_applicable_not_a_zero(data: sb.Data) -> None:
    inst = next(i for i in report(data) if i.query == "Q5")
    row = peers.score_peer(data, inst, "palimpzest", {"unsupported": "no semantic join"}, {})
    assert row["not_applicable"] == "no semantic join" and "f1" not in row
    q3 = next(i for i in report(data) if i.query == "Q3")
    scored = peers.score_peer(data, q3, "palimpzest", {"columns": ["count"], "rows": [[1]]}, {})
    out = peers.summary([row, scored], {"peer": "palimpzest"})
    assert out["not_applicable"] == {"Q5": "no semantic join"} and set(out["queries"]) == {"Q3"}


def test_chat_messages_reach_the_server_in_the_older_form_with_the_same_text() -> None:
    body = json.dumps({"model": "m", "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "user", "content": "developer"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}).encode()
    out = json.loads(peers.plain_messages(body) or b"")
    assert [m["role"] for m in out["messages"]] == ["system", "user", "user"]
    assert [m["content"] for m in out["messages"][:2]] == ["Be brief.", "developer"]
    assert isinstance(out["messages"][2]["content"], list)  # not text: as it was
    assert peers.plain_messages(b'{"prompt": "x"}') == b'{"prompt": "x"}'
    assert peers.plain_messages(None) is None


def test_a_streamed_chat_request_is_asked_whole_and_streamed_back_with_usage() -> None:
    body, streamed = peers.unstreamed(json.dumps({"messages": [], "stream": True,
                                                  "stream_options": {"include_usage": True}}).encode())
    assert streamed and json.loads(body or b"") == {"messages": [], "stream": False}
    assert peers.unstreamed(b'{"messages": [], "stream": false}') == (b'{"messages": [], "stream": false}', False)
    answer = {"id": "c1", "created": 1, "model": "m", "usage": {"prompt_tokens": 7, "completion_tokens": 1},
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "True"},
                           "finish_reason": "stop"}]}
    events = peers.as_stream(json.dumps(answer).encode()).decode().split("\n\n")
    chunks = [json.loads(e[len("data: "):]) for e in events if e.startswith("data: {")]
    assert chunks[0]["choices"][0]["delta"]["content"] == "True"
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[2]["usage"] == {"prompt_tokens": 7, "completion_tokens": 1}
    assert events[-2] == "data: [DONE]"


def test_answer_of_picks_the_instance_and_passes_errors() -> None:
    payload = {"results": [{"key": "Q2:x", "rows": [[1]]}, {"id": "Q3:y", "rows": None, "error": "bad"}]}
    assert peers.answer_of("lotus", payload, "Q2:x")["rows"] == [[1]]
    assert peers.answer_of("blendsql-0.1.28", payload, "Q3:y")["error"] == "bad"
    assert peers.answer_of("lotus", payload, "Q9:z")["error"].startswith("the peer gave no result")
    assert peers.answer_of("lotus", {"error": "exited 1"}, "Q2:x") == {"error": "exited 1"}


def test_the_dry_run_finds_no_label(data: sb.Data, capsys: pytest.CaptureFixture[str]) -> None:
    for peer in peers.PEERS:
        assert peers.dry_run(peer, data, report(data)) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["problems"] == [] and len(out["instances"]) == len(report(data))


# ---------------------------------------------------------------- the metering proxy


class FakeServer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible stand-in: /v1/models, and completions with a usage block."""

    def log_message(self, *args: Any) -> None:
        return None

    def reply(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self.reply({"data": [{"id": "fake"}]})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.reply({"choices": [{"message": {"content": "POSITIVE"}}], "echo": body["model"],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2}})


@pytest.fixture
def upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


def test_the_proxy_counts_completions_and_tokens(upstream: str) -> None:
    with peers.MeteringProxy(upstream) as proxy:
        with urllib.request.urlopen(proxy.url + "/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "fake"
        before = proxy.meter.snapshot()
        for _ in range(3):
            answer = post(proxy.url + "/chat/completions", {"model": "m", "messages": []})
        assert answer["echo"] == "m"  # forwarded as sent
        assert peers.since(before, proxy.meter.snapshot()) == {"model_calls": 3, "prompt_tokens": 30,
                                                               "completion_tokens": 6}
        post(proxy.url + "/completions", {"model": "m", "prompt": "x"})
        assert proxy.meter.snapshot()["model_calls"] == 4


# ---------------------------------------------------------------- llama-server start / stop


def fake_binary(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fake-llama-server"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


SERVES = """
import http.server, json, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
assert args[args.index("--host") + 1] == "127.0.0.1" and "-m" in args

class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        data = json.dumps({"data": [{"id": "fake", "args": args}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_the_server_helper_starts_and_stops_the_server(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, SERVES)
    port = peers.free_port()
    cmd = peers.server_command(binary, tmp_path / "model.gguf", port, threads=1, n_ctx=2048)
    assert cmd[cmd.index("-np") + 1] == "1" and cmd[cmd.index("-t") + 1] == "1"
    with peers.llama_server(cmd, port, timeout=30) as url:
        with urllib.request.urlopen(url + "/models", timeout=5) as r:
            assert "--no-webui" in json.loads(r.read())["data"][0]["args"]
    with pytest.raises(OSError):  # stopped: nothing answers any more
        urllib.request.urlopen(url + "/models", timeout=2)


def test_a_server_that_exits_or_never_answers_is_an_error(tmp_path: Path) -> None:
    exits = fake_binary(tmp_path, "import sys\nprint('no model file')\nsys.exit(3)\n")
    port = peers.free_port()
    with pytest.raises(RuntimeError, match=r"exited 3:\nno model file"):
        with peers.llama_server([str(exits), "--port", str(port)], port, timeout=30):
            pass
    silent = fake_binary(tmp_path, "import time\ntime.sleep(60)\n")
    with pytest.raises(RuntimeError, match="did not answer within 1 s"):
        with peers.llama_server([str(silent)], peers.free_port(), timeout=1):
            pass


FAKE_RUNNER = """
import json, sys, urllib.request
request = json.load(sys.stdin)
results = []
for inst in request["instances"]:
    body = json.dumps({"model": request["model"], "messages": []}).encode()
    req = urllib.request.Request(request["base_url"] + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    results.append({"key": inst["key"], "columns": ["reviewId"], "rows": [], "seconds": 0.1, "error": None})
json.dump({"version": "0.0-fake", "results": results}, sys.stdout)
"""


def test_run_all_meters_each_instance_and_resumes(data: sb.Data, upstream: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    runner = tmp_path / "fake_runner.py"
    runner.write_text(FAKE_RUNNER)
    monkeypatch.setitem(peers.RUNNERS, "lotus", runner)
    insts = [i for i in report(data) if i.query in ("Q2", "Q3")]
    out = tmp_path / "lotus.jsonl"
    ran = peers.run_all("lotus", Path(sys.executable), data, insts, upstream, "m", out, 60, tmp_path)
    rows = sb.read_rows(out)
    assert ran == len(insts) == len(rows)
    for row in rows.values():
        assert row["model_calls"] == 1 and row["prompt_tokens"] == 10 and row["peer_version"] == "0.0-fake"
        worst = {"f1": 0.0, "relative_error": 1.0}[row["metric"]]
        assert row[row["metric"]] == worst  # nothing found / no count returned
    assert peers.run_all("lotus", Path(sys.executable), data, insts, upstream, "m", out, 60, tmp_path) == 0
    json.dumps(peers.runner_request("lotus", data, insts, "u", "m"))  # the request is plain JSON


def test_the_side_by_side_table_names_each_metric_and_what_did_not_run() -> None:
    engine = {"modes": {"default": {"queries": {
        "Q2": {"mean": 0.9, "ci95": [0.8, 1.0], "model_calls": 10, "prompt_tokens": 1000}}}}}
    lotus = {"queries": {"Q2": {"mean": 1.0, "ci95": [1.0, 1.0], "model_calls": 12,
                                "prompt_tokens": 1500}}, "not_applicable": {"Q5": "no join"}}
    table = peers.side_by_side(engine, ["default"], {"lotus": lotus, "palimpzest": None})
    lines = table.splitlines()
    assert lines[0].startswith("| system | Q1 (F1) | Q2 (F1) | Q3 (rel. err.)")
    assert lines[2].startswith("| blendsql `default` | not run | 0.90 (0.80–1.00) |")
    assert lines[0].endswith("| calls (Q2) | prompt tokens (Q2) |")
    assert lines[2].endswith("| 10 | 1,000 |")
    assert "| lotus | not run | 1.00 (1.00–1.00) |" in lines[3] and "| n/a |" in lines[3]
    assert len(lines) == 4  # no row for a peer without results


def test_a_peer_runs_without_this_checkout_on_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = tmp_path / "runner.py"
    runner.write_text("import json, os, sys; json.load(sys.stdin); "
                      "print(json.dumps({'path': os.environ.get('PYTHONPATH')}))")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert peers.run_peer_once(Path(sys.executable), runner, {}, 60) == {"path": None}
