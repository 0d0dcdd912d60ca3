"""What the benchmarks read of a process (/proc) and how they scrape (one GET a connection)."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process, from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def get(url: str, *, gzip: bool = False) -> bytes:
    """One GET on a new connection (as each scrape of this client is), the whole body
    (with `gzip`, asked for gzip and returned as sent, not decoded)."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback only
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
        return bytes(response.read())
