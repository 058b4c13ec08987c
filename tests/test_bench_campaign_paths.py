"""Instance files of a campaign given by a relative path resolve once against the campaign
file's folder (audit of session 27: `distplan bench run bc/rel.toml` looked for
``bc/bc/good.json``; run from inside ``bc/``, or given as an absolute path, it worked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distplan.bench.campaign import load_campaign
from distplan.errors import InputError
from distplan.instances import load_document
from distplan.models.common import write_json

CAMPAIGN = """name = "rel"
time_limit = 1
formulations = ["baechi_etf"]
backends = ["highs"]
instances = [{listed}]
"""


@pytest.mark.parametrize("listed", ['"good.json"', '"go*.json"', '{file = "good.json"}'])
def test_a_campaign_given_by_a_relative_path_finds_its_files_once(listed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bc"
    folder.mkdir()
    write_json({**load_document("placement-small-1"), "name": "good"}, folder / "good.json")
    (folder / "rel.toml").write_text(CAMPAIGN.format(listed=listed))
    monkeypatch.chdir(tmp_path)
    campaign = load_campaign("bc/rel.toml")
    assert [entry.name for entry in campaign.instances] == ["good"]


def test_a_folder_is_not_a_campaign(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a folder, not a campaign file"):
        load_campaign(tmp_path)
