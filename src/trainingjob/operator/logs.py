"""The operator's log output: one line per record, as text or as JSON, and the job each record belongs to.

A context variable is set for the duration of each reconcile; a filter on the root handler copies it onto every
record logged meanwhile (by us or by libraries), and the JSON formatter emits those attributes as fields. Every JSON
record has `timestamp`, `level` (debug, info, warning, error, critical: our documented log schema), `severity` (the
name Kopf's formatter used, kept for tools that already read it), `logger` and `message`; records inside a reconcile
add `namespace`, `job` and `reconcile`.
"""

from __future__ import annotations

import contextvars
import datetime
import itertools
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_current: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar("reconcile", default=None)
_ids = itertools.count(1)
TEXT_FORMAT = "[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s"
CONTEXT_FIELDS = ("namespace", "job", "reconcile")
# Kopf's severity names, for log pipelines written against its JSON output.
SEVERITIES = {"debug": "debug", "info": "info", "warning": "warn", "error": "error", "critical": "fatal"}


@contextmanager
def reconcile_context(namespace: str, job: str) -> Iterator[str]:
    reconcile_id = f"r{next(_ids)}"
    token = _current.set((namespace, job, reconcile_id))
    try:
        yield reconcile_id
    finally:
        _current.reset(token)


class ReconcileContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        if context is not None:
            record.namespace, record.job, record.reconcile = context
        record.level = record.levelname.lower()  # debug, info, warning, error, critical
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a traceback goes into `exc_info` as text, never across lines."""

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        fields = {
            "timestamp": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": level,
            "severity": SEVERITIES.get(level, level),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields.update({name: getattr(record, name) for name in CONTEXT_FIELDS if hasattr(record, name)})
        if record.exc_info:
            fields["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(fields, default=str)


def configure(log_format: str, level: int) -> None:
    """Replace the root handlers with one on stderr in `log_format` ("text" or "json") that adds the context."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ReconcileContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # asyncio's own debug chatter only when asked for.
    logging.getLogger("asyncio").setLevel(max(level, logging.WARNING))
