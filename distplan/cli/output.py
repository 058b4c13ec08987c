"""How commands that write a file report it: one line, ``wrote FILE: key value, ...``, on
stderr (`say_wrote`): the file is the command's output, the line is a status line, and
stdout stays for data (results, tables, emitted text)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        items = [_value(v) for v in value]
        if len(set(items)) == 1 and len(items) > 1:
            return f"{len(items)} x {items[0]}"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} {_value(v)}" for k, v in value.items()) + "}"
    return "-" if value is None else str(value)


def wrote_line(path: str, summary: Mapping[str, Any]) -> str:
    """``wrote gpt3.json: name gpt3, kind sharding, ops 965, ...`` for an instance summary."""
    return f"wrote {path}: " + ", ".join(f"{key} {_value(value)}" for key, value in summary.items())


def say_wrote(line: str) -> None:
    """Print a command's ``wrote FILE ...`` status line (on stderr, as every command does)."""
    print(line, file=sys.stderr)
