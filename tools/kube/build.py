"""Build the pinned upstream components the real-cluster suite runs (`make kube-binaries`).

etcd, kube-apiserver, kube-controller-manager and kube-proxy, from the Go module in this
folder (go.mod written by pin.py), static (CGO_ENABLED=0) with upstream's build tags and the
version ldflags of upstream's hack/lib/version.sh, so `/version` and `--version` say the
pinned release. The binaries go to a git-ignored folder whose path is the last line printed.
A second run with the same go.mod, go.sum and flags builds nothing; Go's own caches make a
rebuild after a change cheap.
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
# Upstream's tags (hack/lib/golang.sh): selinux, notest and grpcnotrace.
TAGS = "selinux,notest,grpcnotrace"
KUBE_COMMANDS = (
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-proxy",
)
ETCD = "go.etcd.io/etcd/server/v3"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy")
_REQUIRE = re.compile(r"^\s*(\S+)\s+(v\S+)", re.MULTILINE)


def pinned(module: str) -> str:
    """The version go.mod requires of `module`."""
    for name, version in _REQUIRE.findall((HERE / "go.mod").read_text(encoding="utf-8")):
        if name == module:
            return str(version)
    raise SystemExit(f"kube-binaries: tools/kube/go.mod does not require {module}")


def output_dir(version: str) -> Path:
    """Where the binaries of `version` live: KUBE_BINARIES_DIR, or build/kube/VERSION."""
    override = os.environ.get("KUBE_BINARIES_DIR")
    return Path(override) if override else ROOT / "build" / "kube" / version


def ldflags(version: str) -> str:
    """version.sh's -X flags, on both packages it sets, plus a stripped binary."""
    major, minor = version.removeprefix("v").split(".")[:2]
    download = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE,
    ).stdout
    # The module proxy's .info file holds the release's commit time: a reproducible date.
    info = json.loads(Path(json.loads(download)["Info"]).read_text(encoding="utf-8"))
    build_date = str(info.get("Time", "1970-01-01T00:00:00Z")).split(".")[0].removesuffix("Z") + "Z"
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version"):
        flags += [f"-X '{package}.{key}={value}'" for key, value in values.items()]
    return " ".join(flags)


def fingerprint(version: str) -> str:
    """What the binaries are built from: the module files and this script's flags."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "build.py"):
        digest.update((HERE / name).read_bytes())
    digest.update(version.encode())
    return digest.hexdigest()


def build(version: str, out: Path) -> None:
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    flags = ["-trimpath", "-tags", TAGS, "-ldflags", ldflags(version)]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run(
        ["go", "build", *flags, "-o", f"{out}/", *KUBE_COMMANDS], check=True, cwd=HERE, env=env
    )
    # etcd's main package path ends in /v3, so it is named explicitly.
    subprocess.run(
        ["go", "build", *flags, "-o", str(out / "etcd"), ETCD], check=True, cwd=HERE, env=env
    )
    print(f"kube-binaries: built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def main() -> None:
    version = pinned("k8s.io/kubernetes")
    out = output_dir(version)
    stamp = out / ".fingerprint"
    wanted = fingerprint(version)
    complete = all((out / name).is_file() for name in BINARIES)
    if not (complete and stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted):
        build(version, out)
        stamp.write_text(wanted, encoding="utf-8")
    print(out)


if __name__ == "__main__":
    main()
