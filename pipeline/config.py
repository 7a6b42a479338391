"""Settings: defaults, then a YAML file, then GAMEBATCH_* environment variables, then flags."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Self, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec
from msgspec import Meta, field

from pipeline.errors import UsageError
from pipeline.urls import SentinelUrl, is_remote, is_sentinel, with_settings

ENV_PREFIX = "GAMEBATCH_"
CONFIG_ENV = "GAMEBATCH_CONFIG"
DEBUG_ENV = "GAMEBATCH_DEBUG"  # set: a Redis error's traceback too, for whoever diagnoses
NOT_SETTINGS = (CONFIG_ENV, "GAMEBATCH_SERVER", "GAMEBATCH_TOKEN", DEBUG_ENV)  # not settings

# msgspec validates settings: its import and classes cost a few ms where pydantic's cost
# 100-150 ms of every command's start (a one-case solve took 0.37 s, --help 0.08 s)
Positive = Annotated[int, Meta(gt=0)]
Count = Annotated[int, Meta(ge=0)]
Seconds = Annotated[float, Meta(gt=0)]
Duration = Annotated[float, Meta(ge=0)]
NonEmpty = Annotated[str, Meta(min_length=1)]


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A group of settings: validated when read (`validated`), immutable after."""

    def replaced(self, **changes: Any) -> Self:
        """A copy with some settings changed (not validated again)."""
        return msgspec.structs.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain values (nested sections as dicts, tuples as they are)."""
        doc: dict[str, Any] = msgspec.to_builtins(self)
        return doc


class SettingError(Exception):
    """A setting that is not valid, at `loc` (its keys from the top)."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


S = TypeVar("S", bound=Section)
_AT = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$")


def validated(data: Any, kind: type[S]) -> S:
    """`data` (from YAML, the environment and flags: strings are read as the types ask) as
    a `kind`; a SettingError names the first bad key."""
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as exc:
        found = _AT.match(str(exc))
        assert found is not None
        message, where = found.group(1), found.group(2) or ""
        loc = tuple(p for p in re.split(r"[.\[\]]", where) if p)
        unknown = _UNKNOWN.match(message)
        if unknown:
            loc, message = (*loc, unknown.group(1)), "not a setting"
        raise SettingError(loc, message) from None


class ChunkSettings(Section, frozen=True):
    """How cases are grouped into tasks (work is the game's cost estimate of a case)."""

    target_work: Positive = 4_000_000  # a chunk's work (about 30 ms of solving)
    max_cases: Positive = 200_000  # tiny cases: a chunk of 2 MB of input, 15 ms
    # a chunk that is a range of an object (each costs a request) grows with the input, up
    # to place_scale times the above, while the input still makes place_spread chunks; a
    # place in a file (an open and a map) keeps the above
    place_scale: Positive = 10
    # 0: twice the pool processes of the workers alive in the cluster, and at least 16
    place_spread: Count = 0
    window: Count = 256  # chunks in flight while `solve` produces; 0: no limit
    window_bytes: Positive = 256 << 20  # and their payload bytes at most
    local_cases: Count = 100_000  # a comparison job this small runs in `grade`
    local_bytes: Count = 256 << 10  # an input this small is solved by the command
    # and one this small too while no local worker runs yet: on two cores the command alone
    # solves it sooner than workers start (a core-second) and help (docs/performance.md)
    alone_bytes: Count = 1 << 30


class LimitSettings(Section, frozen=True):
    """Input limits enforced while reading, before anything large is held."""

    max_token_bytes: Positive = 1 << 26  # one string or board row of an input
    max_file_bytes: Count = 0  # 0: no limit
    max_upload_bytes: Positive = 8 << 30  # one HTTP upload's body (`serve`)
    max_archive_files: Positive = 100_000  # entries of a grading archive
    max_archive_bytes: Positive = 16 << 30  # a grading archive, unpacked


SCOPES = ("submit", "read", "admin")


class TokenSetting(Section, frozen=True, kw_only=True):
    """An API token of `serve`: only the SHA-256 of the secret is configured."""

    name: NonEmpty = "token"
    sha256: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]
    scopes: tuple[str, ...] = SCOPES

    def __post_init__(self) -> None:
        unknown = sorted(set(self.scopes) - set(SCOPES))
        if unknown:
            raise ValueError(f"unknown scope {unknown[0]!r} (scopes: {', '.join(SCOPES)})")


