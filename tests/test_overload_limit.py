"""The `auto` overload limit is the engine's constant wherever it is shown.

Help texts, alerts and dashboards are generated from `exporter.engine.OVERLOAD_LIMIT`;
the hand-written documents state it in prose, so each such sentence is checked here and
fails when the engine's figure changes.
"""

from __future__ import annotations

import pytest

from exporter.engine import OVERLOAD_LIMIT, OVERLOAD_THRESHOLD
from exporter.metrics import families
from tests.conftest import PROJECT_ROOT

LIMIT = f"{OVERLOAD_LIMIT:g}"

PROSE = [
    ("docs/runbooks.md", f"some zone exceeding {LIMIT} times its fair share"),
    ("docs/runbooks.md", f"than {LIMIT} times their fair share of traffic"),
    ("docs/runbooks.md", f"keeps it at or under {LIMIT})"),
    ("docs/walkthrough.md", f"ceil(8/3 / {LIMIT})"),
    ("docs/cli.md", f"more than {LIMIT} times its share"),
    ("dashboards/README.md", f"zone load factor (threshold {LIMIT})"),
]


def test_limit_is_one_plus_the_controllers_threshold() -> None:
    """The controller's 20% threshold and the 1.2 load factor limit are one fact."""
    assert OVERLOAD_LIMIT == 1 + OVERLOAD_THRESHOLD


def test_help_texts_are_generated_from_the_limit() -> None:
    assert f"at or under {LIMIT})" in families.ZONE_LOAD_FACTOR.help
    assert f"within {OVERLOAD_THRESHOLD:.0%} of its share" in families.ZONE_ALLOCATION_MINIMUM.help


@pytest.mark.parametrize(("document", "sentence"), PROSE)
def test_documents_state_the_engines_limit(document: str, sentence: str) -> None:
    """Each sentence of the documents that gives the limit gives the engine's figure."""
    text = " ".join((PROJECT_ROOT / document).read_text(encoding="utf-8").split())
    assert sentence in text, f"{document}: update the overload limit to {LIMIT}"
