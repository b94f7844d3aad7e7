"""The page around every view of ``blendsql serve``: header, navigation, the schema."""

from __future__ import annotations

from blendsql._display import CSS, esc

PAGE_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#fafafa}
header{padding:10px 20px;background:#1d2330;color:#fff;display:flex;gap:16px;align-items:baseline}
header h1{font-size:18px;margin:0} header .db{opacity:.8;font-size:13px}
header nav{margin-left:auto} header nav a{color:#fff;margin-left:14px}
main{display:grid;grid-template-columns:minmax(0,1fr) 240px;gap:20px;padding:16px 20px}
form{margin-bottom:14px} label{display:block;font-weight:600;margin-bottom:4px}
textarea,input[type=text]{width:100%;box-sizing:border-box;font:13px ui-monospace,monospace;padding:6px}
button{margin-top:6px;padding:4px 14px;font-size:13px;cursor:pointer}
.note{font-size:12px;opacity:.7;margin:4px 0}
.error{border:1px solid #d33;background:#fff0f0;padding:8px 12px;border-radius:4px;margin:8px 0}
.error .hint{opacity:.85} .answer{font-size:15px;margin:8px 0}
aside{font-size:12px} aside ul{padding-left:16px;margin:2px 0 8px}
pre.program{background:#eef;padding:6px;white-space:pre-wrap}
ol.turns{padding-left:18px} li.turn{margin-bottom:12px} .you{margin-bottom:2px} .act{opacity:.6}
"""


def schema_html(schema: list[tuple[str, list[str]]]) -> str:
    """The side list of tables and their columns."""
    items = "".join(f"<li><b>{esc(t)}</b><ul>{''.join(f'<li>{esc(c)}</li>' for c in cols)}</ul></li>"
                    for t, cols in schema)
    return f"<aside id='schema'><b>Tables</b><ul>{items}</ul></aside>"


def shell(title: str, body: str, schema: str) -> str:
    """The page around a body: header with navigation, the schema on the side."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>{PAGE_CSS}</style><style>{CSS}</style></head>
<body><header><h1>blendsql</h1><span class="db">{esc(title)} · read-only</span>
<nav><a href="/">Query</a> <a href="/chat">Conversation</a></nav></header>
<main><div>{body}</div>{schema}</main></body></html>"""
