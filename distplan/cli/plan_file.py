"""Reading a plan file for a command that is given its instance (`evaluate`, `plot`,
`emit --instance`): a plan made for another instance is read all the same (a user may check
a plan on an edited copy), with a warning on stderr that names both."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from distplan.models.common import kind_spec, read_json


def warn_other_instance(inst: Any, doc: Any, path: str) -> None:
    """A stderr warning when the plan or result document ``doc`` (read from ``path``) names
    an instance other than ``inst``."""
    named = doc.get("instance") if isinstance(doc, Mapping) else None
    if isinstance(named, str) and named != inst.name:
        print(f"warning: {path} is a plan for instance {named!r}; it is read against instance {inst.name!r}", file=sys.stderr)


def read_plan_file(inst: Any, path: str) -> Any:
    """The plan in ``path`` (a plan or result document) for ``inst``, read by its kind."""
    doc = read_json(path)
    warn_other_instance(inst, doc, path)
    return kind_spec(inst.kind).read_plan(inst, doc)
