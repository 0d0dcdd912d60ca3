"""The expensive /metrics path: `escaping=dots|values` scrapes of a served snapshot.

    python bench/escaping.py                      # 1,500 nodes, 3,000 Services
    python bench/escaping.py --services 600 --nodes 300 --endpoints 9000 --requests 5

Serves a generated snapshot (bench/cluster.py) with the real `serve` command, then makes
`--requests` sequential scrapes of each kind, one connection each: the cached default
format, then `escaping=dots` and `escaping=values` in both formats. Prints each kind's
median and maximum wall time per request, the exporter's CPU seconds per request (the
figure a shared machine's load does not move), the body size, and the process' VmRSS and
VmHWM (peak resident) after each kind: the high-water mark those scrapes cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize, write_snapshot  # noqa: E402
from procstat import cpu_seconds, memory_mib  # noqa: E402

from tests.processes import serving  # noqa: E402

KINDS = {
    "default (cached)": "",
    "text escaping=dots": "text/plain;version=1.0.0;escaping=dots",
    "text escaping=values": "text/plain;version=1.0.0;escaping=values",
    "openmetrics escaping=dots": "application/openmetrics-text;version=1.0.0;escaping=dots",
}


def scrape(url: str, accept: str) -> tuple[float, int]:
    """Wall seconds and body bytes of one GET on a new connection."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})  # noqa: S310
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - loopback
        size = len(response.read())
    return time.perf_counter() - started, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--services", type=int, default=3000)
    parser.add_argument("--endpoints", type=int, default=45000)
    parser.add_argument("--requests", type=int, default=8)
    args = parser.parse_args()
    size = ClusterSize(nodes=args.nodes, services=args.services, endpoints=args.endpoints)
    with tempfile.TemporaryDirectory() as folder:
        snapshot = Path(folder) / "cluster.json"
        write_snapshot(size, snapshot)
        with serving("--snapshot", str(snapshot), "--log-level", "warning") as exporter:
            pid = exporter.process.pid
            rss, hwm = memory_mib(pid)
            print(f"{'after start':26} {'':>44} rss {rss:6.1f} MiB  hwm {hwm:6.1f} MiB")
            for kind, accept in KINDS.items():
                times = []
                body = 0
                cpu = cpu_seconds(pid)
                for _ in range(args.requests):
                    seconds, body = scrape(exporter.url + "/metrics", accept)
                    times.append(seconds)
                cpu = (cpu_seconds(pid) - cpu) / args.requests
                rss, hwm = memory_mib(pid)
                print(
                    f"{kind:26} median {statistics.median(times):5.3f} s max {max(times):5.3f} s"
                    f" cpu {cpu:5.3f} s/req  rss {rss:6.1f} MiB  hwm {hwm:6.1f} MiB"
                    f"  body {body / 1e6:4.1f} MB"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
