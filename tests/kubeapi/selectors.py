"""Field and label selectors, parsed and refused the way kube-apiserver does.

Field selectors: only the fields each resource's storage registers are selectable (every
resource: `metadata.name`, `metadata.namespace`; Nodes: `spec.unschedulable`; Services:
`spec.clusterIP`, `spec.type`; Events: `involvedObject.*`, `reason`, `source`, `type`, ...);
any other field is a 400 whose Status message is the apiserver's own, "field label not
supported: FIELD" (kubectl adds "Unable to find ... that match ..." in front of it itself).
A term without an operator is "invalid selector: 'SELECTOR'; can't understand 'TERM'"
(apimachinery's fields.ParseSelector).

Label selectors follow apimachinery's labels.Parse: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
`k in (a,b)`, `k notin (a,b)`; a malformed one is a 400 "unable to parse requirement: ...".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.status import bad_request

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
# What each resource's field-label conversion accepts (pkg/apis/*/v1/conversion.go) and,
# for the fields a stored object may omit, the value the selector sees then.
FIELDS: dict[str, frozenset[str]] = {
    "nodes": _COMMON_FIELDS | {"spec.unschedulable"},
    "services": _COMMON_FIELDS | {"spec.clusterIP", "spec.type"},
    "events": _COMMON_FIELDS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "configmaps": _COMMON_FIELDS,
    "endpointslices": _COMMON_FIELDS,
    "daemonsets": _COMMON_FIELDS,
}
_DEFAULTS = {"spec.unschedulable": "false", "spec.type": "ClusterIP"}
# labels.Parse's binary operators, in the order its error message lists them.
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
# The lexer's special characters: everything else up to one of them is an identifier.
_TOKEN = re.compile(r"\s*(==|=|!=|!|\(|\)|,|[^\s=!(),]+)")


@dataclass(frozen=True)
class Term:
    path: tuple[str, ...]  # () for a label term
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...]


def field_value(obj: Any, term: Term) -> str:
    value: Any = obj
    for part in term.path:
        if not isinstance(value, dict):
            value = None
            break
        value = value.get(part)
    if value is None or isinstance(value, dict | list):
        return _DEFAULTS.get(term.key, "")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(resource: str, selector: str) -> list[Term]:
    terms: list[Term] = []
    for raw in filter(None, (t.strip() for t in selector.split(","))):
        op = next((op for op in ("!=", "==", "=") if op in raw), None)
        if op is None:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{raw}'")
        key, _, value = raw.partition(op)
        operator = "!=" if op == "!=" else "="
        key = key.strip()
        if key not in FIELDS[resource]:
            raise bad_request(f"field label not supported: {key}")
        terms.append(Term(tuple(key.split(".")), key, operator, (value.strip(),)))
    return terms


def parse_label_selector(selector: str) -> list[Term]:
    try:
        return _LabelParser(selector).parse()
    except _ParseError as error:
        raise bad_request(str(error)) from None


class _ParseError(Exception):
    pass


class _LabelParser:
    def __init__(self, selector: str) -> None:
        self.tokens = [m.group(1) for m in _TOKEN.finditer(selector) if m.group(1)]
        self.position = 0

    def _next(self) -> str:
        token = self.tokens[self.position] if self.position < len(self.tokens) else ""
        self.position += 1
        return token

    def _peek(self) -> str:
        return self.tokens[self.position] if self.position < len(self.tokens) else ""

    def parse(self) -> list[Term]:
        terms: list[Term] = []
        while self._peek():
            try:
                terms.append(self._requirement())
            except _ParseError as error:
                raise _ParseError(f"unable to parse requirement: {error}") from None
            following = self._next()
            if following == "":
                break
            if following != ",":
                raise _ParseError(f"found '{following}', expected: ',' or 'end of string'")
            if not self._peek() or self._peek() in {",", "=", "==", "!=", "(", ")"}:
                raise _ParseError(f"found '{self._peek()}', expected: identifier after ','")
        return terms

    def _requirement(self) -> Term:
        negated = self._peek() == "!"
        if negated:
            self._next()
        key = self._next()
        _check_key(key)
        if negated:
            return Term((), key, "!", ())
        operator = self._peek()
        if operator in {"", ","}:
            return Term((), key, "exists", ())
        self._next()
        if operator in {"=", "==", "!="}:
            value = self._peek()
            if value in {",", ""}:
                value = ""
            else:
                self._next()
            _check_value(value)
            return Term((), key, "!=" if operator == "!=" else "=", (value,))
        if operator in {"in", "notin"}:
            return Term((), key, operator, self._values())
        raise _ParseError(f"found '{operator}', expected: {_BINARY_OPERATORS}")

    def _values(self) -> tuple[str, ...]:
        if (token := self._next()) != "(":
            raise _ParseError(f"found '{token}', expected: '('")
        values: list[str] = []
        while (token := self._next()) != ")":
            if token == "":
                raise _ParseError("found '', expected: ')'")
            if token != ",":  # noqa: S105 - a selector token, not a password
                _check_value(token)
                values.append(token)
        return tuple(values)


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        raise _ParseError(f'<nil>: Invalid value: "{key}": prefix part must be a DNS subdomain')
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        raise _ParseError(f'<nil>: Invalid value: "{key}": {_NAME_MESSAGE}')


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise _ParseError(f'values[0][{value}]: Invalid value: "{value}": {_VALUE_MESSAGE}')


def label_matches(labels: dict[str, Any], term: Term) -> bool:
    present = term.key in labels
    value = str(labels[term.key]) if present else None
    if term.operator == "exists":
        return present
    if term.operator == "!":
        return not present
    if term.operator == "=":
        return value == term.values[0]
    if term.operator == "!=":
        return value != term.values[0]
    if term.operator == "in":
        return value in term.values
    return value not in term.values  # notin
