"""`$(VAR)` expansion in env values, command and args, exactly as Kubernetes defines it.

The rules (k8s.io/kubernetes third_party/forked/golang/expansion): `$(NAME)` becomes the value of NAME when it is
defined and stays verbatim when it is not; `$$` is an escaped `$`; an unterminated `$(` and a `$` before any other
character stay as they are. Only variables defined earlier in the container's env (and the service variables)
can be referenced; the image's ENV cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Lookup = Callable[[str], str]


def mapping_for(*contexts: Mapping[str, str]) -> Lookup:
    """The first context defining a name wins; an undefined name expands to itself, `$(NAME)`."""

    def lookup(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"$({name})"

    return lookup


def _read_reference(text: str) -> tuple[str, bool, int]:
    """What follows a `$`: (text to emit, is it a variable name, characters consumed after the `$`)."""
    first = text[0]
    if first == "$":
        return "$", False, 1
    if first == "(":
        closing = text.find(")", 1)
        if closing != -1:
            return text[1:closing], True, closing + 1
        return "$(", False, 1
    return "$" + first, False, 1


def expand(text: str, lookup: Lookup) -> str:
    """`text` with every `$(NAME)` replaced through `lookup` and `$$` unescaped."""
    pieces: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            pieces.append(text[checkpoint:cursor])
            read, is_variable, advance = _read_reference(text[cursor + 1 :])
            pieces.append(lookup(read) if is_variable else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(pieces) + text[checkpoint:]
