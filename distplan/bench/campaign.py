"""Campaign files (TOML) and their expansion into runs.

A campaign names instances, formulations, backends and the run options::

    name = "placement-small"
    time_limit = 20.0          # seconds per run (the solver's limit)
    grace = 5.0                # seconds after the limit before the run's process is killed
    threads = 1
    mip_gap = 0.0              # optional relative gap handed to the solvers
    seeds = [0]
    repetitions = 1
    memory_limit = "4 GiB"     # optional address-space limit of each run's process
    formulations = ["placement_milp", {name = "baechi_sct", params = {theta = 0.1}}]
    backends = ["highs", "pulp-cbc", "scip"]
    instances = [
      "placement-small-*",                                   # bundled names (glob)
      "my-graph.json",                                        # a file, relative to this file
      {generator = "random_layered_dag", n_ops = [20, 40], seed = [0, 1, 2], n_devices = 2},
    ]

A generator entry names a function of `distplan.instances.generators` (or any
``module:function`` returning a distplan/1 document); list values form a grid (Cartesian
product). Further keys: ``skip_unavailable`` (default true: backends not installed here
are skipped with a note), ``algorithms_once`` (default true: formulations that are
algorithms, which use no solver, run once per instance with their default backend
instead of once per backend), ``fold``, and ``solver_options`` (a table per backend name
of raw options). A formulation table may also override ``time_limit``, ``grace`` and
``memory_limit`` for its runs and carry a ``label``.

Every entry is listed once: a formulation entry giving the same runs as an earlier one,
a repeated seed or backend, and an instance named twice (by content, also through two
patterns or two grid points) are named errors at the later entry (review D5: they ran
twice under one key, or were dropped silently).

Sizes are bounded: at most `MAX_REPETITIONS` repetitions, `MAX_GRID` grid points per
generator entry and `MAX_RUNS` runs in all, checked before any run is built (a campaign of
``repetitions = 1000000000`` was killed for memory by ``bench run --dry-run``, review rev16
D6).

Every run gets a stable key: a hash of the instance's content hash (the document without
``name`` and ``meta``), the formulation and its parameters, the backend, the options that
influence the result (all but ``grace``), the seed and the repetition number. Re-running
a campaign against the same database skips every key already stored.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import itertools
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distplan.errors import InputError
from distplan.formulations.registry import Formulation, check_fold, get_formulation
from distplan.instances import bundled, load_document
from distplan.models.common import import_object, instance_digest, instance_from_dict, kind_spec
from distplan.solvers.base import Backend, BackendError, get_backend

from .store import canonical_json

#: the most repetitions of a run (each is a separate run with its own key)
MAX_REPETITIONS = 10_000
#: the most runs a campaign expands to (each is a spec in memory and a process when run)
MAX_RUNS = 100_000
#: the most grid points (instances) of one generator entry
MAX_GRID = 10_000

TOP_LEVEL_KEYS = (
    "name",
    "description",
    "time_limit",
    "grace",
    "threads",
    "mip_gap",
    "seeds",
    "repetitions",
    "memory_limit",
    "fold",
    "skip_unavailable",
    "algorithms_once",
    "solver_options",
    "formulations",
    "backends",
    "instances",
)
#: options a formulation entry may override for its own runs
ENTRY_OPTION_KEYS = ("time_limit", "grace", "memory_limit")
#: hidden options honoured by the run process, for tests of the runner only
TEST_OPTION_PREFIX = "_test_"
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class FormulationEntry:
    """One formulation of a campaign with its parameters and per-entry option overrides."""

    name: str
    params: dict[str, Any]
    label: str
    options: dict[str, Any]
    kind: str | None = None


@dataclass(frozen=True)
class InstanceEntry:
    """A resolved instance: its document, its content hash and where it came from."""

    name: str
    kind: str
    instance_hash: str
    document: dict[str, Any]
    source: str


@dataclass
class Campaign:
    """A parsed campaign; `runs()` expands it."""

    name: str
    source: str
    text: str
    options: dict[str, Any]
    seeds: list[int]
    repetitions: int
    formulations: list[FormulationEntry]
    backends: list[str]
    instances: list[InstanceEntry]
    skip_unavailable: bool = True
    algorithms_once: bool = True
    solver_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def runs(self) -> list[dict[str, Any]]:
        """Every run of the campaign as a self-contained spec (JSON-serializable dict).

        Order: instance, formulation, backend, seed, repetition. Combinations a backend
        cannot take (a MILP on an LP-only backend, a backend not installed here) are left
        out and listed in ``notes``.
        """
        self.notes = [n for n in self.notes if not n.startswith("skipped ")]
        backends: list[Backend] = []
        for k, b in enumerate(self.backends):
            try:
                be = get_backend(b)
            except BackendError as exc:
                raise InputError(f"backends[{k}]", str(exc), "name a backend listed by `distplan list backends`") from None
            if not be.available():
                if not self.skip_unavailable:
                    # the backend's own account of what is missing (it said pip install
                    # 'distplan[None]' for backends without an extra)
                    raise InputError(f"backends[{k}]", f"backend {b!r} is not available here: {be.missing()}", "install what it names, or set skip_unavailable = true")
                self.notes.append(f"skipped backend {b}: not installed here")
                continue
            backends.append(be)
        versions = {be.name: be.version() for be in backends}
        used_entries: set[int] = set()
        cells: list[tuple[InstanceEntry, FormulationEntry, Formulation, list[Backend]]] = []
        for inst in self.instances:
            for k, entry in enumerate(self.formulations):
                form = _formulation_for(entry, inst.kind, k)
                if form is None:
                    continue
                used_entries.add(k)
                cells.append((inst, entry, form, self._backends_for(form, backends)))
        unused = [k for k in range(len(self.formulations)) if k not in used_entries]
        if unused and self.instances:
            k = unused[0]  # named by its index, as every other entry error is (review D9)
            kinds = sorted({i.kind for i in self.instances})
            also = "".join(f"; nor does formulations[{j}], {self.formulations[j].label}" for j in unused[1:])
            raise InputError(
                f"formulations[{k}]",
                f"{self.formulations[k].label} exists for none of the campaign's instance kinds ({', '.join(kinds)}){also}",
                "list formulations with `distplan list formulations`",
            )
        if self.options.get("fold"):
            self._check_fold(cells)
        total = sum(len(chosen) for *_, chosen in cells) * len(self.seeds) * self.repetitions
        if total > MAX_RUNS:  # counted before any spec is built
            raise InputError(
                "campaign",
                f"expands to {total:,} runs ({len(self.instances)} instance(s), {len(self.seeds)} seed(s), {self.repetitions} repetition(s)), more than the largest taken, {MAX_RUNS:,}",
                "use fewer repetitions, seeds, instances, formulations or backends, or split the campaign",
            )
        specs: list[dict[str, Any]] = []
        for inst, entry, form, chosen in cells:
            for be in chosen:
                for seed in self.seeds:
                    for rep in range(self.repetitions):
                        specs.append(self._spec(inst, entry, form, be.name, versions.get(be.name) or get_backend(be.name).version(), seed, rep))
        return specs

    def _check_fold(self, cells: list[tuple[InstanceEntry, FormulationEntry, Formulation, list[Backend]]]) -> None:
        """``fold = true`` needs every formulation to run folded on its instances' kind: the
        registry's own check (`check_fold`, which ``distplan solve --fold`` asks first: a
        folding for the kind, and one declared exact for a bound-only formulation), made
        once here instead of failing every such run with input_error."""
        for inst, _, form, _ in cells:
            try:
                check_fold(form, inst.kind)
            except InputError as exc:
                raise InputError("fold", f"{exc.problem} ({inst.name}, {inst.source})", "set fold = false, or leave those instances or formulations out") from None

    def _backends_for(self, form: Formulation, backends: list[Backend]) -> list[Backend]:
        if form.program == "algorithm" and self.algorithms_once:
            return [get_backend(form.default_backend)]
        out = []
        for be in backends:
            caps = be.capabilities
            ok = {"milp": caps.milp, "convex": caps.convex, "lp": caps.lp}.get(form.program, True)
            if ok:
                out.append(be)
            else:
                note = f"skipped {form.name} on {be.name}: a {form.program} program and the backend cannot take it"
                if note not in self.notes:
                    self.notes.append(note)
        return out

    def _spec(self, inst: InstanceEntry, entry: FormulationEntry, form: Formulation, backend: str, version: str, seed: int, rep: int) -> dict[str, Any]:
        options = {**self.options, **entry.options}
        raw = self.solver_options.get(backend)
        if raw:
            options["solver_options"] = dict(raw)
        options = {k: v for k, v in options.items() if v is not None}
        key = run_key(inst.instance_hash, form.name, entry.params, backend, options, seed, rep)
        return {
            "run_key": key,
            "campaign": self.name,
            "instance": inst.name,
            "instance_hash": inst.instance_hash,
            "kind": inst.kind,
            "formulation": form.name,
            "label": entry.label,
            "program": form.program,
            "exact": bool(form.exact),
            "bound_only": bool(form.bound_only),
            "params": dict(entry.params),
            "backend": backend,
            "backend_version": version,
            "options": options,
            "seed": seed,
            "repetition": rep,
            "document": inst.document,
        }


def run_key(instance_hash: str, formulation: str, params: Mapping[str, Any], backend: str, options: Mapping[str, Any], seed: int, repetition: int) -> str:
    """The stable identity of a run (24 hex digits); ``grace`` does not enter it."""
    keyed = {k: v for k, v in options.items() if k != "grace"}
    payload = canonical_json([instance_hash, formulation, dict(params), backend, keyed, seed, repetition])
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def instance_hash(document: Mapping[str, Any]) -> str:
    """Content hash of an instance document (16 hex digits): everything but name and meta
    (`models.common.instance_digest`, which result files record too)."""
    return instance_digest(document)


def _formulation_for(entry: FormulationEntry, kind: str, k: int) -> Formulation | None:
    if entry.kind is not None and entry.kind != kind:
        return None
    try:
        form = get_formulation(kind, entry.name)
    except InputError:
        if entry.kind is not None:
            raise InputError(f"formulations[{k}].name", f"unknown {kind} formulation {entry.name!r}", "list them with `distplan list formulations`") from None
        return None
    try:
        form.check_params(entry.params)  # names, types, ranges and choices, as solve checks them
    except InputError as exc:
        raise InputError(f"formulations[{k}].{exc.path}", exc.problem, exc.fix) from None
    return form


# -- parsing -----------------------------------------------------------------------------------


def load_campaign(path: str | Path) -> Campaign:
    """Read and validate a campaign file; instances are resolved (generated, hashed) here."""
    p = Path(path)
    if p.is_dir():
        raise InputError(str(p), "a folder, not a campaign file", "give the path of a .toml campaign")
    if not p.is_file():
        raise InputError(str(p), "no such campaign file", "give the path of a .toml campaign")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(str(p), f"not a campaign file: not UTF-8 text ({exc.reason} at byte {exc.start})", "give the path of a .toml campaign") from None
    except OSError as exc:
        raise InputError(str(p), f"cannot be read: {exc.strerror}", "check the path and its permissions") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(p), f"not valid TOML: {exc}", "fix the syntax at that line") from None
    return parse_campaign(data, base=p.parent, source=str(p), text=text, default_name=p.stem)


def parse_campaign(data: Mapping[str, Any], base: Path | None = None, source: str = "", text: str = "", default_name: str = "campaign") -> Campaign:
    """A `Campaign` from the parsed TOML table (paths relative to ``base``)."""
    base = base or Path.cwd()
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise InputError(key, "unknown campaign key", f"use one of: {', '.join(TOP_LEVEL_KEYS)}")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise InputError("name", f"expected a non-empty string, got {name!r}")
    time_limit = _positive(data.get("time_limit", 60.0), "time_limit")
    options: dict[str, Any] = {
        "time_limit": time_limit,
        "grace": _nonneg(data.get("grace", 5.0), "grace"),
        "threads": _int(data.get("threads", 1), "threads", minimum=1),
        "mip_gap": None if data.get("mip_gap") is None else _relative_gap(data["mip_gap"], "mip_gap"),
        "fold": _bool(data.get("fold", False), "fold"),
        "memory_limit": None if data.get("memory_limit") is None else parse_bytes(data["memory_limit"], "memory_limit"),
    }
    seeds_raw = data.get("seeds", [0])
    if not isinstance(seeds_raw, list) or not seeds_raw:
        raise InputError("seeds", f"expected a non-empty list of integers, got {seeds_raw!r}", "write e.g. seeds = [0, 1, 2]")
    seeds = [_int(s, f"seeds[{k}]", minimum=0) for k, s in enumerate(seeds_raw)]
    _no_duplicates(seeds, "seeds")
    repetitions = _int(data.get("repetitions", 1), "repetitions", minimum=1, maximum=MAX_REPETITIONS)
    formulations = _formulations(data.get("formulations"))
    backends_raw = data.get("backends", ["highs"])
    if not isinstance(backends_raw, list) or not backends_raw or not all(isinstance(b, str) for b in backends_raw):
        raise InputError("backends", f"expected a non-empty list of backend names, got {backends_raw!r}", 'write e.g. backends = ["highs", "pulp-cbc"]')
    _no_duplicates(backends_raw, "backends")
    solver_options = data.get("solver_options", {}) or {}
    if not isinstance(solver_options, Mapping) or not all(isinstance(v, Mapping) for v in solver_options.values()):
        raise InputError("solver_options", "expected a table of tables keyed by backend name", 'write e.g. [solver_options.highs] then presolve = "off"')
    for backend_name, table in solver_options.items():
        _check_solver_options(str(backend_name), table)
    instances = resolve_instances(data.get("instances"), base)
    return Campaign(
        name=name,
        source=source,
        text=text,
        options=options,
        seeds=seeds,
        repetitions=repetitions,
        formulations=formulations,
        backends=list(backends_raw),
        instances=instances,
        skip_unavailable=_bool(data.get("skip_unavailable", True), "skip_unavailable"),
        algorithms_once=_bool(data.get("algorithms_once", True), "algorithms_once"),
        solver_options={str(k): dict(v) for k, v in solver_options.items()},
    )


def _formulations(raw: Any) -> list[FormulationEntry]:
    if not isinstance(raw, list) or not raw:
        raise InputError("formulations", "expected a non-empty list", 'write e.g. formulations = ["placement_milp", "baechi_etf"]')
    out: list[FormulationEntry] = []
    for k, item in enumerate(raw):
        path = f"formulations[{k}]"
        if isinstance(item, str):
            out.append(FormulationEntry(name=item, params={}, label=item, options={}))
            continue
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise InputError(path, f"expected a formulation name or a table with a name, got {item!r}", 'write e.g. {name = "baechi_sct", params = {theta = 0.1}}')
        params = item.get("params", {}) or {}
        if not isinstance(params, Mapping):
            raise InputError(f"{path}.params", "expected a table of parameters")
        opts: dict[str, Any] = {}
        for key, value in item.items():
            if key in ("name", "params", "label", "kind"):
                continue
            if key == "time_limit":
                opts[key] = _positive(value, f"{path}.time_limit")
            elif key == "grace":
                opts[key] = _nonneg(value, f"{path}.grace")
            elif key == "memory_limit":
                opts[key] = parse_bytes(value, f"{path}.memory_limit")
            elif key.startswith(TEST_OPTION_PREFIX):
                opts[key] = value
            else:
                raise InputError(f"{path}.{key}", "unknown formulation option", f"use name, params, label, kind or one of {', '.join(ENTRY_OPTION_KEYS)}")
        # the default label tells entries apart by their parameters and their own options
        named = {**params, **opts}
        label = item.get("label") or (item["name"] if not named else f"{item['name']}[{','.join(f'{a}={b}' for a, b in sorted(named.items()))}]")
        kind = item.get("kind")
        out.append(FormulationEntry(name=item["name"], params=dict(params), label=str(label), options=opts, kind=kind))
    _no_duplicate_formulations(out)
    return out


def _no_duplicate_formulations(entries: list[FormulationEntry]) -> None:
    """No two entries give the same runs: the same formulation with the same parameters and
    options on overlapping kinds (review D5: ``["baechi_etf", "baechi_etf"]`` planned every
    run twice under one key, and ``bench run`` then reported the second copy as "stored
    meanwhile by another driver")."""
    for k, entry in enumerate(entries):
        for j in range(k):
            other = entries[j]
            same = other.name == entry.name and canonical_json(other.params) == canonical_json(entry.params) and canonical_json(other.options) == canonical_json(entry.options)
            if same and (other.kind is None or entry.kind is None or other.kind == entry.kind):
                raise InputError(
                    f"formulations[{k}]",
                    f"duplicate {entry.label!r}: formulations[{j}] already gives the same runs (same formulation, parameters and options)",
                    "list each formulation once; to run it again, use seeds or repetitions",
                )


def _no_duplicates(values: list[Any], path: str) -> None:
    """A named error at the first list item equal to an earlier one (``seeds[1]: duplicate
    0``): a repeated seed or backend planned each of its runs twice under one key."""
    seen: dict[Any, int] = {}
    for k, value in enumerate(values):
        if value in seen:
            raise InputError(f"{path}[{k}]", f"duplicate {value!r} ({path}[{seen[value]}] names it already)", f"list each of the {path} once")
        seen[value] = k


def resolve_instances(raw: Any, base: Path) -> list[InstanceEntry]:
    """Instance entries -> documents with content hashes.

    The same instance (by content hash) named twice is a named error at the entry that
    names it again (review D5: it was dropped silently, so a campaign ran fewer instances
    than its author listed), also when two patterns match it or two grid points of a
    generator give it."""
    if not isinstance(raw, list) or not raw:
        raise InputError("instances", "expected a non-empty list", 'write e.g. instances = ["placement-small-*"]')
    found: list[tuple[str, dict[str, Any], str, str]] = []  # (name, document, source, entry path)
    for k, item in enumerate(raw):
        path = f"instances[{k}]"
        if isinstance(item, str):
            found.extend((*got, path) for got in _from_string(item, base, path))
        elif isinstance(item, Mapping):
            if "generator" in item:
                found.extend((*got, path) for got in _from_generator(item, path))
            elif "bundled" in item:
                listed = item["bundled"] if isinstance(item["bundled"], list) else [item["bundled"]]
                for j, nm in enumerate(listed):
                    found.extend((*got, f"{path}.bundled[{j}]") for got in _bundled(str(nm), f"{path}.bundled[{j}]"))
            elif "file" in item:
                files = item["file"] if isinstance(item["file"], list) else [item["file"]]
                for j, f in enumerate(files):
                    found.append((*_file(str(f), base, f"{path}.file[{j}]"), f"{path}.file[{j}]"))
            else:
                raise InputError(path, "an instance table needs one of: generator, bundled, file", '{generator = "random_layered_dag", n_ops = [20, 40]}')
        else:
            raise InputError(path, f"expected a name, a path or a table, got {item!r}")
    out: list[InstanceEntry] = []
    by_hash: dict[str, tuple[InstanceEntry, str]] = {}
    names: dict[str, str] = {}
    for name, doc, source, path in found:
        h = instance_hash(doc)
        if h in by_hash:
            first, first_path = by_hash[h]
            where = "this entry" if first_path == path else first_path
            raise InputError(
                path,
                f"duplicate instance: {source} is the same instance as {first.source} of {where} (same content, hash {h})",
                "list each instance once",
            )
        if name in names and names[name] != h:
            name = f"{name}-{h[:6]}"  # two different instances with one name: keep both apart
            doc = {**doc, "name": name}
        names[name] = h
        kind = doc.get("kind")
        try:
            instance_from_dict(doc)  # validate once here, not in every run
        except InputError as exc:
            raise InputError(f"{source}: {exc.path}", exc.problem, exc.fix) from None
        entry = InstanceEntry(name=name, kind=str(kind), instance_hash=h, document=doc, source=source)
        by_hash[h] = (entry, path)
        out.append(entry)
    return out


def _from_string(item: str, base: Path, path: str) -> list[tuple[str, dict[str, Any], str]]:
    if any(ch in item for ch in "*?["):
        names = sorted(n for n in bundled() if fnmatch.fnmatchcase(n, item))
        files = sorted(base.glob(item)) if not names else []
        if not names and not files:
            raise InputError(path, f"the pattern {item!r} matches no bundled instance and no file", "list bundled instances with `distplan list instances`")
        out = []
        for nm in names:
            out.extend(_bundled(nm, path))
        out.extend(_file_at(f, path) for f in files)
        return out
    p = Path(item) if Path(item).is_absolute() else base / item
    if p.is_file():
        return [_file_at(p, path)]
    return _bundled(item, path)


def _bundled(name: str, path: str) -> list[tuple[str, dict[str, Any], str]]:
    if name not in bundled():
        raise InputError(path, f"no file and no bundled instance named {name!r}", "list bundled instances with `distplan list instances`")
    doc = load_document(name)
    return [(str(doc.get("name", name)), doc, f"bundled:{name}")]


def _file(item: str, base: Path, path: str) -> tuple[str, dict[str, Any], str]:
    """The instance in file ``item`` (a path relative to the campaign file's folder ``base``)."""
    return _file_at(Path(item) if Path(item).is_absolute() else base / item, path)


def _file_at(p: Path, path: str) -> tuple[str, dict[str, Any], str]:
    """The instance in file ``p`` (already joined to the campaign's folder: joined again, a
    campaign given as ``bc/rel.toml`` looked for ``bc/bc/good.json``)."""
    if not p.is_file():
        raise InputError(path, f"no such instance file {str(p)!r}", "give a path relative to the campaign file")
    doc = load_document(p)
    if not isinstance(doc, Mapping):
        raise InputError(path, "the file holds no instance document")
    return (str(doc.get("name", p.stem)), dict(doc), f"file:{p}")


def _from_generator(item: Mapping[str, Any], path: str) -> list[tuple[str, dict[str, Any], str]]:
    from distplan.instances.generators import GENERATORS

    gen_name = item["generator"]
    if not isinstance(gen_name, str):
        raise InputError(f"{path}.generator", f"expected a generator name, got {gen_name!r}")
    if gen_name in GENERATORS:
        fn = GENERATORS[gen_name]
    elif ":" in gen_name:
        try:
            fn = import_object(gen_name)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"{path}.generator", f"cannot import {gen_name!r}: {exc}", "write module:function") from None
        except Exception as exc:  # the module itself fails while imported: its error, named, not a traceback
            raise InputError(f"{path}.generator", f"importing {gen_name!r} raised {type(exc).__name__}: {exc}", "fix the generator's module") from None
        if not callable(fn):
            raise InputError(f"{path}.generator", f"{gen_name!r} is a {type(fn).__name__}, not a function", "write module:function, the function returning a distplan/1 document")
    else:
        raise InputError(f"{path}.generator", f"unknown generator {gen_name!r}", f"use one of: {', '.join(GENERATORS)} or module:function")
    keys = [k for k in item if k != "generator"]
    _check_generator_params(fn, gen_name, keys, path)
    axes = [item[k] if isinstance(item[k], list) else [item[k]] for k in keys]
    points = math.prod(len(axis) for axis in axes)
    if points > MAX_GRID:
        raise InputError(path, f"the grid of generator {gen_name!r} has {points:,} points, more than the largest taken, {MAX_GRID:,}", "give fewer values per parameter")
    varying = [k for k, axis in zip(keys, axes) if len(axis) > 1]
    out = []
    for combo in itertools.product(*axes):
        params = dict(zip(keys, combo))
        try:
            doc = fn(**params)
        except InputError as exc:
            raise InputError(f"{path}.{exc.path}", exc.problem, exc.fix) from None
        except TypeError as exc:
            raise InputError(path, f"generator {gen_name!r} rejects the parameters {params}: {exc}", "give each parameter a value of the type the generator takes") from None
        except Exception as exc:  # a custom generator's own failure (review D6: a traceback, exit 1)
            raise InputError(f"{path}.generator", f"generator {gen_name!r} raised {type(exc).__name__} with the parameters {params}: {exc}", "fix the generator or its parameters") from None
        if not isinstance(doc, Mapping):  # (an int gave AttributeError: 'int' object has no attribute 'get')
            raise InputError(
                f"{path}.generator",
                f"generator {gen_name!r} returned {_brief(doc)} with the parameters {params}, not a distplan/1 instance document",
                "return the document as a dict (an instance object's to_dict())",
            )
        doc = dict(doc)
        try:
            kind_spec(str(doc.get("kind")))
        except InputError as exc:
            raise InputError(f"{path}.generator", f"generator {gen_name!r} returned a document with a bad {exc.path}: {exc.problem}", exc.fix) from None
        label = ",".join(f"{k}={v}" for k, v in params.items())
        out.append((str(doc.get("name", gen_name)), doc, f"generator:{gen_name}({label})"))
    # grid points the generator names alike get the varying parameters its name lacks
    counts: dict[str, int] = {}
    for name, _, _ in out:
        counts[name] = counts.get(name, 0) + 1
    renamed = []
    for (name, doc, source), combo in zip(out, itertools.product(*axes)):
        if counts[name] > 1:
            params = dict(zip(keys, combo))
            extra = "-".join(f"{k}{params[k]}" for k in varying if str(params[k]) not in name)
            if extra:
                name = f"{name}-{extra}"
                doc = {**doc, "name": name}
        renamed.append((name, doc, source))
    return renamed


