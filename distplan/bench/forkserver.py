"""The fork server: each campaign run in a process of its own, under a hard wall clock.

Every run executes `distplan.bench.record.execute_run` (``distplan.solve`` plus a flat
record) in a process of its own. The processes are forked from a *fork server*: one helper
process (``python -m distplan.bench.forkserver --serve``) that imports distplan, the kind
packages and the solver packages once and then forks a fresh child per run, so a run
starts in milliseconds instead of the ~1 s an interpreter with numpy, scipy and the
solvers needs. Each child leads its own session (process group): when ``time_limit +
grace`` seconds pass the whole session, solver binaries included, is killed with SIGKILL.
The fork server reaps the child with ``wait4`` and reports its exit status and peak
resident memory (bytes; it includes the preloaded interpreter and libraries, reported once
as the baseline).

Cleaning up on every exit path: `ForkServer.close` (normal end, interrupt, SIGTERM) kills
the live runs and removes the scratch folder; the fork server kills its runs when its
stdin closes (the driver died); run processes die with the fork server
(``PR_SET_PDEATHSIG``); and a `distplan.bench.reaper.Reaper` in a session of its own kills
every run session in the fork server's ledger and removes the scratch folder when the
driver is killed with SIGKILL, process group and all. Each run's ``TMPDIR`` is a folder
inside the scratch folder, so solver temp folders go with it.

What the campaign records when a run does not finish normally:

* ``killed``: the wall clock ran out (``error`` says after how long) — a hang;
* ``crashed``: the process died without a result (signal or exit code, with the tail of
  its stderr) — a segfault, an abort, the kernel's out-of-memory killer;
* ``out_of_memory``: Python raised MemoryError (``memory_limit`` caps the address space);
* ``infeasible``, ``no_solution``, ``plan_rejected`` (the evaluator rejected the plan:
  a wrong answer), ``input_error``, ``backend_error``, ``error``: what ``solve`` raised.

Hidden test hooks honoured by the run process (never used by real campaigns): option
``_test_hang_seconds`` sleeps before solving, ``_test_exit_code`` exits at once with that
code after writing to stderr, ``_test_stray_pidfile`` forks a helper into a process group
of its own that would outlive the run (its pid goes to that file), ``_test_exec_log``
appends the run key and the Unix time to that file when the run starts.

The driver environment sets ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/
``MKL_NUM_THREADS`` to 1 in the run processes unless they are set already: solver threads
are the campaign's ``threads`` option, not a side effect of numpy.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import math
import os
import queue
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from .reaper import Reaper, kill_session
from .record import LOG_TAIL_CHARS, Record, base_record, execute_run
from .store import canonical_json

# -- the run process (forked by the fork server) -----------------------------------------------------


def run_process_main(spec_path: str, result_path: str, scratch: str | None = None) -> None:
    """Body of a run process: limits, test hooks, `execute_run`, the record to a file.

    ``scratch``: the run's temp folder (inside the campaign's, which the driver and its
    reaper remove): every temporary file of the run and its solvers goes there.

    The run's time limit starts here, at the process's start, as the driver's wall clock
    (limit + grace) does: reading the spec and loading the instance count against it,
    as they do for ``distplan solve`` (`execute_run`'s ``started``)."""
    started = time.perf_counter()
    if scratch:
        os.makedirs(scratch, exist_ok=True)
        tempfile.tempdir = scratch
        os.environ["TMPDIR"] = scratch
    spec = json.loads(Path(spec_path).read_text())
    opts = spec.get("options", {})
    exec_log = opts.get("_test_exec_log")
    if exec_log:  # one line per execution: tests count how often each run ran
        with open(exec_log, "a") as fh:
            fh.write(f"{spec['run_key']} {time.time()!r}\n")
    limit = opts.get("time_limit")
    grace = float(opts.get("grace", 5.0))
    if limit is not None:
        # guard against being orphaned: the parent kills at limit + grace; SIGALRM's default
        # action ends this process even inside a solver's C code holding the GIL
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(math.ceil(float(limit) + 2 * grace + 30)))
    memory = opts.get("memory_limit")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    hang = opts.get("_test_hang_seconds")
    if hang:
        print(f"test hook: sleeping {hang} s before solving", file=sys.stderr, flush=True)
        time.sleep(float(hang))
    stray_pidfile = opts.get("_test_stray_pidfile")
    if stray_pidfile:
        pid = os.fork()
        if pid == 0:  # a helper that leaves the run's process group, as forked solver helpers do
            os.setpgid(0, 0)
            time.sleep(600)
            os._exit(0)
        Path(stray_pidfile).write_text(str(pid))
    code = opts.get("_test_exit_code")
    if code is not None:
        print(f"test hook: exiting with code {code}", file=sys.stderr, flush=True)
        os._exit(int(code))
    record = execute_run(spec, started=started)
    tmp = result_path + ".tmp"
    Path(tmp).write_text(canonical_json(record))
    os.replace(tmp, result_path)


