# syntax=docker/dockerfile:1
# One image for both components:
#   promscaler-adapter ...           the custom/external metrics API server (apiservice/, chart)
#   promscaler-autoscaler run ...    the autoscaler controller
# Production only: no sandbox (kubesim), no demo extras (rich, matplotlib); `promscaler-autoscaler
# demo` answers with a one-line message. Runs as an unprivileged user and works with a read-only
# root filesystem (only /tmp is written). tests/project/test_image.py builds the same virtual
# environment with these commands.
#
#   docker build -t ghcr.io/promscaler/promscaler:0.1.0 .

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/promscaler
# Dependencies first (cached while only the sources change), at the versions constraints.txt pins
# (the ones the test suite ran with), then the package itself.
# (promscaler/__init__.py holds the version pyproject.toml reads.)
COPY pyproject.toml README.md constraints.txt ./
COPY promscaler/__init__.py promscaler/
RUN /opt/promscaler/bin/pip install -c constraints.txt . \
    && /opt/promscaler/bin/pip uninstall -y promscaler
COPY promscaler/ promscaler/
COPY adapter/ adapter/
COPY autoscaler/ autoscaler/
COPY apiservice/ apiservice/
# The package, compiled; then the installers leave the environment (nothing in the runtime stage builds).
RUN /opt/promscaler/bin/pip install --no-deps . \
    && /opt/promscaler/bin/python -m compileall -q /opt/promscaler/lib \
    && /opt/promscaler/bin/pip uninstall -y pip setuptools

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="promscaler" \
      org.opencontainers.image.description="Autoscale Kubernetes workloads on Prometheus metrics" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/promscaler/promscaler"
RUN groupadd --system --gid 10001 promscaler \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin promscaler
COPY --from=build /opt/promscaler /opt/promscaler
ENV PATH=/opt/promscaler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
USER 10001:10001
EXPOSE 6443
CMD ["promscaler-adapter", "--help"]
