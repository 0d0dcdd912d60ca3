"""Build the pinned kube-state-metrics the benchmark runs beside the exporter (`make ksm-binary`).

From the Go module in this folder (go.mod written by pin.py), static (CGO_ENABLED=0) with
the version ldflags of KSM's own Makefile, so `--version` says the pinned release. The
binary goes to a git-ignored folder (build/ksm/VERSION, or $KSM_BINARY_DIR) whose path is
the last line printed. A second run with the same go.mod, go.sum and flags builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODULE = "k8s.io/kube-state-metrics/v2"
BINARY = "kube-state-metrics"
_REQUIRE = re.compile(r"^\s*(\S+)\s+(v\S+)", re.MULTILINE)


def pinned(module: str) -> str:
    """The version go.mod requires of `module`."""
    for name, version in _REQUIRE.findall((HERE / "go.mod").read_text(encoding="utf-8")):
        if name == module:
            return str(version)
    raise SystemExit(f"ksm-binary: tools/ksm/go.mod does not require {module}")


def output_dir(version: str) -> Path:
    """Where the binary of `version` lives: KSM_BINARY_DIR, or build/ksm/VERSION."""
    override = os.environ.get("KSM_BINARY_DIR")
    return Path(override) if override else ROOT / "build" / "ksm" / version


def ldflags(version: str) -> str:
    """KSM's Makefile's -X flags (prometheus/common's version package and the client-go
    version its /version and build info report), plus a stripped binary."""
    download = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE,
    ).stdout
    info = json.loads(Path(json.loads(download)["Info"]).read_text(encoding="utf-8"))
    build_date = str(info.get("Time", "1970-01-01T00:00:00Z")).split(".")[0].removesuffix("Z") + "Z"
    client_go = pinned("k8s.io/client-go")
    values = {
        "github.com/prometheus/common/version.Version": version.removeprefix("v"),
        "github.com/prometheus/common/version.Revision": version,
        "github.com/prometheus/common/version.Branch": "release",
        "github.com/prometheus/common/version.BuildUser": "topology-hints-exporter",
        "github.com/prometheus/common/version.BuildDate": build_date,
        f"{MODULE}/pkg/app.ClientGoVersion": client_go,
    }
    return " ".join(["-s", "-w", *(f"-X '{key}={value}'" for key, value in values.items())])


def fingerprint(version: str) -> str:
    """What the binary is built from: the module files and this script's flags."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "build.py"):
        digest.update((HERE / name).read_bytes())
    digest.update(version.encode())
    return digest.hexdigest()


def build(version: str, out: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run(
        ["go", "build", "-trimpath", "-ldflags", ldflags(version), "-o", str(out / BINARY), MODULE],
        check=True,
        cwd=HERE,
        env=env,
    )
    print(f"ksm-binary: built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def binary() -> Path:
    """The pinned binary, built first when absent or built from other module files."""
    version = pinned(MODULE)
    out = output_dir(version)
    stamp = out / ".fingerprint"
    wanted = fingerprint(version)
    if not ((out / BINARY).is_file() and stamp.is_file() and stamp.read_text() == wanted):
        build(version, out)
        stamp.write_text(wanted, encoding="utf-8")
    return out / BINARY


def main() -> None:
    print(binary().parent)


if __name__ == "__main__":
    main()
