"""The configuration reference (docs/configuration.md), made from the settings' own source:
`python -m pipeline.settings_doc > docs/configuration.md`; a test keeps the file current."""

from __future__ import annotations

import inspect
import re
from typing import Any

import msgspec

from pipeline.config import (
    ENV_PREFIX,
    ChunkSettings,
    JudgeSettings,
    LimitSettings,
    Section,
    ServerSettings,
    Settings,
)

_FIELD = re.compile(r"^\s{4}(\w+): [^=]+(?:= .*?)?(?:\s+#\s*(.*))?$")
_COMMENT = re.compile(r"^\s{4}#\s?(.*)$")

HEADER = """# Configuration

Every setting has a default. A YAML file (`--config FILE`, or `GAMEBATCH_CONFIG`) overrides
the defaults, environment variables override the file, and command-line flags override
both. Nested keys are written `section.key` in prose, as a mapping in YAML, and as
`GAMEBATCH_SECTION__KEY` in the environment. An unknown key or a bad value is an error that
names it (exit status 2). In the environment a switch is `true` or `false` (or `1`, `0`).
Passwords in URLs are never printed. Examples: `configs/local.yaml`, `configs/cluster.yaml`.

This file is generated from `pipeline/config.py` (`python -m pipeline.settings_doc >
docs/configuration.md`); a test checks that it is current.
"""


def comments(model: type[Section]) -> dict[str, str]:
    """Each field's comment in the class's source: the one on its line, after any above it."""
    found: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(model).splitlines():
        comment = _COMMENT.match(line)
        if comment:
            above.append(comment.group(1).strip())
            continue
        field = _FIELD.match(line)
        if field and field.group(1) in model.__struct_fields__:
            parts = [*above, field.group(2) or ""]
            found[field.group(1)] = " ".join(p for p in parts if p)
        above = []
    return found


def _default(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]" if value else "[]"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:_}".replace("_", " ") if isinstance(value, int) else str(value)


def _table(model: type[Section], section: str | None) -> list[str]:
    notes = comments(model)
    rows = ["| setting | environment | default | what it is |", "| --- | --- | --- | --- |"]
    for info in msgspec.structs.fields(model):
        name = info.name
        if info.default_factory is not msgspec.NODEFAULT:
            continue  # a section: its own table
        key = f"{section}.{name}" if section else name
        env = ENV_PREFIX + (f"{section}__{name}" if section else name).upper()
        what = notes.get(name, "").replace("|", "\\|")
        rows.append(f"| `{key}` | `{env}` | {_default(info.default)} | {what} |")
    return rows


def reference() -> str:
    """The whole reference, as Markdown."""
    sections: list[tuple[str, type[Section], str | None]] = [
        ("Everything a command or a worker reads", Settings, None),
        ("`chunk`: " + (ChunkSettings.__doc__ or ""), ChunkSettings, "chunk"),
        ("`limits`: " + (LimitSettings.__doc__ or ""), LimitSettings, "limits"),
        ("`server`: " + (ServerSettings.__doc__ or ""), ServerSettings, "server"),
        ("`judge`: " + (JudgeSettings.__doc__ or ""), JudgeSettings, "judge"),
    ]
    out = [HEADER]
    for title, model, section in sections:
        out += [f"## {title.rstrip('.')}", "", *_table(model, section), ""]
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(reference(), end="")
