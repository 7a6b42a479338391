"""The Redis key schema: every key gamebatch writes, in one place.

gb:job:{job}              hash   manifest: problem, input, size (of a regular file), state,
                                 created, chunk settings, lane, producer (host:pid), chunks
                                 and total (set once every chunk is queued), done_chunks,
                                 done_cases, started, answered and finished (Redis clock at
                                 the first chunk's start, the latest answers, and DONE)
gb:job:{job}:in:{i}       string JSON payload of chunk i ({"format", "problem", "first", "cases"},
                                 or a comparison chunk's {"kind": "compare", "segments", ...});
                                 deleted when its answers are stored
gb:job:{job}:out          hash   chunk index -> answer codes, one ASCII character per case
                                 (messages.ANSWER_CODES; "-" for an invalid case); written once
gb:job:{job}:details      hash   of a comparison job: chunk index -> JSON, per segment its file,
                                 cases, first mismatches and extra output; written with :out
gb:job:{job}:errors       hash   chunk index -> why the chunk failed for good
gb:job:{job}:attempts     hash   chunk index -> runs started (removed once answered)
gb:job:{job}:requeued     hash   chunk index -> attempts seen when last re-queued
gb:job:{job}:cursor       hash   chunk index -> case being solved, on a retried chunk
gb:job:{job}:lease:{i}    string worker holding chunk i; expires unless refreshed
gb:job:{job}:sums         hash   chunk index -> digest of what its payload was cut from (the
                                 stream's SHA-256 so far and the chunk's place in it); answers
                                 are stored only for the payload of the digest in force
gb:job:{job}:producer     string the one producer of the job (a random token); expires unless
                                 renewed, so that a dead producer's job is taken over
gb:job:{job}:invalid      list   errors of invalid cases let through by --keep-going
gb:job:{job}:invalid:{t}  list   the same, as producer {t} reads them; renamed to the above
                                 when its production ends (expires if it never does)
gb:jobs                   zset   job ids by creation time
gb:jobs:open              zset   job ids the sweep has not seen finished yet
gb:sweep                  string worker looking for lost chunks this round; expires
gb:sweep:cursor           string where in gb:jobs the next sweep looks beyond gb:jobs:open
gb:sweep:store            string a producer looking for forgotten payload-store copies; expires
gb:cluster                string this cluster's random id: its payload-store copies are under
                                 inputs/{id}/, and only its own are ever swept
gb:capacity               zset   "worker node name:pool processes" by the Redis time it last said
                                 so (every lease_seconds / 3); older than a few minutes: gone
gb:table:{name}           string shared tables (Grundy tables), computed once per cluster
gb:verdicts:{key}         string one output file's verdicts (JSON: letters, first mismatches,
                                 extra output), keyed by what they depend on (see
                                 grade_service.file_key); expire after result_ttl
gb:judged:{program}       hash   a judged program's kept verdicts: case key -> verdict (judging.
                                 case_key, encode_verdict); expires result_ttl after the latest
gb:bodies:{key}           string one output file's rendered report bodies (see report_bodies)
gb:api:job:{job}          hash   the HTTP service's record of an uploaded job: name as
                                 uploaded, state, error, result checksum, callback state
gb:api:jobs               zset   uploaded job ids by upload time (the listing's order)
gb:api:grading:{id}       hash   a grading of an uploaded archive: state, summary, error
gb:api:gradings           zset   grading ids by upload time
gb:api:pending:{server}   set    jobs a server instance still has to finish (its spool holds
                                 their input); :grading for its gradings
gb:api:batch:{batch}      hash   a batch callback: its jobs and delivery state
gb:api:solved             string cases of uploaded jobs that ended done (for /metrics)
gb:api:events             stream job events of the HTTP service (created, progress, done,
                                 failed, cancelled), capped; stream ids are the resume tokens

Celery's Redis transport keeps its own keys beside these: the lane queues `{queue}.interactive`
and `{queue}.bulk` (setting `queue`), `unacked`, `unacked_index`, `_kombu.binding.*`, and the
replies of `status`'s worker ping.

A job id {job} is `<problem>-<24 hex digits of the input's SHA-256>`, with `-keep-going`
for a job that lets invalid cases through, or `compare.<problem>-<24 hex digits>` for a grading's
comparison job (the digits hash the keys of its files): nothing else is ever a job id.
"""

