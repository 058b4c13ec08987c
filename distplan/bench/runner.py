"""Run campaign runs, each in its own process under a hard wall clock.

Every run executes `execute_run` (``distplan.solve`` plus a flat record) in a process of
its own. The processes are forked from a *fork server*: one helper process (started with
``python -m distplan.bench.runner --serve``) that imports distplan, the kind packages and
the solver packages once and then forks a fresh child per run, so a run starts in
milliseconds instead of the ~1 s an interpreter with numpy, scipy and the solvers needs.
Each child leads its own session (process group): when ``time_limit + grace`` seconds pass
the whole group, solver binaries included, is killed with SIGKILL. The fork server reaps
the child with ``wait4`` and reports its exit status and peak resident memory (bytes; it
includes the preloaded interpreter and libraries, reported once as the baseline).

What the campaign records when a run does not finish normally:

* ``killed``: the wall clock ran out (``error`` says after how long) — a hang;
* ``crashed``: the process died without a result (signal or exit code, with the tail of
  its stderr) — a segfault, an abort, the kernel's out-of-memory killer;
* ``out_of_memory``: Python raised MemoryError (``memory_limit`` caps the address space);
* ``infeasible``, ``no_solution``, ``plan_rejected`` (the evaluator rejected the plan:
  a wrong answer), ``input_error``, ``backend_error``, ``error``: what ``solve`` raised.

None of these stops the campaign. Hidden test hooks honoured by the run process (never
used by real campaigns): option ``_test_hang_seconds`` sleeps before solving,
``_test_exit_code`` exits at once with that code after writing to stderr,
``_test_stray_pidfile`` forks a helper into a process group of its own that would outlive
the run (its pid goes to that file).

The driver environment sets ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/
``MKL_NUM_THREADS`` to 1 in the run processes unless they are set already: solver threads
are the campaign's ``threads`` option, not a side effect of numpy.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO, Any

from .store import canonical_json

#: terminations that mean the run produced no usable answer
FAILED_TERMINATIONS = frozenset(
    {"killed", "crashed", "out_of_memory", "no_solution", "plan_rejected", "input_error", "backend_error", "error"}
)
#: how much of a failed run's stderr is kept (characters)
LOG_TAIL_CHARS = 4000
Record = dict[str, Any]


# -- one run, in the current process -------------------------------------------------------------


def base_record(spec: dict[str, Any]) -> Record:
    """The identifying columns of a run's record (from its spec)."""
    opts = spec.get("options", {})
    return {
        "run_key": spec["run_key"],
        "campaign": spec.get("campaign"),
        "instance": spec["instance"],
        "instance_hash": spec["instance_hash"],
        "kind": spec["kind"],
        "formulation": spec["formulation"],
        "program": spec.get("program"),
        "exact": bool(spec.get("exact")),
        "bound_only": bool(spec.get("bound_only")),
        "params_json": canonical_json(spec.get("params", {})),
        "backend": spec["backend"],
        "backend_version": spec.get("backend_version"),
        "options_json": canonical_json(opts),
        "time_limit": opts.get("time_limit"),
        "seed": spec.get("seed"),
        "repetition": spec.get("repetition"),
        "termination": "error",
        "status": "none",
    }


