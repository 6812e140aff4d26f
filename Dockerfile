# corpus-reconciler image: multi-stage, runs as a non-root user.
#   docker build -t corpus-reconciler .
#   docker run --rm -p 9464:9464 -v $PWD/config:/etc/reconciler:ro corpus-reconciler  # serve (default)
#   docker run --rm -v $PWD/config:/etc/reconciler:ro corpus-reconciler run          # one cron cycle
#
# The base image is pinned by digest (a tag moves; a digest does not). To move to a newer
# python:3.11-slim, look its digest up and change BASE in one place:
#   docker buildx imagetools inspect python:3.11-slim     # the "Digest:" of the index
ARG BASE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY connectors ./connectors
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[postgres,discovery]"

FROM ${BASE}
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/reconciler reconciler \
    && mkdir -p /etc/reconciler
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "corpus-reconciler[postgres,discovery]" \
    && rm -rf /wheels
COPY reconciler/settings/reconciler.example.toml /etc/reconciler/reconciler.example.toml
USER 10001:10001
WORKDIR /var/lib/reconciler
# `serve` listens on every interface inside the container (the example config's 127.0.0.1
# would answer nobody behind EXPOSE); override RECONCILER_METRICS__LISTEN to move it.
ENV RECONCILER_CONFIG=/etc/reconciler/reconciler.toml \
    RECONCILER_METRICS__LISTEN=0.0.0.0:9464 \
    PYTHONUNBUFFERED=1
EXPOSE 9464
# /healthz answers 200 while serve's jobs succeed in time, 503 otherwise (docs/operations.md);
# the slim image has no curl, so Python asks it. A one-shot `run` container has no /healthz:
# run it with --no-healthcheck (docker) or let the orchestrator's own probes decide.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('RECONCILER_METRICS__LISTEN', '0.0.0.0:9464').rsplit(':', 1)[1]; urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4)"]
ENTRYPOINT ["reconciler"]
CMD ["--log-format", "json", "--log-level", "info", "serve"]
