# Multi-stage build: wheels are built in a full image, the runtime image holds only the venv.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kinitiras_py ./kinitiras_py
RUN python -m venv /venv && /venv/bin/pip install --no-cache-dir .

FROM python:3.11-slim-bookworm
COPY --from=build /venv /venv
# Non-root and nothing written outside mounted volumes, so a read-only root filesystem works.
USER 65532:65532
ENV PATH=/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT ["kinitiras-py"]
