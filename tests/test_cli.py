"""The `distplan` command line: output, files and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distplan.cli import main
from distplan.instances import load_document

TINY: dict[str, Any] = {
    "format": "distplan/1",
    "kind": "placement",
    "name": "tiny",
    "graph": {
        "ops": [{"name": "a", "time": 1.0, "memory": 5}, {"name": "b", "time": 2.0, "memory": 5}, {"name": "c", "time": 1.0, "memory": 1}],
        "edges": [{"src": "a", "dst": "b", "bytes": 10}, {"src": "a", "dst": "c", "bytes": 10}],
    },
    "cluster": {"devices": [{"name": "g0", "memory": 20}, {"name": "g1", "memory": 20}], "bandwidth": 10.0, "latency": 0.5},
}


def write(tmp_path: Path, doc: dict[str, Any], name: str = "inst.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_solve_json_has_the_promised_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, TINY)
    assert main(["solve", path, "-f", "placement_milp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("termination", "status", "objective", "bound", "gap", "formulation", "backend", "timings", "plan"):
        assert key in out
    assert out["status"] == "optimal"
    assert set(out["plan"]["device"]) == {"a", "b", "c"}
    assert set(out["plan"]["start"]) == {"a", "b", "c"}
    assert out["objective"] == pytest.approx(3.5)  # a, b on one device; c elsewhere after a 1.5 s transfer


def test_solve_human_summary_and_plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, TINY)
    plan = tmp_path / "plan.json"
    result = tmp_path / "result.json"
    assert main(["solve", path, "-f", "baechi_etf", "--out", str(plan), "--result", str(result)]) == 0
    text = capsys.readouterr().out
    assert "makespan" in text and "bound" in text and "gap" in text and "g0" in text
    assert main(["evaluate", path, str(plan)]) == 0
    assert "feasible     True" in capsys.readouterr().out
    assert main(["verify", str(result)]) == 0
    assert "0 problem(s)" in capsys.readouterr().out


def test_verify_flags_a_false_optimality_claim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, TINY)
    result = tmp_path / "result.json"
    assert main(["solve", path, "-f", "baechi_etf", "--result", str(result)]) == 0
    doc = json.loads(result.read_text())
    doc["status"] = "optimal"
    doc["bound"] = doc["objective"] * 0.5
    result.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["verify", str(result)]) == 1
    assert "claims optimal with gap" in capsys.readouterr().out
    doc["objective"] *= 0.9
    result.write_text(json.dumps(doc))
    assert main(["verify", str(result)]) == 1
    assert "the evaluator computes" in capsys.readouterr().out


def test_exit_code_2_for_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = json.loads(json.dumps(TINY))
    bad["graph"]["edges"][1]["dst"] = "foo"
    path = write(tmp_path, bad)
    assert main(["solve", path, "-f", "baechi_etf"]) == 2
    assert "graph.edges[1].dst: unknown op 'foo'" in capsys.readouterr().err
    assert main(["solve", write(tmp_path, TINY, "good.json"), "-f", "nope"]) == 2
    assert "use one of:" in capsys.readouterr().err
    assert main(["validate", path]) == 2
    assert main(["solve", "no-such-instance", "-f", "baechi_etf"]) == 2


def test_exit_code_3_for_infeasible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tight = json.loads(json.dumps(TINY))
    for dev in tight["cluster"]["devices"]:
        dev["memory"] = 5.5
    path = write(tmp_path, tight)
    # a and b (5 bytes each) need both devices of 5.5, so c (1 byte) fits nowhere: the MILP
    # proves it (exit 3); m-ETF only stops (exit 4: a heuristic's stop proves nothing)
    assert main(["solve", path, "-f", "placement_milp"]) == 3
    err = capsys.readouterr().err
    assert "proves its model infeasible" in err and "'g0' holds 5.5" in err and "(short by 0.5 bytes)" in err
    assert main(["solve", path, "-f", "baechi_etf"]) == 4
    err = capsys.readouterr().err
    assert "short by 0.5 bytes" in err and "does not prove that no plan exists" in err


def test_exit_code_4_without_a_solution_in_time(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # memory so tight that every heuristic fails (no warm start; a plan exists; the packing
    # by memory, placement_milp's source of last resort, made to fail too), and HiGHS
    # stopped at the root without heuristics
    from distplan.errors import InfeasibleError
    from distplan.formulations.placement import milp

    def no_packing(inst: object) -> None:
        raise InfeasibleError("packing made to fail by the test")

    monkeypatch.setattr(milp, "packed_schedule", no_packing)
    doc = load_document("placement-small-4")
    doc["cluster"]["devices"] = [dict(d, memory=d["memory"] * 0.8) for d in doc["cluster"]["devices"]]
    path = write(tmp_path, doc)
    opts = ["--solver-option", "mip_max_nodes=0", "--solver-option", "mip_heuristic_effort=0.0", "--solver-option", "presolve=off"]
    code = main(["solve", path, "-f", "placement_milp", "--time-limit", "5", *opts])
    assert code == 4
    assert "no solution" in capsys.readouterr().err


def test_list_inspect_validate_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "baechi_sct" in out and "highs" in out and "gnmt-v2-4gpu" in out
    assert main(["inspect", "gnmt-v2-4gpu"]) == 0
    out = capsys.readouterr().out
    assert "2169" in out and "critical path without communication" in out
    assert main(["validate", "gnmt-v2-4gpu"]) == 0
    mps = tmp_path / "m.mps"
    assert main(["export", write(tmp_path, TINY), "-f", "placement_milp", "--to", str(mps)]) == 0
    assert "ENDATA" in mps.read_text()
    assert main(["export", write(tmp_path, TINY), "-f", "baechi_etf", "--to", str(mps)]) == 2
    # a parameter of another type is named before anything is built, as for solve
    assert main(["export", write(tmp_path, TINY), "-f", "placement_milp", "--param", "joined_windows=maybe", "--to", str(mps)]) == 2
    assert "params.joined_windows: expected true or false" in capsys.readouterr().err


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "g.png"
    assert main(["plot", write(tmp_path, TINY), "-f", "baechi_sct", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_console_entry_point_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "distplan", "solve", "placement-small-1", "-f", "baechi_sct", "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["formulation"] == "baechi_sct"


def test_a_gap_the_status_counts_is_not_printed_as_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """With --mip-gap 0 a proven optimum keeps the bound's rounding margin as its gap: it
    is printed as such beside status feasible (it was "0.00 %")."""
    assert main(["solve", "placement-small-1", "-f", "placement_milp", "--mip-gap", "0"]) == 0
    out = capsys.readouterr().out
    assert "status feasible" in out and "gap          0.00 %" not in out and "e-0" in out and "(optimal when <= 0 %)" in out
