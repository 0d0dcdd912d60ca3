"""What the exporter may ask of the API server, checked against its audit-log requests.

It lists and watches the four resources it reads and gets /version, nothing else; it
starts each resource with a streaming list (a watch with sendInitialEvents=true) or a LIST
from the watch cache (resourceVersion=0), both at resourceVersionMatch=NotOlderThan, never
with a quorum read of etcd; every watch asks for bookmarks; nothing is refused.
"""

from __future__ import annotations

from tests.realcluster.audit import Request

RESOURCES = ("nodes", "services", "events", "endpointslices.discovery.k8s.io")
ALLOWED = frozenset(
    {
        *((verb, resource) for resource in RESOURCES for verb in ("list", "watch")),
        ("get", "/version"),
    }
)
NOT_OLDER_THAN = "NotOlderThan"


def is_initial(request: Request) -> bool:
    """A request that reads a whole resource: a LIST, or a watch with the initial events."""
    return request.verb == "list" or request.query.get("sendInitialEvents") == "true"


def started_from_the_watch_cache(made: list[Request]) -> list[str]:
    """What is wrong with how each resource was first read (none: an empty list)."""
    problems = []
    for resource in RESOURCES:
        first = next((r for r in made if r.target == resource), None)
        if first is None:
            problems.append(f"{resource}: never read")
            continue
        query = first.query
        streaming = first.verb == "watch" and query.get("sendInitialEvents") == "true"
        cached = first.verb == "list" and query.get("resourceVersion") == "0"
        if not (streaming or cached) or query.get("resourceVersionMatch") != NOT_OLDER_THAN:
            problems.append(f"{resource}: started with {first.describe()}")
    return problems


def asked_properly(made: list[Request]) -> list[str]:
    """Only the verbs and targets the exporter needs, bookmarks on every watch, no refusal."""
    problems = [f"not needed: {r.describe()}" for r in made if (r.verb, r.target) not in ALLOWED]
    problems += [
        f"no bookmarks: {r.describe()}"
        for r in made
        if r.verb == "watch" and r.query.get("allowWatchBookmarks") != "true"
    ]
    problems += [f"refused: {r.describe()}" for r in made if r.refused]
    return problems
