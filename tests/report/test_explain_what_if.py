"""explain shows the what-if answers: the endpoint margin and what losing each zone does."""

from __future__ import annotations

import math
import subprocess

import pytest

from exporter.engine.whatif.feasibility import Margin
from exporter.report.advice import margin_text
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR, exporter_command


@pytest.mark.parametrize(
    ("margin", "text"),
    [
        (Margin(0, 1), "one endpoint fewer turns hints off; 1 surge pod more keeps them on"),
        (Margin(1, 0), "hints survive losing 1 endpoint; one surge pod turns them off"),
        (Margin(3, math.inf), "hints survive losing 3 endpoints; any number of surge pods keeps"),
        (Margin(0, 2), "one endpoint fewer turns hints off; 2 surge pods more keep them on"),
    ],
)
def test_margin_words(margin: Margin, text: str) -> None:
    """Singular and plural, zero and infinity, each in words."""
    assert margin_text(margin).startswith(text)


def explain(*args: str) -> str:
    completed = subprocess.run(
        [*exporter_command(), "explain", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode in {0, 1}, completed.stderr
    return completed.stdout


def test_margin_beside_the_replica_advisor() -> None:
    """shop/cart runs 9 in 3 equal zones: 8 is refused, 10 works, 11 is refused."""
    text = explain("--snapshot", str(EXAMPLES_DIR / "demo-cluster.json"), "shop/cart")
    assert "Margin:            one endpoint fewer turns hints off; 1 surge pod more keeps" in text
    lines = text.splitlines()
    advisor = next(i for i, line in enumerate(lines) if "Replica advisor:" in line)
    margin = next(i for i, line in enumerate(lines) if "Margin:" in line)
    assert advisor < margin


def test_no_margin_for_a_refused_service() -> None:
    text = explain("--snapshot", str(EXAMPLES_DIR / "demo-cluster.json"), "payments/ledger")
    assert "Margin:" not in text


def test_zone_loss_in_the_cluster_section() -> None:
    """Each zone whose loss would turn Services off is named, and what-if agrees."""
    text = explain("--snapshot", str(EXAMPLES_DIR / "demo-cluster.json"))
    assert "Zone loss:         losing any one zone keeps every Service's hints" in text
    # Two zones: losing either leaves one zone, which the controller refuses outright.
    two_zones = CONFORMANCE_DIR / "float-boundary-ratio-0.4-0.6-n9.snapshot.json"
    lines = explain("--snapshot", str(two_zones)).splitlines()
    at = lines.index("  Zone loss:         losing zone-a would turn hints off for 1 Service")
    assert lines[at + 1].strip() == "losing zone-b would turn hints off for 1 Service"
    for zone in ("zone-a", "zone-b"):
        gate = subprocess.run(
            [*exporter_command(), "what-if", "--snapshot", str(two_zones), "--lose-zone", zone],
            capture_output=True,
            check=False,
            timeout=60,
        )
        assert gate.returncode == 1
