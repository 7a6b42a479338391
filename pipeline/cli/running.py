"""`serve`, `worker` and `config`: the long-running processes, and the settings shown."""

from __future__ import annotations

import os
import sys

from pipeline.cli.front import Front, err
from pipeline.errors import UsageError


def serve(front: Front) -> int:
    from pipeline.server.auth import token_from_file
    from pipeline.server.serve import serve

    args, settings = front.args, front.settings()
    tokens = settings.server.tokens
    if args.token_file is not None:
        from_file = token_from_file(args.token_file)
        if from_file.name in {token.name for token in tokens}:
            raise UsageError(
                f"token file {args.token_file}: a configured token has its name "
                f"{from_file.name!r} (a token's name owns its jobs)"
            )
        tokens = (*tokens, from_file)
    if not 1 <= args.port <= 65535:
        raise UsageError("--port must be from 1 to 65535")
    serve(settings, args.host, args.port, tokens)
    return 0


def worker(front: Front) -> int:
    from pipeline.local.workers import supervise_worker
    from pipeline.store.jobstore import JobStore

    args, settings = front.args, front.settings(need_broker=True)
    for url in settings.shard_urls:  # one Celery worker per shard
        JobStore.wait_for(url, err)
    if os.geteuid() == 0:  # runs of programs that a killed worker left on this host end
        from pipeline.judging.sandbox import sweep_runs

        sweep_runs()
    concurrency = args.concurrency or settings.concurrency or os.cpu_count() or 1
    return supervise_worker(
        settings.shard_urls,
        concurrency,
        loglevel=args.loglevel,
        events=args.events or settings.events,
        config=args.config,
    )


def config(front: Front) -> int:
    from pipeline.config import show

    sys.stdout.write(show(front.settings()))
    return 0