def die_with_parent(parent: int) -> None:
    """Linux: the kernel sends this process SIGKILL when its parent dies (PR_SET_PDEATHSIG,
    option 1); if ``parent`` is already gone, exit now."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _in_forked_child(msg: dict[str, Any], proto_fd: int, parent: int) -> None:
    """Never returns: runs the child and exits with its status."""
    code = 0
    try:
        os.setsid()  # lead a new session and process group: killed as a whole
        die_with_parent(parent)  # the fork server's death (its driver's SIGKILL) takes the run along
        fd = os.open(msg["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.close(proto_fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        run_process_main(msg["spec"], msg["result"], msg.get("scratch"))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 70
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _warm_up(kinds: Sequence[str], backends: Sequence[str]) -> None:
    """Import what runs need (in the fork server, once)."""
    import importlib

    import distplan.api  # noqa: F401
    from distplan.formulations.registry import formulations
    from distplan.models.common import kind_spec
    from distplan.solvers.base import get_backend

    for kind in kinds:
        try:
            kind_spec(kind)
            formulations(kind)
        except Exception as exc:  # a broken kind fails its runs, not the server
            print(f"fork server: cannot preload kind {kind}: {exc}", file=sys.stderr)
    for name in backends:
        try:
            be = get_backend(name)
            for mod in be.requires:
                importlib.import_module(mod)
        except Exception as exc:
            print(f"fork server: cannot preload backend {name}: {exc}", file=sys.stderr)


def serve(kinds: Sequence[str], backends: Sequence[str], ledger: str | None = None) -> None:
    """The fork server's loop: JSON lines in on stdin, JSON lines out on the original stdout.

    Requests: ``{"op": "run", "token", "spec", "result", "log"}`` forks a run process;
    ``{"op": "kill", "token"}`` kills its process group (only while it is not yet reaped,
    so a recycled pid is never hit). Events: ``hello``, ``started`` (pid), ``exit`` (exit
    code, negative for a signal, peak memory in bytes, and how many stray processes of the
    run's session had to be killed). A run's whole session is killed on expiry and swept
    when it exits, so solver helpers that moved to a process group of their own cannot
    outlive it. End of stdin (the driver exited or was killed) kills every live run and
    ends the server. ``ledger``: a file that gets ``+PID`` before a run process can do
    anything and ``-PID`` once it is reaped, for the driver's reaper (`distplan.bench.reaper`).
    """
    proto_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints of imported packages go to stderr, not the protocol
    proto = os.fdopen(proto_fd, "w", buffering=1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides about interrupts
    _warm_up(kinds, backends)

    def send(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    send({"ev": "hello", "pid": os.getpid(), "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
    ledger_fd = None if not ledger else os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(sign: str, pid: int) -> None:
        if ledger_fd is not None:
            with contextlib.suppress(OSError):
                os.write(ledger_fd, f"{sign}{pid}\n".encode())

    live: dict[int, int] = {}  # pid -> token
    by_token: dict[int, int] = {}
    buf = b""
    running = True
    while running:
        while live:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            token = live.pop(pid, -1)
            by_token.pop(token, None)
            strays = kill_session(pid)  # nothing a run started may outlive it
            note("-", pid)
            send({"ev": "exit", "token": token, "pid": pid, "code": os.waitstatus_to_exitcode(status), "maxrss": usage.ru_maxrss * 1024, "strays": strays})
        ready, _, _ = select.select([0], [], [], 0.02)
        if not ready:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg["op"] == "run":
                sys.stdout.flush()
                sys.stderr.flush()
                # the child waits for one byte: its pid is in the ledger before it runs
                server_pid = os.getpid()
                gate_r, gate_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(gate_w)
                    os.read(gate_r, 1)
                    os.close(gate_r)
                    _in_forked_child(msg, proto_fd, server_pid)
                os.close(gate_r)
                note("+", pid)
                os.write(gate_w, b"x")
                os.close(gate_w)
                live[pid] = int(msg["token"])
                by_token[int(msg["token"])] = pid
                send({"ev": "started", "token": msg["token"], "pid": pid})
            elif msg["op"] == "kill":
                pid = by_token.get(int(msg["token"]), 0)
                if pid:
                    kill_session(pid)
            elif msg["op"] == "exit":
                running = False
                break
    for pid in list(live):
        kill_session(pid)
    for pid in list(live):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        note("-", pid)


# -- the driver's side of the fork server ---------------------------------------------------------


class ForkServerError(RuntimeError):
    """The fork server could not start a run (it died or did not answer)."""


class ServerClosed(RuntimeError):
    """The executor is shutting down (interrupt): the run was not executed."""


class RunHandle:
    def __init__(self, token: int, events: queue.Queue[dict[str, Any]]):
        self.token = token
        self.events = events
        self.pid = 0

    def wait(self, deadline: float | None) -> dict[str, Any] | None:
        """The exit event, or None when ``deadline`` (perf_counter seconds) passes first."""
        while True:
            timeout = None if deadline is None else deadline - time.perf_counter()
            if timeout is not None and timeout <= 0:
                return None
            try:
                ev = self.events.get(timeout=timeout)
            except queue.Empty:
                return None
            if ev["ev"] in ("exit", "dead"):
                return ev


class ForkServer:
    """Starts run processes through one preloaded fork server (thread-safe)."""

    def __init__(self, kinds: Iterable[str] = (), backends: Iterable[str] = ()):
        #: the campaign's scratch folder (run specs, results, logs, each run's TMPDIR)
        self.workdir = tempfile.mkdtemp(prefix="distplan-bench-")
        self.ledger = os.path.join(self.workdir, "ledger")
        #: started with the first server: cleans up if this process dies without `close`
        self.reaper: Reaper | None = None
        self.kinds = sorted(set(kinds))
        self.backends = sorted(set(backends))
        self.baseline_rss: int | None = None
        self.closed = False
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._waiters: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._owner: dict[int, subprocess.Popen[bytes]] = {}  # token -> the server running it
        self._tokens = itertools.count(1)

    def ensure_running(self) -> subprocess.Popen[bytes]:
        """Start the fork server unless it runs (it preloads the kinds and backends given)."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if self.reaper is None:
            self.reaper = Reaper()
            self.reaper.watch_ledger(self.ledger)
            self.reaper.watch_dir(self.workdir)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        cmd = [sys.executable, "-m", "distplan.bench.forkserver", "--serve", "--kinds", ",".join(self.kinds), "--backends", ",".join(self.backends), "--ledger", self.ledger]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0)
        assert proc.stdout is not None
        hello = proc.stdout.readline()
        if not hello:
            proc.wait()
            raise ForkServerError(f"the fork server exited with code {proc.returncode} before answering")
        self.baseline_rss = int(json.loads(hello).get("rss_bytes") or 0) or None
        self._proc = proc
        threading.Thread(target=self._read, args=(proc, proc.stdout), name="distplan-forkserver-reader", daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        for line in stream:
            ev = json.loads(line)
            with self._lock:
                q = self._waiters.get(int(ev.get("token", -1)))
            if q is not None:
                q.put(ev)
        with self._lock:
            for token, q in self._waiters.items():
                if self._owner.get(token) is proc:  # runs of a restarted server are not affected
                    q.put({"ev": "dead"})
            if self._proc is proc:
                self._proc = None

    def _send(self, proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def start(self, spec_path: str, result_path: str, log_path: str, scratch: str | None = None) -> RunHandle:
        with self._lock:
            if self.closed:
                raise ServerClosed("the executor is shutting down")
            try:
                proc = self.ensure_running()
                token = next(self._tokens)
                handle = RunHandle(token, queue.Queue())
                self._waiters[token] = handle.events
                self._owner[token] = proc
                self._send(proc, {"op": "run", "token": token, "spec": spec_path, "result": result_path, "log": log_path, "scratch": scratch})
            except (OSError, ValueError) as exc:
                raise ForkServerError(str(exc)) from exc
        try:
            ev = handle.events.get(timeout=60.0)
        except queue.Empty:
            raise ForkServerError("the fork server did not start the run within 60 s") from None
        if ev["ev"] != "started":
            raise ForkServerError("the fork server died before starting the run")
        handle.pid = int(ev["pid"])
        return handle

    def kill(self, handle: RunHandle) -> None:
        with self._lock:
            proc = self._proc
            if proc is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._send(proc, {"op": "kill", "token": handle.token})

    def release(self, handle: RunHandle) -> None:
        with self._lock:
            self._waiters.pop(handle.token, None)
            self._owner.pop(handle.token, None)

    def close(self) -> None:
        """Kill every live run, stop the server, remove the scratch folder (idempotent)."""
        with self._lock:
            self.closed = True
            proc, self._proc = self._proc, None
        try:
            if proc is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._send(proc, {"op": "exit"})
                with contextlib.suppress(OSError, ValueError):
                    assert proc.stdin is not None
                    proc.stdin.close()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self.reaper is not None:
                self.reaper.close()


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_CHARS))
            return fh.read().decode(errors="replace").strip()
    except OSError:
        return ""


