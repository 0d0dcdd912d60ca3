"""`explain` at cluster scale through the real CLI: scope flags, summary, problems, exit status,
snapshots that lack a kind of object, and reading the test API server instead of a dump."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command
from tests.kubeapi import FakeKubeAPI

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")
HEALTHY = str(EXAMPLES_DIR / "healthy-three-zones.json")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=PROJECT_ROOT,
        env=env,
    )


def without(kind: str, tmp_path: Path) -> str:
    """The demo cluster's snapshot with every object of one kind left out."""
    document = json.loads(Path(DEMO).read_text())
    document["items"] = [item for item in document["items"] if item["kind"] != kind]
    path = tmp_path / f"without-{kind}.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_namespace_flag_and_name_select_like_kubectl() -> None:
    """`-n shop cart` is `shop/cart`; -n alone keeps one namespace; -A overrides -n."""
    by_flag = run("explain", "--snapshot", DEMO, "-n", "shop", "cart")
    by_path = run("explain", "--snapshot", DEMO, "shop/cart")
    assert by_flag.returncode == by_path.returncode == 0, by_flag.stderr
    assert by_flag.stdout == by_path.stdout
    assert "Service shop/cart (IPv4)" in by_flag.stdout
    payments = run("explain", "--snapshot", DEMO, "--summary", "-n", "payments").stdout
    table = payments.splitlines()[1:-1]
    assert table
    assert all(line.startswith("payments ") for line in table)
    everything = run("explain", "--snapshot", DEMO, "--summary", "-n", "payments", "-A")
    assert "shop " in everything.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["-A", "cart"],
        ["-n", "payments", "shop/cart"],
        ["-n", "", "cart"],
        ["shop/cart/x"],
        ["-n", "shop", "nope"],
    ],
)
def test_bad_scope_exits_2_with_one_line(args: list[str]) -> None:
    completed = run("explain", "--snapshot", DEMO, *args)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert len(completed.stderr.splitlines()) == 1
    assert "Traceback" not in completed.stderr


def test_summary_lists_problems_first_with_a_count_line() -> None:
    """One line per Service, problems first, then the counts; exit 1 as some lack hints."""
    completed = run("explain", "--snapshot", DEMO, "--summary")
    assert completed.returncode == 1
    header, *rows, counts = completed.stdout.splitlines()
    assert header.split()[:4] == ["NAMESPACE", "NAME", "MECHANISM", "VERDICT"]
    problems = [row.split()[-1] for row in rows]
    assert len(rows) == 7
    first_clean = problems.index("-")
    assert all(problem != "-" for problem in problems[:first_clean])
    assert all(problem == "-" for problem in problems[first_clean:])
    assert counts == (
        "7 Services: 2 disabled, 4 enabled, 1 not-applicable; 4 with problems "
        "(2 hints-off, 1 partial-hints, 1 drift, 1 overloaded-zone, 1 config-issue)"
    )


def test_healthy_cluster_exits_0() -> None:
    """Every Service asking for hints gets them: exit 0, for the summary and the explanation."""
    assert run("explain", "--snapshot", HEALTHY, "--summary").returncode == 0
    assert run("explain", "--snapshot", HEALTHY).returncode == 0


def test_problems_keeps_only_services_with_a_problem() -> None:
    """--problems explains only the troubled Services; the table shows them with the count."""
    text = run("explain", "--snapshot", DEMO, "--problems").stdout
    titles = sorted(line for line in text.splitlines() if line.startswith("Service "))
    assert titles == [
        "Service payments/checkout (IPv4)",
        "Service payments/ledger (IPv4)",
        "Service shop/inventory (IPv4)",
        "Service shop/search (IPv4)",
    ]
    summary = run("explain", "--snapshot", DEMO, "--summary", "--problems").stdout
    assert summary.splitlines()[-1].endswith("; 4 shown")


