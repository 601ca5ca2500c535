# Strata's container image: Ray 2.60 + Serve, Strata and the packaged MiniLM model (CPU).
# Used by deploy/kuberay/rayservice.yaml for the head and worker pods; see deploy/README.md.
#
#   docker build -t ghcr.io/strata-memory/strata:0.1.0 .
#
# KubeRay replaces the command with `/bin/bash -c -- "ulimit -n …; ray start …"`, and its
# probes run `bash -c "wget … | grep success"`, so like the rayproject/ray images this one has
# bash, wget and `ray` on PATH, runs as a non-root user `ray` (uid 1000) and just starts bash.
# There is no redis-server here: production uses a Redis server (STRATA_REDIS_URL) and a
# Milvus server (STRATA_MILVUS_URI); the embedded Redis is for `strata serve` on one machine.
FROM python:3.11-slim

ARG TORCH_VERSION=2.13.0
# The Ray of the image = rayClusterConfig.rayVersion in deploy/kuberay/rayservice.yaml.
ARG RAY_VERSION=2.60.0

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 1000 ray \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash ray

# torch first, pinned to the CPU build: an unpinned torch pulls a multi-GB CUDA build.
RUN pip install torch==${TORCH_VERSION} --index-url https://download.pytorch.org/whl/cpu

WORKDIR /tmp/strata-src
COPY pyproject.toml README.md ./
COPY strata ./strata
COPY actors ./actors
COPY serve_app ./serve_app
COPY jobs ./jobs
# Naming torch again keeps the resolver on the CPU build installed above; Ray is pinned to
# the version the RayService declares (pyproject.toml only asks for >= 2.40).
RUN pip install ".[local]" "torch==${TORCH_VERSION}" "ray[serve]==${RAY_VERSION}" \
    && cd / && rm -rf /tmp/strata-src

USER 1000:1000
ENV HOME=/home/ray
WORKDIR /home/ray

# 8000: Serve's HTTP proxy (Strata's API); 8265: the Ray dashboard (KubeRay submits
# serveConfigV2 there). KubeRay also uses 6379 (GCS) and 10001 (Ray client) on the head.
EXPOSE 8000 8265

CMD ["bash"]
