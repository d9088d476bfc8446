"""An agent's final answer checked against its ``output`` JSON Schema."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def check_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """The answer parsed as JSON (a fenced code block is unwrapped) and validated; the value
    and None, or None and what is wrong (written for the model, which is asked again)."""
    from jsonschema import validators

    fenced = _FENCE.match(text)
    body = fenced.group("body") if fenced else text
    try:
        value = json.loads(body)
    except ValueError as exc:
        return None, f"it is not JSON ({exc})"
    validator = validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return value, None
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path)
    return None, first.message + (f" (at `{where}`)" if where else "")
