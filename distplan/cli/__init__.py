"""The `distplan` command line.

Subcommands live in modules of this package; each exposes ``register(subparsers)`` and
sets ``func`` on its parser, and declares the files it writes with
`distplan.cli.args.add_output` (checked before the command runs). Exit codes: 0 solved, 1 internal error, 2 bad input,
3 infeasible, 4 no solution within the time limit.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from distplan.cli.args import check_outputs, out_of_memory, output_errors
from distplan.errors import DistplanError, InputError
from distplan.models.common import print_json

COMMAND_MODULES = (
    "distplan.cli.core",
    "distplan.cli.plot",
    "distplan.cli.make",
    "distplan.cli.bench",
    "distplan.cli.importers",
    "distplan.cli.codecs",
    "distplan.cli.emit",
)


#: the exit codes, as ``distplan --help`` lists them (review rev16: only the README had them)
EXIT_CODES = """exit codes:
  0  done (solved; a plan or stored result that checks out)
  1  internal error, or a stored claim or plan that does not verify
  2  bad input: a named field, file or option (never a traceback)
  3  infeasible: proven for the instance, or for the one plan of a fixed-rule baseline,
     or (evaluate) the plan given breaks a constraint; the message names where
  4  no plan found and nothing proves that none exists (the time limit, or a heuristic
     that stops)
with --json, a failure prints {"error": {...}} as its one JSON document; evaluate's
verdict on a plan that breaks a constraint (exit 3) is its report, {"feasible": false,
"violations": [...], ...}, as for a plan that keeps them"""


class UsageError(InputError):
    """A command line argparse refuses (an unknown option, a missing or malformed
    argument): exit 2 like any bad input, and with ``--json`` an error document too."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are raised (`UsageError`, after the usage on
    stderr) instead of exiting, so that ``--json`` gets its error document (review rev23:
    ``--time-limit abc --json`` printed nothing on stdout); its subcommands' parsers are
    of this class too."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(self.prog, message, f"see `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="distplan",
        description="Plan distributed deep-learning execution with optimization.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMAND_MODULES:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod).register(sub)
    return parser


def _json_error(args: argparse.Namespace, exc: Exception, code: int) -> None:
    """With ``--json``, the error as the one JSON document on stdout (the commands print
    theirs last, after every step that can fail): ``{"error": {"type", "message",
    "exit_code", "path" (a bad input's field), "details" (device, shortfall, ...)}}``;
    the message is on stderr as always (review rev16: a script reading stdout got nothing
    on exits 3 and 4)."""
    if not getattr(args, "json", False):
        return
    doc: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc), "exit_code": code}
    if isinstance(exc, InputError):
        doc["path"] = exc.path
    details = getattr(exc, "details", None)
    if details:
        doc["details"] = details
    try:
        print_json({"error": doc}, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`distplan ... --json | true`): the exit code stands
        _quiet_stdout()


def _asks_for_json(argv: Sequence[str]) -> bool:
    """Whether a command line argparse refused asked for ``--json``, as argparse reads it
    (any unambiguous prefix from ``--js``: review rev23b, ``--jso``)."""
    return any(len(token) >= 4 and "--json".startswith(token) for token in argv)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone, so that the flush at exit
    raises no second BrokenPipeError (Python's "Exception ignored" traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
    """A warning as the command's other status lines are: ``warning: ...`` on stderr,
    without Python's file, line and source."""
    print(f"warning: {message}", file=sys.stderr)


#: the garbage collector's thresholds in a ``distplan`` process (the default is (700, 10,
#: 10)): reading and writing a large instance allocates millions of objects that all
#: live, and the default's full collections took a third of the time (40,965-op sharding
#: instance: loading 0.90 -> 0.74 s, its `to_dict` for the result's digest 0.29 -> 0.09 s;
#: review rev25). A Python caller of `main` keeps its own.
COMMAND_GC_THRESHOLD = (100_000, 20, 20)


def main(argv: Sequence[str] | None = None) -> int:
    """The command. Called with no ``argv`` it is the process's entry point, and a time
    limit counts from when distplan began to load (imports and reading the instance
    included); called with an ``argv`` (from Python) it counts from this call. Warnings
    print as ``warning: ...`` lines on stderr."""
    if argv is None:  # the process is the command: its own collector thresholds
        gc.set_threshold(*COMMAND_GC_THRESHOLD)
    shown = warnings.showwarning
    warnings.showwarning = _warning_line
    try:
        return _run(argv)
    finally:
        warnings.showwarning = shown


def _run(argv: Sequence[str] | None) -> int:
    import distplan

    started = distplan.LOADED_AT if argv is None else time.perf_counter()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _json_error(argparse.Namespace(json=_asks_for_json(sys.argv[1:] if argv is None else list(argv))), exc, exc.exit_code)
        return exc.exit_code
    except SystemExit as exc:  # argparse printed the help (or its version)
        return exc.code if isinstance(exc.code, int) else 2
    args.started = started
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_outputs(args)  # before any work: a solve is not lost to a typo in --out
        with output_errors(args):
            return int(args.func(args) or 0)
    except DistplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _json_error(args, exc, exc.exit_code)
        return exc.exit_code
    except MemoryError as exc:
        error = out_of_memory(exc)
        print(f"error: {error}", file=sys.stderr)
        _json_error(args, error, error.exit_code)
        return error.exit_code
    except BrokenPipeError:  # the reader went away (`distplan list | head`): stop quietly
        _quiet_stdout()
        return 141
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
