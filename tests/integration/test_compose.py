"""What can be checked of the compose deployment without a Docker engine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.cli.parser import parser as _parser
from pipeline.config import load_settings
from pipeline.errors import UsageError
from pipeline.server.serve import check_exposure
from pipeline.urls import SentinelUrl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def test_redis_is_private_persistent_and_password_protected(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    assert "ports" not in redis
    command = " ".join(redis["command"])
    for flag in ("--requirepass", "--appendonly yes", "--maxmemory-policy noeviction"):
        assert flag in command
    assert "REDIS_PASSWORD" in redis["environment"]
    assert "healthcheck" in redis


def test_workers_scale_and_use_only_known_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    services = compose["services"]
    worker = services["worker"]
    assert worker["build"] == "." and "container_name" not in worker  # --scale needs both
    assert worker["stop_grace_period"]
    for service in ("worker", "cli", "flower"):
        env = services[service]["environment"]
        assert env["GAMEBATCH_BROKER_URL"].startswith("redis://:${REDIS_PASSWORD")
        for name, value in env.items():
            fake = "redis://:pw@redis:6379/0" if "URL" in name else str(value).split(":-")[-1]
            monkeypatch.setenv(name, fake.rstrip("}"))
        settings = load_settings()  # raises when a variable is not a setting
        assert settings.broker_url == "redis://:pw@redis:6379/0"
    assert settings.events is True and settings.concurrency == 2


def test_flower_is_local_and_needs_a_password(compose: dict[str, Any]) -> None:
    flower = compose["services"]["flower"]
    assert flower["ports"] == ["127.0.0.1:5555:5555"]
    assert "--basic-auth" in " ".join(flower["command"])
    assert "FLOWER_PASSWORD" in flower["environment"]


def test_the_api_is_local_needs_tokens_and_keeps_its_spool(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    api = compose["services"]["api"]
    assert api["ports"] == ["127.0.0.1:8080:8080"]
    command = api["command"]
    assert command[:2] == ["gamebatch", "serve"] and _parser().parse_args(command[1:])
    env = api["environment"]
    assert env["GAMEBATCH_SERVER__TOKENS"].startswith("${GAMEBATCH_API_TOKENS:?")
    assert any(
        volume.endswith(":" + env["GAMEBATCH_SERVER__SPOOL_DIR"]) for volume in api["volumes"]
    )
    tokens = '[{"name": "judge", "sha256": "' + "ab" * 32 + '", "scopes": ["submit", "read"]}]'
    monkeypatch.setenv("GAMEBATCH_BROKER_URL", "redis://:pw@redis:6379/0")
    monkeypatch.setenv("GAMEBATCH_SERVER__TOKENS", tokens)
    monkeypatch.setenv("GAMEBATCH_SERVER__SPOOL_DIR", "/spool")
    monkeypatch.setenv("GAMEBATCH_SERVER__WEBHOOK_SECRET", "")
    monkeypatch.setenv("GAMEBATCH_SERVER__WEBHOOK_HOSTS", "")
    server = load_settings().server
    assert server.tokens[0].scopes == ("submit", "read") and server.webhook_hosts == ()
    check_exposure("0.0.0.0", server.tokens)  # tokens set: it may listen in the container
    with pytest.raises(UsageError):
        check_exposure("0.0.0.0", ())
    assert "chown gamebatch /spool" in (ROOT / "Dockerfile").read_text()


def test_the_object_store_is_opt_in_local_and_shares_its_keys(compose: dict[str, Any]) -> None:
    minio = compose["services"]["minio"]
    assert minio["profiles"] == ["objects"]  # `docker compose up` alone does not start it
    assert all(port.startswith("127.0.0.1:") for port in minio["ports"])
    assert minio["environment"]["MINIO_ROOT_PASSWORD"] == "${AWS_SECRET_ACCESS_KEY:-}"
    for service in ("worker", "api", "cli"):  # every reader of objects has the same keys
        env = compose["services"][service]["environment"]
        assert env["AWS_SECRET_ACCESS_KEY"] == "${AWS_SECRET_ACCESS_KEY:-}"
        assert env["AWS_ENDPOINT_URL"].endswith("http://minio:9000}")


def test_worker_only_file_for_other_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.worker.yml").read_text())
    assert set(doc["services"]) == {"worker"}
    env = doc["services"]["worker"]["environment"]
    for name in env:
        monkeypatch.setenv(name, "rediss://:pw@central:6380/0" if "URL" in name else "true")
    monkeypatch.setenv("GAMEBATCH_CONCURRENCY", "2")
    assert load_settings().broker_url == "rediss://:pw@central:6380/0"


def test_commands_exist_in_the_cli(compose: dict[str, Any]) -> None:
    assert compose["services"]["cli"]["entrypoint"] == ["gamebatch"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["gamebatch", "worker"]' in dockerfile
    parser = _parser()
    for command in ("worker", "solve", "submit", "collect", "status", "config"):
        assert parser.parse_args(_minimal(command)).command == command


def _stages(dockerfile: str) -> list[list[str]]:
    """The instructions of each stage (continuation lines joined)."""
    stages: list[list[str]] = []
    for line in dockerfile.replace("\\\n", " ").splitlines():
        if line.startswith("FROM "):
            stages.append([])
        if line.strip() and not line.startswith("#"):
            stages[-1].append(line)
    return stages


def test_the_image_is_built_with_the_c_kernel(tmp_path: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine")
    build, final = _stages((ROOT / "Dockerfile").read_text())
    assert any("apt-get install" in line and " gcc " in line for line in build)
    kernels = 'python -c "import pipeline.games._trie, pipeline.games._pathgame"'
    assert any(kernels in line for line in final)
    # What the build stage copies is enough to compile the kernel.
    for line in build:
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for source in sources:
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, tmp_path / source, ignore=_built)
                else:
                    shutil.copy(ROOT / source, tmp_path / source)
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    for kernel in ("_trie", "_pathgame"):
        assert list((tmp_path / "pipeline" / "games").glob(f"{kernel}*.so")), kernel


def _built(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".so") or n == "__pycache__"]


def _minimal(command: str) -> list[str]:
    return {
        "worker": ["worker"],
        "solve": ["solve", "-p", "strgame", "in"],
        "submit": ["submit", "-p", "strgame", "in"],
        "collect": ["collect", "JOB", "-o", "out"],
        "status": ["status"],
        "config": ["config", "show"],
    }[command]


def test_the_sentinel_file_has_two_replicas_three_sentinels_and_follows_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.sentinel.yml").read_text())
    services = doc["services"]
    sentinels = [name for name in services if name.startswith("sentinel-")]
    assert len(sentinels) == 3 and {"redis-replica", "redis-replica-2"} <= set(services)
    for name in [*sentinels, "redis-replica", "redis-replica-2"]:
        assert "ports" not in services[name], f"{name} publishes a port"
    for name in sentinels:
        script = " ".join(services[name]["command"])
        assert "sentinel monitor gamebatch redis 6379 2" in script  # 2 of 3 must agree
        assert "requirepass $$SENTINEL_PASSWORD" in script and "auth-pass gamebatch" in script
    for name in ("redis-replica", "redis-replica-2"):
        replica = " ".join(services[name]["command"])
        assert "--replicaof redis 6379" in replica and "--requirepass" in replica
    assert "--masterauth" in " ".join(services["redis"]["command"])  # it may become a replica
    for name in ("redis", "redis-replica", "redis-replica-2"):  # each may be the primary
        command = " ".join(services[name]["command"])
        assert "--min-replicas-to-write 1 --min-replicas-max-lag 10" in command, name
    for name in ("worker", "flower", "api", "cli"):
        env = services[name]["environment"]
        for variable in (
            "GAMEBATCH_BROKER_URL",
            "GAMEBATCH_SENTINEL_MASTER",
            "GAMEBATCH_SENTINEL_PASSWORD",
        ):
            value = str(env[variable]).replace("${REDIS_PASSWORD:?set REDIS_PASSWORD}", "pw")
            value = value.replace("${SENTINEL_PASSWORD:?set SENTINEL_PASSWORD}", "spw")
            monkeypatch.setenv(variable, value)
        settings = load_settings()
        assert settings.broker_url is not None and settings.sentinel_password == "spw"
        found = SentinelUrl.parse(settings.broker_url)
        assert (found.master, found.password, len(found.hosts)) == ("gamebatch", "pw", 3)
