# corpus-reconciler image: multi-stage, runs as a non-root user.
#   docker build -t corpus-reconciler .
#   docker run --rm -v $PWD/config:/etc/reconciler:ro corpus-reconciler          # serve (default)
#   docker run --rm -v $PWD/config:/etc/reconciler:ro corpus-reconciler run      # one cron cycle
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
COPY connectors ./connectors
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[postgres,discovery]"

FROM python:3.11-slim
RUN useradd --system --uid 10001 --create-home --home-dir /var/lib/reconciler reconciler \
    && mkdir -p /etc/reconciler
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "corpus-reconciler[postgres,discovery]" \
    && rm -rf /wheels
COPY reconciler/settings/reconciler.example.toml /etc/reconciler/reconciler.example.toml
USER 10001
WORKDIR /var/lib/reconciler
ENV RECONCILER_CONFIG=/etc/reconciler/reconciler.toml \
    PYTHONUNBUFFERED=1
ENTRYPOINT ["reconciler"]
EXPOSE 9464
CMD ["--log-format", "json", "--log-level", "info", "serve"]