def _check_generator_params(fn: Any, gen_name: str, keys: list[str], path: str) -> None:
    """Every key of a generator entry is a parameter of the generator, and every parameter
    it requires is given: the error names the key (``instances[0].n_opz``), not only the
    entry, before any grid point is generated. A generator whose signature Python cannot
    read, or that takes ``**kwargs``, is left to say so itself when called."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    named = [n for n, p in params.items() if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    for key in keys:
        if key not in named:
            raise InputError(f"{path}.{key}", f"generator {gen_name!r} has no parameter {key!r}", f"its parameters: {', '.join(named) or '(none)'}")
    for name in named:
        if params[name].default is inspect.Parameter.empty and name not in keys:
            raise InputError(f"{path}.{name}", f"generator {gen_name!r} needs this parameter", f"add {name} = ... to the entry")


def _brief(value: Any) -> str:
    """A value's type and a short repr of it, for messages."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


# -- small validators --------------------------------------------------------------------------


def parse_bytes(value: Any, path: str) -> int:
    """Bytes from an integer or a string like "4 GiB" / "512MB"."""
    if isinstance(value, bool):
        raise InputError(path, f"expected bytes, got {value!r}")
    if isinstance(value, int | float) and value > 0:
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS and float(m.group(1)) > 0:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise InputError(path, f"{value!r} is not a positive amount of memory", 'write bytes or e.g. "4 GiB", "512 MB"')


