"""Progress of long commands, on stderr (stdout stays for results and ``--json``)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import TextIO

#: a command quicker than this shows nothing
QUIET_SECONDS = 2.0
#: how often a command that is not on a terminal says it is still running
LINE_EVERY_SECONDS = 10.0


class Progress:
    """Says on stderr that a command is still running, once it has run ``QUIET_SECONDS``.

    On a terminal it keeps one line up to date (elapsed seconds, once a second) and clears
    it at the end; elsewhere (a pipe, a CI log) it writes a line every
    ``LINE_EVERY_SECONDS`` and a closing line with the total time.
    """

    def __init__(self, label: str, enabled: bool = True, stream: TextIO | None = None, lines: bool = False):
        """``lines``: whole lines even on a terminal (beside a solver log that ``--verbose``
        streams to the same stderr, which a line kept up to date would overwrite)."""
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._tty = not lines and bool(getattr(self.stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="distplan-progress")
        self._shown = False
        self._t0 = 0.0

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed stream never fails the command
            self.stream.write(text)
            self.stream.flush()

    def _run(self) -> None:
        if self._stop.wait(QUIET_SECONDS):
            return
        self._shown = True
        step = 1.0 if self._tty else LINE_EVERY_SECONDS
        while True:
            elapsed = time.perf_counter() - self._t0
            if self._tty:
                self._write(f"\r{self.label} ... {elapsed:.0f} s")
            else:
                self._write(f"{self.label} ... {elapsed:.0f} s\n")
            if self._stop.wait(step):
                return

    def __enter__(self) -> Progress:
        self._t0 = time.perf_counter()
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        self._thread.join()
        if not self._shown:
            return
        elapsed = time.perf_counter() - self._t0
        if self._tty:
            self._write("\r\033[K")
        else:
            self._write(f"{self.label}: done in {elapsed:.1f} s\n")
