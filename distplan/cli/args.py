"""Argument checks shared by every command: number types and output paths.

Numbers: ``type=positive_int`` (and the others) make argparse reject ``--batch -1`` with
``argument --batch: -1 is not a whole number >= 1`` (exit 2) before any work starts.

Output paths: a command declares each file it writes with `add_output` instead of
``add_argument``. Before the command runs, `check_outputs` rejects an output that cannot be
written (its directory is missing, it is a directory, a wrong suffix, no permission), so a
long solve is not lost to a typo in ``--out``; while it runs, `output_errors` turns an
`OSError` on one of those paths into an `InputError` naming the option and the path.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distplan.errors import InputError

# -- numbers ---------------------------------------------------------------------------------


def _integer(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number >= {minimum}")
    return value


def _real(text: str, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    if positive and value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number > 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (counts, sizes, repeats)."""
    return _integer(text, 1)


def positive_int_at_most(maximum: int) -> Callable[[str], int]:
    """argparse type: a whole number from 1 to ``maximum`` (sizes a command builds: the
    largest is documented in the option's help). ``--ops 1000000000`` was taken and the
    generator was killed for memory (review rev16 D6); now argparse says
    ``argument --ops: 1000000000 is more than the largest taken, 1000000`` (exit 2)."""

    def parse(text: str) -> int:
        value = _integer(text, 1)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is more than the largest taken, {maximum}")
        return value

    parse.__name__ = f"positive_int_at_most_{maximum}"
    return parse


def nonneg_int(text: str) -> int:
    """argparse type: a whole number >= 0 (seeds)."""
    return _integer(text, 0)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (times, memory, bandwidth)."""
    return _real(text, positive=True)


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0 (delays)."""
    return _real(text, positive=False)


def relative_gap(text: str) -> float:
    """argparse type: a relative gap in [0, 1) (``--mip-gap``)."""
    value = _real(text, positive=False)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a relative gap in [0, 1)")
    return value


# -- output paths ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """A file (or, with ``directory``, a directory created if missing) a command writes."""

    dest: str
    option: str
    directory: bool = False
    #: accepted suffixes (lower case, with the dot), or None for any
    suffixes: tuple[str, ...] | None = None


#: the parsed namespace's attribute listing its command's outputs
OUTPUTS = "_outputs"


def given_flags(args: argparse.Namespace, names: Sequence[str]) -> list[str]:
    """The flags (``--time-limit``) of the options among ``names`` (``time_limit``) that the
    command line gave: a value other than None and False (every such option's default),
    in ``names``' order. What a command refuses when they would be ignored."""
    return ["--" + name.replace("_", "-") for name in names if getattr(args, name) not in (None, False)]


def add_output(
    parser: argparse.ArgumentParser, *flags: str, directory: bool = False, suffixes: Sequence[str] | None = None, **kwargs: Any
) -> argparse.Action:
    """``parser.add_argument(*flags, **kwargs)`` for an option naming a file the command
    writes (a directory with ``directory=True``), checked by `check_outputs`."""
    action = parser.add_argument(*flags, **kwargs)
    option = "/".join(action.option_strings) or action.dest
    out = Output(action.dest, option, directory, None if suffixes is None else tuple(s.lower() for s in suffixes))
    parser.set_defaults(**{OUTPUTS: (*(parser.get_default(OUTPUTS) or ()), out)})
    return action


def outputs_of(args: argparse.Namespace) -> list[tuple[Output, Path]]:
    """The outputs the parsed command line names (an omitted optional output is none). A
    file output given with a trailing separator (``--to e.mps/``) names a directory: an
    `InputError` (``Path`` would drop the separator, and the writer refuse it later)."""
    found = []
    for out in getattr(args, OUTPUTS, None) or ():
        value = getattr(args, out.dest, None)
        if value is not None:
            text = str(value)
            if not out.directory and text.endswith(("/", os.sep)):
                raise InputError(out.option, f"cannot write {text}: the trailing {text[-1]!r} makes it a directory", f"name a file: {text.rstrip('/' + os.sep) or text}")
            found.append((out, Path(value)))
    return found


