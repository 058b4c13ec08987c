"""What a new user meets first: `--json` is one JSON document, bad input is a named error
with exit 2 (never a traceback), options are checked, and every exception that leaves
`distplan.solve` is a `DistplanError` (issue 17)."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_named_error, cli_run

import distplan
from distplan.cli import main
from distplan.errors import DistplanError, InfeasibleError, InputError
from distplan.formulations.registry import formulations

#: small instances per kind, tried in order: every formulation must print its result on at
#: least one of them (a schedule may not apply to a placement, or need more memory)
CANDIDATES = {
    "placement": ["placement-small-1"],
    "sharding": ["gpt-1layer-tp8"],
    "compression": ["compression-mlp-small"],
    "pipeline": ["{pipeline_split}", "{pipeline_chunks}", "{pipeline_v2}", "pipeline-tessel-vshape"],
    "bandwidth": ["libra-resnet50-3d-total500"],
}

JSON_CASES = [pytest.param(kind, f.name, id=f"{kind}-{f.name}") for kind in CANDIDATES for f in sorted(formulations(kind), key=lambda f: f.name)]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Pipeline instances with the B/W split and unlimited memory: one stage per device, 2
    interleaved chunks per device, and the V placement (2 chunks per device, zig-zag)."""
    from distplan.instances.pipelines import make_pipeline

    tmp = tmp_path_factory.mktemp("made")
    split = make_pipeline("v", 4, 4, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    chunks = make_pipeline("v", 4, 4, forward_time=1.0, backward_time=2.0, weight_time=1.0, chunks=2)
    v2 = make_pipeline("v2", 4, 8, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    split.to_json(tmp / "split.json")
    chunks.to_json(tmp / "chunks.json")
    v2.to_json(tmp / "v2.json")
    return {"pipeline_split": str(tmp / "split.json"), "pipeline_chunks": str(tmp / "chunks.json"), "pipeline_v2": str(tmp / "v2.json")}


@pytest.mark.parametrize(("kind", "formulation"), JSON_CASES)
def test_json_prints_exactly_one_document(kind: str, formulation: str, made: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    """capfd reads file descriptor 1 itself: a banner a C library prints is caught too. A
    formulation that does not apply to an instance says so on stderr, and stdout holds the
    one error document."""
    printed = []
    for candidate in CANDIDATES[kind]:
        rc = main(["solve", candidate.format(**made), "-f", formulation, "--time-limit", "10", "--json"])
        captured = capfd.readouterr()
        if rc != 0:
            assert rc in (2, 3) and json.loads(captured.out)["error"]["exit_code"] == rc and captured.err.startswith("error: "), (rc, captured)
            continue
        doc = json.loads(captured.out)  # one document and nothing else: json.loads rejects trailing text
        printed.append(doc)
        assert doc["formulation"] == formulation and doc["kind"] == kind
        assert doc["gap_tolerance"] > 0
        if doc["plan"] is None:  # a bound-only formulation
            assert doc["status"] == "none" and doc["bound"] is not None
        else:
            assert doc["status"] in ("optimal", "feasible")
            if doc["bound"] is not None:
                assert doc["bound"] <= doc["objective"]
        break
    assert printed, f"{formulation} printed a result on none of {CANDIDATES[kind]}"


def test_list_and_import_print_no_solver_banner(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "backends"]) == 0
    out = capfd.readouterr().out
    assert "Running HiGHS" not in out and "Copyright" not in out
    assert out.startswith("backends:")


def _bad_files(tmp: Path) -> dict[str, Path]:
    corrupt_gz = tmp / "corrupt.json.gz"
    corrupt_gz.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(2000))
    not_gz = tmp / "plain.json.gz"
    not_gz.write_bytes(b'{"format": "distplan/1"}')
    binary = tmp / "binary.json"
    binary.write_bytes(bytes(range(256)) * 4096)  # 1 MiB, not UTF-8
    gz_binary = tmp / "binary.json.gz"
    gz_binary.write_bytes(gzip.compress(bytes(range(128, 256)) * 64))
    syntax = tmp / "syntax.json"
    syntax.write_text('{"format": "distplan/1", "kind": "placement",,}')
    unknown_op = tmp / "unknown_op.json"
    tiny = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "tiny",
        "graph": {"ops": [{"name": "a", "time": 0.001, "memory": 1}], "edges": [{"src": "a", "dst": "foo", "bytes": 8}]},
        "cluster": {"devices": [{"name": "gpu0", "memory": 100}], "bandwidth": 1e10, "latency": 1e-5},
    }
    unknown_op.write_text(json.dumps(tiny))
    return {
        "corrupt_gz": corrupt_gz,
        "not_gz": not_gz,
        "binary": binary,
        "gz_binary": gz_binary,
        "syntax": syntax,
        "unknown_op": unknown_op,
        "directory": tmp,
        "missing": tmp / "missing.json",
    }