def execute_run(spec: dict[str, Any]) -> Record:
    """Solve one run in this process and return its record (never raises for a bad run).

    The plan has been re-checked by the kind's evaluator inside ``distplan.solve``; the
    record's ``verdict`` is "accepted" then, "rejected" when ``solve`` raised
    `PlanCheckError`, and None when there is no plan.
    """
    from distplan.api import solve
    from distplan.errors import InfeasibleError, InputError, NoSolutionError, PlanCheckError
    from distplan.models.common import instance_from_dict
    from distplan.solvers.base import BackendError

    rec = base_record(spec)
    opts = spec.get("options", {})
    t0 = time.perf_counter()
    try:
        inst = instance_from_dict(spec["document"])
        res = solve(
            inst,
            spec["formulation"],
            backend=spec["backend"],
            time_limit=opts.get("time_limit"),
            mip_gap=opts.get("mip_gap"),
            fold=bool(opts.get("fold", False)),
            threads=opts.get("threads"),
            seed=spec.get("seed"),
            solver_options=opts.get("solver_options"),
            **spec.get("params", {}),
        )
        doc = res.to_dict()
        plan = doc.pop("plan")
        t = doc.get("timings", {})
        rec.update(
            termination=doc["termination"],
            status=doc["status"],
            objective=doc["objective"],
            bound=doc["bound"],
            bound_source=doc["bound_source"],
            gap=doc["gap"],
            backend_version=doc["backend_version"],
            build_seconds=t.get("build_seconds"),
            handover_seconds=t.get("handover_seconds"),
            solve_seconds=t.get("solve_seconds"),
            wall_seconds=t.get("wall_seconds"),
            verdict=None if res.check is None else ("accepted" if res.check.feasible else "rejected"),
            plan_json=None if plan is None else canonical_json(plan),
            result_json=canonical_json(doc),
        )
        return rec
    except InfeasibleError as exc:
        rec.update(termination="infeasible", error=str(exc))
    except NoSolutionError as exc:
        rec.update(termination="no_solution", error=str(exc))
    except PlanCheckError as exc:
        rec.update(termination="plan_rejected", verdict="rejected", error=str(exc))
    except InputError as exc:
        rec.update(termination="input_error", error=str(exc))
    except BackendError as exc:
        rec.update(termination="backend_error", error=str(exc))
    except MemoryError:
        rec.update(termination="out_of_memory", error="MemoryError: " + traceback.format_exc()[-LOG_TAIL_CHARS:])
    except Exception as exc:
        rec.update(termination="error", error=f"{type(exc).__name__}: {exc}\n" + traceback.format_exc()[-LOG_TAIL_CHARS:])
    rec["wall_seconds"] = time.perf_counter() - t0
    return rec


# -- the run process (forked by the fork server) -----------------------------------------------------


def _child_main(spec_path: str, result_path: str) -> None:
    """Body of a run process: limits, test hooks, `execute_run`, the record to a file."""
    spec = json.loads(Path(spec_path).read_text())
    opts = spec.get("options", {})
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
    record = execute_run(spec)
    tmp = result_path + ".tmp"
    Path(tmp).write_text(canonical_json(record))
    os.replace(tmp, result_path)


def _in_forked_child(msg: dict[str, Any], proto_fd: int) -> None:
    """Never returns: runs the child and exits with its status."""
    code = 0
    try:
        os.setsid()  # lead a new session and process group: killed as a whole
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
        _child_main(msg["spec"], msg["result"])
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


