"""Bound-only results (``placement_bounds``), review rev17:

* H2: with a folding that is not exact (placement's coarsening merges ops, a restriction)
  the bounds proven on the folded instance were reported for the instance: 41.9 ms on
  inception-v3-dgx1-2-tight, which has a plan of 32.9 ms. Such a run is now refused.
* H1: the result recorded neither its gap tolerance nor its options, so a campaign's
  ``mip_gap`` made ``distplan verify DB`` report a mismatch on every such run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_named_error, cli_run

import distplan
from distplan.bench.campaign import load_campaign
from distplan.bench.runner import run_campaign
from distplan.bench.verify import verify_database
from distplan.errors import InputError
from distplan.formulations.registry import solver_free_bounds


def test_a_bound_only_run_on_a_folding_that_is_not_exact_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Bounds proven on a coarsened placement would not hold for the instance: the run is
    refused before it spends its time (exit 2), and without folding it proves its own."""
    inst = distplan.load_instance("placement-small-4")
    with pytest.raises(InputError, match=r"placement_bounds proves bounds, and the placement folding is not exact"):
        distplan.solve(inst, "placement_bounds", fold=True, time_limit=10)
    rc, out, err = cli_run(["solve", "placement-small-4", "-f", "placement_bounds", "--fold", "--time-limit", "10"], capsys)
    assert_named_error(rc, out, err, "fold: placement_bounds proves bounds")
    free = {b.source for b in solver_free_bounds(inst)}
    unfolded = distplan.solve(inst, "placement_bounds", time_limit=10)
    assert any(b.source not in free for b in unfolded.bounds)  # (its own proofs)


def test_a_bound_only_result_records_its_gap_tolerance_and_options(tmp_path: Path) -> None:
    r = distplan.solve("placement-small-4", "placement_bounds", mip_gap=0.01, time_limit=10)
    assert r.gap_tolerance == 0.01 and r.options is not None and r.options["mip_gap"] == 0.01
    camp = tmp_path / "c.toml"
    camp.write_text('name = "gap"\ntime_limit = 10\nmip_gap = 0.01\nformulations = ["placement_bounds", "baechi_etf"]\nbackends = ["highs"]\ninstances = ["placement-small-4"]\n')
    db = tmp_path / "c.db"
    run_campaign(load_campaign(camp), db, progress=False)
    report = verify_database(db)
    assert report.ok, report.problems
