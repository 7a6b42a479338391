# Worker image: `docker compose up --scale worker=N`, or any host with GAMEBATCH_BROKER_URL set.
FROM python:3.11-slim
RUN useradd --create-home gamebatch
WORKDIR /app
COPY pyproject.toml README.md ./
COPY pipeline ./pipeline
COPY workers ./workers
COPY configs ./configs
RUN pip install --no-cache-dir ".[monitor]"
USER gamebatch
ENV GAMEBATCH_CONFIG=/app/configs/cluster.yaml
CMD ["gamebatch", "worker"]