def test_wide_and_json_summaries() -> None:
    """-o wide adds columns; --summary -o json is a document carrying the exit status."""
    wide = run("explain", "--snapshot", DEMO, "-o", "wide")
    assert wide.returncode == 1
    assert "ADDRESS TYPE" in wide.stdout.splitlines()[0]
    assert "7 or 9" in wide.stdout
    document: dict[str, Any] = json.loads(
        run("explain", "--snapshot", DEMO, "--summary", "-o", "json").stdout
    )
    assert document["exit_status"] == 1
    assert document["missing"] == {}
    ledger = next(entry for entry in document["services"] if entry["name"] == "ledger")
    assert ledger["problems"] == ["hints-off"]


def test_snapshot_without_nodes_warns_and_exits_2(tmp_path: Path) -> None:
    """No Nodes: say so and what it leaves unknown; never 'insufficient' or 'label nodes'."""
    snapshot = without("Node", tmp_path)
    completed = run("explain", "--snapshot", snapshot)
    assert completed.returncode == 2
    text = " ".join(completed.stdout.split())
    assert "Node info: unknown: no Nodes" in text
    assert "the snapshot holds no Nodes" in text
    assert "no auto verdict (enabled or refused)" in text
    assert "insufficient" not in text
    assert "label worker nodes" not in text
    assert "InsufficientNodeInfo" not in text
    assert "Verdict: unknown (no Nodes)" in text
    summary = run("explain", "--snapshot", snapshot, "--summary")
    assert summary.returncode == 2
    assert summary.stdout.startswith("Warning: the snapshot holds no Nodes")
    as_json = run("explain", "--snapshot", snapshot, "-o", "json")
    assert as_json.returncode == 2
    json.loads(as_json.stdout)
    assert "warning: the snapshot holds no Nodes" in as_json.stderr
    evaluated = run("evaluate", "--snapshot", snapshot)
    assert evaluated.returncode == 0
    assert "warning: the snapshot holds no Nodes" in evaluated.stderr


@pytest.mark.parametrize("kind", ["Service", "EndpointSlice"])
def test_snapshot_without_services_or_slices_warns_and_exits_2(kind: str, tmp_path: Path) -> None:
    completed = run("explain", "--snapshot", without(kind, tmp_path))
    assert completed.returncode == 2
    text = " ".join(completed.stdout.split())
    assert f"the snapshot holds no {kind}s" in text
    assert "there is no verdict at all" in text


# Reading the cluster instead of a dump


def demo_objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(Path(DEMO).read_text())["items"]
    return items


@pytest.mark.parametrize("args", [["--summary"], []])
def test_live_cluster_gives_the_verdicts_of_its_dump(
    kube_api: FakeKubeAPI, kubeconfig: Path, args: list[str]
) -> None:
    """explain --kubeconfig prints what explain --snapshot prints on a dump of the same objects,
    evaluated under the version the API server reports (the profile's source aside)."""
    kube_api.kubernetes_version = "1.33"
    kube_api.load(demo_objects())
    live = run("explain", "--kubeconfig", str(kubeconfig), *args)
    dumped = run("explain", "--snapshot", DEMO, "--kubernetes-version", "1.33", *args)
    assert live.returncode == dumped.returncode == 1, live.stderr
    assert live.stdout == dumped.stdout.replace(
        "1.33 (given by flag)", "1.33 (the API server's /version)"
    )
    lists = [request for request in kube_api.requests if request.method == "GET"]
    assert {request.resource for request in lists} == {"nodes", "services", "endpointslices", None}
    assert "/version" in {request.path for request in lists if request.resource is None}
    assert not any(request.watch for request in lists)