#: (case, argv with {placeholders} for the files above, what the message must name)
CLI_BAD_INPUT = [
    ("corrupt_gz", ["solve", "{corrupt_gz}", "-f", "baechi_etf"], "corrupt.json.gz: not a valid gzip file"),
    ("not_gz", ["solve", "{not_gz}", "-f", "baechi_etf"], "plain.json.gz: not a valid gzip file"),
    ("binary", ["solve", "{binary}", "-f", "baechi_etf"], "binary.json: a binary file"),
    ("gz_binary", ["inspect", "{gz_binary}"], "binary.json.gz: compressed data that is not UTF-8"),
    ("syntax", ["validate", "{syntax}"], "syntax.json: not valid JSON"),
    ("unknown_op", ["solve", "{unknown_op}", "-f", "baechi_etf"], "graph.edges[0].dst"),
    ("directory", ["solve", "{directory}", "-f", "baechi_etf"], "is a directory, not an instance file"),
    ("missing_instance", ["solve", "{missing}", "-f", "baechi_etf"], "missing.json"),
    ("missing_plan", ["evaluate", "placement-small-1", "{missing}"], "missing.json: no such file"),
    ("plan_is_binary", ["evaluate", "placement-small-1", "{binary}"], "binary.json: a binary file"),
    ("wrong_kind", ["solve", "placement-small-1", "-f", "tag_sfb"], "'tag_sfb' is a compression formulation"),
    ("unknown_formulation", ["solve", "placement-small-1", "-f", "nope"], "unknown placement formulation 'nope'"),
    ("unknown_backend", ["solve", "placement-small-1", "-f", "placement_milp", "-b", "nope"], "unknown backend 'nope'"),
    ("time_limit_zero", ["solve", "placement-small-1", "-f", "baechi_etf", "--time-limit", "0"], "argument --time-limit: 0 is not a number > 0"),
    ("time_limit_negative", ["solve", "placement-small-1", "-f", "baechi_etf", "--time-limit", "-1"], "argument --time-limit: -1 is not a number > 0"),
    ("time_limit_nan", ["solve", "placement-small-1", "-f", "baechi_etf", "--time-limit", "nan"], "argument --time-limit: nan is not a finite number"),
    ("mip_gap", ["solve", "placement-small-1", "-f", "placement_milp", "--mip-gap", "2"], "argument --mip-gap: 2 is not a relative gap in [0, 1)"),
    ("threads", ["solve", "placement-small-1", "-f", "placement_milp", "--threads", "0"], "argument --threads: 0 is not a whole number >= 1"),
    ("unknown_param", ["solve", "placement-small-1", "-f", "baechi_sct", "--param", "thetaa=0.1"], "params.thetaa"),
    ("export_algorithm", ["export", "placement-small-1", "-f", "baechi_etf", "--to", "{directory}/m.mps"], "is an algorithm, not a model"),
    ("export_no_single_model", ["export", "gpt-1layer-tp8", "-f", "tap", "--to", "{directory}/m.mps"], "builds its models as it runs"),
    ("make_unknown_model", ["make", "sharding", "--model", "nope", "-o", "{directory}/x.json"], "unknown model 'nope' (use one of: transformer, gpt2-xl, gpt3-175b, llama3-8b"),
]


