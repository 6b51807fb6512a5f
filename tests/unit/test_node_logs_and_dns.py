"""The log endpoint's query and CRI log parsing, and the cluster DNS's wire format and records (pure)."""

from __future__ import annotations

import struct

import pytest

from trainingjob.node.logs.logquery import (
    LogQuery,
    LogQueryError,
    fixed_timestamp,
    parse_query,
    parse_record,
    parse_time_ns,
    select,
    tail_start,
)
from trainingjob.node.network import dnswire as w
from trainingjob.node.network.dns import DnsRecords

LINES = [
    b"2026-01-01T00:00:00.000000001Z stdout F one\n",
    b"2026-01-01T00:00:01.5Z stderr P long-\n",
    b"2026-01-01T00:00:01.6Z stderr F line\n",
    b"2026-01-01T00:00:02Z stdout F three\n",
]


def records() -> list:
    return [parse_record(line) for line in LINES]


def test_query_options_like_kubectl_sends_them() -> None:
    query = parse_query({"follow": "true", "tailLines": "10", "timestamps": "1", "limitBytes": "5"})
    assert query == LogQuery(follow=True, timestamps=True, tail_lines=10, limit_bytes=5)
    since = parse_query({"sinceSeconds": "10"}, now_ns=100 * 10**9)
    assert since.since_ns == 90 * 10**9
    assert parse_query({"sinceTime": "2026-01-01T00:00:01Z"}).since_ns == parse_time_ns("2026-01-01T00:00:01Z")
    assert parse_query({"previous": "true"}).previous


@pytest.mark.parametrize(
    "params",
    [
        {"tailLines": "-1"},
        {"tailLines": "x"},
        {"follow": "maybe"},
        {"sinceSeconds": "5", "sinceTime": "2026-01-01T00:00:00Z"},
    ],
)
def test_bad_queries_are_refused(params: dict) -> None:
    with pytest.raises(LogQueryError):
        parse_query(params)


def test_records_render_with_partial_lines_joined() -> None:
    plain = b"".join(select(records(), LogQuery()))
    assert plain == b"one\nlong-line\nthree\n"
    stamped = b"".join(select(records(), LogQuery(timestamps=True))).decode().splitlines()
    assert stamped[0] == "2026-01-01T00:00:00.000000001Z one"
    assert stamped[1] == "2026-01-01T00:00:01.500000000Z long-line"  # one timestamp for the joined line
    since = b"".join(select(records(), LogQuery(since_ns=parse_time_ns("2026-01-01T00:00:01.55Z"))))
    assert since == b"line\nthree\n"
    assert tail_start(LINES, 1) == 3 and tail_start(LINES, 10) == 0 and tail_start(LINES, None) == 0


def test_time_parsing_handles_offsets_and_fractions() -> None:
    assert parse_time_ns("2026-01-01T01:00:00+01:00") == parse_time_ns("2026-01-01T00:00:00Z")
    assert fixed_timestamp(parse_time_ns("2026-01-01T00:00:00.5Z")) == "2026-01-01T00:00:00.500000000Z"
    assert parse_record(b"garbage") is None


def query_bytes(name: str, qtype: int = w.TYPE_A, edns: int | None = None) -> bytes:
    header = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 1 if edns else 0)
    message = header + w.encode_name(name) + struct.pack("!HH", qtype, w.CLASS_IN)
    if edns:
        message += b"\0" + struct.pack("!HHIH", w.TYPE_OPT, edns, 0, 0)
    return message


def answers_of(message: bytes) -> tuple[int, int, list[bytes]]:
    _, flags, _, count, _, _ = struct.unpack_from("!HHHHHH", message)
    _, offset = w._read_name(message, 12)
    offset += 4
    found = []
    for _ in range(count):
        _, _, _, _, length = struct.unpack_from("!HHHIH", message, offset)
        found.append(message[offset + 12 : offset + 12 + length])
        offset += 12 + length
    return flags & 0xF, flags, found


