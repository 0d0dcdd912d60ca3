# syntax=docker/dockerfile:1
# topology-hints-exporter image: build a venv in one stage, copy only the venv into the next.
# Build: docker build -t ghcr.io/topology-hints-exporter/topology-hints-exporter:0.1.0 .
#
# PYTHON_IMAGE is the base of both stages: any image with `python3` on its PATH and the venv
# module. Pin its digest when building with registry access
# (--build-arg PYTHON_IMAGE=docker.io/library/python:3.11.11-slim-bookworm@sha256:...), or
# substitute a locally made base (tests/image builds on a Debian base made with mmdebstrap).
# pip installs from public PyPI by default; to use a mirror or a private certificate
# authority, give pip its configuration at build time instead of writing it here, e.g.
# `buildah bud --volume /etc/pip.conf:/etc/pip.conf:ro ...` (tests/image/test_image.py does so).
# The dependencies come from requirements.lock, pinned with their sha256 hashes: a mirror can
# serve them, but not other files under their names (`make lock` rewrites it).
ARG PYTHON_IMAGE=docker.io/library/python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# `python3`, found on the PATH: the base decides where its interpreter lives, and the venv
# links to that same path, which the final stage (same base) also has.
RUN python3 -m venv /opt/venv

# First the locked dependencies, each checked against its hashes (--require-hashes), and
# setuptools to build the package with; --no-deps: nothing outside the lock file comes in.
COPY requirements.lock ./
RUN /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock
# Then the package alone, built with the locked setuptools (no build isolation, which would
# fetch an unlocked one). `pip check` fails the build if the lock misses a dependency.
# pip compiles the bytecode while installing (the root filesystem is read-only at run time);
# the installers themselves are not needed at run time.
COPY pyproject.toml README.md ./
COPY exporter ./exporter
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes setuptools pip

FROM ${PYTHON_IMAGE}

ARG PYTHON_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="topology-hints-exporter" \
      org.opencontainers.image.description="Prometheus exporter that tells whether Kubernetes topology-aware routing works, and why not when it does not." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

# The venv lives at the same path as in the builder, so its scripts' shebangs still resolve.
ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=builder /opt/venv /opt/venv

# nobody:nogroup, as in the Kubernetes manifests (runAsUser 65534).
USER 65534:65534
EXPOSE 9808
ENTRYPOINT ["topology-hints-exporter"]
CMD ["serve"]
