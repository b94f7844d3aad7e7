"""Declining in a dialogue: off-schema questions at turn 1 and at turn 5, answerable turns.

Issue 43: the conversation declined "What is the weather tomorrow in Paris?" alone
(P(unanswerable) 0.82) but answered it at turn 3 (0.74, under a fixed 0.75), and
answered an off-schema sports question at turn 5 as a follow-up. This benchmark
measures the decision (``Conversation._act``: answer or decline; no program is written)
on SParC **dev** interactions (``dev_ids.txt``, spread round-robin over their databases):

- ``off_schema_turn1``: each question of :data:`OFF_SCHEMA` (written for this benchmark,
  about nothing a Spider database holds; some with a referring word) asked first;
- ``off_schema_turn5``: the same questions asked after the interaction's first four
  turns were answered (their gold SQL run through the conversation, so the dialogue
  state holds their rows and filters);
- ``answerable``: every turn of the interaction at its own position (earlier turns
  answered with gold SQL): the rate wrongly declined; over ``--answerable-interactions``
  interactions (the off-schema questions are asked in the first ``--interactions``).

Each decision is reported under the rule of this commit (``new``) and under the rule
before issue 43 (``old``: a turn naming a table or column is answered; a follow-up word
after an answered turn is answered; else declined from P(unanswerable) 0.75), both from
the same model scores (the judge's prompt is the question alone in both). Rates with
95% Wilson intervals.

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)
    python benchmarks/dialogue_declines.py --interactions 3 --answerable-interactions 12 \
        --out benchmarks/results/dialogue_declines_dev.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.nl import Conversation  # noqa: E402
from blendsql.nl.conversation import Turn  # noqa: E402
from blendsql.nl.grounding import is_follow_up, schema_mentions  # noqa: E402
from blendsql.nl.serialize import list_tables  # noqa: E402

#: off-schema questions (dev set, written for this benchmark): nothing a Spider database holds.
#: The first twelve are the first round's set; the rest were added when two of them still
#: slipped through (weather, news, opinions, how-to, trivia, requests to act; none about a
#: topic of a SParC dev database)
OFF_SCHEMA = (
    "What is the weather tomorrow in Paris?",
    "Who won the football world cup in 2018?",
    "Tell me a joke about cats.",
    "What time does the bakery open on Sundays?",
    "Can you recommend a good movie for tonight?",
    "How do I reset my email password?",
    "What is the weather like there this weekend?",
    "Who won it last year, the Super Bowl?",
    "What's the capital of Mongolia's neighbour to the north?",
    "Please translate 'good morning' into Japanese.",
    "How many calories are in a banana?",
    "What is the stock price of Apple today?",
    "Will it rain in London on Saturday?",
    "What's the latest news about the elections in Brazil?",
    "Do you think pineapple belongs on pizza?",
    "How do I bake sourdough bread at home?",
    "Which is better, Python or JavaScript?",
    "Who painted the Mona Lisa?",
    "How far is the Moon from the Earth?",
    "Book me a table for two at an Italian restaurant tonight.",
    "What's the score of the Lakers game?",
    "How many goals did Messi score last season?",
    "Set an alarm for 7 am tomorrow.",
    "Summarize the plot of Hamlet for me.",
    "What is the exchange rate from euros to yen?",
    "How do I fix a flat bicycle tire?",
    "Is coffee bad for your health?",
    "What's the traffic like on the highway right now?",
    "Explain quantum entanglement in simple terms.",
    "What year did the Berlin Wall fall?",
    "Can you recommend a podcast about ancient Rome?",
    "How many bones are in the human body?",
)
OLD_THRESHOLD = 0.75
REFUSALS = ("not_related", "cannot_answer", "cannot_understand")


class DecisionOnly(Conversation):
    """The decision alone: a decline's kind (unrelated, not held, not understood: one more
    model call per declined question) is not asked; every decline counts as one."""

    def _decline(self, utterance: str) -> str:
        return "not_related"


def old_rule(conv: Conversation, utterance: str, p: float | None, informative: bool) -> bool:
    """Declined under the rule before issue 43 (same scores)."""
    if schema_mentions(conv.db, utterance, tables=list_tables(conv.db)):
        return False
    if conv.last_query_turn() is not None and is_follow_up(utterance):
        return False
    return not (informative and p is not None and p < OLD_THRESHOLD)


def decide(conv: Conversation, utterance: str) -> dict[str, Any]:
    """The new decision (``_act``) and the old one, from one scoring of the question."""
    t0 = time.perf_counter()
    with conv._turn("benchmark"):
        act, reason = conv._act(utterance)
        rel = conv._relevance_judge(list_tables(conv.db)).judge(utterance)
        old = old_rule(conv, utterance, rel.p_unanswerable, rel.informative)
    return {"utterance": utterance, "act": act, "declined": act in REFUSALS, "old_declined": old,
            "p_unanswerable": None if rel.p_unanswerable is None else round(rel.p_unanswerable, 3),
            "threshold": round(rel.threshold, 3), "reason": reason,
            "seconds": round(time.perf_counter() - t0, 2)}


def answer_with_gold(conv: Conversation, utterance: str, gold: str) -> None:
    """An earlier turn answered by its gold SQL (the dialogue state records it)."""
    turn = Turn(utterance, "inform_sql", "", question=utterance)
    with conv._turn("benchmark"):
        conv._run(turn, gold)
    conv.history.append(turn)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from blendsql.models import LlamaCpp

    data = protocol.data_dir()
    raw = json.loads((data / "sparc" / "dev.json").read_text())
    dev = {int(x) for x in (data / "sparc" / "dev_ids.txt").read_text().split()}
    picked = [(i, it) for i, it in enumerate(raw) if i in dev and len(it["interaction"]) >= 4]
    chosen = protocol.spread(picked, lambda p: p[1]["database_id"],
                             max(args.interactions, args.answerable_interactions), args.seed)
    model_path = protocol.model_arg(args.model)
    model = LlamaCpp(model_path, n_ctx=4096, timeout=900) if model_path else LlamaCpp()
    header = protocol.run_record("dialogue_declines.py", args.argv, model_path)  # the tree the run started from
    rows: list[dict[str, Any]] = []
    done: list[int] = []
    for n, (idx, it) in enumerate(chosen):
        off = n < args.interactions  # the off-schema questions in the first interactions only
        path = data / "spider" / "database" / it["database_id"] / f"{it['database_id']}.sqlite"
        bsql = BlendSQL(str(path), model=model, cache=False)
        bsql.registry = type(bsql.registry)()  # plain SQL: Spider questions
        conv = DecisionOnly(bsql)
        for q in OFF_SCHEMA if off else ():
            rows.append({"interaction": idx, "db": it["database_id"], "set": "off_schema_turn1",
                         **decide(conv, q)})
        for k, t in enumerate(it["interaction"]):
            rows.append({"interaction": idx, "db": it["database_id"], "set": "answerable", "turn": k + 1,
                         **decide(conv, t["utterance"])})
            answer_with_gold(conv, t["utterance"], protocol.fix_tokenised(t["query"]))
            if k == 3 and off:
                for q in OFF_SCHEMA:
                    rows.append({"interaction": idx, "db": it["database_id"], "set": "off_schema_turn5",
                                 **decide(conv, q)})
        bsql.close()
        print(f"interaction {idx} ({it['database_id']}): {len(rows)} decisions so far", flush=True)
        done.append(idx)
        args.out.write_text(json.dumps(summarise(header, done, rows), indent=1) + "\n")
    return summarise(header, done, rows)


def summarise(header: dict[str, Any], done: list[int], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The results so far (written after every interaction: a long run can be read midway)."""
    summary: dict[str, Any] = {}
    for name in ("off_schema_turn1", "off_schema_turn5", "answerable"):
        part = [r for r in rows if r["set"] == name]
        summary[name] = {"new_declined": protocol.accuracy([r["declined"] for r in part]),
                         "old_declined": protocol.accuracy([r["old_declined"] for r in part])}
    return {**header, "interactions": done, "off_schema": list(OFF_SCHEMA),
            "summary": summary, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF path (default: $BLENDSQL_EVAL_MODEL)")
    ap.add_argument("--interactions", type=int, default=6,
                    help="interactions the off-schema questions are asked in (turn 1 and turn 5)")
    ap.add_argument("--answerable-interactions", type=int, default=0,
                    help="interactions whose own turns are decided (at least --interactions)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.argv = argv
    result = run(args)
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
