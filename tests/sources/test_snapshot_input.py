"""Snapshot input through the real CLI: bad input exits 2 with one clear line, good input works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES_DIR, exporter_command

TIMEOUT = 60


def _evaluate(snapshot: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", snapshot],
        input=stdin.decode() if stdin is not None else None,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )


def _assert_one_line_error(completed: subprocess.CompletedProcess[str], *names: str) -> str:
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert completed.stdout == ""
    return lines[0]


def _list(*items: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def _node(name: str, zone: str, cpu: Any = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _service(name: str = "web", namespace: str | None = "default") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "annotations": {"service.kubernetes.io/topology-mode": "Auto"},
    }
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10"},
    }


def _endpoint(address: str, zone: str, *, ready: Any = True) -> dict[str, Any]:
    return {
        "addresses": [address],
        "conditions": {"ready": ready},
        "zone": zone,
        "hints": {"forZones": [{"name": zone}]},
    }


def _slice(*endpoints: dict[str, Any], name: str = "web-abc") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": list(endpoints),
    }


GOOD_OBJECTS = [
    _node("node-a", "zone-a"),
    _node("node-b", "zone-b"),
    _service(),
    _slice(_endpoint("10.0.0.1", "zone-a"), _endpoint("10.0.0.2", "zone-b")),
]


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _bad_node_cpu(cpu: object) -> str:
    return json.dumps(_list(_node("node-a", "zone-a", cpu)))


BAD_CONTENT = [
    # id, file content, names the message must contain besides the file
    ("empty-file", "", ()),
    ("whitespace-only", "  \n\n", ()),
    ("not-json-or-yaml", "{not json: [", ()),
    ("binary", b"\xff\xfe\x00\x01", ()),
    ("json-array", "[1, 2]", ()),
    ("json-string", '"a list"', ()),
    ("object-without-kind", '{"items": []}', ()),
    ("kind-not-a-string", '{"kind": 5, "items": []}', ()),
    ("items-not-a-list", '{"kind": "List", "items": {"a": 1}}', ()),
    ("item-not-an-object", '{"kind": "List", "items": [5]}', ()),
    (
        "node-without-name",
        json.dumps(_list({"kind": "Node", "metadata": {"labels": {}}})),
        ("Node",),
    ),
    (
        "service-without-namespace",
        json.dumps(_list(_service("web", namespace=None))),
        ("Service", "web"),
    ),
    (
        "service-without-spec",
        json.dumps(_list({"kind": "Service", "metadata": {"name": "web", "namespace": "ns"}})),
        ("Service", "ns/web"),
    ),
    (
        "endpointslice-without-address-type",
        json.dumps(_list({k: v for k, v in _slice().items() if k != "addressType"})),
        ("EndpointSlice", "default/web-abc", "addressType"),
    ),
    (
        "ready-is-a-string",
        json.dumps(_list(_slice(_endpoint("10.0.0.1", "zone-a", ready="yes")))),
        ("EndpointSlice", "default/web-abc", "ready"),
    ),
    (
        "addresses-missing",
        json.dumps(_list(_slice({"conditions": {"ready": True}}))),
        ("EndpointSlice", "default/web-abc", "addresses"),
    ),
    (
        "labels-not-strings",
        json.dumps(_list({"kind": "Node", "metadata": {"name": "node-x", "labels": {"a": 1}}})),
        ("Node", "node-x"),
    ),
    ("cpu-not-a-quantity", _bad_node_cpu("four"), ("Node", "node-a", "cpu")),
    ("cpu-empty", _bad_node_cpu(""), ("Node", "node-a", "cpu")),
    ("cpu-boolean", _bad_node_cpu(cpu=True), ("Node", "node-a")),
    ("cpu-infinite", _bad_node_cpu("inf"), ("Node", "node-a")),
    ("json-nested-too-deeply", "[" * 100_000, ()),
    ("yaml-not-a-list", "kind: List\nitems: []\n---\n- 1\n", ()),
]


@pytest.mark.parametrize(
    ("content", "names"), [pytest.param(row[1], row[2], id=row[0]) for row in BAD_CONTENT]
)
def test_bad_snapshot_content(tmp_path: Path, content: str | bytes, names: tuple[str, ...]) -> None:
    """Bad content exits 2 with one stderr line naming the file (and object), no traceback."""
    path = _write(tmp_path, "snapshot.json", content)
    _assert_one_line_error(_evaluate(str(path)), str(path), *names)


def test_huge_cpu_exponent_is_rejected_quickly(tmp_path: Path) -> None:
    """A CPU quantity with an absurd exponent is rejected with one line, not computed for ever."""
    path = _write(tmp_path, "snapshot.json", _bad_node_cpu("1e999999999"))
    try:
        completed = subprocess.run(
            [*exporter_command(), "evaluate", "--snapshot", str(path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("evaluate did not finish within 5 s")
    _assert_one_line_error(completed, str(path), "node-a")


def test_missing_file(tmp_path: Path) -> None:
    """A missing file exits 2 with one line naming it."""
    path = tmp_path / "absent.json"
    _assert_one_line_error(_evaluate(str(path)), str(path))


def test_directory(tmp_path: Path) -> None:
    """A directory given as the snapshot exits 2 with one line naming it."""
    _assert_one_line_error(_evaluate(str(tmp_path)), str(tmp_path))


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads files whatever their mode, so chmod 000 cannot make one unreadable",
)
def test_unreadable_file(tmp_path: Path) -> None:
    """A file without read permission exits 2 with one line naming it."""
    path = _write(tmp_path, "secret.json", json.dumps(_list(*GOOD_OBJECTS)))
    path.chmod(0)
    try:
        _assert_one_line_error(_evaluate(str(path)), str(path))
    finally:
        path.chmod(0o600)


def test_empty_stdin_names_stdin() -> None:
    """Empty standard input exits 2 with one line naming '-'."""
    line = _assert_one_line_error(_evaluate("-", stdin=b""))
    assert ": -: " in line


def _document(
    completed: subprocess.CompletedProcess[str], warnings: list[str] | None = None
) -> dict[str, Any]:
    assert completed.returncode == 0, completed.stderr
    # Only the kinds of object the snapshot lacks are warned about, one line each.
    lacking = [line.split(" (")[0] for line in completed.stderr.splitlines()]
    assert lacking == [f"topology-hints-exporter: warning: the snapshot holds no {kind}"
                       for kind in warnings or []]  # fmt: skip
    document = json.loads(completed.stdout)
    assert isinstance(document, dict)
    return document


@pytest.fixture(scope="module")
def reference_document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The document for the good objects given as a JSON List."""
    path = tmp_path_factory.mktemp("reference") / "list.json"
    path.write_text(json.dumps(_list(*GOOD_OBJECTS)), encoding="utf-8")
    return _document(_evaluate(str(path)))


