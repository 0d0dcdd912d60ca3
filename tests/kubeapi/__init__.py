"""A Kubernetes-compatible API server for tests; see `server.py`."""

from tests.kubeapi.server import RESOURCES, FakeKubeAPI, Request, Resource

__all__ = ["RESOURCES", "FakeKubeAPI", "Request", "Resource"]
