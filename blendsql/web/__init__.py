"""``blendsql serve``: a small local, read-only web page over one BlendSQL session.

``create_app(bsql)`` returns a Starlette app (so a Python caller can register
its own ingredients on ``bsql`` first); ``serve(bsql, host, port)`` runs it
with uvicorn. Needs the ``web`` extra: ``pip install 'blendsql[web]'``.
"""

from blendsql.web.app import DEFAULT_ASK_TIMEOUT, DEFAULT_QUERY_TIMEOUT, create_app, serve

__all__ = ["DEFAULT_ASK_TIMEOUT", "DEFAULT_QUERY_TIMEOUT", "create_app", "serve"]