def serve(kinds: Sequence[str], backends: Sequence[str]) -> None:
    """The fork server's loop: JSON lines in on stdin, JSON lines out on the original stdout.

    Requests: ``{"op": "run", "token", "spec", "result", "log"}`` forks a run process;
    ``{"op": "kill", "token"}`` kills its process group (only while it is not yet reaped,
    so a recycled pid is never hit). Events: ``hello``, ``started`` (pid), ``exit`` (exit
    code, negative for a signal, peak memory in bytes, and how many stray processes of the
    run's session had to be killed). A run's whole session is killed on expiry and swept
    when it exits, so solver helpers that moved to a process group of their own cannot
    outlive it. End of stdin (the driver exited or was killed) kills every live run and
    ends the server.
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
            strays = _kill_session(pid)  # nothing a run started may outlive it
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
                pid = os.fork()
                if pid == 0:
                    _in_forked_child(msg, proto_fd)
                live[pid] = int(msg["token"])
                by_token[int(msg["token"])] = pid
                send({"ev": "started", "token": msg["token"], "pid": pid})
            elif msg["op"] == "kill":
                pid = by_token.get(int(msg["token"]), 0)
                if pid:
                    _kill_session(pid)
            elif msg["op"] == "exit":
                running = False
                break
    for pid in list(live):
        _kill_session(pid)
    for pid in list(live):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (Linux /proc; empty elsewhere)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def _kill_session(sid: int) -> int:
    """Kill the run's process group and every other process left in its session (a solver
    helper may sit in a process group of its own, e.g. a forked isolation child): returns
    how many processes besides the group leader were hit."""
    _kill_group(sid)
    hit = 0
    for pid in session_members(sid):
        if pid in (sid, os.getpid()):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            hit += 1
    return hit


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
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        cmd = [sys.executable, "-m", "distplan.bench.runner", "--serve", "--kinds", ",".join(self.kinds), "--backends", ",".join(self.backends)]
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

    def start(self, spec_path: str, result_path: str, log_path: str) -> RunHandle:
        with self._lock:
            if self.closed:
                raise ServerClosed("the executor is shutting down")
            try:
                proc = self.ensure_running()
                token = next(self._tokens)
                handle = RunHandle(token, queue.Queue())
                self._waiters[token] = handle.events
                self._owner[token] = proc
                self._send(proc, {"op": "run", "token": token, "spec": spec_path, "result": result_path, "log": log_path})
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
        """Kill every live run and stop the server (idempotent)."""
        with self._lock:
            self.closed = True
            proc, self._proc = self._proc, None
        if proc is None:
            return
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


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_CHARS))
            return fh.read().decode(errors="replace").strip()
    except OSError:
        return ""


def run_isolated(spec: dict[str, Any], server: ForkServer, workdir: str | Path, executor: str = "local") -> Record | None:
    """Run one spec in its own process; kill it after ``time_limit + grace`` seconds.

    Returns the run's record, or None when the executor was shut down (interrupt) before
    the run finished — such a run is not recorded and runs again next time.
    """
    opts = spec.get("options", {})
    limit = opts.get("time_limit")
    grace = float(opts.get("grace", 5.0))
    base = Path(workdir) / spec["run_key"]
    spec_path, result_path, log_path = (str(base) + s for s in (".spec.json", ".result.json", ".log"))
    Path(spec_path).write_text(canonical_json(spec))
    t0 = time.perf_counter()
    handle: RunHandle | None = None
    try:
        try:
            handle = server.start(spec_path, result_path, log_path)
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


def warm_set(specs: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Kinds and backends the fork server should preload for these runs."""
    return sorted({s["kind"] for s in specs}), sorted({s["backend"] for s in specs})


# -- progress -------------------------------------------------------------------------------------


def is_success(rec: Record) -> bool:
    """A run that produced an answer: an accepted plan, a proof of infeasibility, or bounds."""
    if rec.get("termination") in FAILED_TERMINATIONS:
        return False
    if rec.get("termination") == "infeasible":
        return bool(rec.get("exact"))  # a proof from an exact program; a heuristic merely failed
    return rec.get("verdict") == "accepted" or bool(rec.get("bound_only"))


