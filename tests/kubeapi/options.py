"""ListOptions validation, as kube-apiserver's ValidateListOptions answers it (422 Invalid).

apimachinery/pkg/apis/meta/internalversion/validation: a LIST may not ask for
sendInitialEvents, resourceVersionMatch needs a resourceVersion and no continue token; a
WATCH with sendInitialEvents needs resourceVersionMatch=NotOlderThan (and bookmarks), and is
refused outright while the WatchList feature is off, which is how a client learns that it
must fall back to LIST then WATCH.
"""

from __future__ import annotations

from typing import Any

from tests.kubeapi.status import ApiError

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _forbidden(field: str, detail: str) -> tuple[str, str, str]:
    return (field, "FieldValueForbidden", f"Forbidden: {detail}")


def _not_supported(field: str, value: str, allowed: list[str]) -> tuple[str, str, str]:
    quoted = ", ".join(f'"{a}"' for a in allowed)
    return (
        field,
        "FieldValueNotSupported",
        f'Unsupported value: "{value}": supported values: {quoted}',
    )


def send_initial_events(query: dict[str, str]) -> bool | None:
    value = query.get("sendInitialEvents")
    return None if value is None else value.lower() in {"1", "true"}


def validate(query: dict[str, str], *, watch: bool, watch_list: bool) -> None:
    """Raise the 422 Invalid the API server answers to these ListOptions, if any."""
    errors = _watch_errors(query, watch_list=watch_list) if watch else _list_errors(query)
    if errors:
        raise invalid_list_options(errors)


def _watch_errors(query: dict[str, str], *, watch_list: bool) -> list[tuple[str, str, str]]:
    match = query.get("resourceVersionMatch", "")
    initial = send_initial_events(query)
    errors: list[tuple[str, str, str]] = []
    if initial is not None:
        if match != NOT_OLDER_THAN:
            errors.append(
                _forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to " + NOT_OLDER_THAN,
                )
            )
        if not watch_list:
            errors.append(
                _forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList "
                    "feature gate is enabled",
                )
            )
        if initial and query.get("allowWatchBookmarks", "").lower() not in {"1", "true"}:
            errors.append(
                _forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks must be set to true when sendInitialEvents is true",
                )
            )
    if match:
        if initial is None:
            errors.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                    "is provided",
                )
            )
        if match != NOT_OLDER_THAN:
            errors.append(_not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if query.get("continue"):
            errors.append(_CONTINUE_FORBIDDEN)
    return errors


_CONTINUE_FORBIDDEN = _forbidden(
    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"
)


def _list_errors(query: dict[str, str]) -> list[tuple[str, str, str]]:
    match = query.get("resourceVersionMatch", "")
    rv = query.get("resourceVersion", "")
    errors: list[tuple[str, str, str]] = []
    if match:
        if not rv:
            errors.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if query.get("continue"):
            errors.append(_CONTINUE_FORBIDDEN)
        if match not in {EXACT, NOT_OLDER_THAN}:
            errors.append(
                _not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""])
            )
        if match == EXACT and rv == "0":
            errors.append(
                _forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial_events(query) is not None:
        errors.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errors


def invalid_list_options(errors: list[tuple[str, str, str]]) -> ApiError:
    """StatusError of NewInvalid(ListOptions.meta.k8s.io, "", errors)."""
    parts = [f"{field}: {message}" for field, _, message in errors]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    causes: list[dict[str, Any]] = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in errors
    ]
    return ApiError(
        422,
        "Invalid",
        f'ListOptions.meta.k8s.io "" is invalid: {joined}',
        {"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes},
    )
