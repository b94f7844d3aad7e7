"""blendsql.db: the guarded SQLite connection the engine runs on."""

from blendsql.db.database import Database

__all__ = ["Database"]
