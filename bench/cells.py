"""The cells of the benchmark report's tables: a figure with its unit, a ratio, a target's verdict."""

from __future__ import annotations


def fmt(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{value:g}{unit}"


def ratio(ours: float | None, other: float | None) -> float | None:
    return round(ours / other, 2) if ours is not None and other else None


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("met" if ok else "**missed**")
