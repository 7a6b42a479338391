"""Settings: defaults, then a YAML file, then GAMEBATCH_* environment variables, then flags."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from pipeline.errors import UsageError
from pipeline.objects import is_remote
from pipeline.sentinel import SentinelUrl, is_sentinel, with_settings

ENV_PREFIX = "GAMEBATCH_"
CONFIG_ENV = "GAMEBATCH_CONFIG"
NOT_SETTINGS = (CONFIG_ENV, "GAMEBATCH_SERVER", "GAMEBATCH_TOKEN")  # client mode's own


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChunkSettings(Section):
    """How cases are grouped into tasks (work is the game's cost estimate of a case)."""

    target_work: int = Field(4_000_000, gt=0)  # a chunk's work (about 30 ms of solving)
    max_cases: int = Field(200_000, gt=0)  # tiny cases: a chunk of 2 MB of input, 15 ms
    # a chunk that names its place in a file or object (not its bytes) grows with the input,
    # up to place_scale times the above, while the input still makes place_spread chunks
    place_scale: int = Field(10, ge=1)
    # 0: twice the pool processes of the workers alive in the cluster, and at least 16
    place_spread: int = Field(0, ge=0)
    window: int = Field(256, ge=0)  # chunks in flight while `solve` produces; 0: no limit
    window_bytes: int = Field(256 << 20, gt=0)  # and their payload bytes at most
    local_cases: int = Field(100_000, ge=0)  # a comparison job this small runs in `grade`
    local_bytes: int = Field(256 << 10, ge=0)  # an input this small is solved by the command


class LimitSettings(Section):
    """Input limits enforced while reading, before anything large is held."""

    max_token_bytes: int = Field(1 << 26, gt=0)  # one string or board row of an input
    max_file_bytes: int = Field(0, ge=0)  # 0: no limit
    max_upload_bytes: int = Field(8 << 30, gt=0)  # one HTTP upload's body (`serve`)
    max_archive_files: int = Field(100_000, gt=0)  # entries of a grading archive
    max_archive_bytes: int = Field(16 << 30, gt=0)  # a grading archive, unpacked


SCOPES = ("submit", "read", "admin")


class TokenSetting(Section):
    """An API token of `serve`: only the SHA-256 of the secret is configured."""

    name: str = Field("token", min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    scopes: tuple[str, ...] = SCOPES

    @field_validator("scopes")
    @classmethod
    def _known_scopes(cls, scopes: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(scopes) - set(SCOPES))
        if unknown:
            raise ValueError(f"unknown scope {unknown[0]!r} (scopes: {', '.join(SCOPES)})")
        return scopes


class ServerSettings(Section):
    """The HTTP service (`gamebatch serve`)."""

    # API tokens: {name, sha256 of the secret, scopes: submit, read, admin}; a JSON list
    tokens: tuple[TokenSetting, ...] = ()
    spool_dir: str | None = None  # uploads and results; none: `server` in the state folder
    runners: int = Field(2, gt=0)  # processes that read uploads and collect results
    jobs_per_runner: int = Field(8, gt=0)  # jobs each runner process follows at once
    keep_seconds: int = Field(30 * 24 * 3600, gt=0)  # finished jobs, results and gradings kept
    max_pending_jobs: int = Field(1000, gt=0)  # unfinished jobs before uploads get 503
    webhook_secret: str | None = None  # signs callbacks (HMAC-SHA256)
    webhook_hosts: tuple[str, ...] = ()  # hosts callbacks may go to ("*.example.org" too)
    webhook_private_networks: tuple[str, ...] = ()  # private addresses callbacks may reach
    webhook_attempts: int = Field(6, gt=0)  # deliveries tried, with doubling pauses
    webhook_timeout: float = Field(10.0, gt=0)  # seconds to connect, and per read or write
    webhook_queue: int = Field(1000, gt=0)  # callbacks waiting to be sent; past it one fails
    webhook_senders: int = Field(4, gt=0)  # threads of each runner that send callbacks
    header_timeout: float = Field(10.0, gt=0)  # seconds for a request's headers to arrive
    body_timeout: float = Field(30.0, gt=0)  # a body that sends nothing this long gets 408
    keep_alive: float = Field(10.0, gt=0)  # seconds between comment lines on an idle event feed

    @field_validator("tokens", mode="before")
    @classmethod
    def _tokens_from_json(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("must be a JSON list of {name, sha256, scopes}") from None
        return value

    @field_validator("tokens")
    @classmethod
    def _unique_names(cls, tokens: tuple[TokenSetting, ...]) -> tuple[TokenSetting, ...]:
        names = [token.name for token in tokens]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:  # a token's name is who owns its jobs: two tokens must not share one
            raise ValueError(f"two tokens are named {twice[0]!r}: give each a name of its own")
        return tokens

    @field_validator("webhook_hosts", "webhook_private_networks", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return (
            [part.strip() for part in value.split(",") if part.strip()]
            if isinstance(value, str)
            else value
        )


class LanguageSetting(Section):
    """How a contestant's entry file (`main` + extension) is compiled and run, in /box of
    the sandbox; `version` prints the compiler's version (it keys the compiled program)."""

    extension: str = Field(pattern=r"^\.[a-z0-9+]{1,8}$")
    compile: tuple[str, ...]  # empty: nothing to compile (the source is what runs)
    run: tuple[str, ...] = Field(min_length=1)
    version: tuple[str, ...] = Field(min_length=1)


def _languages() -> dict[str, LanguageSetting]:
    return {
        "cpp": LanguageSetting(
            extension=".cpp",
            compile=("/usr/bin/g++", "-std=c++17", "-O2", "-pipe", "-o", "main", "main.cpp"),
            run=("./main",),
            version=("/usr/bin/g++", "--version"),
        ),
        "c": LanguageSetting(
            extension=".c",
            compile=("/usr/bin/gcc", "-std=c11", "-O2", "-pipe", "-o", "main", "main.c", "-lm"),
            run=("./main",),
            version=("/usr/bin/gcc", "--version"),
        ),
        "python": LanguageSetting(
            extension=".py",
            compile=("/usr/bin/python3", "-I", "-S", "-m", "py_compile", "main.py"),
            run=("/usr/bin/python3", "-I", "-S", "main.py"),
            version=("/usr/bin/python3", "--version"),
        ),
    }


class JudgeSettings(Section):
    """Judging programs (`grade --programs`): limits of each run, and the sandbox's uids."""

    time_limit: float = Field(1.0, gt=0)  # CPU seconds per case (--time-limit)
    memory_limit_mb: int = Field(256, gt=0)  # per case (--memory-limit)
    output_limit_mb: int = Field(64, gt=0)  # per run (--output-limit)
    batch_cases: int = Field(1000, gt=0)  # cases handed to one run at most
    max_source_kb: int = Field(256, gt=0)  # a larger source file is a compile error
    compile_seconds: float = Field(30, gt=0)  # a compiler's CPU time
    first_uid: int = Field(61000, gt=0)  # runs are uids first_uid.. (one per run slot)
    slots: int = Field(64, gt=0)  # runs at once on a machine, at most
    languages: dict[str, LanguageSetting] = Field(default_factory=_languages)


class Settings(Section):
    """Everything a command or a worker needs to know."""

    # before broker_url, which reads them: a Redis watched by Sentinel (pipeline/sentinel.py)

    sentinel_master: str | None = None  # the name its sentinels know the Redis by
    sentinel_password: str | None = None  # the sentinels' own password
    # redis://, rediss:// or sentinel://; none: an embedded Redis and local workers
    broker_url: str | None = None
    # more Redis instances (URLs as broker_url's) that take whole jobs beside broker_url's,
    # each job on the one its id hashes to; the environment's list is split at commas
    shards: tuple[str, ...] = ()
    workers: int | None = Field(None, gt=0)  # embedded mode's local worker processes
    producers: int | None = Field(None, gt=0)  # `solve` reading inputs at once; None: auto
    state_dir: str | None = None  # embedded Redis data; None: XDG state folder, "": none
    warm_seconds: int = Field(600, ge=0)  # idle seconds the warm local service stays; 0: none
    concurrency: int | None = Field(None, gt=0)  # pool processes of `gamebatch worker`
    events: bool = False  # workers send task events (for Flower and `celery events`)
    # chunks name their place in the input file instead of carrying its bytes, for workers
    # that see the producer's files (None: yes with the embedded Redis, no with a broker_url)
    file_payloads: bool | None = None
    # an object store's folder (s3://BUCKET/PREFIX) where a producer whose workers do not see
    # its files puts an input's bytes: chunks then name ranges of that object, not bytes in
    # Redis; the object is deleted once the job's result is collected, or it is cancelled
    payload_store: str | None = None
    # chunks that carry the input's bytes carry them compressed (zstd level 1): Redis moves
    # and holds about half of random game text, producers and workers spend CPU on it
    compress_payloads: bool = False
    queue: str = Field("gamebatch", min_length=1)  # lanes: QUEUE.interactive, QUEUE.bulk
    interactive_max_bytes: int = Field(1 << 20, ge=0)  # inputs up to this size jump the line
    visibility_timeout: int = Field(3600, gt=0)  # seconds before Redis redelivers a message
    result_ttl: int = Field(7 * 24 * 3600, gt=0)  # seconds job keys live after collection
    lease_seconds: int = Field(30, gt=0)  # a running chunk's lease; lost leases are re-queued
    max_attempts: int = Field(3, gt=0)  # runs of a chunk before it fails as a poison chunk
    stall_seconds: float = Field(60, gt=0)  # no progress and an empty queue: re-queue chunks
    # a command that starts while its Redis restarts (it refuses connections) or while the
    # sentinels promote a replica waits this long for it, saying so once
    failover_seconds: float = Field(60, ge=0)
    poll_interval: float = Field(0.05, gt=0)  # seconds between looks at a job's counters
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)

    @field_validator("payload_store")
    @classmethod
    def _remote_store(cls, url: str | None) -> str | None:
        if url and not is_remote(url):
            raise ValueError(f"{url}: the payload store is an object store's URL (s3://...)")
        return url.rstrip("/") if url else None

    @field_validator("shards", mode="before")
    @classmethod
    def _shard_list(cls, value: Any) -> Any:
        if isinstance(value, str):  # GAMEBATCH_SHARDS
            return [url.strip() for url in value.split(",") if url.strip()]
        return value

    @field_validator("shards")
    @classmethod
    def _known_shards(cls, urls: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        for url in urls:
            check_broker_url(url)
        if urls and not info.data.get("broker_url"):
            raise ValueError("shards are more Redis instances beside broker_url: set it too")
        return urls

    @property
    def shard_urls(self) -> tuple[str, ...]:
        """Every Redis that holds jobs, broker_url's first (it also holds what is the
        cluster's, not a job's: the HTTP service's records, sweeps); none when embedded."""
        if not self.broker_url:
            return ()
        return tuple(dict.fromkeys((self.broker_url, *self.shards)))

    @field_validator("broker_url")
    @classmethod
    def _known_broker(cls, url: str | None, info: ValidationInfo) -> str | None:
        if url and is_sentinel(url):  # one string that carries the sentinel settings along
            return with_settings(
                url, info.data.get("sentinel_master"), info.data.get("sentinel_password")
            )
        if url:
            check_broker_url(url)
        return url or None


BROKER_SCHEMES = ("redis", "rediss")  # what both redis-py and kombu take


def check_broker_url(url: str) -> None:
    """Raise ValueError (naming no password) unless `url` is a Redis URL we can use."""
    if is_sentinel(url):
        SentinelUrl.parse(url)
        return
    parts = urlsplit(url)
    if parts.scheme not in BROKER_SCHEMES:
        raise ValueError(
            f"broker URL must start with {', '.join(s + '://' for s in BROKER_SCHEMES)}"
            " (or sentinel:// for sentinels)"
            f" (got {parts.scheme + '://' if parts.scheme else 'no scheme'})"
        )
    if not parts.hostname:
        raise ValueError("broker URL has no host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("broker URL's port must be a number from 1 to 65535")
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise ValueError(f"broker URL's database must be a number, got {database!r}")


LANES = ("interactive", "bulk")  # workers take from the first lane that has work


def lane_queue(settings: Settings, lane: str) -> str:
    """The Celery queue of a lane."""
    return f"{settings.queue}.{lane}"


def default_state_dir() -> Path:
    """Where the embedded Redis keeps its data unless `state_dir` says otherwise."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gamebatch"


def load_settings(path: str | None = None, **flags: Any) -> Settings:
    """Merge the layers and validate them; errors name the offending key and its source."""
    path = path or os.environ.get(CONFIG_ENV)
    data: dict[str, Any] = {}
    source = "defaults"
    if path:
        data = read_yaml(Path(path))
        source = f"config {path}"
    env = _environment()
    if env:
        data = _merge(data, env)
        source += " and GAMEBATCH_* environment variables"
    data = _merge(data, {k: v for k, v in flags.items() if v is not None})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(part) for part in first["loc"]]
        message = str(first["msg"]).removeprefix("Value error, ")
        if flags.get(loc[0]) is not None:
            raise UsageError(f"{_FLAGS.get(loc[0], '--' + loc[0])}: {message}") from None
        if _lookup(env, loc) is not None:
            variable = ENV_PREFIX + "__".join(loc).upper()
            raise UsageError(f"environment variable {variable}: {message}") from None
        raise UsageError(f"{source}: setting {'.'.join(loc)!r}: {message}") from None


_FLAGS = {"broker_url": "--broker"}  # settings whose flag has another name


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # only commands given a config file pay for it

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"config {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise UsageError(f"config {path} must be a mapping of settings")
    return doc


def _environment() -> dict[str, Any]:
    """GAMEBATCH_KEY=value and GAMEBATCH_SECTION__KEY=value as nested settings."""
    found: dict[str, Any] = {}
    for name, value in os.environ.items():
        if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        node = found
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return found


def _lookup(tree: dict[str, Any], path: list[str]) -> Any:
    node: Any = tree
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def worker_settings(settings: Settings) -> str:
    """The settings as a config file for local workers: what this command was given (file,
    environment and flags) reaches them, not only what they would find themselves."""
    import yaml

    doc = settings.model_dump(
        exclude={"broker_url", "shards", "workers", "producers", "state_dir", "server"}
    )
    return yaml.safe_dump(doc, sort_keys=False)


def show(settings: Settings) -> str:
    """The effective settings as YAML, with every password masked."""
    import yaml

    doc = settings.model_dump()
    doc["broker_url"] = mask_url(settings.broker_url) if settings.broker_url else None
    doc["shards"] = [mask_url(url) for url in settings.shards]
    if settings.server.webhook_secret:
        doc["server"]["webhook_secret"] = "***"
    if settings.sentinel_password:
        doc["sentinel_password"] = "***"
    return yaml.safe_dump(doc, sort_keys=False)


def mask_url(url: str | None) -> str:
    """The URL with every password replaced (in the user part and in the query), safe to print."""
    if not url:
        return "(embedded)"
    if is_sentinel(url):
        try:
            return SentinelUrl.parse(url).masked()
        except ValueError:
            return "sentinel://(unreadable)"
    parts = urlsplit(url)
    if parts.password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        parts = parts._replace(netloc=f"{user}:***@{host}")
    query = [
        (k, "***" if "password" in k.lower() else v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*/")))
