"""Bound-only results (``placement_bounds``), review rev17:

* H2: with a folding that is not exact (placement's coarsening merges ops, a restriction)
  the bounds proven on the folded instance were reported for the instance: 41.9 ms on
  inception-v3-dgx1-2-tight, which has a plan of 32.9 ms. Only the solver-free bounds of
  the instance itself are kept.
* H1: the result recorded neither its gap tolerance nor its options, so a campaign's
  ``mip_gap`` made ``distplan verify DB`` report a mismatch on every such run."""

from __future__ import annotations

from pathlib import Path

import distplan
from distplan.bench.campaign import load_campaign
from distplan.bench.runner import run_campaign
from distplan.bench.verify import verify_database
from distplan.formulations.registry import solver_free_bounds


def test_a_folded_bound_only_run_keeps_only_the_instances_own_bounds() -> None:
    inst = distplan.load_instance("placement-small-4")
    folded = distplan.solve(inst, "placement_bounds", fold=True, time_limit=10)
    free = {b.source: b.value for b in solver_free_bounds(inst)}
    assert folded.bounds and all(b.source in free and b.value == free[b.source] for b in folded.bounds)
    assert folded.info["folding"]["coarse_ops"] < inst.n_ops
    unfolded = distplan.solve(inst, "placement_bounds", time_limit=10)
    assert any(b.source not in free for b in unfolded.bounds)  # (its own proofs, when not folded)


def test_a_bound_only_result_records_its_gap_tolerance_and_options(tmp_path: Path) -> None:
    r = distplan.solve("placement-small-4", "placement_bounds", mip_gap=0.01, time_limit=10)
    assert r.gap_tolerance == 0.01 and r.options is not None and r.options["mip_gap"] == 0.01
    camp = tmp_path / "c.toml"
    camp.write_text('name = "gap"\ntime_limit = 10\nmip_gap = 0.01\nformulations = ["placement_bounds", "baechi_etf"]\nbackends = ["highs"]\ninstances = ["placement-small-4"]\n')
    db = tmp_path / "c.db"
    run_campaign(load_campaign(camp), db, progress=False)
    report = verify_database(db)
    assert report.ok, report.problems