from __future__ import annotations

PREFIX = "gb"


JOBS = f"{PREFIX}:jobs"
OPEN_JOBS = f"{PREFIX}:jobs:open"  # jobs the sweep has not seen finished yet
SWEEP = f"{PREFIX}:sweep"
SWEEP_CURSOR = f"{PREFIX}:sweep:cursor"  # where in JOBS the next sweep looks further
STORE_SWEEP = f"{PREFIX}:sweep:store"  # held while a producer sweeps the payload store
CLUSTER = f"{PREFIX}:cluster"  # this cluster's random id (its folder in the payload store)
CAPACITY = f"{PREFIX}:capacity"  # the live workers and their pool processes


def job(job_id: str) -> str:
    """The job's manifest hash."""
    return f"{PREFIX}:job:{job_id}"


def chunk_input(job_id: str, index: int) -> str:
    """Chunk payload waiting for a worker."""
    return f"{chunk_input_prefix(job_id)}{index}"


def chunk_input_prefix(job_id: str) -> str:
    """What every chunk payload key of the job starts with (then comes the index)."""
    return f"{PREFIX}:job:{job_id}:in:"


def lease(job_id: str, index: int) -> str:
    """Held by the worker running the chunk."""
    return f"{lease_prefix(job_id)}{index}"


def lease_prefix(job_id: str) -> str:
    """What every lease key of the job starts with (then comes the index)."""
    return f"{PREFIX}:job:{job_id}:lease:"


def job_field(job_id: str, name: str) -> str:
    """One of the job's per-chunk keys: out, details, errors, attempts, requeued, cursor, sums."""
    return f"{PREFIX}:job:{job_id}:{name}"


def producer(job_id: str) -> str:
    """The token of the process producing the job (at most one at a time)."""
    return job_field(job_id, "producer")


def invalid(job_id: str, token: str = "") -> str:
    """Errors of a keep-going job's invalid cases; with a producer's token, the list that
    producer fills as it reads (it becomes the job's list when its production ends)."""
    return job_field(job_id, "invalid") + (f":{token}" if token else "")


def sums(job_id: str) -> str:
    """The digest of each chunk's payload."""
    return job_field(job_id, "sums")


def answers(job_id: str) -> str:
    """Answers of every finished chunk."""
    return job_field(job_id, "out")


def errors(job_id: str) -> str:
    """Chunks that failed, with the reason."""
    return job_field(job_id, "errors")


def per_chunk(job_id: str) -> list[str]:
    """Every key of a job besides its manifest, payloads and leases."""
    names = ("out", "details", "errors", "attempts", "requeued", "cursor", "invalid", "sums")
    return [job_field(job_id, n) for n in names]


def verdicts(key: str) -> str:
    """One output file's stored verdicts."""
    return f"{PREFIX}:verdicts:{key}"


def judged(program: str) -> str:
    """The kept verdicts of one program (its source, language, compiler and limits), a hash
    by case key (pipeline.judging.cases.case_key)."""
    return f"{PREFIX}:judged:{program}"


def report_bodies(key: str) -> str:
    """One output file's rendered report bodies (its verdicts' key and the reports' context)."""
    return f"{PREFIX}:bodies:{key}"


def table(name: str) -> str:
    """A shared table."""
    return f"{PREFIX}:table:{name}"


API_JOBS = f"{PREFIX}:api:jobs"
API_EVENTS = f"{PREFIX}:api:events"
EVENT_CAP = 100_000  # events kept for clients that resume (older ones are trimmed)
API_SOLVED = f"{PREFIX}:api:solved"


def api_record(kind: str, record_id: str) -> str:
    """The HTTP service's record of a job or a grading (`kind`: "job" or "grading")."""
    return f"{PREFIX}:api:{kind}:{record_id}"


def api_job(job_id: str) -> str:
    """The HTTP service's record of a job."""
    return api_record("job", job_id)


def api_listing(kind: str) -> str:
    """Records of one kind by upload time."""
    return f"{PREFIX}:api:{kind}s"


def api_pending(server: str, kind: str = "job") -> str:
    """Jobs (or gradings) one server instance has yet to finish."""
    return f"{PREFIX}:api:pending:{server}" + ("" if kind == "job" else f":{kind}")


def api_batch(batch_id: str) -> str:
    """A batch callback."""
    return f"{PREFIX}:api:batch:{batch_id}"
