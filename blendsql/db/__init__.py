"""blendsql.db: the guarded SQLite connection the engine runs on, plus data loaders."""

from blendsql.db.database import Database
from blendsql.db.documents import build_fts, search
from blendsql.db.loaders import example_db_path, from_frames, hybridqa_to_sqlite, load_hybridqa

__all__ = [
    "Database",
    "build_fts",
    "example_db_path",
    "from_frames",
    "hybridqa_to_sqlite",
    "load_hybridqa",
    "search",
]