class ServerSettings(Section, frozen=True):
    """The HTTP service (`gamebatch serve`)."""

    # API tokens: {name, sha256 of the secret, scopes: submit, read, admin}; a JSON list
    tokens: tuple[TokenSetting, ...] = ()
    spool_dir: str | None = None  # uploads and results; none: `server` in the state folder
    runners: Positive = 2  # processes that read uploads and collect results
    jobs_per_runner: Positive = 8  # jobs each runner process follows at once
    keep_seconds: Positive = 30 * 24 * 3600  # finished jobs, results and gradings kept
    max_pending_jobs: Positive = 1000  # unfinished jobs before uploads get 503
    webhook_secret: str | None = None  # signs callbacks (HMAC-SHA256)
    webhook_hosts: tuple[str, ...] = ()  # hosts callbacks may go to ("*.example.org" too)
    webhook_private_networks: tuple[str, ...] = ()  # private addresses callbacks may reach
    webhook_attempts: Positive = 6  # deliveries tried, with doubling pauses
    webhook_timeout: Seconds = 10.0  # seconds to connect, and per read or write
    webhook_queue: Positive = 1000  # callbacks waiting to be sent; past it one fails
    webhook_senders: Positive = 4  # threads of each runner that send callbacks
    header_timeout: Seconds = 10.0  # seconds for a request's headers to arrive
    body_timeout: Seconds = 30.0  # a body that sends nothing this long gets 408
    keep_alive: Seconds = 10.0  # seconds between comment lines on an idle event feed

    def __post_init__(self) -> None:
        names = [token.name for token in self.tokens]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:  # a token's name is who owns its jobs: two tokens must not share one
            message = f"two tokens are named {twice[0]!r}: give each a name of its own"
            raise SettingError(("server", "tokens"), message)


Extension = Annotated[str, Meta(pattern=r"^\.[A-Za-z0-9+]{1,8}$")]


class LanguageSetting(Section, frozen=True):
    """How a contestant's program in one language is compiled and run in /box of the sandbox
    (placeholders in pipeline/language_table.py); `version` prints the toolchain's version
    (it keys the compiled program, and a worker without it judges none)."""

    extensions: Annotated[tuple[Extension, ...], Meta(min_length=1)]
    compile: tuple[str, ...]  # empty: nothing to compile (the source is what runs)
    run: Annotated[tuple[str, ...], Meta(min_length=1)]
    version: Annotated[tuple[str, ...], Meta(min_length=1)]
    name: str = ""  # as reports show it
    codes: tuple[str, ...] = ()  # more names a contestant may give it (besides its key)
    shebang: str = ""  # a first line that picks it among the languages of its extension
    entry_pattern: str = ""  # what names the entry file in the source (Java: public class)
    processes: Positive | None = None  # a run's processes and threads (None: 16)
    runtime_mb: Count = 0  # what the runtime holds besides the program's heap ({heap_mb})
    memory_errors: tuple[str, ...] = ()  # on standard error: the heap ran out (MLE, not RE)
    system: tuple[str, ...] = ()  # more host paths the toolchain reads (read-only, globs)
    compile_seconds: Seconds | None = None  # None: judge.compile_seconds
    compile_memory_mb: Positive | None = None  # None: 1024
    package: str = ""  # the Debian package that brings it, for a worker that lacks it

    def __post_init__(self) -> None:
        for name in ("shebang", "entry_pattern"):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise SettingError((name,), f"not a regular expression: {exc}") from None


def _languages() -> dict[str, LanguageSetting]:
    from pipeline.language_table import LANGUAGES

    return {name: msgspec.convert(doc, LanguageSetting) for name, doc in LANGUAGES.items()}


class JudgeSettings(Section, frozen=True):
    """Judging programs (`grade --programs`): limits of each run, and the sandbox's uids."""

    time_limit: Seconds = 1.0  # CPU seconds per case (--time-limit)
    memory_limit_mb: Positive = 256  # per case (--memory-limit)
    output_limit_mb: Positive = 64  # per run (--output-limit)
    batch_cases: Positive = 1000  # cases handed to one run at most
    max_source_kb: Positive = 256  # a larger source file is a compile error
    compile_seconds: Seconds = 30  # a compiler's CPU time
    first_uid: Positive = 61000  # runs are uids first_uid.. (one per run slot)
    slots: Positive = 64  # runs at once on a machine, at most
    languages: dict[str, LanguageSetting] = field(default_factory=_languages)


