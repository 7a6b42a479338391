"""Settings layers, validation errors that name the key, and masking of secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_settings, mask_url, show
from pipeline.errors import UsageError
from pipeline.urls import SentinelUrl


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("GAMEBATCH_"):
            monkeypatch.delenv(name)


def test_defaults_then_file_then_environment_then_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("queue: from-file\nworkers: 3\nchunk:\n  target_work: 1000\n")
    assert load_settings().queue == "gamebatch"
    assert load_settings(str(config)).chunk.target_work == 1000
    monkeypatch.setenv("GAMEBATCH_CHUNK__TARGET_WORK", "2000")
    monkeypatch.setenv("GAMEBATCH_QUEUE", "from-env")
    settings = load_settings(str(config), workers=5)
    assert (settings.queue, settings.chunk.target_work, settings.workers) == ("from-env", 2000, 5)
    assert settings.chunk.max_cases == 200_000  # untouched keys keep their defaults


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("chunk:\n  target_work: -1\n", "chunk.target_work"),
        ("chunk:\n  target_wrok: 5\n", "chunk.target_wrok"),
        ("workers: many\n", "workers"),
        ("nonsense: 1\n", "nonsense"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    with pytest.raises(UsageError, match=f"setting '{key}'"):
        load_settings(str(config))


def test_environment_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAMEBATCH_CHUNK__MAX_CASES", "lots")
    with pytest.raises(UsageError, match="environment variable GAMEBATCH_CHUNK__MAX_CASES"):
        load_settings()
    monkeypatch.delenv("GAMEBATCH_CHUNK__MAX_CASES")
    monkeypatch.setenv("GAMEBATCH_WROKERS", "2")
    with pytest.raises(UsageError, match="GAMEBATCH_WROKERS"):
        load_settings()


def test_unreadable_or_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read config"):
        load_settings(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_settings(str(bad))
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(UsageError, match="must be a mapping"):
        load_settings(str(bad))


def test_shipped_configs_are_valid() -> None:
    folder = Path(__file__).resolve().parents[2].joinpath("configs")
    configs = [p for p in sorted(folder.glob("*.yaml")) if not p.name.startswith("scoring-")]
    assert len(configs) >= 2
    for config in configs:
        load_settings(str(config))


def test_config_show_masks_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.config import show

    monkeypatch.setenv("GAMEBATCH_BROKER_URL", "redis://:hunter2@db:6379/0")
    text = show(load_settings())
    assert "hunter2" not in text and "broker_url: redis://:***@db:6379/0" in text
    assert "target_work: 4000000" in text


def test_passwords_are_masked() -> None:
    assert mask_url("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert mask_url("rediss://user:s3cret@host/1") == "rediss://user:***@host/1"
    assert mask_url("redis://host:6379/0") == "redis://host:6379/0"
    assert "s3cret" not in mask_url("redis://:s3cret@host")


def test_producers_read_large_inputs_on_the_cpus_that_workers_leave_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.local.producers import PARALLEL_MIN_BYTES, producer_count

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    small = [tmp_path / f"s{i}.in" for i in range(3)]
    large = [tmp_path / f"l{i}.in" for i in range(3)]
    for path in small:
        path.write_text("1\n1 1\na\n")
    for path in large:
        with path.open("wb") as out:
            out.truncate(PARALLEL_MIN_BYTES // 2)  # sparse: three of them are large enough
    auto = load_settings()
    assert producer_count(auto, small) == 1
    assert producer_count(auto, large[:1]) == 1  # one file: nothing to share
    assert producer_count(auto, large) == 3  # a submitting machine: one per file
    assert producer_count(auto, large, local_workers=6) == 2
    assert producer_count(auto, large, local_workers=8) == 1  # the embedded default
    assert producer_count(load_settings(producers=2), small) == 2


def test_passwords_are_masked_in_the_user_part_and_in_the_query() -> None:
    url = "rediss://alice:s3cret@h:6380/0?password=s3cret&ssl_ca_certs=/etc/ca.crt"
    assert mask_url(url) == "rediss://alice:***@h:6380/0?password=***&ssl_ca_certs=/etc/ca.crt"


def test_port_zero_is_refused() -> None:
    with pytest.raises(UsageError, match="port must be a number from 1 to 65535"):
        load_settings(broker_url="redis://127.0.0.1:0/0")


def test_sentinel_urls_carry_their_settings_and_mask_their_passwords() -> None:
    url = "sentinel://:data%40pw@h1:26379;sentinel://h2:26380;sentinel://h3/2"
    settings = load_settings(broker_url=url, sentinel_master="main", sentinel_password="spw")
    assert settings.broker_url is not None
    found = SentinelUrl.parse(settings.broker_url)
    assert found == SentinelUrl(
        (("h1", 26379), ("h2", 26380), ("h3", 26379)), "main", 2, None, "data@pw", "spw"
    )
    assert SentinelUrl.parse(found.url()) == found  # one canonical form, passed on as is
    assert found.kombu_url() == "sentinel://h1:26379;sentinel://h2:26380;sentinel://h3:26379/2"
    assert found.transport_options() == {
        "master_name": "main",
        "sentinel_kwargs": {"password": "spw"},
        "master_password": "data@pw",
    }
    shown = mask_url(settings.broker_url)
    assert "data" not in shown and "spw" not in shown and "***" in shown and "h3" in shown
    assert "spw" not in show(settings) and "data@pw" not in show(settings)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("sentinel://h1:26379", "needs the master's name"),
        ("sentinel://h1:port?master_name=m", "entry 1 has a port that is no number"),
        ("sentinel://h1:1;redis://h2:2?master_name=m", "entry 2 must look like sentinel://"),
        ("sentinel://h1:1/x?master_name=m", "database must be a number"),
    ],
)
def test_a_bad_sentinel_url_is_one_clear_line(url: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        load_settings(broker_url=url)


def test_the_configuration_reference_is_current() -> None:
    """docs/configuration.md is what `python -m pipeline.settings_doc` makes of config.py."""
    from pipeline import settings_doc

    path = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert path.read_text() == settings_doc.reference(), (
        "run: python -m pipeline.settings_doc > docs/configuration.md"
    )
    documented = settings_doc.comments(settings_doc.Settings)
    sections = ("chunk", "limits", "server", "judge")
    fields = settings_doc.Settings.__struct_fields__
    missing = [n for n in fields if n not in sections and not documented.get(n)]
    assert missing == [], "settings without a comment"


def test_two_tokens_may_not_share_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token's name owns the jobs it uploads: two tokens of one name (both left unnamed,
    say) could cancel and see each other's jobs."""
    digests = ['{"sha256": "' + c * 64 + '", "scopes": ["submit"]}' for c in "ab"]
    monkeypatch.setenv("GAMEBATCH_SERVER__TOKENS", "[" + ", ".join(digests) + "]")
    with pytest.raises(UsageError, match="two tokens are named 'token'"):
        load_settings()
    pairs = zip(digests, "xy", strict=True)
    named = [d.replace("{", '{"name": "' + n + '", ', 1) for d, n in pairs]
    monkeypatch.setenv("GAMEBATCH_SERVER__TOKENS", "[" + ", ".join(named) + "]")
    assert [t.name for t in load_settings().server.tokens] == ["x", "y"]