def _existing_ancestor(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def check_output(out: Output, path: Path) -> None:
    """Raise an `InputError` naming ``out.option`` when ``path`` cannot be written."""
    if out.suffixes is not None and not any(path.name.lower().endswith(s) for s in out.suffixes):
        what = f"unsupported suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise InputError(out.option, f"cannot write {path}: {what}", f"end the file name in one of: {', '.join(out.suffixes)}")
    if out.directory:
        if path.exists() and not path.is_dir():
            raise InputError(out.option, f"cannot write to {path}: it exists and is not a directory", "name a directory; it is created when missing")
        parent = path if path.is_dir() else _existing_ancestor(path)
        if not parent.is_dir():
            raise InputError(out.option, f"cannot create {path}: {parent} is not a directory", "name a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(out.option, f"cannot write to {path}: permission denied in {parent}", "choose a directory you can write to")
        return
    if path.is_dir():
        raise InputError(out.option, f"cannot write {path}: it is a directory", "name a file inside it, e.g. " + str(path / ("out" + (out.suffixes[0] if out.suffixes else ".json"))))
    parent = path.absolute().parent
    if not parent.exists():
        raise InputError(out.option, f"cannot write {path}: directory {parent} does not exist", "create it first or choose another path")
    if not parent.is_dir():
        raise InputError(out.option, f"cannot write {path}: {parent} is not a directory", "choose another path")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        raise InputError(out.option, f"cannot write {path}: permission denied", "choose a path you can write to")


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output of a parsed command before the command does any work: each can
    be written, no two are one file (``--out X --result X`` kept only the last), and none
    is a file the command reads (``solve t.json --out t.json`` replaced the instance with
    its plan)."""
    outputs = outputs_of(args)
    for out, path in outputs:
        check_output(out, path)
    written: dict[str, str] = {}
    for out, path in outputs:
        key = os.path.realpath(path)
        if key in written:
            raise InputError(out.option, f"cannot write {path}: {written[key]} writes the same file", "give each output a path of its own")
        written[key] = out.option
    dests = {out.dest for out in getattr(args, OUTPUTS, None) or ()}
    for name, value in vars(args).items():
        if name in dests or not isinstance(value, str) or not os.path.isfile(value):
            continue
        for out, path in outputs:
            if path.exists() and os.path.samefile(value, path):
                raise InputError(out.option, f"cannot write {path}: it is the file the command reads ({value})", "write the output to another path")


_REASONS = {
    errno.ENOENT: "its directory does not exist",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EEXIST: "it exists and is not a directory",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
}


def _belongs(filename: Any, out: Output, path: Path) -> bool:
    """Whether an OSError's file is the output (or, for a directory output, inside it; or a
    temporary file next to it)."""
    if filename is None:
        return False
    try:
        failed = Path(os.fsdecode(filename)).absolute()
    except (TypeError, ValueError):
        return False
    target = path.absolute()
    if failed == target or (out.directory and target in failed.parents):
        return True
    return failed.parent == target.parent and failed.name.startswith(target.name)


@contextmanager
def output_errors(args: argparse.Namespace) -> Iterator[None]:
    """Turn an OSError writing one of the command's outputs into an `InputError` (exit 2)
    naming the option and the path."""
    outputs = outputs_of(args)
    try:
        yield
    except OSError as exc:
        for out, path in outputs:
            if _belongs(exc.filename, out, path) or _belongs(exc.filename2, out, path):
                reason = _REASONS.get(exc.errno or 0) or exc.strerror or str(exc)
                raise InputError(out.option, f"cannot write {path}: {reason}", "choose a path you can write to") from None
        raise


def out_of_memory(exc: MemoryError) -> InputError:
    """A `MemoryError` anywhere in a command (numpy's ``_ArrayMemoryError`` included) as an
    `InputError` (exit 2) saying that the input asks for more memory than the process has,
    not a traceback (review rev16 D6: under ``ulimit -v``, ``make random --ops 1000000000``
    ended in a numpy traceback)."""
    detail = f" ({exc})" if str(exc) else ""
    return InputError(
        "memory",
        f"ran out of memory{detail}: the input asks for more than this process may allocate",
        "give smaller sizes (fewer ops, stages, layers, runs), or raise the memory limit",
    )
