"""The kubelet's /containerLogs query and the CRI log format (pure).

A log file holds one record per line: `<RFC3339Nano time> <stdout|stderr> <F|P> <content>`, P marking a piece of
a line longer than the runtime's buffer. The query options are those of `kubectl logs`: follow, previous,
timestamps, tailLines, sinceSeconds or sinceTime, limitBytes. Timestamps are printed as the kubelet prints them
(RFC 3339 with nine fractional digits).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass


class LogQueryError(ValueError):
    """A query the endpoint answers with 400."""


@dataclass(frozen=True)
class LogQuery:
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_ns: int | None = None
    limit_bytes: int | None = None


@dataclass(frozen=True)
class Record:
    timestamp: str
    epoch_ns: int
    stream: str
    partial: bool
    content: bytes


def _flag(params: Mapping[str, str], name: str) -> bool:
    if name not in params:
        return False
    value = params[name].lower()
    if value in ("true", "1", ""):
        return True
    if value in ("false", "0"):
        return False
    raise LogQueryError(f"invalid value for {name}: {value!r}")


def _number(params: Mapping[str, str], name: str, minimum: int) -> int | None:
    if name not in params:
        return None
    try:
        value = int(params[name])
    except ValueError:
        raise LogQueryError(f"{name} must be an integer") from None
    if value < minimum:
        raise LogQueryError(f"{name} must be at least {minimum}")
    return value


def parse_time_ns(stamp: str) -> int:
    """RFC 3339 (any fraction, Z or offset) -> nanoseconds since the epoch."""
    text = stamp.strip()
    offset = 0
    if text.endswith("Z"):
        text = text[:-1]
    elif len(text) > 6 and text[-6] in "+-" and text[-3] == ":":
        sign = 1 if text[-6] == "+" else -1
        offset = sign * (int(text[-5:-3]) * 3600 + int(text[-2:]) * 60)
        text = text[:-6]
    base, _, fraction = text.partition(".")
    try:
        seconds = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) - offset
    except ValueError:
        raise LogQueryError(f"invalid time {stamp!r}") from None
    return seconds * 1_000_000_000 + int((fraction + "000000000")[:9] or 0)


def parse_query(params: Mapping[str, str], now_ns: int | None = None) -> LogQuery:
    since_seconds = _number(params, "sinceSeconds", 1)
    since_time = params.get("sinceTime")
    if since_seconds is not None and since_time:
        raise LogQueryError("at most one of sinceTime or sinceSeconds may be specified")
    since_ns = None
    if since_seconds is not None:
        since_ns = (now_ns if now_ns is not None else time.time_ns()) - since_seconds * 1_000_000_000
    elif since_time:
        since_ns = parse_time_ns(since_time)
    return LogQuery(
        follow=_flag(params, "follow"),
        previous=_flag(params, "previous"),
        timestamps=_flag(params, "timestamps"),
        tail_lines=_number(params, "tailLines", 0),
        since_ns=since_ns,
        limit_bytes=_number(params, "limitBytes", 1),
    )


def parse_record(line: bytes) -> Record | None:
    parts = line.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        return None
    content = parts[3] if len(parts) == 4 else b""
    stamp = parts[0].decode(errors="replace")
    try:
        epoch_ns = parse_time_ns(stamp)
    except LogQueryError:
        return None
    return Record(stamp, epoch_ns, parts[1].decode(errors="replace"), parts[2] == b"P", content)


def fixed_timestamp(epoch_ns: int) -> str:
    seconds, fraction = divmod(epoch_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


def render(record: Record, query: LogQuery, line_start: bool) -> bytes:
    """One record as the endpoint prints it; `line_start` is False for the pieces after a partial record."""
    prefix = f"{fixed_timestamp(record.epoch_ns)} ".encode() if query.timestamps and line_start else b""
    return prefix + record.content + (b"" if record.partial else b"\n")


def tail_start(lines: list[bytes], tail: int | None) -> int:
    """Index of the first record to print for tailLines (records of one long line count once each, as the
    kubelet counts newlines)."""
    if tail is None:
        return 0
    return max(0, len(lines) - tail)


def select(records: Iterable[Record], query: LogQuery) -> Iterator[bytes]:
    """Rendered output for records already on disk (sinceTime/sinceSeconds applied)."""
    line_start = True
    for record in records:
        if query.since_ns is not None and record.epoch_ns < query.since_ns:
            line_start = not record.partial
            continue
        yield render(record, query, line_start)
        line_start = not record.partial
