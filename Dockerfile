# misstriage service image: `docker compose up` (see docker-compose.yml).
FROM python:3.11-slim

# NUMBA_CACHE_DIR: where the compiled pass over large logs is kept (app.eval.cluster_stream.warm
# compiles it at build time; the service's user reads it there).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    NUMBA_CACHE_DIR=/srv/misstriage/var/numba
WORKDIR /srv/misstriage

# The wheel bundles migrations, templates and examples (pyproject.toml's force-include), so
# each must be copied; tests/test_docker_build.py builds the wheel from exactly these COPY lines.
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
COPY templates ./templates
COPY examples ./examples
# (warmed from another folder than the source: the installed package is what runs)
RUN pip install . && cd / && python -c "from app.eval.cluster_stream import warm; warm()" \
    && useradd --system --home /srv/misstriage misstriage \
    && mkdir -p /srv/misstriage/var && chown -R misstriage /srv/misstriage/var

USER misstriage
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"
# `serve` migrates the database first, then starts uvicorn.
CMD ["misstriage", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
