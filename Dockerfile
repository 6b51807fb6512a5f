# syntax=docker/dockerfile:1
# The operator image: `docker build -t <registry>/trainingjob-operator:0.1.0 .` (BuildKit; Docker 23+ by default).
# deploy/manager/deployment.yaml runs it as uid 65532 with a read-only root filesystem and /tmp as an emptyDir.

# ---- builder: the project's wheel plus the wheels of its dependencies, in /wheels
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# The image is the whole operator: the sweeps extra (Optuna) too, or every TrainingSweep would wait for it.
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && pip wheel --wheel-dir /wheels "$(ls /wheels/trainingjob_operator-*.whl)[sweeps]"

# ---- runtime: only the installed wheels; no compilers, no pip cache, no wheels left in any layer, no pip
FROM python:3.11-slim
LABEL org.opencontainers.image.title="trainingjob-operator" \
      org.opencontainers.image.description="Kubernetes operator for distributed ML training jobs" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# The wheels are bind-mounted from the builder for this one step, so they never become part of the image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels 'trainingjob-operator[sweeps]' \
    && pip uninstall --yes pip setuptools wheel \
    && rm -rf /root/.cache
USER 65532:65532
# health (Kopf liveness), metrics, progress endpoint, webhooks: see deploy/manager/deployment.yaml
EXPOSE 8080 9090 8443 9443
ENTRYPOINT ["tj"]
CMD ["operator", "--all-namespaces"]
