# Worker image: `docker compose up --scale worker=N`, or any host with GAMEBATCH_BROKER_URL set.

# The build stage has a compiler, so the wheel carries the games' C kernels.
FROM python:3.11-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY pipeline ./pipeline
COPY workers ./workers
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
# bubblewrap: the sandbox of `grade --programs`; then every contest language's toolchain
# (docs/judging.md#languages: drop the ones a contest does not use). The JDK's packages
# expect the man folders that slim images leave out.
RUN mkdir -p /usr/share/man/man1 && apt-get update && apt-get install -y --no-install-recommends \
    bubblewrap g++ gcc libc6-dev python3 pypy3 default-jdk-headless kotlin rustc golang-go \
    nodejs mono-mcs && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home gamebatch && mkdir /spool && chown gamebatch /spool
WORKDIR /app
COPY configs ./configs
COPY --from=build /wheels /wheels
# Fail the build rather than ship the pure-Python solver, which is 10-50x slower.
# The wheel by its path, so that no package of the same name on PyPI can take its place.
RUN wheel=$(ls /wheels/gamebatch-*.whl) && pip install --no-cache-dir "$wheel[monitor,s3]" \
    && rm -rf /wheels && python -c "import pipeline.games._trie, pipeline.games._pathgame"
USER gamebatch
ENV GAMEBATCH_CONFIG=/app/configs/cluster.yaml
CMD ["gamebatch", "worker"]
