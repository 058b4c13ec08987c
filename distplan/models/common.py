"""Shared pieces of the domain layer: the evaluator verdict, the kind registry, JSON I/O."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import gzip
import importlib
import importlib.util
import json
import math
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from distplan.errors import InputError
from distplan.kinds import KINDS
from distplan.models.schema import (
    check_known_fields,
    long_integer_text,
    refuse_instance,
    refuse_plan_or_result,
    unknown_field_problem,
)

if TYPE_CHECKING:
    import numpy as np


FORMAT = "distplan/1"


@dataclass
class Check:
    """The independent evaluator's verdict on a plan.

    ``objective`` is recomputed from the instance and the plan (e.g. makespan in seconds);
    ``violations`` lists every broken constraint in words; ``details`` holds per-device
    figures (memory peaks, busy time, ...).
    """

    feasible: bool
    objective: float
    violations: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    #: overrides of the kind's objective name / unit (e.g. "time x cost", "s*USD")
    objective_name: str | None = None
    objective_unit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON (`json_ready`): numpy arrays and numbers in ``details`` (the placement
        evaluator's start times) as lists and Python numbers, non-finite numbers as None."""
        return {"feasible": self.feasible, "objective": json_ready(self.objective), "violations": self.violations, "details": json_ready(self.details)}


class JsonDocument:
    """Mixin of every instance class: ``to_json(path)`` writes ``to_dict()`` (gzip for .gz)."""

    def to_json(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)  # type: ignore[attr-defined]


