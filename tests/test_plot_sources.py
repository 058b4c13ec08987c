"""`distplan plot` draws what it is given, and refuses what it would ignore.

Bandwidth: the Pareto curve of `libra_perf_per_cost` is solved in every case; a PLAN.json,
or another formulation's plan (-f), is evaluated and marked on the curve and in the bars.
Other kinds: a PLAN.json is drawn as it is, so the solving options beside it are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import distplan
from distplan.models import bandwidth_plot
from tests.conftest import assert_named_error, cli_run

BW = "libra-gpt3-3d-total500"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments `plot_pareto` was called with (it still draws)."""
    calls: list[dict[str, Any]] = []
    real = bandwidth_plot.plot_pareto

    def spy(result: Any, path: Any, **kw: Any) -> Path:
        calls.append({"result": result, **kw})
        return real(result, path, **kw)

    monkeypatch.setattr(bandwidth_plot, "plot_pareto", spy)
    return calls


def _time_and_cost(name: str) -> tuple[float, float]:
    res = distplan.solve(BW, name)
    return res.check.details["time_seconds"], res.check.details["cost_usd"]


def test_bandwidth_plan_file_is_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], drawn: list[dict[str, Any]]) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert cli_run(["solve", BW, "-f", "equal_bw", "--out", "eq.json"], capsys)[0] == 0
    rc, _, err = cli_run(["plot", BW, "eq.json", "-o", "pareto.png"], capsys)
    assert rc == 0, err
    assert (tmp_path / "pareto.png").stat().st_size > 0
    (call,) = drawn
    point = call["points"]["eq.json"]
    assert (point["time_seconds"], point["cost_usd"]) == pytest.approx(_time_and_cost("equal_bw"), rel=1e-12)
    assert point["bandwidth"] == distplan.solve(BW, "equal_bw").plan.bandwidth
    assert call["result"].info["pareto"], "the curve is still drawn"


def test_bandwidth_formulation_is_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], drawn: list[dict[str, Any]]) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli_run(["plot", BW, "-f", "proportional_to_traffic", "-o", "pareto.png"], capsys)
    assert rc == 0, err
    (call,) = drawn
    assert list(call["points"]) == ["proportional_to_traffic"]
    point = call["points"]["proportional_to_traffic"]
    assert (point["time_seconds"], point["cost_usd"]) == pytest.approx(_time_and_cost("proportional_to_traffic"), rel=1e-12)
    drawn.clear()
    assert cli_run(["plot", BW, "-f", "libra_perf_per_cost", "-o", "pareto.png"], capsys)[0] == 0
    assert drawn[0]["points"] == {}, "the curve's own formulation is marked by the curve"


def test_infeasible_bandwidth_plan_is_drawn_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], drawn: list[dict[str, Any]]) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    plan = distplan.solve(BW, "equal_bw").plan
    doc = {"format": "distplan/1", "kind": "bandwidth-plan", "instance": BW, "bandwidth": {k: 2 * v for k, v in plan.bandwidth.items()}}
    (tmp_path / "double.json").write_text(json.dumps(doc))
    rc, _, err = cli_run(["plot", BW, "double.json", "-o", "pareto.png"], capsys)
    assert rc == 0, err
    assert "warning: the plan is infeasible: total_bandwidth" in err
    assert "double.json" in drawn[0]["points"]


def test_too_short_a_limit_names_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli_run(["plot", BW, "--time-limit", "1e-6", "-o", "pareto.png"], capsys)
    assert rc == 4 and out == "", (rc, err)
    assert "libra_perf_per_cost stopped at its time_limit before it traced the Pareto curve (raise --time-limit; 1e-06 s" in err
    assert "Traceback" not in err and not (tmp_path / "pareto.png").exists()


@pytest.mark.parametrize(
    ("instance", "extra", "named"),
    [
        (BW, ["-f", "equal_bw"], "both a PLAN.json and --formulation are given"),
        ("placement-small-2", ["-f", "baechi_etf"], "both a PLAN.json and --formulation are given"),
        ("placement-small-2", ["--fold"], "--fold applies only when solving"),
        ("placement-small-2", ["-b", "highs", "--time-limit", "3"], "--backend, --time-limit apply only when solving"),
    ],
)
def test_options_a_plan_file_would_ignore_are_refused(
    instance: str, extra: list[str], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    form = "equal_bw" if instance == BW else "baechi_etf"
    assert cli_run(["solve", instance, "-f", form, "--out", "plan.json"], capsys)[0] == 0
    rc, out, err = cli_run(["plot", instance, "plan.json", *extra, "-o", "chart.png"], capsys)
    assert_named_error(rc, out, err, "plot: ", named)
    assert not (tmp_path / "chart.png").exists()


def test_plot_pareto_draws_the_given_points(tmp_path: Path) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    res = distplan.solve(BW, "libra_perf_per_cost")
    point = {"time_seconds": 0.75, "cost_usd": 2e7, "bandwidth": distplan.solve(BW, "equal_bw").plan.bandwidth}
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # labels as text in the SVG
        out = bandwidth_plot.plot_pareto(res, tmp_path / "pareto.svg", points={"my-point": point})
    svg = out.read_text()
    assert svg.count("my-point") == 2, "a legend entry on the curve and one in the bars"


def test_time_limit_covers_the_whole_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The marked formulation's solve and the curve's share one --time-limit."""
    import time

    from distplan.cli import plot

    limits: list[tuple[str, float | None]] = []
    starts: list[float | None] = []
    real = plot.solve

    def slow(inst: Any, formulation: str, **kw: Any) -> Any:
        limits.append((formulation, kw.get("time_limit")))
        starts.append(kw.get("started"))
        res = real(inst, formulation=formulation, **kw)
        if formulation == "equal_bw":
            time.sleep(0.25)
        return res

    monkeypatch.setattr(plot, "solve", slow)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli_run(["plot", BW, "-f", "equal_bw", "--time-limit", "0.2", "-o", "pareto.png"], capsys)
    assert rc == 4 and "equal_bw used the whole --time-limit (0.2 s), leaving none for the Pareto curve" in err, (rc, err)
    assert limits == [("equal_bw", 0.2)]
    limits.clear()
    rc, out, err = cli_run(["plot", BW, "-f", "equal_bw", "--time-limit", "30", "-o", "pareto.png"], capsys)
    assert rc == 0, err
    # one limit for both: the curve's solve counts from the same start, after equal_bw's 0.25 s
    assert limits == [("equal_bw", 30), ("libra_perf_per_cost", 30)]
    assert starts[-1] == starts[-2] is not None and time.perf_counter() - starts[-1] > 0.25


def test_the_help_says_what_the_time_limit_covers(capsys: pytest.CaptureFixture[str]) -> None:
    """The limit covers the solves, not the drawing (audit of session 27: the help said
    "for the whole command", and a run at 0.01 s took 2.25 s, most of it matplotlib)."""
    rc, out, _ = cli_run(["plot", "--help"], capsys)
    text = " ".join(out.split())
    assert rc == 0 and "for the whole command" not in text and "drawing the chart comes after, unlimited" in text