class Settings(Section, frozen=True):
    """Everything a command or a worker needs to know."""

    # before broker_url, which reads them: a Redis watched by Sentinel (pipeline/urls.py)

    sentinel_master: str | None = None  # the name its sentinels know the Redis by
    sentinel_password: str | None = None  # the sentinels' own password
    # redis://, rediss:// or sentinel://; none: an embedded Redis and local workers
    broker_url: str | None = None
    # more Redis instances (URLs as broker_url's) that take whole jobs beside broker_url's,
    # each job on the one its id hashes to; the environment's list is split at commas
    shards: tuple[str, ...] = ()
    workers: Positive | None = None  # embedded mode's local worker processes
    producers: Positive | None = None  # `solve` reading inputs at once; None: auto
    state_dir: str | None = None  # embedded Redis data; None: XDG state folder, "": none
    warm_seconds: Count = 600  # idle seconds the warm local service stays; 0: none
    concurrency: Positive | None = None  # pool processes of `gamebatch worker`
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
    queue: NonEmpty = "gamebatch"  # lanes: QUEUE.interactive, QUEUE.bulk
    interactive_max_bytes: Count = 1 << 20  # inputs up to this size jump the line
    visibility_timeout: Positive = 3600  # seconds before Redis redelivers a message
    result_ttl: Positive = 7 * 24 * 3600  # seconds job keys live after collection
    lease_seconds: Positive = 30  # a running chunk's lease; lost leases are re-queued
    max_attempts: Positive = 3  # runs of a chunk before it fails as a poison chunk
    stall_seconds: Seconds = 60  # no progress and an empty queue: re-queue chunks
    # a command that starts while its Redis restarts (it refuses connections) or while the
    # sentinels promote a replica waits this long for it, saying so once
    failover_seconds: Duration = 60
    # a command waiting for chunks on a broker where no worker has been seen for this long
    # gives up (exit status 3; its job stays queued); None: it waits, saying so after 5 s
    wait_for_workers: Seconds | None = None
    poll_interval: Seconds = 0.05  # seconds between looks at a job's counters
    chunk: ChunkSettings = field(default_factory=ChunkSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)

    def __post_init__(self) -> None:
        url = self.payload_store
        if url and not is_remote(url):
            message = f"{url}: the payload store is an object store's URL (s3://...)"
            raise SettingError(("payload_store",), message)
        msgspec.structs.force_setattr(self, "payload_store", url.rstrip("/") if url else None)
        if self.broker_url:
            msgspec.structs.force_setattr(self, "broker_url", _known_broker(self))
        for url in self.shards:
            _check(("shards",), url)
        if self.shards and not self.broker_url:
            message = "shards are more Redis instances beside broker_url: set it too"
            raise SettingError(("shards",), message)

    @property
    def shard_urls(self) -> tuple[str, ...]:
        """Every Redis that holds jobs, broker_url's first (it also holds what is the
        cluster's, not a job's: the HTTP service's records, sweeps); none when embedded."""
        if not self.broker_url:
            return ()
        return tuple(dict.fromkeys((self.broker_url, *self.shards)))


def _known_broker(settings: Settings) -> str:
    """The broker URL, checked; a Sentinel URL carries the sentinel settings along in one
    string."""
    url = settings.broker_url or ""
    if is_sentinel(url):
        try:
            return with_settings(url, settings.sentinel_master, settings.sentinel_password)
        except ValueError as exc:
            raise SettingError(("broker_url",), str(exc)) from None
    _check(("broker_url",), url)
    return url


def _check(loc: tuple[str, ...], url: str) -> None:
    try:
        check_broker_url(url)
    except ValueError as exc:
        raise SettingError(loc, str(exc)) from None


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
        return validated(_read_lists(data), Settings)
    except SettingError as exc:
        loc, message = list(exc.loc) or ["settings"], exc.message  # [] : the whole mapping
        if flags.get(loc[0]) is not None:
            raise UsageError(f"{_FLAGS.get(loc[0], '--' + loc[0])}: {message}") from None
        if _lookup(env, loc) is not None:
            variable = ENV_PREFIX + "__".join(loc).upper()
            raise UsageError(f"environment variable {variable}: {message}") from None
        raise UsageError(f"{source}: setting {'.'.join(loc)!r}: {message}") from None


def _read_lists(data: dict[str, Any]) -> dict[str, Any]:
    """Lists given as one string (as the environment gives them): the server's tokens as
    JSON, shards and webhook hosts and networks split at commas."""
    server = data.get("server")
    if isinstance(server, dict) and isinstance(server.get("tokens"), str):
        try:
            server = {**server, "tokens": json.loads(server["tokens"])}
        except json.JSONDecodeError:
            message = "must be a JSON list of {name, sha256, scopes}"
            raise SettingError(("server", "tokens"), message) from None
    if isinstance(server, dict):
        for key in ("webhook_hosts", "webhook_private_networks"):
            if isinstance(server.get(key), str):
                server = {**server, key: _comma_list(server[key])}
        data = {**data, "server": server}
    if isinstance(data.get("shards"), str):
        data = {**data, "shards": _comma_list(data["shards"])}
    return data


def _comma_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# settings whose flag has another name
_FLAGS = {"broker_url": "--broker", "wait_for_workers": "--wait-for-workers"}


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

    doc = settings.as_dict()
    for name in ("broker_url", "shards", "workers", "producers", "state_dir", "server"):
        del doc[name]
    return yaml.safe_dump(doc, sort_keys=False)


def show(settings: Settings) -> str:
    """The effective settings as YAML, with every password masked."""
    import yaml

    doc = settings.as_dict()
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
