"""A campaign's executor arguments are checked before its database is touched (audit of
session 27: `bench run --executor dask` without ``--scheduler`` exited 2 after recording
the campaign, and `distplan verify` then reported its one run missing, as if interrupted;
``--scheduler`` without the dask executor ran locally without a word)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distplan.bench.campaign import load_campaign
from distplan.bench.runner import run_campaign
from distplan.errors import InputError

CAMPAIGN = """name = "t"
time_limit = 1
formulations = ["baechi_etf"]
backends = ["highs"]
instances = ["placement-small-1"]
"""


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"executor": "dask"}, "the dask executor needs the scheduler's address"),
        ({"executor": "local", "scheduler": "tcp://127.0.0.1:1"}, "is for --executor dask only"),
        ({"executor": "threads"}, "unknown executor 'threads'"),
    ],
)
def test_bad_executor_arguments_leave_no_database(kwargs: dict[str, Any], message: str, tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(CAMPAIGN)
    db = tmp_path / "t.db"
    with pytest.raises(InputError, match=message):
        run_campaign(load_campaign(tmp_path / "t.toml"), db, progress=False, **kwargs)
    assert not db.exists()
