"""Fixtures of the source tests: a real `kubernetes` client on the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, CoreV1Api

from tests.sources.kubeapi_client import client_from_kubeconfig, close_client


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[ApiClient]:
    """A real kubernetes ApiClient loaded from the generated kubeconfig."""
    client = client_from_kubeconfig(kubeconfig, context="fake")
    yield client
    close_client(client)


@pytest.fixture
def core(api_client: ApiClient) -> CoreV1Api:
    return CoreV1Api(api_client)