def _positive(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InputError(path, f"expected a finite number > 0 (seconds), got {value!r}")
    return float(value)


def _nonneg(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise InputError(path, f"expected a finite number >= 0, got {value!r}")
    return float(value)


def _relative_gap(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise InputError(path, f"expected a relative gap in [0, 1), got {value!r}", "write e.g. mip_gap = 1e-4")
    return float(value)


def _check_solver_options(backend_name: str, table: Mapping[str, Any]) -> None:
    """A table of raw options names a backend, and its solver takes them (when installed)."""
    try:
        backend = get_backend(backend_name)
    except (InputError, BackendError) as exc:
        raise InputError(f"solver_options.{backend_name}", f"unknown backend {backend_name!r}", str(exc).split("; ", 1)[-1]) from None
    try:
        backend.check_options(table)
    except InputError as exc:
        raise InputError(f"solver_options.{backend_name}.{exc.path.removeprefix('solver_options.')}", exc.problem, exc.fix) from None


def _int(value: Any, path: str, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(path, f"expected an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise InputError(path, f"{value} is more than the largest taken, {maximum:,}", "give a smaller number")
    return int(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(path, f"expected true or false, got {value!r}")
    return value


def latest_campaigns(campaigns: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last stored row of each campaign name (a database keeps one per time it ran)."""
    latest: dict[str, dict[str, Any]] = {}
    for c in campaigns:
        if c.get("name") is not None:
            latest[str(c["name"])] = c
    return latest


def stored_runs(campaign: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The runs a stored campaign row's text expands to (`Campaign.runs`), or None when it
    no longer expands here (a moved instance file, a formulation gone)."""
    from distplan.errors import DistplanError

    text = str(campaign.get("text") or "")
    source = Path(str(campaign.get("source") or "."))
    try:
        return parse_campaign(tomllib.loads(text), base=source.parent, source=str(source), text=text, default_name=str(campaign.get("name"))).runs()
    except (DistplanError, ValueError, OSError, KeyError, TypeError):
        return None
