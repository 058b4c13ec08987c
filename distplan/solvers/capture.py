"""Keep what solver libraries print off the caller's stdout.

Solver libraries write to the process's file descriptors 1 and 2 from C (HiGHS prints its
banner when a ``highspy.Highs`` object is made, SCIP and Clarabel print their logs, PuLP's
and Pyomo's HiGHS wrappers make their own ``Highs`` objects). distplan writes nothing to
stdout unless asked, so every backend call runs inside `captured_output`: both descriptors
and Python's ``sys.stdout`` / ``sys.stderr`` go to a temporary file for the duration, and
the text comes back as ``.text`` for the result's log. A temporary file rather than a pipe:
a solver that holds the GIL while it writes can never block on a full pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

#: the caller's stderr descriptors saved by the open `captured_output` blocks, innermost last
_CONSOLES: list[int] = []


class CapturedText:
    """What was printed inside a `captured_output` block (set when the block ends)."""

    text: str = ""


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None)


def _flush_c_stdio() -> None:
    with contextlib.suppress(Exception):
        _libc().fflush(None)


@contextlib.contextmanager
def captured_output() -> Iterator[CapturedText]:
    """Capture file descriptors 1 and 2 (C libraries, flushed with ``fflush``) and Python's
    ``sys.stdout`` / ``sys.stderr`` into ``.text``. Nesting is allowed: an inner block hands
    the outer one nothing of what it captured."""
    captured = CapturedText()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _flush_c_stdio()
    saved = [os.dup(1), os.dup(2)]
    py_out = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            _CONSOLES.append(saved[1])
            with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_out):
                yield captured
        finally:
            _CONSOLES.pop()
            _flush_c_stdio()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            captured.text = tmp.read().decode(errors="replace") + py_out.getvalue()


def echo_to_stderr(text: str) -> None:
    """Show solver log text on the caller's stderr (``verbose``), also from inside a
    `captured_output` block (live logs); logs never go to stdout."""
    if not text:
        return
    if _CONSOLES:
        with contextlib.suppress(OSError):
            os.write(_CONSOLES[-1], text.encode(errors="replace"))
        return
    sys.stderr.write(text)
    sys.stderr.flush()


class LiveStderr(io.TextIOBase):
    """A text stream that writes to the caller's stderr through `echo_to_stderr` (for
    wrappers that take a stream to tee a solver log to)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        echo_to_stderr(text)
        return len(text)
