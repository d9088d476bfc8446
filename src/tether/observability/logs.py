"""``--log-format json``: one JSON object per log line, carrying the trace of what it is about.

Each line has ``time`` (ISO 8601, UTC), ``level``, ``logger`` and ``message``; ``trace_id``
and ``span_id`` (hex, as trace backends show them) of the span current where the line was
logged, when tracing is on and one is; ``execution_id`` of the run being executed, when the
line is logged inside one; ``exception`` when the record carries one. A log backend (Loki,
Elasticsearch, Datadog) links a line to its trace by ``trace_id``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage()}
        line.update(_trace_ids())
        execution_id = _execution_id()
        if execution_id is not None:
            line["execution_id"] = execution_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _trace_ids() -> dict[str, str]:
    api = sys.modules.get("opentelemetry.trace")  # never imported: no span to name
    if api is None:
        return {}
    context = api.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def _execution_id() -> str | None:
    from tether.runtime.context import RUN

    run = RUN.get(None)
    return run.execution_id if run is not None else None


def configure_logging(log_format: str, level: int = logging.INFO) -> None:
    """The root logger of ``tether worker`` and ``tether serve``: text (as before) or json."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
