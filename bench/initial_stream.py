"""The exporter's memory under a streaming list that never ends (issue 30, finding 5).

The test API server (tests/kubeapi) serves 3 Nodes, a Service and its slice, but never sends
the Nodes' end bookmark (k8s.io/initial-events-end) while one Node is modified without
pause; `serve` is started against it and its VmRSS read every few seconds. Each event used to
be kept until the end that never came (60 -> 280 MiB in 45 s); the list now holds the newest
object per key.

Usage: python bench/initial_stream.py [--seconds 45] [--every 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project is not
    sys.path.insert(0, str(ROOT))

from procstat import get, memory_mib  # noqa: E402

from tests.k8s_objects import (  # noqa: E402
    endpoint_slice,
    node,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.kubeapi import FakeKubeAPI  # noqa: E402
from tests.processes import serving  # noqa: E402


def churn(api: FakeKubeAPI, done: threading.Event, rate: float) -> int:
    """Modify node-a-0 `rate` times a second until `done`; how many times."""
    count = 0
    started = time.monotonic()
    while not done.is_set():
        count += 1
        changed = node("node-a-0", "zone-a")
        changed["metadata"]["labels"]["example.com/churn"] = str(count)
        api.apply(changed)
        ahead = started + count / rate - time.monotonic()
        if ahead > 0:
            done.wait(ahead)
    return count


def watched(url: str) -> str:
    """What the exporter says of its Nodes watch: events received, restarts by cause."""
    lines = get(url + "/metrics").decode().splitlines()
    wanted = ("topology_hints_watch_events_total", "topology_hints_watch_restarts_total")
    return "\n".join(
        line for line in lines if line.startswith(wanted) and 'resource="nodes"' in line
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=10000.0, help="modifications a second")
    args = parser.parse_args()
    # A history long enough that the exporter never falls behind it (410: a new list).
    with (
        FakeKubeAPI(bookmark_interval=1.0, history=10_000_000) as api,
        tempfile.TemporaryDirectory() as tmp,
    ):
        api.load(
            [
                *three_zone_nodes(),
                service("shop", "web", topology_mode="Auto"),
                endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
            ]
        )
        api.misorder_initial_events("nodes", "never")
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        with serving("--kubeconfig", str(kubeconfig), "--context", "fake", ready=None) as served:
            pid = served.process.pid
            api.wait_for_watches("nodes", 1, timeout=30)
            done = threading.Event()
            counted: list[int] = []
            thread = threading.Thread(target=lambda: counted.append(churn(api, done, args.rate)))
            started = time.monotonic()
            thread.start()
            try:
                while (elapsed := time.monotonic() - started) <= args.seconds + 0.01:
                    rss, _peak = memory_mib(pid)
                    print(f"{elapsed:5.1f} s  VmRSS {rss:6.1f} MiB", flush=True)
                    time.sleep(args.every)
            finally:
                done.set()
                thread.join()
            print(watched(served.url), flush=True)
        print(f"{counted[0]} modifications of node-a-0", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