def test_wire_format_round_trip_and_truncation() -> None:
    query = w.parse_query(query_bytes("W0.Workers.NS.svc.cluster.local."))
    assert query.name == "w0.workers.ns.svc.cluster.local" and query.udp_size == 512
    assert w.parse_query(query_bytes("a.b", edns=1232)).udp_size == 1232
    rcode, flags, found = answers_of(w.response(query, [w.a_record("10.1.1.2", 5)]))
    assert rcode == 0 and flags & 0x8000 and flags & 0x0400 and found == [bytes([10, 1, 1, 2])]
    many = [w.a_record(f"10.1.{i // 250}.{i % 250 + 1}", 5) for i in range(60)]
    truncated = w.response(query, many, max_size=512)
    assert struct.unpack_from("!H", truncated, 2)[0] & 0x0200 and len(truncated) <= 512
    with pytest.raises(w.DnsFormatError):
        w.parse_query(b"\x00\x01")


def cluster_records() -> DnsRecords:
    records = DnsRecords()
    records.on_service(
        "ADDED",
        {
            "metadata": {"name": "job-workers", "namespace": "ns"},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True},
        },
    )
    records.on_service("ADDED", {"metadata": {"name": "strict", "namespace": "ns"}, "spec": {"clusterIP": "None"}})
    records.on_service("ADDED", {"metadata": {"name": "db", "namespace": "ns"}, "spec": {"clusterIP": "10.0.0.7"}})
    records.on_service(
        "ADDED",
        {
            "metadata": {"name": "ext", "namespace": "ns"},
            "spec": {"type": "ExternalName", "externalName": "example.org"},
        },
    )
    endpoints = [
        {"addresses": ["10.1.1.2"], "hostname": "job-worker-0", "conditions": {"ready": False}},
        {"addresses": ["10.1.2.2"], "hostname": "job-worker-1", "conditions": {"ready": True}},
    ]
    for service in ("job-workers", "strict"):
        labels = {"kubernetes.io/service-name": service}
        records.on_slice(
            "ADDED",
            {"metadata": {"name": f"{service}-abc", "namespace": "ns", "labels": labels}, "endpoints": endpoints},
        )
    return records


@pytest.mark.parametrize(
    ("name", "rcode", "addresses"),
    [
        ("job-worker-0.job-workers.ns.svc.cluster.local", 0, ["10.1.1.2"]),
        ("job-worker-1.job-workers.ns.svc.cluster.local", 0, ["10.1.2.2"]),
        ("job-workers.ns.svc.cluster.local", 0, ["10.1.1.2", "10.1.2.2"]),
        ("strict.ns.svc.cluster.local", 0, ["10.1.2.2"]),  # not-ready endpoints are not published
        ("job-worker-0.strict.ns.svc.cluster.local", 3, []),
        ("db.ns.svc.cluster.local", 0, ["10.0.0.7"]),
        ("missing.ns.svc.cluster.local", 3, []),
        ("job-worker-9.job-workers.ns.svc.cluster.local", 3, []),
        ("10-1-1-2.ns.pod.cluster.local", 0, ["10.1.1.2"]),
        ("nonsense.cluster.local", 3, []),
    ],
)
def test_cluster_names(name: str, rcode: int, addresses: list[str]) -> None:
    result = cluster_records().lookup(name, w.TYPE_A)
    assert result is not None
    assert result[0] == rcode
    assert [".".join(str(b) for b in a.data) for a in result[1]] == addresses


def test_other_types_names_outside_and_deletions() -> None:
    records = cluster_records()
    assert records.lookup("db.ns.svc.cluster.local", w.TYPE_AAAA) == (0, [])
    assert records.lookup("example.org", w.TYPE_A) is None
    cname = records.lookup("ext.ns.svc.cluster.local", w.TYPE_A)
    assert cname is not None and cname[1][0].rtype == w.TYPE_CNAME
    records.on_service("DELETED", {"metadata": {"name": "db", "namespace": "ns"}})
    assert records.lookup("db.ns.svc.cluster.local", w.TYPE_A) == (w.RCODE_NXDOMAIN, [])