class Progress:
    """A progress bar with ETA and live solved/failed counts, on stderr.

    On a terminal it redraws one line; otherwise it prints a line at most every
    ``interval`` seconds (and at the end).
    """

    def __init__(self, total: int, already: int = 0, stream: IO[str] | None = None, enabled: bool = True, interval: float = 5.0):
        self.total = total
        self.already = already
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interval = interval
        self.done = 0
        self.ok = 0
        self.failed = 0
        self.killed = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._last_line = ""
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def add(self, rec: Record) -> None:
        self.done += 1
        if is_success(rec):
            self.ok += 1
        else:
            self.failed += 1
            if rec.get("termination") == "killed":
                self.killed += 1
        self._draw(final=False)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        frac = self.done / self.total if self.total else 1.0
        width = 24
        filled = int(round(width * frac))
        eta = elapsed / self.done * (self.total - self.done) if self.done else math.nan
        eta_s = "--" if math.isnan(eta) else _clock(eta)
        prior = f" (+{self.already} stored before)" if self.already else ""
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}{prior}  solved {self.ok}  failed {self.failed}"
            f" (killed {self.killed})  elapsed {_clock(elapsed)}  ETA {eta_s}"
        )

    def _draw(self, final: bool) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            self.stream.write("\r" + self.line() + ("\n" if final else ""))
            self.stream.flush()
        elif final or now - self._last >= self.interval:
            text = self.line()
            if final and text.split("  elapsed")[0] == self._last_line.split("  elapsed")[0]:
                return  # the last line printed already says it all
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last, self._last_line = now, text

    def finish(self) -> None:
        self._draw(final=True)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# -- the local executor and the campaign driver ---------------------------------------------------


def run_local(specs: Sequence[dict[str, Any]], on_record: Callable[[Record], None], jobs: int = 1) -> ForkServer:
    """Run specs with ``jobs`` run processes at a time; ``on_record`` gets each record in
    the driver thread as soon as its run finishes. Returns the (closed) fork server, whose
    ``baseline_rss`` is the memory every run process starts with."""
    kinds, backends = warm_set(specs)
    server = ForkServer(kinds, backends)
    workdir = tempfile.mkdtemp(prefix="distplan-bench-")
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="distplan-run")
    try:
        pending: set[Future[Record | None]] = {pool.submit(run_isolated, s, server, workdir, "local") for s in specs}
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                rec = fut.result()
                if rec is not None:
                    on_record(rec)
    finally:
        server.close()
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return server


def run_campaign(
    campaign: Any,
    db: str | Path,
    *,
    executor: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    client: Any = None,
    progress: bool = True,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Expand ``campaign``, skip the runs already in ``db``, run the rest and store each
    record as it finishes. Returns counts: planned, skipped (stored before), stored,
    duplicates (a record whose key was already there: never counted twice), notes."""
    from .store import Store

    specs = campaign.runs()
    with Store(db) as store:
        for inst in campaign.instances:
            store.add_instance(inst.instance_hash, inst.name, inst.kind, inst.document)
        store.add_campaign(campaign.name, campaign.source, campaign.text, len(specs))
        done = store.done_keys()
        todo = [s for s in specs if s["run_key"] not in done]
        bar = Progress(len(todo), already=len(specs) - len(todo), stream=stream, enabled=progress)
        counts: dict[str, Any] = {"planned": len(specs), "skipped": len(specs) - len(todo), "stored": 0, "duplicates": 0, "baseline_rss": None}

        def on_record(rec: Record) -> None:
            if store.insert_run(rec):
                counts["stored"] += 1
            else:
                counts["duplicates"] += 1
            bar.add(rec)

        if todo:
            if executor == "local":
                server = run_local(todo, on_record, jobs=jobs)
                counts["baseline_rss"] = server.baseline_rss
            elif executor == "dask":
                from .dask_executor import run_dask

                not_run = run_dask(todo, on_record, scheduler=scheduler, client=client)
                if not_run:
                    campaign.notes.append(f"{len(not_run)} run(s) failed on the cluster and were not recorded (run the campaign again to retry them); first: {not_run[0][1]}")
            else:
                from distplan.errors import InputError

                raise InputError("--executor", f"unknown executor {executor!r}", "use local or dask")
        bar.finish()
    counts["notes"] = list(campaign.notes)
    return counts


def _main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m distplan.bench.runner", description="the fork server of distplan bench (internal)")
    parser.add_argument("--serve", action="store_true", required=True)
    parser.add_argument("--kinds", default="")
    parser.add_argument("--backends", default="")
    args = parser.parse_args(argv)
    serve([k for k in args.kinds.split(",") if k], [b for b in args.backends.split(",") if b])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
