"""Bundled instances, generators and importers.

`load_instance(path_or_name)` reads a distplan/1 JSON file (optionally gzip-compressed) or a
bundled instance by name; `bundled()` lists the bundled ones. Each bundled file lives in
``distplan/instances/data/`` and is listed in ``data/index.json`` with its kind, size and a
one-line description. Each kind keeps its own index file ``data/index-<kind>.json``; all
``data/index*.json`` files are merged.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from distplan.errors import InputError
from distplan.models.common import broken_link, instance_from_dict, read_json

__all__ = ["bundled", "bundled_path", "gpt2_xl", "gpt3_175b", "load_document", "load_instance", "transformer"]

DATA = resources.files("distplan.instances") / "data"


@lru_cache(maxsize=1)
def bundled() -> dict[str, dict[str, Any]]:
    """Bundled instances by name: {"kind", "file", "description", "size"}."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in sorted(DATA.iterdir(), key=lambda e: e.name):
        if entry.name.startswith("index") and entry.name.endswith(".json"):
            merged.update(json.loads(entry.read_text()))
    return merged


def bundled_path(name: str) -> Path:
    entry = bundled().get(name)
    if entry is None:
        raise InputError("instance", f"no file and no bundled instance named {name!r}", f"use a file path or one of: {', '.join(sorted(bundled()))}")
    return Path(str(DATA / entry["file"]))


def _instance_file(path_or_name: str | Path) -> Path:
    """The file of a path or a bundled name. A directory and a broken symbolic link are
    named as such; another existing path that is not a regular file (a pipe, as bash's
    ``<(gunzip -c x.json.gz)`` gives) is read as a file. An empty name is named as such
    (``Path("")`` is the current directory: it read as "is a directory")."""
    if not str(path_or_name).strip():
        raise InputError("instance", "the instance's name or path is empty", "name a .json or .json.gz file, or a bundled instance listed by `distplan list instances`")
    p = Path(path_or_name)
    if p.is_dir():
        raise InputError(str(p), "is a directory, not an instance file", "name a .json or .json.gz file, or a bundled instance listed by `distplan list instances`")
    if p.exists():
        return p
    link = broken_link(p)
    if link is not None:
        raise link
    return bundled_path(str(path_or_name))


def load_instance(path_or_name: str | Path) -> Any:
    """An instance from a JSON file (``.json`` or ``.json.gz``) or a bundled name."""
    p = _instance_file(path_or_name)
    return instance_from_dict(read_json(p))


def load_document(path_or_name: str | Path) -> Any:
    """The raw JSON document of a file or bundled instance (no validation)."""
    p = _instance_file(path_or_name)
    return read_json(p)


# the sharding builders, as `distplan.instances.transformer(...)` (bound after the submodule)
from distplan.instances.transformer import gpt2_xl, gpt3_175b, transformer  # noqa: E402
