"""What one user asked the real API server, read from its audit log (level Metadata).

Each request is one audit ID; a watch has two entries (ResponseStarted, then
ResponseComplete when it ends), a short request one. A request is summarised by its verb,
what it named (a resource with its API group, or a path such as /version) and the shape of
its query: the parameter names with their values, except those that change from one
request to the next (a resourceVersion other than 0, timeoutSeconds, continue tokens).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.parse
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Parameters whose value differs between requests of the same kind: shown as a placeholder.
_VARYING = {"timeoutSeconds": "N", "continue": "TOKEN"}
# The identity a ServiceAccount token carries (authentication.kubernetes.io/credential-id).
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclass
class Request:
    """One request of the audit log, from its entries (one per stage)."""

    audit_id: str
    verb: str
    uri: str
    target: str  # "nodes", "endpointslices.discovery.k8s.io" or a path such as /version
    stages: list[str] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)
    credential: str = ""
    received: str = ""
    user_agent: str = ""

    @property
    def received_at(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.received)

    @property
    def query(self) -> dict[str, str]:
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.uri).query))

    @property
    def shape(self) -> str:
        """The query with its varying values replaced, parameters in name order."""
        parts = []
        for name, value in sorted(self.query.items()):
            if name == "resourceVersion" and value != "0":
                shown = "RV"
            else:
                shown = _VARYING.get(name, value)
            parts.append(f"{name}={shown}")
        return "&".join(parts)

    @property
    def refused(self) -> bool:
        return bool(self.codes & {401, 403, 429})

    def describe(self) -> str:
        return f"{self.verb} {self.target}?{self.shape} -> {sorted(self.codes)}"


def _target(entry: dict[str, object]) -> str:
    ref = entry.get("objectRef")
    if isinstance(ref, dict) and ref.get("resource"):
        group = ref.get("apiGroup") or ""
        return f"{ref['resource']}.{group}" if group else str(ref["resource"])
    return urllib.parse.urlsplit(str(entry.get("requestURI", ""))).path


def requests(log: Path, username: str, token: str | None = None) -> list[Request]:
    """The requests `username` made (with `token` only, when given: one process's among
    all that share a ServiceAccount), in the order the API server received them."""
    found: dict[str, Request] = {}
    text = log.read_text(errors="replace") if log.exists() else ""
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line the API server is still writing
        user = entry.get("user") or {}
        if user.get("username") != username:
            continue
        audit_id = str(entry["auditID"])
        request = found.get(audit_id)
        if request is None:
            credential = (user.get("extra") or {}).get(CREDENTIAL_ID) or [""]
            request = found[audit_id] = Request(
                audit_id,
                str(entry.get("verb", "")),
                str(entry.get("requestURI", "")),
                _target(entry),
                credential=str(credential[0]),
                received=str(entry.get("requestReceivedTimestamp", "")),
                user_agent=str(entry.get("userAgent", "")),
            )
        request.stages.append(str(entry.get("stage", "")))
        code = (entry.get("responseStatus") or {}).get("code")
        if isinstance(code, int):
            request.codes.add(code)
    made = sorted(found.values(), key=lambda request: request.received)
    if token is not None:
        credential = credential_id(token)
        made = [request for request in made if request.credential == credential]
    return made


def summary(made: Iterable[Request]) -> Counter[str]:
    """How many requests of each verb, target and query shape (with their answers)."""
    return Counter(request.describe() for request in made)


def report(title: str, made: list[Request]) -> str:
    """The summary as lines for people: the count, then the request."""
    counted = summary(made)
    lines = [f"{title}: {len(made)} requests"]
    lines += [f"  {count:5d}  {line}" for line, count in sorted(counted.items())]
    return "\n".join(lines)


def credential_id(token: str) -> str:
    """What the audit log records of a ServiceAccount token: JTI=<its jti claim>."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"JTI={claims['jti']}"
