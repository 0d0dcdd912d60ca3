"""The apps the HTTP server serves: routes by path, the probes, plain-text answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Check = Callable[[], tuple[bool, str]]
# Path -> app. A key ending in "/*" also serves every path below it ("/api/v1/*").
Routes = dict[str, "WSGIApplication"]

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
SCRAPE_PATHS = frozenset({"/metrics"})


def plain_text(
    start_response: StartResponse,
    status: str,
    body: str,
    content_type: str = "text/plain",
    headers: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    data = body.encode()
    start_response(
        status,
        [
            ("Content-Type", f"{content_type}; charset=utf-8"),
            ("Content-Length", str(len(data))),
            *headers,
        ],
    )
    return [data]


def default_routes(metrics_app: WSGIApplication, *, ready: Check, healthy: Check) -> Routes:
    """/metrics, /healthz and /readyz; the status pages merge their routes on top."""

    def probe(check: Check) -> WSGIApplication:
        def app(_environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            ok, detail = check()
            status = "200 OK" if ok else "503 Service Unavailable"
            return plain_text(start_response, status, detail + "\n")

        return app

    return {
        "/metrics": metrics_app,
        "/healthz": probe(healthy),
        "/readyz": probe(ready),
    }


def route(routes: Mapping[str, WSGIApplication], path: str) -> WSGIApplication | None:
    """The app for an exact path, else for the longest "/prefix/*" route above it."""
    found = routes.get(path)
    if found is not None:
        return found
    best: tuple[int, WSGIApplication] | None = None
    for key, app in routes.items():
        if (
            key.endswith("/*")
            and path.startswith(key[:-1])
            and (best is None or len(key) > best[0])
        ):
            best = (len(key), app)
    return best[1] if best else None


def make_app(routes: Mapping[str, WSGIApplication]) -> WSGIApplication:
    """Serve `routes`, read on each request: routes merged in before start() are served."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        target = route(routes, environ.get("PATH_INFO", "/"))
        if target is None:
            # The path is not echoed: a response never reflects what the client sent.
            return plain_text(start_response, "404 Not Found", "not found\n")
        body: Iterable[bytes] = target(environ, start_response)
        return body

    return app
