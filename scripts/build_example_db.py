"""Build the bundled example database ``blendsql/data/example.db``.

Source: HybridQA dev table ``1991_College_Baseball_All-America_Team_0``
(HybridQA, wenhuchen/HybridQA, MIT; table and passages from OTT-QA, MIT),
chosen from the dev split (its dev question: 22611a9d70bd5177) because it has
``position`` / ``name`` / ``school`` columns, 20 rows, and 37 linked passages:
enough for LLMMap ("Is this a pitcher?"), LLMQA over ``documents`` and an
LLMJoin demo.

Contents:
- ``w``: the table (columns position, name, school, abca, ba, cb);
- ``documents(title, content)``: FTS5 over the linked Wikipedia passages;
- ``programs(program)``: the title of every linked page about a school's
  team (e.g. "Fresno State Bulldogs baseball"), sorted by name: a second table
  whose values align with ``w.school`` only semantically (an LLMJoin demo);
- ``_columns`` / ``_tables``: original headers and provenance.

Run from the repository root: ``python scripts/build_example_db.py
[--data ../shared/data/hybridqa] [--out blendsql/data/example.db]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a clone without installing

from blendsql.db.loaders import (  # noqa: E402
    from_frames,
    hybridqa_to_sqlite,
    link_title,
    load_hybridqa,
)

TABLE_ID = "1991_College_Baseball_All-America_Team_0"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hybridqa"
DEFAULT_OUT = ROOT / "blendsql" / "data" / "example.db"


def school_programs(record: dict) -> list[str]:
    """Titles of the pages linked from the school column (the team programs)."""
    col = [h.lower() for h in record["header"]].index("school")
    links = {link for row in record["links"] for link in row[col]}
    return sorted({link_title(link) for link in links})


def build(data_dir: Path, out: Path) -> Path:
    """Write the example database to ``out`` (replacing it) and return the path."""
    record = next(load_hybridqa(data_dir, [TABLE_ID]), None)
    if record is None:
        raise SystemExit(f"table {TABLE_ID} not found under {data_dir}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    hybridqa_to_sqlite(record, conn)
    programs = pd.DataFrame({"program": school_programs(record)})
    from_frames({"programs": programs}, None, conn)
    conn.execute("VACUUM")
    conn.close()
    tmp.replace(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    path = build(args.data, args.out)
    print(f"wrote {path} ({path.stat().st_size} bytes) from {TABLE_ID}")


if __name__ == "__main__":
    main()
