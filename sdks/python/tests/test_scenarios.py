"""Every shared scenario (sdks/scenarios/*.json) with the sync and the async client."""
from __future__ import annotations

from pathlib import Path

import pytest

from scenarios import load, run_scenario, scenario_files


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario(path: Path, flavour: str, servers) -> None:
    spec = load(path)
    assert spec["name"] == path.stem.split("_", 1)[1], "name must match the file name"
    server = servers.get(tuple(spec.get("server", {}).get("args", [])))
    run_scenario(spec, server.url, flavour, server.operator_url)


def test_there_are_scenarios() -> None:
    assert len(scenario_files()) >= 9