def run_spec(spec: dict[str, Any], server: ForkServer, executor: str = "local") -> Record | None:
    """Run one spec in its own process; kill it after ``time_limit + grace`` seconds.

    Returns the run's record, or None when the executor was shut down (interrupt) before
    the run finished — such a run is not recorded and runs again next time.
    """
    opts = spec.get("options", {})
    limit = opts.get("time_limit")
    grace = float(opts.get("grace", 5.0))
    base = Path(server.workdir) / spec["run_key"]
    spec_path, result_path, log_path, scratch = (str(base) + s for s in (".spec.json", ".result.json", ".log", ".tmp"))
    Path(spec_path).write_text(canonical_json(spec))
    t0 = time.perf_counter()
    handle: RunHandle | None = None
    try:
        try:
            handle = server.start(spec_path, result_path, log_path, scratch)
        except ServerClosed:
            return None
        except ForkServerError as exc:
            rec = base_record(spec)
            rec.update(termination="crashed", error=f"the run process could not be started: {exc}")
            return _finish(rec, t0, None, executor)
        t0 = time.perf_counter()  # the clock starts at the fork (the first start also boots the server)
        deadline = None if limit is None else t0 + float(limit) + grace
        ev = handle.wait(deadline)
        killed = False
        if ev is None:
            server.kill(handle)
            killed = True
            ev = handle.wait(time.perf_counter() + 30.0)
        elapsed = time.perf_counter() - t0
        if server.closed:
            return None
        if os.path.exists(result_path):
            rec = json.loads(Path(result_path).read_text())
        else:
            rec = base_record(spec)
            tail = _tail(Path(log_path))
            if killed:
                rec.update(termination="killed", error=f"killed after {elapsed:.1f} s: time limit {limit} s + grace {grace} s passed without an answer" + (f"\n{tail}" if tail else ""))
            else:
                code = None if ev is None else ev.get("code")
                if ev is None or ev["ev"] == "dead":
                    why = "the fork server died while the run was going on"
                elif code is not None and code < 0:
                    why = f"the run process died from signal {signal.Signals(-code).name}" + (" (the kernel's out-of-memory killer sends SIGKILL)" if code == -signal.SIGKILL else "")
                else:
                    why = f"the run process exited with code {code} without a result"
                rec.update(termination="crashed", error=why + (f"\n{tail}" if tail else ""))
        rec["process_seconds"] = elapsed
        return _finish(rec, t0, ev, executor)
    except Exception as exc:  # a runner bug must not stop the campaign: record it
        rec = base_record(spec)
        rec.update(termination="crashed", error=f"runner error {type(exc).__name__}: {exc}\n" + traceback.format_exc()[-LOG_TAIL_CHARS:])
        return _finish(rec, t0, None, executor)
    finally:
        if handle is not None:
            server.release(handle)
        for p in (spec_path, result_path, log_path, result_path + ".tmp"):
            with contextlib.suppress(OSError):
                os.unlink(p)
        shutil.rmtree(scratch, ignore_errors=True)


def _finish(rec: Record, t0: float, ev: dict[str, Any] | None, executor: str) -> Record:
    rec.setdefault("process_seconds", time.perf_counter() - t0)
    if ev is not None and ev.get("maxrss"):
        rec["peak_memory_bytes"] = int(ev["maxrss"])
    if ev is not None and ev.get("strays"):
        note = f"{ev['strays']} process(es) the run left behind in its session were killed"
        rec["error"] = f"{rec['error']}\n{note}" if rec.get("error") else note
    rec["host"] = socket.gethostname()
    rec["executor"] = executor
    return rec


def _main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m distplan.bench.forkserver", description="the fork server of distplan bench (internal)")
    parser.add_argument("--serve", action="store_true", required=True)
    parser.add_argument("--kinds", default="")
    parser.add_argument("--backends", default="")
    parser.add_argument("--ledger", default=None)
    args = parser.parse_args(argv)
    serve([k for k in args.kinds.split(",") if k], [b for b in args.backends.split(",") if b], args.ledger)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
