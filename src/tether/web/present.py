"""Values as the pages show them: JSON drawn as a foldable tree, exactly as stored.

Every text goes through ``markupsafe.escape`` (a context holding ``<script>`` shows as text);
the result is ``Markup`` so templates, which autoescape everything else, insert it as built.
Keys keep their stored order. Long strings and big collections are folded in
``<details>`` (open them to read all of it); nesting deeper than :data:`MAX_DEPTH` is shown
as pretty-printed JSON text instead of a tree, so a hostile value cannot make a page huge.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

LONG_TEXT = 160
BIG_COLLECTION = 20
MAX_ITEMS = 500
MAX_DEPTH = 12


def pretty_json(value: Any) -> str:
    """Indented JSON text, non-ASCII kept, keys in their stored order."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def json_tree(value: Any) -> Markup:
    """``value`` as nested, foldable HTML (see the module docstring)."""
    return Markup('<div class="json">') + _node(value, 0) + Markup("</div>")


def _scalar(value: Any) -> Markup:
    if value is None:
        return Markup('<span class="j-null">null</span>')
    if isinstance(value, bool):
        return Markup('<span class="j-bool">') + ("true" if value else "false") + \
            Markup("</span>")
    if isinstance(value, int | float):
        return Markup('<span class="j-num">') + escape(json.dumps(value)) + Markup("</span>")
    text = json.dumps(str(value), ensure_ascii=False)
    if len(text) <= LONG_TEXT:
        return Markup('<span class="j-str">') + escape(text) + Markup("</span>")
    return (Markup('<details class="j-long"><summary><span class="j-str">')
            + escape(text[:LONG_TEXT // 2]) + Markup("</span>… ")
            + escape(f"({len(str(value)):,} characters)")
            + Markup('</summary><pre class="j-str">') + escape(text)
            + Markup("</pre></details>"))


def _node(value: Any, depth: int) -> Markup:
    if not isinstance(value, dict | list):
        return _scalar(value)
    if depth >= MAX_DEPTH:
        return Markup('<pre class="j-deep">') + escape(pretty_json(value)) + Markup("</pre>")
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    brackets = ("{", "}") if isinstance(value, dict) else ("[", "]")
    if not items:
        return Markup('<span class="j-empty">') + brackets[0] + brackets[1] + \
            Markup("</span>")
    rows = Markup("").join(
        Markup('<li><span class="j-key">') + escape(json.dumps(key, ensure_ascii=False)
                                                    if isinstance(key, str) else str(key))
        + Markup("</span>: ") + _node(item, depth + 1) + Markup("</li>")
        for key, item in items[:MAX_ITEMS])
    if len(items) > MAX_ITEMS:
        rows += Markup('<li class="j-more">') + escape(
            f"… {len(items) - MAX_ITEMS:,} more (see the JSON text)") + Markup("</li>")
    size = f"{len(items):,} {'keys' if isinstance(value, dict) else 'items'}"
    opened = "" if len(items) > BIG_COLLECTION or depth >= 3 else " open"
    return (Markup(f'<details class="j-coll"{opened}><summary>') + brackets[0]
            + Markup(' <span class="j-size">') + escape(size) + Markup("</span> ")
            + brackets[1] + Markup("</summary><ul>") + rows + Markup("</ul></details>"))


def short(value: Any, limit: int = 80) -> str:
    """One line of JSON, cut to ``limit`` characters (escaped later by the template)."""
    if value is None:
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def moment(value: datetime | None) -> str:
    """A time as the pages show it (UTC, to the second)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None
