"""The README's static scrape configurations scrape each pod under the job the rules expect: a
sharded install's Service would answer each scrape from another shard and mix their series."""

from __future__ import annotations

import re
from typing import Any

import yaml

from exporter.metrics.monitoring import JOB
from tests.conftest import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
SHARDED = PROJECT_ROOT / "deploy" / "overlays" / "sharded"


def scrape_configs() -> dict[str, dict[str, Any]]:
    """The README's yaml blocks holding a scrape config, by their first comment line."""
    blocks = re.findall(r"\n *```yaml\n(.*?)\n *```", README.read_text(encoding="utf-8"), re.DOTALL)
    found = {}
    for block in blocks:
        document = yaml.safe_load(block)
        if isinstance(document, dict) and "scrape_configs" in document:
            found[block.lstrip().splitlines()[0]] = document
    return found


def targets(document: dict[str, Any]) -> list[str]:
    (job,) = document["scrape_configs"]
    assert job["job_name"] == JOB
    assert job["honor_labels"] is True
    return [target for static in job["static_configs"] for target in static["targets"]]


def test_sharded_scrape_config_has_one_target_per_shard() -> None:
    """The sharded example lists each StatefulSet pod by its stable DNS name, as many as the
    StatefulSet has replicas, and never the Service that balances them."""
    statefulset = yaml.safe_load((SHARDED / "statefulset.yaml").read_text(encoding="utf-8"))
    configs = scrape_configs()
    (sharded,) = [doc for first, doc in configs.items() if "Sharded" in first]
    name = statefulset["metadata"]["name"]
    namespace = statefulset["metadata"]["namespace"]
    service = statefulset["spec"]["serviceName"]
    assert targets(sharded) == [
        f"{name}-{ordinal}.{service}.{namespace}.svc:9808"
        for ordinal in range(statefulset["spec"]["replicas"])
    ]
    (plain,) = [doc for first, doc in configs.items() if "Plain" in first]
    assert targets(plain) == [f"{name}.{namespace}:9808"]