def test_json_list_is_evaluated(reference_document: dict[str, Any]) -> None:
    """A JSON List of Nodes, a Service and an EndpointSlice gives the Service's entry."""
    [entry] = reference_document["services"]
    assert (entry["namespace"], entry["name"], entry["address_type"]) == (
        "default",
        "web",
        "IPv4",
    )
    assert entry["ready_endpoints"] == 2
    assert reference_document["cluster"]["sufficient_node_info"] is True


GOOD_VARIANTS = [
    ("yaml-list", yaml.safe_dump(_list(*GOOD_OBJECTS))),
    ("multi-document-yaml", yaml.safe_dump_all(GOOD_OBJECTS)),
    (
        "multi-document-yaml-of-lists",
        yaml.safe_dump_all([_list(*GOOD_OBJECTS[:2]), _list(*GOOD_OBJECTS[2:])]),
    ),
    (
        "other-kinds-ignored",
        json.dumps(
            _list(
                {"kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "b"}},
                {"kind": "Pod", "spec": "not even a pod"},
                *GOOD_OBJECTS,
            )
        ),
    ),
    (
        "items-null-document",
        yaml.safe_dump_all([{"kind": "List", "items": None}, _list(*GOOD_OBJECTS)]),
    ),
    ("single-objects-json-lines-as-yaml", "\n---\n".join(json.dumps(o) for o in GOOD_OBJECTS)),
]


@pytest.mark.parametrize("content", [pytest.param(row[1], id=row[0]) for row in GOOD_VARIANTS])
def test_good_input_variants_match_json_list(
    tmp_path: Path, content: str, reference_document: dict[str, Any]
) -> None:
    """YAML, multi-document and mixed-kind inputs evaluate exactly like the JSON List."""
    path = _write(tmp_path, "snapshot.yaml", content)
    assert _document(_evaluate(str(path))) == reference_document


def test_stdin_dash(reference_document: dict[str, Any]) -> None:
    """`--snapshot -` reads the List from standard input."""
    completed = _evaluate("-", stdin=json.dumps(_list(*GOOD_OBJECTS)).encode())
    assert _document(completed) == reference_document


def test_items_null_alone_is_an_empty_cluster(tmp_path: Path) -> None:
    """A List with `items: null` is an empty snapshot: no Services, insufficient node info."""
    path = _write(tmp_path, "empty-list.json", '{"kind": "List", "items": null}')
    document = _document(_evaluate(str(path)), ["Nodes", "Services", "EndpointSlices"])
    assert document["services"] == []
    assert document["cluster"]["sufficient_node_info"] is False


def _run_cli(
    *args: str, stdin: bytes | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    try:
        completed = subprocess.run(
            [*exporter_command(), *args],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} did not finish within {timeout} s")
    return subprocess.CompletedProcess(
        completed.args,
        completed.returncode,
        completed.stdout.decode(errors="replace"),
        completed.stderr.decode(errors="replace"),
    )


BOUNDED_CONTENT = [
    ("negative-cpu", _bad_node_cpu("-4"), ("Node", "node-a", "negative")),
    ("negative-millicores", _bad_node_cpu("-0.001"), ("Node", "node-a", "negative")),
    ("arabic-indic-digits", _bad_node_cpu("\u0661\u0662"), ("Node", "node-a", "cpu")),
    ("tiny-cpu-exponent", _bad_node_cpu("1e-999999999"), ("Node", "node-a", "exponent")),
    ("node-twice", json.dumps(_list(*GOOD_OBJECTS, GOOD_OBJECTS[0])), ("Node node-a", "twice")),
    (
        "slice-twice",
        json.dumps(_list(*GOOD_OBJECTS, GOOD_OBJECTS[3])),
        ("EndpointSlice default/web-abc", "twice"),
    ),
    ("service-twice", json.dumps(_list(*GOOD_OBJECTS, _service())), ("Service default/web",)),
    (
        "not-utf8",
        json.dumps(_list(*GOOD_OBJECTS)).encode().replace(b"zone-b", b"zone-\xff"),
        ("UTF-8",),
    ),
    ("json-integer-5001-digits", '{"kind": "List", "items": [' + "1" * 5001 + "]}", ()),
    ("yaml-key-5001-digits", "kind: List\n? " + "1" * 5001 + "\n: x\n", ()),
]


@pytest.mark.parametrize(
    ("content", "names"), [pytest.param(row[1], row[2], id=row[0]) for row in BOUNDED_CONTENT]
)
def test_out_of_bounds_content(
    tmp_path: Path, content: str | bytes, names: tuple[str, ...]
) -> None:
    """Values outside Kubernetes' grammar or bounds, and duplicates, exit 2 with one line."""
    path = _write(tmp_path, "snapshot.json", content)
    _assert_one_line_error(
        _run_cli("evaluate", "--snapshot", str(path), timeout=10), str(path), *names
    )


def test_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    """A FIFO with no writer is refused at once instead of blocking for ever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    line = _assert_one_line_error(_run_cli("evaluate", "--snapshot", str(fifo), timeout=10))
    assert "not a regular file" in line


@pytest.mark.parametrize("command", ["evaluate", "explain"])
def test_device_is_refused(command: str) -> None:
    """/dev/zero (a device) is refused, not read until memory runs out."""
    line = _assert_one_line_error(_run_cli(command, "--snapshot", "/dev/zero", timeout=10))
    assert "/dev/zero" in line


def test_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    """A file above --max-input-bytes is refused with one line naming the flag."""
    path = _write(tmp_path, "snapshot.json", json.dumps(_list(*GOOD_OBJECTS)))
    completed = _run_cli("evaluate", "--snapshot", str(path), "--max-input-bytes", "1Ki")
    assert "--max-input-bytes" in _assert_one_line_error(completed, str(path))


def test_stdin_is_bounded() -> None:
    """`--snapshot -` reads at most --max-input-bytes of standard input."""
    completed = _run_cli(
        "evaluate", "--snapshot", "-", "--max-input-bytes", "100", stdin=b" " * 1000
    )
    assert "--max-input-bytes" in _assert_one_line_error(completed)


def test_max_input_bytes_must_be_a_size() -> None:
    """--max-input-bytes takes a whole number of bytes, as a number or a quantity."""
    completed = _run_cli("evaluate", "--snapshot", "-", "--max-input-bytes", "1.5")
    assert completed.returncode == 2
    assert "--max-input-bytes" in completed.stderr


def test_billion_laughs_is_refused_quickly(tmp_path: Path) -> None:
    """A small YAML file whose aliases expand to a billion nodes is refused in seconds."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = _write(tmp_path, "laughs.yaml", "\n".join([*lines, "kind: List", "items: *a8", ""]))
    line = _assert_one_line_error(_run_cli("evaluate", "--snapshot", str(path), timeout=10))
    assert "aliases" in line


def _stderr_of_script(script: str, argument: Path) -> str:
    """What a fresh interpreter running `script` with one argument wrote to stderr."""
    completed = subprocess.run(
        [sys.executable, "-c", script, str(argument)],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stderr


def test_offline_commands_import_neither_the_kubernetes_client_nor_structlog() -> None:
    """evaluate, explain and what-if never import `kubernetes` (0.45 s of start-up, unused
    offline) nor structlog (with rich beside it, 0.13 s: they log no transition)."""
    snapshot = EXAMPLES_DIR / "healthy-three-zones.json"
    script = (
        "import sys\n"
        "from exporter.cli import main\n"
        "NODE = 'ip-10-0-1-23.eu-west-1.compute.internal'\n"
        "for command in ('evaluate', 'explain'):\n"
        "    assert main([command, '--snapshot', sys.argv[1]]) == 0\n"
        "assert main(['what-if', '--snapshot', sys.argv[1], '--lose-node', NODE]) in (0, 1)\n"
        "loaded = sorted(\n"
        "    name for name in sys.modules if name.split('.')[0] in ('kubernetes', 'structlog')\n"
        ")\n"
        "sys.stderr.write(repr(loaded))\n"
    )
    assert _stderr_of_script(script, snapshot) == "[]"


def test_the_live_path_imports_kubernetes_only_to_load_its_configuration(tmp_path: Path) -> None:
    """`serve` and its sources import without `kubernetes`; loading a kubeconfig imports it."""
    kubeconfig = _write(
        tmp_path,
        "kubeconfig",
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    script = (
        "import sys\n"
        "import exporter.cli, exporter.run.serve\n"
        "import exporter.sources.cluster, exporter.sources.listing\n"
        "before = sorted(name for name in sys.modules if name.split('.')[0] == 'kubernetes')\n"
        "from exporter.sources.kubeapi import api_client\n"
        "api_client(sys.argv[1])\n"
        "after = 'kubernetes' in sys.modules\n"
        "sys.stderr.write(repr((before, after)))\n"
    )
    assert _stderr_of_script(script, kubeconfig) == "([], True)"