class Instance(Protocol):
    kind: str
    name: str

    def to_dict(self) -> dict[str, Any]: ...

    def summary(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class KindSpec:
    """A problem kind: how to read its instances and plans and how to judge a plan."""

    kind: str
    from_dict: Callable[[Mapping[str, Any]], Any]
    plan_from_dict: Callable[[Any, Mapping[str, Any]], Any]
    evaluate: Callable[..., Check]
    objective_name: str
    objective_unit: str
    #: human-readable lines about a checked plan (ops and memory per device, ...)
    describe: Callable[[Any, Any, Check], list[str]] | None = None
    #: raises `InfeasibleError` when the instance alone proves that no plan exists, beyond
    #: what reading it checks (placement: all devices together hold less than the ops
    #: need); ``distplan validate`` asks it, as the formulations that make plans do
    check_plan_exists: Callable[[Any], None] | None = None
    #: the fields of a plan document besides `PLAN_ENVELOPE` (`read_plan` rejects others)
    plan_fields: tuple[str, ...] = ()

    def read_plan(self, inst: Any, data: Any) -> Any:
        """The plan in ``data``: a plan document (``distplan solve --out``: `PLAN_ENVELOPE`
        and the kind's `plan_fields`) or a result document (``--result``: its ``plan``).
        A plan document of another kind, or a field the kind's plans do not have, is an
        `InputError` naming it: plan readers take what they know, so a misspelled
        ``"snyc"`` read as absent (every gradient all-reduced) or ``"strat"`` (start
        times recomputed) gave another plan's verdict."""
        if not isinstance(data, Mapping):
            raise InputError("plan", f"expected an object, got {type(data).__name__}")
        refuse_instance(data)
        if data.get("kind") == self.kind and "plan" in data and data["plan"] is None:
            raise InputError("plan", "the result holds no plan (a bound-only or failed run)", "give a result with a plan, or the plan file of `distplan solve --out`")
        if data.get("kind") in (None, self.kind) and isinstance(data.get("plan"), Mapping):  # a result document
            data = data["plan"]
        kind = data.get("kind")
        if kind is not None and kind != f"{self.kind}-plan":
            raise InputError("kind", f"a {kind!r} document, not a {self.kind}-plan", f"give a plan written by `distplan solve --out` for a {self.kind} instance")
        known = PLAN_ENVELOPE + self.plan_fields
        unknown = next((key for key in data if key not in known), None)
        if unknown is not None:
            raise InputError(str(unknown), unknown_field_problem(unknown, known), "correct or remove the field")
        return self.plan_from_dict(inst, data)


#: the fields every plan document has besides its kind's (`KindSpec.read_plan`)
PLAN_ENVELOPE = ("format", "kind", "instance", "source")


_KIND_MODULES = {name: kind.models for name, kind in KINDS.items()}
_KINDS: dict[str, KindSpec] = {}


def register_kind(spec: KindSpec) -> KindSpec:
    _KINDS[spec.kind] = spec
    return spec


def kind_spec(kind: str) -> KindSpec:
    if kind not in _KINDS:
        mod = _KIND_MODULES.get(kind)
        if mod is None or importlib.util.find_spec(mod) is None:
            raise InputError("kind", f"unknown kind {kind!r}", f"use one of: {', '.join(known_kinds())}")
        importlib.import_module(mod)
    return _KINDS[kind]


def known_kinds() -> list[str]:
    return [k for k, m in _KIND_MODULES.items() if importlib.util.find_spec(m) is not None]


def per_instance(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn(instance)`` computed once per instance object (instances are not hashable; the
    object is kept beside its value, so an id reused by another object misses), for the
    derived data a database audit asks of each of its many runs on one instance; at most
    64 held."""
    held: dict[int, tuple[Any, Any]] = {}

    @functools.wraps(fn)
    def cached(instance: Any) -> Any:
        entry = held.get(id(instance))
        if entry is None or entry[0] is not instance:
            if len(held) >= 64:
                held.clear()
            entry = held[id(instance)] = (instance, fn(instance))
        return entry[1]

    return cached


#: JSON values that are immutable: shared, not copied, by `copy_json`
_JSON_ATOMS = (str, int, float, bool, type(None))


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists and immutable scalars), 3x faster than
    ``copy.deepcopy`` on a Llama-3 8B placement (24 against 78 ms); a value of any other
    type (a numpy array in a document built in Python) is copied by ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if kind is list:
        return [copy_json(v) for v in value]
    if kind in _JSON_ATOMS:
        return value
    return copy.deepcopy(value)


def broken_link(path: Path) -> InputError | None:
    """The error for ``path`` when it is a symbolic link to nothing (it reads as missing)."""
    if path.is_symlink() and not path.exists():
        return InputError(str(path), f"is a broken symbolic link (to {str(path.readlink())!r}, which does not exist)", "point it at the file, or name the file itself")
    return None


def missing_file(path: Path) -> InputError:
    """The error for a file that is not there: a broken link is named as one."""
    return broken_link(path) or InputError(str(path), "no such file", "check the path")


class _DuplicateKey(Exception):
    """A JSON object with a key twice (`_unique_keys`)."""

    def __init__(self, key: str, keys: list[str]) -> None:
        super().__init__(key)
        self.key, self.keys = key, keys


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.load``'s object hook: the object, unless a key comes twice (the standard
    reader keeps the last silently: ``"name": "a", "name": "b"`` read as b)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key, list(obj))
            seen.add(key)
    return obj


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Cyclic garbage collection off for work that makes many objects and no cycles, where
    a collection only walks every object made so far, again and again: reading or
    checking a document (a 360,000-layer bandwidth workload: 1.9 of its 3.8 s of checks,
    and 1.2 of 3.2 s of reading), placement's list scheduler (its short-lived tuples: 3-6 %
    of its time). Collection resumes afterwards, as it was (nested uses keep it off); when
    more than `PROMOTE_AFTER` objects made meanwhile are still alive (a document read),
    they are moved to the oldest generation first (`gc.freeze` then `gc.unfreeze`: two
    list splices), as the first young collection would have walked them all at once
    (0.7 s); fewer (the scheduler's, freed as it ends) stay where they are."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_count()[0] > PROMOTE_AFTER:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


#: `gc_paused` moves the objects made while it held when more than this many are alive
PROMOTE_AFTER = 100_000


def read_json(path: str | Path) -> Any:
    """The JSON document in a ``.json`` or gzip-compressed ``.json.gz`` file. Every way a
    file can fail to be one (missing, unreadable, corrupt gzip, binary, not UTF-8, bad
    syntax) is an `InputError` naming the file."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as fh, gc_paused():  # type: ignore[operator]
            return json.load(fh, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        shown = ", ".join(repr(k) for k in exc.keys[:6]) + (", ..." if len(exc.keys) > 6 else "")
        raise InputError(str(p), f"an object gives the key {exc.key!r} twice (the object with keys {shown})", "give each key once") from None
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"not valid JSON: {exc}", "fix the syntax at that line/column") from None
    except RecursionError:  # (review rev16: 100,000 nested arrays gave a traceback)
        raise InputError(str(p), "not readable JSON: nested too deeply", "write a distplan/1 document, whose values nest a few levels") from None
    except FileNotFoundError:
        raise missing_file(p) from None
    except IsADirectoryError:
        raise InputError(str(p), "is a directory, not a JSON file", "name a .json or .json.gz file") from None
    except PermissionError:
        raise InputError(str(p), "cannot be read (permission denied)", "check the file's permissions") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(str(p), f"not a valid gzip file ({exc})", "re-create or re-download the .json.gz file") from None
    except UnicodeDecodeError:
        what = "a binary file" if p.suffix != ".gz" else "compressed data that is not UTF-8 text"
        raise InputError(str(p), f"{what}, not JSON text", "name a distplan/1 .json or .json.gz file") from None
    except ValueError as exc:  # (after its subclasses above) an integer literal longer than Python converts (4300 digits)
        raise InputError(str(p), f"not readable JSON: {exc}", "write numbers in range") from None
    except OSError as exc:
        raise InputError(str(p), f"cannot be read ({exc.strerror or exc})", "check the file") from None


def json_default(obj: Any) -> Any:
    """JSON encoding of numpy values (arrays as lists) and enums (their value)."""
    import enum

    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def json_ready(data: Any) -> Any:
    """``data`` as strict JSON (RFC 8259) takes it: every numpy array and number, enum and
    path inside its dicts, lists and tuples as `json_default` encodes them (arrays by
    ``tolist``, at C speed), and every infinite or NaN number as None (an infeasible plan's
    objective, a solver call's -inf bound); containers with nothing to replace are returned
    as they are."""
    import numpy as np

    if isinstance(data, Mapping):
        out = {k: json_ready(v) for k, v in data.items()}
        return data if isinstance(data, dict) and all(out[k] is data[k] for k in data) else out
    if isinstance(data, list | tuple):
        items = [json_ready(v) for v in data]
        return data if all(a is b for a, b in zip(items, data)) else items
    if isinstance(data, np.ndarray):
        return data.tolist() if data.dtype.kind not in "fc" or np.isfinite(data).all() else json_ready(data.tolist())
    if isinstance(data, float | np.floating):
        v = float(data)
        return (data if type(data) is float else v) if math.isfinite(v) else None
    if data is None or isinstance(data, str | bool | int) and not hasattr(data, "dtype"):
        return data
    try:
        return json_default(data)
    except TypeError:
        return data


def canonical_json(data: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces): the input of every content hash."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=json_default)


def instance_digest(document: Mapping[str, Any]) -> str:
    """Content hash of an instance document (16 hex digits of SHA-256 over its canonical
    JSON): everything but its name and meta, so a renamed copy has the same digest and any
    changed number another."""
    import hashlib

    content = {k: v for k, v in document.items() if k not in ("name", "meta")}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()[:16]


def digest_of(instance: Any) -> str:
    """`instance_digest` of an instance's document (`to_dict`), made with the cyclic
    garbage collector paused (`gc_paused`: a 360,000-layer workload's document took 2.2 s
    to make with it running, 0.3 s without)."""
    with gc_paused():
        return instance_digest(instance.to_dict())


def strict_json(data: Any, default: Callable[[Any], Any] = json_default, indent: int | None = None) -> str:
    """``data`` as one strict JSON document: non-finite numbers as null (RFC 8259 has no
    Infinity or NaN). Encoded at once by the C encoder when every number is finite (a
    524,288-operation plan: 0.11 s, where walking it first took 0.09 s more and streaming
    it 0.26 s, review rev25); only a document holding a non-finite number is walked."""
    try:
        return json.dumps(data, default=default, allow_nan=False, indent=indent)
    except ValueError:  # an Infinity or NaN somewhere
        return json.dumps(json_ready(data), default=default, allow_nan=False, indent=indent)


def print_json(data: Any, stream: IO[str], default: Callable[[Any], Any] = json_default, indent: int | None = None) -> None:
    """One strict JSON document on ``stream`` (``--json``): non-finite numbers as null."""
    stream.write(strict_json(data, default, indent))


def write_json(data: Any, path: str | Path) -> None:
    """``data`` as one strict JSON document in ``path`` (gzip-compressed for ``.gz``):
    non-finite numbers as null, as `print_json` writes them, so a ``--result`` file and
    the ``--json`` document of one solve are the same JSON (a solver call's -inf bound
    was a bare ``-Infinity``, which strict readers refuse)."""
    p = Path(path)
    text = strict_json(data, indent=1 if p.suffix != ".gz" else None) + "\n"
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "wt") as fh:  # type: ignore[operator]
            fh.write(text)
    except OSError as exc:
        if exc.filename is None:  # a failed write names no file (ENOSPC on /dev/full): this one
            raise OSError(exc.errno, exc.strerror, str(p)) from exc
        raise


def instance_from_dict(data: Mapping[str, Any]) -> Any:
    """Build an instance of the kind named in the document (validating it). A field its
    kind's schema (``distplan/schema/``) does not list is an `InputError` naming its path
    and the closest known field."""
    if not isinstance(data, Mapping):
        raise InputError("", "an instance must be a JSON object", 'start with {"format": "distplan/1", "kind": ...}')
    refuse_plan_or_result(data)
    fmt = data.get("format")
    if fmt != FORMAT:
        raise InputError("format", f"expected {FORMAT!r}, got {fmt!r}", f'add "format": "{FORMAT}"')
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise InputError("kind", "missing", f"add \"kind\": one of {', '.join(known_kinds())}")
    spec = kind_spec(kind)

    # the loaders skip fields they do not read: a misspelled one (every op's "memroy") read
    # as absent, 0 bytes (review rev16 D4); the schema lists every field of every object
    with gc_paused():
        check_known_fields(data)
        return spec.from_dict(data)


# -- small validation helpers shared by every kind -----------------------------------------

def need(data: Mapping[str, Any], key: str, path: str) -> Any:
    if not isinstance(data, Mapping):
        raise InputError(path, "expected an object")
    if key not in data:
        raise InputError(f"{path}.{key}" if path else key, "missing", "add this field")
    return data[key]


#: the largest op time (seconds: 31 years) and amount of bytes (an exabyte) an instance may
#: give: beyond them sums and solver units overflow (HiGHS takes 1e20 for infinity, and
#: placement times go to the MILP in microseconds), which became internal errors
MAX_SECONDS = 1e9
MAX_BYTES = 1e18
#: the least bandwidth or throughput an instance may give (bytes/second): below it moving
#: `MAX_BYTES` takes longer than a float holds (a bandwidth of 1e-300 made transfer times
#: infinite, which read as forbidden)
MIN_RATE = 1.0
#: the greatest bandwidth an instance may give (bytes/second): an exabyte per second
MAX_RATE = 1e18
#: the greatest price an instance may give (USD per byte/second: 1e9 USD per GB/s, 1e8
#: times LIBRA's link prices): at 1e200 a network's cost overflowed (objective 3.2e212,
#: "overflow encountered in dot"), at 1e300 it became NaN and the run ended with no plan
MAX_PRICE = 1.0


def number(
    value: Any, path: str, *, positive: bool = False, nonneg: bool = True, integer: bool = False, at_least: float = -math.inf, at_most: float = math.inf, unit: str = ""
) -> float:
    """A finite number (>= 0 unless nonneg=False; > 0 if positive; at least ``at_least``
    and at most ``at_most``, named in ``unit``). The JSON Schema files in
    ``distplan/schema/`` state the same ranges (`tests/test_schema.py` holds them equal)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(path, f"expected a number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond the float range (JSON allows 10**400)
        raise InputError(path, f"{long_integer_text(int(value))} is too large (beyond 1.8e308)", "give a finite value in range") from None
    if math.isnan(v) or math.isinf(v):
        raise InputError(path, f"{value!r} is not a finite number", "give a finite value")
    if (positive and v <= 0) or (nonneg and v < 0) or (integer and v != int(v)) or v < at_least or v > at_most:
        # an integer of more digits than a double holds is named by its magnitude (10**300
        # had its 301 digits printed); the text is made only for an error (a 360,000-layer
        # workload reads 2 million numbers)
        shown = f"{v:g}" if isinstance(value, int) and abs(value) >= 10**16 else repr(value)
        if positive and v <= 0:
            raise InputError(path, f"{shown} must be > 0")
        if nonneg and v < 0:
            raise InputError(path, f"{shown} is negative", "give a value >= 0")
        if integer and v != int(v):
            raise InputError(path, f"{shown} must be an integer")
        if v < at_least:
            raise InputError(path, f"{shown} {unit} is below the least value taken, {at_least:g} {unit}".replace("  ", " "), "give a value in range")
        raise InputError(path, f"{shown} {unit} is beyond the largest value taken, {at_most:g} {unit}".replace("  ", " "), "give a value in range")
    return v


def plain_numbers(values: list[Any], at_most: float) -> np.ndarray | None:
    """``values`` as a float array when every one is a plain int or float (not a bool) in
    [0, ``at_most``]: what `number` accepts with ``nonneg`` and ``at_most``, checked at
    once for a large list (a 200,000-op placement's 800,000 op numbers: 1.6 s one by one).
    None when any is not: the caller then checks them one by one with `number`, which
    names the first bad one by its path."""
    import numpy as np

    if not {type(v) for v in values} <= {int, float}:
        return None
    try:
        arr = np.array(values, dtype=float)
    except OverflowError:  # an integer beyond the float range
        return None
    if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0 and arr.max() <= at_most):
        return None
    return arr


def name_list(items: Any, path: str, what: str) -> list[str]:
    """Names of a list of objects, each with a unique non-empty "name"."""
    if not isinstance(items, list):
        raise InputError(path, f"expected a list of {what}")
    if {type(item) for item in items} <= {dict}:  # (plain objects: the names checked at once)
        plain = [item.get("name") for item in items]
        if {type(nm) for nm in plain} <= {str} and len(unique := set(plain)) == len(plain) and "" not in unique:
            return plain
    # (else one by one, which names the first missing, empty or repeated name)
    names: list[str] = []
    seen: dict[str, int] = {}
    for k, item in enumerate(items):
        nm = need(item, "name", f"{path}[{k}]")
        if not isinstance(nm, str) or not nm:
            raise InputError(f"{path}[{k}].name", f"expected a non-empty string, got {nm!r}")
        if nm in seen:
            raise InputError(f"{path}[{k}].name", f"duplicate name {nm!r} (also {path}[{seen[nm]}])", "give every entry a unique name")
        seen[nm] = k
        names.append(nm)
    return names


def import_object(spec: str) -> Any:
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr)