@pytest.mark.parametrize(("case", "argv", "named"), CLI_BAD_INPUT, ids=[c[0] for c in CLI_BAD_INPUT])
def test_bad_input_is_a_named_error_with_exit_2(
    case: str, argv: list[str], named: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    files = {k: str(v) for k, v in _bad_files(tmp_path).items()}
    assert_named_error(*cli_run([a.format(**files) for a in argv], capfd), named)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"time_limit": 0}, "time_limit"),
        ({"time_limit": -1.0}, "time_limit"),
        ({"time_limit": float("inf")}, "time_limit"),
        ({"mip_gap": -0.1}, "mip_gap"),
        ({"threads": 0}, "threads"),
        ({"thetaa": 0.1}, "params.thetaa"),
    ],
)
def test_api_checks_options_before_solving(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        distplan.solve("placement-small-1", "baechi_sct", **kwargs)  # type: ignore[arg-type]
    assert err.value.path == field


@pytest.mark.parametrize("case", ["corrupt_gz", "binary", "missing", "directory"])
def test_api_raises_input_errors_for_unreadable_files(case: str, tmp_path: Path) -> None:
    path = _bad_files(tmp_path)[case]
    with pytest.raises(InputError):
        distplan.solve(path, "baechi_etf")


def test_api_wrong_kind_names_the_formulations_kind() -> None:
    with pytest.raises(InputError, match="'tag_sfb' is a compression formulation, and this is a placement instance"):
        distplan.solve("placement-small-1", "tag_sfb")


def test_api_rejects_a_non_instance() -> None:
    with pytest.raises(InputError, match="is not an instance"):
        distplan.solve(42, "baechi_etf")


def test_every_exception_from_solve_is_a_distplan_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug inside a formulation still leaves `solve` as a DistplanError, with its cause."""
    import dataclasses

    from distplan.formulations import registry

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    etf = registry.get_formulation("placement", "baechi_etf")
    monkeypatch.setitem(registry._FORMULATIONS, ("placement", "baechi_etf"), dataclasses.replace(etf, run=broken))
    with pytest.raises(DistplanError) as err:
        distplan.solve("placement-small-1", "baechi_etf")
    assert isinstance(err.value.__cause__, KeyError)


def test_an_op_larger_than_every_device_is_infeasible_exit_3(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "too-big",
        "graph": {"ops": [{"name": "a", "time": 0.001, "memory": 200}], "edges": []},
        "cluster": {"devices": [{"name": "gpu0", "memory": 100}, {"name": "gpu1", "memory": 150}], "bandwidth": 1e10, "latency": 1e-5},
    }
    path = tmp_path / "too-big.json"
    path.write_text(json.dumps(doc))
    assert main(["solve", str(path), "-f", "baechi_etf"]) == 3
    err = capfd.readouterr().err
    assert "gpu1" in err and "short by 50 bytes" in err
    with pytest.raises(InfeasibleError):
        distplan.solve(path, "baechi_etf")


def test_a_solve_that_cannot_be_interrupted_returns_within_its_limit_plus_grace() -> None:
    """codec_select on BERT-large hands HiGHS 111k rows whose presolve ignores the time
    limit (it ran 12 minutes): the solve is isolated and killed, and returns its best plan."""
    import time

    limit = 3.0
    t0 = time.perf_counter()
    res = distplan.solve("compression-bert-large", "codec_select", time_limit=limit)
    elapsed = time.perf_counter() - t0
    assert elapsed <= limit + max(2.0, 0.1 * limit), elapsed
    assert res.status.value == "feasible" and res.check is not None and res.check.feasible
    assert any(r.extra.get("isolated") for r in res.solver_results)


def test_progress_speaks_on_stderr_only_for_long_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quiet for short commands; in a pipe a line now and then and a closing line."""
    import io
    import time

    from distplan.cli import progress

    quick = io.StringIO()
    with progress.Progress("quick", stream=quick):
        pass
    assert quick.getvalue() == ""
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.05)
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.05)
    slow = io.StringIO()
    with progress.Progress("solving x", stream=slow):
        time.sleep(0.3)
    lines = slow.getvalue().splitlines()
    assert lines[0].startswith("solving x ... ") and lines[-1].startswith("solving x: done in ")


def test_a_phase_of_a_run_never_runs_past_the_run_deadline() -> None:
    """`RunContext.child` (the sub-runs of codec_select, tag_sfb, libra_discrete) gets at
    most what remains of the run, not the run's whole limit again."""
    import time

    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import get_backend
    from distplan.solvers.options import SolveOptions

    late = RunContext(get_backend("highs"), SolveOptions(time_limit=10.0), {"x": 1}, started=time.perf_counter() - 9.5)
    child = late.child({"objective": "iteration"})
    assert child.options.time_limit is not None and child.options.time_limit <= 0.5
    assert child.params == {"objective": "iteration"} and late.child().params == {"x": 1}
    assert late.child(time_limit=0.2).options.time_limit == 0.2
    unlimited = RunContext(get_backend("highs"), SolveOptions(), {})
    assert unlimited.child(time_limit=3.0).options.time_limit == 3.0
    assert unlimited.child().options.time_limit is None



def test_a_solve_asked_after_the_run_deadline_does_not_start_the_solver() -> None:
    """Past the run's deadline `RunContext.solve_model` records a time-limited call without
    starting the solver (which would only be stopped, or killed a grace later)."""
    import time

    from distplan.formulations.deadline import DeadlineReached, check, past
    from distplan.formulations.registry import RunContext
    from distplan.modeling.model import Model
    from distplan.solvers.base import get_backend
    from distplan.solvers.options import SolveOptions

    model = Model("late")
    x = model.add_vars("x", 2, lb=0.0, ub=1.0)
    model.add_constraints("sum", x[0] + x[1] >= 1)
    model.minimize(x[0] + 2 * x[1])
    late = RunContext(get_backend("highs"), SolveOptions(time_limit=1.0), {}, started=time.perf_counter() - 1.5)
    res = late.solve_model(model, build_seconds=0.25)
    assert res.termination.value == "time_limit" and not res.has_solution and res.raw_status == "not started"
    assert res.build_seconds == 0.25 and late.solver_results == [res]
    assert past(late.deadline)
    with pytest.raises(DeadlineReached, match="folding ran out of time"):
        check(late.deadline, "folding")
    early = RunContext(get_backend("highs"), SolveOptions(time_limit=30.0), {})
    assert not past(early.deadline) and early.solve_model(model).termination.value == "optimal"
    unlimited = RunContext(get_backend("highs"), SolveOptions(), {})
    assert unlimited.deadline is None and not past(unlimited.deadline)
    check(unlimited.deadline, "anything")


