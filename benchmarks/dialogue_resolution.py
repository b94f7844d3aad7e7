"""How often the dialogue state resolves a dependent turn without a model, and how often rightly.

On SParC / CoSQL **dev** interactions (``dev_ids.txt``), every turn after the first is
replayed with the earlier turns answered by their gold SQL (so the dialogue state holds
what a right answer named). For each such turn the conversation's model-free step runs
(``grounding.ground`` then ``dialogue.resolve``): a ``substitute`` (ellipsis), a ``rows``
(a plural reference: the previous rows by their keys) or a
``lookup`` (pronoun / ordinal) writes the turn's program itself; it is right when its
result rows equal the gold SQL's (as multisets, values normalised, column order kept, as
``benchmarks/conversation.py`` scores). A ``hint`` only rewrites the parser's question
and is counted, not scored. No model is loaded.

    python benchmarks/dialogue_resolution.py --dataset sparc --out benchmarks/results/dialogue_resolution_sparc_dev.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.errors import BlendSQLError  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.nl import Conversation  # noqa: E402
from blendsql.nl.conversation import Turn  # noqa: E402
from blendsql.nl.dialogue import resolve  # noqa: E402
from blendsql.nl.grounding import ground  # noqa: E402
from blendsql.nl.serialize import list_tables  # noqa: E402


def no_model(req: Request) -> str:
    raise AssertionError("this benchmark calls no model")


def rows_of(result: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(protocol.norm_value(v) for v in r) for r in result)


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = protocol.data_dir()
    raw = json.loads((data / args.dataset / "dev.json").read_text())
    dev = {int(x) for x in (data / args.dataset / "dev_ids.txt").read_text().split()}
    items: list[dict[str, Any]] = []
    for idx, it in enumerate(raw):
        if idx not in dev:
            continue
        path = data / "spider" / "database" / it["database_id"] / f"{it['database_id']}.sqlite"
        bsql = BlendSQL(str(path), model=FunctionModel(no_model), cache=False)
        conv = Conversation(bsql, classify_acts=False)
        tables = list_tables(bsql.db)
        for k, t in enumerate(it["interaction"]):
            gold = protocol.fix_tokenised(t["query"])
            if k > 0:
                with conv._turn("benchmark"):
                    g = ground(bsql.db, t["utterance"], tables)
                    res = resolve(conv.state, t["utterance"], g, tables, bsql.db)
                row: dict[str, Any] = {"interaction": idx, "db": it["database_id"], "turn": k + 1,
                                       "utterance": t["utterance"], "gold": gold,
                                       "kind": res.kind if res else None, "program": res.program if res else None,
                                       "note": res.note if res else None, "match": None}
                if res is not None and res.program is not None:
                    gold_rows = protocol.run_readonly(path, gold, 20.0)
                    try:
                        got = rows_of(bsql.execute(res.program).df.itertuples(index=False, name=None))
                    except BlendSQLError as e:
                        got, row["error"] = None, str(e).splitlines()[0]
                    row["match"] = bool(gold_rows is not None and got is not None and got == rows_of(gold_rows))
                items.append(row)
            turn = Turn(t["utterance"], "inform_sql", "", question=t["utterance"])
            with conv._turn("benchmark"):
                conv._run(turn, gold)
            conv.history.append(turn)
        bsql.close()
    kinds = Counter(r["kind"] for r in items)
    scored = [r for r in items if r["match"] is not None]
    by_kind = {k: protocol.accuracy([bool(r["match"]) for r in scored if r["kind"] == k])
               for k in ("substitute", "lookup", "rows")}
    return {**protocol.run_record("dialogue_resolution.py", args.argv, None, "no model"),
            "dataset": args.dataset, "split": "dev", "dependent_turns": len(items),
            "resolutions": {str(k): v for k, v in kinds.items()},
            "resolved_right": protocol.accuracy([bool(r["match"]) for r in scored]), "by_kind": by_kind,
            "rows": items}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["sparc", "cosql"], default="sparc")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.argv = argv
    result = run(args)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("dataset", "dependent_turns", "resolutions", "resolved_right",
                                             "by_kind")}, indent=1))


if __name__ == "__main__":
    main()
