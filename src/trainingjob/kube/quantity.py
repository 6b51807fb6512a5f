"""Kubernetes resource quantities ("500m", "2", "4Gi", "1e3") as exact decimals.

Why exact: the downward API rounds `value / divisor` up, and CPU thread limits round up too; floats would turn
"0.1" cores into 0.10000000000000001 and round a whole core up to two.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_PATTERN = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's value in base units (cores, bytes)."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f"quantities must match the regular expression of resource.Quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number)
        if exponent:
            return amount * (Decimal(10) ** int(exponent[1:]))
    except InvalidOperation as error:
        raise QuantityError(f"invalid quantity {value!r}") from error
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    return amount * _DECIMAL[suffix or ""]


def ceil_ratio(value: Decimal, divisor: Decimal) -> int:
    """ceil(value / divisor), the rounding the downward API uses for resourceFieldRef."""
    if divisor <= 0:
        raise QuantityError("a divisor must be positive")
    return math.ceil(value / divisor)


def cpu_threads(cpu: str | None, machine_cpus: int) -> int | None:
    """Threads for a CPU limit: rounded up, at least 1, at most the machine's CPUs; None without a limit."""
    if not cpu:
        return None
    cores = parse_quantity(cpu)
    return max(1, min(machine_cpus, math.ceil(cores)))
