"""Log records carry the job and the reconcile they belong to, so JSON logs can be filtered per job.

A context variable is set for the duration of each reconcile; a filter on the root handlers copies it onto every
record logged meanwhile (by us or by libraries), and Kopf's JSON formatter emits those attributes as fields.
Every record also gets a `level` field: our documented log schema (timestamp, level, message, namespace, job,
reconcile) names it so, while Kopf's formatter calls it `severity` (kept, for tools that already read it).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager

_current: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar("reconcile", default=None)
_ids = itertools.count(1)


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


def install() -> None:
    """Attach the filter to every root handler (call after Kopf configured logging)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ReconcileContextFilter) for f in handler.filters):
            handler.addFilter(ReconcileContextFilter())
