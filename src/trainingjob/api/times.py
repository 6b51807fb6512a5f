"""Times as Kubernetes writes them (RFC 3339 in UTC, whole seconds), read once where an object is read."""

from __future__ import annotations

import datetime


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes timestamps."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def whole_seconds(moment: datetime.datetime | None) -> datetime.datetime | None:
    """`moment` as a written timestamp holds it: in UTC, whole seconds. A status compares equal to the one read
    back from the API server only if its times are cut the same way."""
    return None if moment is None else moment.astimezone(datetime.UTC).replace(microsecond=0)