def test_live_evaluate_pages_through_every_object(kube_api: FakeKubeAPI, kubeconfig: Path) -> None:
    """evaluate --kubeconfig equals evaluate --snapshot of the same objects."""
    kube_api.load(demo_objects())
    live = run("evaluate", "--kubeconfig", str(kubeconfig), "--context", "fake")
    assert live.returncode == 0, live.stderr
    dumped = json.loads(run("evaluate", "--snapshot", DEMO, "--kubernetes-version", "1.34").stdout)
    document = json.loads(live.stdout)
    # The version is the API server's /version (behaviour §12), the verdicts the dump's.
    assert document.pop("kubernetes")["source"] == "api"
    assert dumped.pop("kubernetes")["source"] == "flag"
    assert document == dumped


def test_live_evaluate_follows_the_api_servers_version(
    kube_api: FakeKubeAPI, kubeconfig: Path
) -> None:
    """A 1.33 API server: PreferSameZone is not accepted (mechanism none, config issue)."""
    kube_api.kubernetes_version = "1.33+"
    kube_api.load(demo_objects())
    live = run("evaluate", "--kubeconfig", str(kubeconfig))
    assert live.returncode == 0, live.stderr
    document = json.loads(live.stdout)
    gates_1_33 = {
        "TopologyAwareHints": True,
        "ServiceTrafficDistribution": True,
        "PreferSameTrafficDistribution": False,
    }
    assert document["kubernetes"] == {
        "version": "1.33",
        "binary_version": None,
        "source": "api",
        "feature_gates": gates_1_33,
        "kube_proxy": {"version": "1.33", "source": "control-plane", "feature_gates": gates_1_33},
    }
    (search,) = (entry for entry in document["services"] if entry["name"] == "search")
    assert search["mechanism"] == "none"
    assert "traffic-distribution-unsupported" in search["config_issues"]
    # The hints it carries are removed by a 1.33 controller: drift.
    assert search["drift"] == ["unexpected-hints"]
    # A flag wins over the API server's version.
    flagged = run("evaluate", "--kubeconfig", str(kubeconfig), "--kubernetes-version", "1.35")
    assert json.loads(flagged.stdout)["kubernetes"]["source"] == "flag"
    # No /version: the newest semantics, assumed, with a warning.
    kube_api.kubernetes_version = None
    unknown = run("evaluate", "--kubeconfig", str(kubeconfig))
    assert unknown.returncode == 0, unknown.stderr
    assert json.loads(unknown.stdout)["kubernetes"]["source"] == "assumed"
    assert "/version" in unknown.stderr


@pytest.mark.server
def test_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    """A kubeconfig pointing at nothing: one line naming the server, exit 2."""
    with FakeKubeAPI() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        url = api.url
    completed = run("explain", "--kubeconfig", str(kubeconfig))
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"topology-hints-exporter: error: cannot reach the API server at {url}: Connection refused"
    ]


def test_nothing_to_show_says_why(tmp_path: Path) -> None:
    """No problem, or a namespace whose Services have no EndpointSlices: a sentence saying
    so, exit 0."""
    clean = run("explain", "--snapshot", HEALTHY, "--problems")
    assert clean.returncode == 0
    assert clean.stdout.endswith("\nNo Service with a problem among the 2 checked.\n")
    document = json.loads(Path(HEALTHY).read_text())
    document["items"].append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "db", "namespace": "external", "uid": "uid-db"},
            "spec": {"type": "ExternalName", "externalName": "db.example.com"},
        }
    )
    path = tmp_path / "with-external.json"
    path.write_text(json.dumps(document))
    empty = run("explain", "--snapshot", str(path), "-n", "external")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.endswith(
        "\nNo Service with EndpointSlices in namespace external in the snapshot.\n"
    )


@pytest.mark.parametrize("args", [["--problems"], ["--summary", "--problems"], ["-o", "json"], []])
def test_a_namespace_without_services_fails_the_gate(args: list[str]) -> None:
    """A misspelt namespace must not pass a CI gate: one line, exit 2, a suggestion."""
    completed = run("explain", "--snapshot", DEMO, "-n", "shpo", *args)
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr == (
        "topology-hints-exporter: error: no Service in namespace shpo in the snapshot "
        "(did you mean shop?)\n"
    )
