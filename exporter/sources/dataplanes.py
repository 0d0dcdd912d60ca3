"""`serve --dataplane auto`: read the named objects that tell which data planes run.

Only `get` on four named objects in kube-system (deploy/components/dataplane-detection grants
exactly that). Without the permission, or when nothing is recognised, detection logs one line
and the configured data planes apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import structlog
import urllib3

from exporter.engine import DataPlane
from exporter.engine.detection import (
    CILIUM_CONFIG,
    DAEMONSETS,
    DaemonSetFacts,
    DataPlaneFacts,
    detect,
    kube_proxy_minor,
)
from exporter.sources.kubeapi import ApiStatusError, KubeTransport, Timeouts

logger = structlog.get_logger("exporter")

NAMESPACE = "kube-system"
_NOT_FOUND = 404
DETECTED = "detected"
FLAG = "flag"


def _get(transport: KubeTransport, path: str, timeouts: Timeouts) -> dict[str, Any] | None:
    """The object at `path`, or None when it does not exist."""
    try:
        response = transport.get(path, (), timeouts)
    except ApiStatusError as error:
        if error.status == _NOT_FOUND:
            return None
        raise
    try:
        document = json.loads(response.data or b"{}")
    finally:
        response.release_conn()
    return document if isinstance(document, dict) else None


def _daemonset_facts(document: Mapping[str, Any]) -> DaemonSetFacts:
    spec = ((document.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    env = {
        str(variable["name"]): str(variable["value"])
        for container in containers
        for variable in container.get("env") or ()
        if isinstance(variable, dict) and "name" in variable and "value" in variable
    }
    return DaemonSetFacts(
        images=tuple(str(c["image"]) for c in containers if c.get("image")), env=env
    )


def read_facts(transport: KubeTransport, timeouts: Timeouts) -> DataPlaneFacts:
    """GET the three DaemonSets and cilium-config; ApiStatusError on anything but 2xx or 404."""
    daemonsets = {}
    for name in DAEMONSETS:
        document = _get(
            transport, f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{name}", timeouts
        )
        if document is not None:
            daemonsets[name] = _daemonset_facts(document)
    config = _get(transport, f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CILIUM_CONFIG}", timeouts)
    data = None
    if config is not None:
        data = {str(key): str(value) for key, value in (config.get("data") or {}).items()}
    return DataPlaneFacts(daemonsets=daemonsets, cilium_config=data)


def detect_dataplanes(
    transport: KubeTransport, timeouts: Timeouts, fallback: tuple[DataPlane, ...]
) -> tuple[tuple[DataPlane, ...], str, int | None]:
    """(data planes, source, kube-proxy's minor version): the detected ones, or `fallback`
    from the flag with one log line; the version from the kube-proxy DaemonSet's image tag
    (behaviour §12), None when it is not known."""
    try:
        facts = read_facts(transport, timeouts)
    except (ApiStatusError, OSError, urllib3.exceptions.HTTPError) as error:
        logger.warning(
            "data plane detection failed; using --dataplane's",
            error=str(error),
            hint="add the deploy/components/dataplane-detection kustomize component",
            dataplanes=",".join(fallback),
        )
        return fallback, FLAG, None
    detected = detect(facts)
    proxy_minor = kube_proxy_minor(facts)
    if not detected:
        logger.warning(
            "no known data plane found in kube-system; using --dataplane's",
            dataplanes=",".join(fallback),
        )
        return fallback, FLAG, proxy_minor
    logger.info(
        "data planes detected",
        dataplanes=",".join(detected),
        kube_proxy_version=f"1.{proxy_minor}" if proxy_minor is not None else None,
    )
    return detected, DETECTED, proxy_minor
