"""blendsql.db: the backends the engine runs on (SQLite, DuckDB, PostgreSQL, Spark: each
found in the ``blendsql.backends`` entry-point group), plus data loaders."""

from blendsql.db.backend import Backend, Capabilities, open_database, register_backend
from blendsql.db.database import Database
from blendsql.db.documents import build_fts, search
from blendsql.db.duck import DuckDBDatabase
from blendsql.db.loaders import example_db_path, from_frames, hybridqa_to_sqlite, load_hybridqa
from blendsql.db.postgres import PostgresDatabase

__all__ = [
    "Backend",
    "Capabilities",
    "Database",
    "DuckDBDatabase",
    "PostgresDatabase",
    "build_fts",
    "example_db_path",
    "from_frames",
    "hybridqa_to_sqlite",
    "load_hybridqa",
    "open_database",
    "register_backend",
    "search",
]