@pytest.mark.parametrize(("field", "value", "path"), [("time", 1e308, "graph.ops[0].time"), ("memory", 1e300, "graph.ops[0].memory"), ("device", 1.7e308, "cluster.devices[0].memory")])
def test_placement_values_beyond_range_are_named(field: str, value: float, path: str) -> None:
    """Op times of 1e308 s reached placement_milp as NaN variable bounds, and device memory
    of 1.7e308 bytes overflowed an integer conversion (internal errors, exit 1); baechi_etf
    returned an infinite makespan. Times above `MAX_SECONDS` and bytes above `MAX_BYTES`
    are named where they are read."""
    from distplan.models.placement_instance import PlacementInstance

    ops = [{"name": n, "time": 1.0, "memory": 5.0} for n in "ab"]
    doc: dict[str, Any] = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "huge",
        "graph": {"ops": ops, "edges": [{"src": "a", "dst": "b", "bytes": 1.0}]},
        "cluster": {"devices": [{"name": "d0", "memory": 1000.0}, {"name": "d1", "memory": 1000.0}], "bandwidth": 1e9},
    }
    if field == "device":
        doc["cluster"]["devices"][0]["memory"] = value
    else:
        ops[0][field] = value
    with pytest.raises(InputError, match=rf"^{re.escape(path)}: .* is beyond the largest value taken"):
        PlacementInstance.from_dict(doc)


def test_json_of_an_infeasible_plan_is_strict_json(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A dimension left without bandwidth takes infinitely long: ``evaluate --json`` printed
    ``Infinity``, which is not JSON (RFC 8259) and which jq and most parsers refuse.
    Non-finite numbers are null in every ``--json`` document."""
    plan = tmp_path / "zero.json"
    assert main(["solve", "libra-gpt3-3d-total500", "-f", "equal_bw", "--out", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    doc["bandwidth"] = dict.fromkeys(doc["bandwidth"], 0.0)
    plan.write_text(json.dumps(doc))
    capfd.readouterr()
    assert main(["evaluate", "libra-gpt3-3d-total500", str(plan), "--json"]) == 3

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    out = json.loads(capfd.readouterr().out, parse_constant=refuse)
    assert out["feasible"] is False and out["objective"] is None


@pytest.mark.parametrize("name", ["doc.json", "doc.json.gz"])
def test_files_written_are_strict_json(tmp_path: Path, name: str) -> None:
    """`write_json` (``--out``, ``--result``, ``make -o``) writes non-finite numbers as null,
    as ``--json`` does: a solver call's -inf bound was a bare ``-Infinity`` in a result."""
    import numpy as np

    from distplan.models.common import read_json, write_json

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    path = tmp_path / name
    write_json({"bound": float("-inf"), "calls": [{"objective": np.float64("inf"), "gap": float("nan")}], "x": np.array([1.0, np.inf])}, path)
    text = gzip.decompress(path.read_bytes()).decode() if name.endswith(".gz") else path.read_text()
    assert json.loads(text, parse_constant=refuse) == {"bound": None, "calls": [{"objective": None, "gap": None}], "x": [1.0, None]}
    assert read_json(path)["bound"] is None


def test_verbose_solve_keeps_its_progress_in_whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--verbose`` streams the solver log to stderr: the progress of a long solve is then
    written as whole lines even on a terminal (review rev24b: a verbose tap run printed
    nothing at all), never a line kept up to date that the log would overwrite."""
    import io
    import time

    from distplan.cli import progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.05)
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.05)
    tty = Terminal()
    with progress.Progress("solving x", stream=tty, lines=True):
        time.sleep(0.3)
    text = tty.getvalue()
    assert "\r" not in text and text.splitlines()[-1].startswith("solving x: done in ")
    seen: list[bool] = []
    real = progress.Progress.__init__

    def spy(self: Any, label: str, enabled: bool = True, stream: Any = None, lines: bool = False) -> None:
        seen.append(enabled and lines)
        real(self, label, enabled, stream, lines)

    monkeypatch.setattr(progress.Progress, "__init__", spy)
    assert main(["solve", "placement-small-2", "-f", "baechi_etf", "--verbose"]) == 0
    assert seen == [True], "a verbose solve keeps its progress, in lines"
