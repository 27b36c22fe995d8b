# kinitiras-py controller image.
#   docker build -t kinitiras-py:0.1.0 .      (or: make image IMG=...)
# Multi-stage: the build stage makes a virtualenv with the package and its dependencies (wheels
# only, bytecode compiled ahead); the runtime stage copies just that venv onto a slim Python.
# At run time nothing is written outside /tmp and /certs (emptyDirs in config/base/deployment.yaml),
# so readOnlyRootFilesystem works; the user is the numeric non-root 65532 (runAsNonRoot).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /venv
# Dependencies first, so a source-only change reuses this layer.
COPY pyproject.toml README.md ./
RUN mkdir kinitiras_py && touch kinitiras_py/__init__.py \
    && /venv/bin/pip install . \
    && /venv/bin/pip uninstall --yes kinitiras-py \
    && rm -rf kinitiras_py build
COPY kinitiras_py ./kinitiras_py
RUN /venv/bin/pip install --no-deps . \
    && /venv/bin/python -m compileall -q /venv/lib \
    && /venv/bin/kinitiras-py --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kinitiras-py" \
      org.opencontainers.image.description="Kubernetes admission policy controller" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /venv /venv
ENV PATH=/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
WORKDIR /tmp
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["kinitiras-py"]
CMD ["serve"]
