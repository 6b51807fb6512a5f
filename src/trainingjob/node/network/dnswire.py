"""DNS messages (RFC 1035), the little a cluster DNS server needs (pure): read a query, write an answer.

Answers name the question by a compression pointer; a response that does not fit the client's UDP size (512
bytes, or what its EDNS OPT record announces) is sent truncated (TC) so the resolver retries over TCP.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

TYPE_A = 1
TYPE_CNAME = 5
TYPE_OPT = 41
TYPE_AAAA = 28
CLASS_IN = 1
RCODE_OK = 0
RCODE_FORMERR = 1
RCODE_SERVFAIL = 2
RCODE_NXDOMAIN = 3
RCODE_NOTIMP = 4
HEADER = struct.Struct("!HHHHHH")


class DnsFormatError(ValueError):
    """Not a query this server can read."""


@dataclass(frozen=True)
class Query:
    id: int
    flags: int
    name: str  # lower case, no trailing dot
    qtype: int
    qclass: int
    question: bytes  # the raw question section, echoed in the answer
    udp_size: int


@dataclass(frozen=True)
class Answer:
    rtype: int
    ttl: int
    data: bytes


def _read_name(message: bytes, offset: int) -> tuple[str, int]:
    labels = []
    while True:
        if offset >= len(message):
            raise DnsFormatError("name runs past the message")
        length = message[offset]
        if length == 0:
            return ".".join(labels), offset + 1
        if length & 0xC0:
            raise DnsFormatError("compressed names are not expected in a question")
        labels.append(message[offset + 1 : offset + 1 + length].decode("ascii", errors="replace"))
        offset += 1 + length


def parse_query(message: bytes) -> Query:
    if len(message) < HEADER.size:
        raise DnsFormatError("message shorter than a header")
    ident, flags, questions, _, _, additional = HEADER.unpack_from(message)
    if flags & 0x8000 or questions != 1:
        raise DnsFormatError("not a single-question query")
    name, end = _read_name(message, HEADER.size)
    if end + 4 > len(message):
        raise DnsFormatError("question truncated")
    qtype, qclass = struct.unpack_from("!HH", message, end)
    udp_size = 512
    if additional:
        udp_size = _edns_size(message, end + 4) or 512
    return Query(ident, flags, name.lower().rstrip("."), qtype, qclass, message[HEADER.size : end + 4], udp_size)


def _edns_size(message: bytes, offset: int) -> int | None:
    """The UDP payload size of an OPT record right after the question, if there is one."""
    if offset < len(message) and message[offset] == 0 and offset + 11 <= len(message):
        rtype, size = struct.unpack_from("!HH", message, offset + 1)
        if rtype == TYPE_OPT:
            return max(512, min(size, 4096))
    return None


def encode_name(name: str) -> bytes:
    out = b""
    for label in name.strip(".").split("."):
        raw = label.encode("ascii")
        if not raw or len(raw) > 63:
            raise ValueError(f"invalid DNS label in {name!r}")
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def a_record(address: str, ttl: int) -> Answer:
    return Answer(TYPE_A, ttl, ipaddress.IPv4Address(address).packed)


def cname_record(target: str, ttl: int) -> Answer:
    return Answer(TYPE_CNAME, ttl, encode_name(target))


def response(query: Query, answers: list[Answer], rcode: int = RCODE_OK, max_size: int | None = None) -> bytes:
    """The answer to `query`: authoritative, recursion available, answers named by a pointer to the question."""
    flags = 0x8000 | (query.flags & 0x7900) | 0x0400 | 0x0080 | rcode
    records = b"".join(struct.pack("!HHHIH", 0xC00C, a.rtype, CLASS_IN, a.ttl, len(a.data)) + a.data for a in answers)
    body = query.question + records
    if max_size is not None and HEADER.size + len(body) > max_size:
        return HEADER.pack(query.id, flags | 0x0200, 1, 0, 0, 0) + query.question
    return HEADER.pack(query.id, flags, 1, len(answers), 0, 0) + body


def error_response(message: bytes, rcode: int) -> bytes | None:
    """A bare error answer for a message we could not parse (None if it has no header to answer)."""
    if len(message) < HEADER.size:
        return None
    ident, flags = struct.unpack_from("!HH", message)
    return HEADER.pack(ident, 0x8000 | (flags & 0x7900) | 0x0080 | rcode, 0, 0, 0, 0)
