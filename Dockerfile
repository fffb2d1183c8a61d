# syntax=docker/dockerfile:1
# secretferry operator image: `secretferry run` as a non-root user on a read-only root filesystem.
#
# Two stages: the builder turns the source into a wheel and installs it into /opt/venv; the final
# image gets only that venv (no source tree, no pip cache, no build tools). The venv path is the
# same in both stages because a venv's scripts hard-code their interpreter path.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
# Every dependency ships manylinux wheels for CPython 3.11, so no compiler is needed here either.
# The wheel is installed without extras: no dev server web stack (fastapi, uvicorn, sse-starlette),
# no dev cluster certificates (cryptography). The wheel also carries the dev server and dev cluster
# packages, for `pip install 'secretferry[devserver]'` users; the operator never imports them
# (import-linter), so they are deleted here rather than shipped half-working without their extras.
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install /wheels/*.whl \
 && pkg="$(/opt/venv/bin/python -c 'import pathlib, secretferry; print(pathlib.Path(secretferry.__file__).parent)')" \
 && rm -r "$pkg/devserver" "$pkg/devcluster" \
 && /opt/venv/bin/python -m compileall -q /opt/venv/lib

FROM ${PYTHON_IMAGE}
# The release this image is. The default equals secretferry.__version__ (tests/unit/test_version.py),
# so a plain `docker build` and `make image`/`make release` label it right without a --build-arg.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="secretferry" \
      org.opencontainers.image.description="Keeps Kubernetes Secrets in step with an Infisical-compatible secrets service" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/secretferry/secretferry"
# 65532 is the conventional "nonroot" uid/gid (distroless); the chart's securityContext expects it.
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin nonroot
COPY --from=builder /opt/venv /opt/venv
# Read-only root filesystem: byte code is compiled at build time, and everything that wants to
# write (HOME, TMPDIR) goes to /tmp, which the chart mounts as an emptyDir.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
USER 65532:65532
WORKDIR /tmp
# 8080: Prometheus metrics; 8081: kopf liveness (/healthz); 8082: readiness (/readyz);
# 8083: the signed-webhook receiver (chart webhook.port; off unless webhook.enabled).
EXPOSE 8080 8081 8082 8083
ENTRYPOINT ["secretferry"]
CMD ["run"]
