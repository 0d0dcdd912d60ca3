"""Where the status pages live: `--external-url` and the paths built from it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

SERVICES_PATH = "/services"
API_PATH = "/api/v1"


def parse_external_url(url: str) -> str:
    """An absolute http(s) URL without query or fragment, without its trailing slash."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"external URL {url!r} is not an absolute http:// or https:// URL")
    if parts.query or parts.fragment:
        raise ValueError(f"external URL {url!r} must not have a query or a fragment")
    return url.rstrip("/")


def service_path(namespace: str, name: str) -> str:
    return f"{SERVICES_PATH}/{quote(namespace, safe='')}/{quote(name, safe='')}"


def explain_url(external_url: str, namespace: str, name: str) -> str:
    """The absolute link to one Service's page, e.g. for an alert's `explain_url`."""
    return parse_external_url(external_url) + service_path(namespace, name)


@dataclass(frozen=True, slots=True)
class Links:
    """Links as the browser must write them: under the external URL's path, if any.

    A reverse proxy that serves the exporter under /topology/ and strips that prefix
    still needs the pages to link to /topology/services/..., not /services/....
    """

    prefix: str = ""

    @classmethod
    def from_external_url(cls, external_url: str | None) -> Links:
        if external_url is None:
            return cls()
        return cls(urlsplit(parse_external_url(external_url)).path.rstrip("/"))

    def home(self, query: str = "") -> str:
        return f"{self.prefix}/" + (f"?{query}" if query else "")

    def service(self, namespace: str, name: str) -> str:
        return self.prefix + service_path(namespace, name)

    def api_service(self, namespace: str, name: str) -> str:
        return f"{self.prefix}{API_PATH}{service_path(namespace, name)}"

    def api_evaluation(self) -> str:
        return f"{self.prefix}{API_PATH}/evaluation"

    def asset(self, name: str) -> str:
        return f"{self.prefix}/static/{name}"

    def path(self, path: str) -> str:
        """Any other route of the exporter, e.g. /metrics."""
        return self.prefix + path

    def strip(self, path: str) -> str:
        """The route of a request path, whether or not the proxy kept the prefix."""
        if self.prefix and (path == self.prefix or path.startswith(self.prefix + "/")):
            return path[len(self.prefix) :] or "/"
        return path
