"""What /readyz and the status page say about a resource the exporter cannot read."""

from __future__ import annotations

import re
import time

_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")
_GROUPS = {"endpointslices": "discovery.k8s.io"}


def describe_watch_failure(
    resource: str, problem: str, down_since: dict[str, float], now: float
) -> str:
    """One line for people about a resource the exporter cannot read.

    `problem` is the informer's own text (a library's exception string with hosts in it):
    only its kind is used here, never its words.
    """
    since = down_since.get(resource)
    when = f" since {ago(since, now)}" if since is not None else ""
    match = _HTTP_STATUS.search(problem)
    status = int(match.group(1)) if match else None
    group = _GROUPS.get(resource, "core")
    if problem.startswith("list expired: "):
        # The informer's own words (counts, a status code), never a library's.
        what = f"its list cannot complete: {problem.removeprefix('list expired: ')}"
        check = (
            "410 Gone says the API server no longer has the version the list asked for; "
            "check the exporter's log for the API server's message, and proxies or caches "
            "between the exporter and the API server"
        )
    elif problem.startswith("list stalled: "):
        what = (
            "its streaming list has not ended: "
            f"{problem.removeprefix('list stalled: ')} (k8s.io/initial-events-end); "
            "the objects so far are held, not used"
        )
        check = (
            "the exporter's log counts the events received; check the API server's "
            "version and logs, and proxies that rewrite or cut watch streams"
        )
    elif problem.startswith("forbidden") or status == 403:
        what = "the API server refuses to list or watch them (403 Forbidden)"
        check = (
            f"check that the exporter's ClusterRole grants list and watch on {resource} "
            f"(API group {group}) and that its ClusterRoleBinding names the exporter's "
            "service account"
        )
    elif status == 401:
        what = "the API server does not accept the exporter's credentials (401 Unauthorized)"
        check = "check the service account token, or the user of the kubeconfig in use"
    elif problem.startswith("stalled"):
        what = "its watch went silent: no event and no bookmark from the API server in time"
        check = (
            "the watch was restarted; check proxies or load balancers between the exporter "
            "and the API server that hold connections open without passing data"
        )
    elif status == 429 or problem.startswith("throttled"):
        what = "the API server asks the exporter to slow down (429 Too Many Requests)"
        check = "the exporter retries as told; check the API server's load and priority levels"
    elif status is not None and status >= 500:
        what = f"the API server answers with an error (HTTP {status})"
        check = "check the API server's health and its logs"
    elif status is not None:
        what = f"the API server rejects the request (HTTP {status})"
        check = "check the exporter's log for the API server's message"
    else:
        what = "the API server cannot be reached, or its answer cannot be read"
        check = (
            "check the network path to the API server (NetworkPolicy egress, DNS, proxies) "
            "and that it is up; the exporter's log has the details"
        )
    return f"- {resource}: {what}{when}; {check}. Retrying."


def ago(moment: float, now: float) -> str:
    """A moment as people read it: its UTC time and how long ago it was."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
    return f"{stamp} ({max(0, round(now - moment))} s ago)"
