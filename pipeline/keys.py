"""The Redis key schema: every key gamebatch writes, in one place.

gb:job:{job}              hash   manifest: problem, input, checksum, state, chunk settings,
                                 chunks (set once produced), total (cases), done_chunks,
                                 done_cases, failed
gb:job:{job}:in:{i}       string JSON payload of chunk i ({"problem", "first", "cases"});
                                 deleted when its answers are stored
gb:job:{job}:out          hash   chunk index -> answer digits, one per case (index into the
                                 game's answer words); written once per chunk
gb:job:{job}:errors       hash   chunk index -> why a chunk failed
gb:jobs                   zset   job ids by creation time
gb:table:{name}           string shared tables (Grundy tables), computed once per cluster
"""

from __future__ import annotations

PREFIX = "gb"
JOBS = f"{PREFIX}:jobs"


def job(job_id: str) -> str:
    """The job's manifest hash."""
    return f"{PREFIX}:job:{job_id}"


def chunk_input(job_id: str, index: int) -> str:
    """Chunk payload waiting for a worker."""
    return f"{PREFIX}:job:{job_id}:in:{index}"


def answers(job_id: str) -> str:
    """Answers of every finished chunk."""
    return f"{PREFIX}:job:{job_id}:out"


def errors(job_id: str) -> str:
    """Chunks that failed, with the reason."""
    return f"{PREFIX}:job:{job_id}:errors"


def table(name: str) -> str:
    """A shared table."""
    return f"{PREFIX}:table:{name}"
