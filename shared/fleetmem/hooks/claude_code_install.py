"""`fleetmem hook install|uninstall --harness claude-code`: fleetmem's SessionStart and PreCompact
entries in a project's Claude Code settings (`.claude/settings.local.json`), written and taken out
again without touching any other hook; the hook itself is `fleetmem.hooks.claude_code`."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from fleetmem.hooks.claude_code import HOOK_EVENTS

SESSION_START_MATCHER = "startup|resume|clear|compact"
PRE_COMPACT_MATCHER = "manual|auto"
#: What identifies our entries in settings.json (uninstall removes only these).
HOOK_SUBCOMMAND = "hook claude-code"
HARNESS_TIMEOUT_S = 10
#: Where install writes: Claude Code's personal project settings (not committed; it reads hooks
#: there as from settings.json). The hook command names this clone's absolute path, which must not
#: land in the committed `settings.json` — earlier installs wrote there, so install and uninstall
#: take fleetmem's hooks out of it.
LOCAL_SETTINGS = "settings.local.json"
SHARED_SETTINGS = "settings.json"
BACKUP_SUFFIX = ".fleetmem.bak"


def hook_command(extra: list[str], env: dict[str, str] | None = None) -> str:
    """The hook's command line: this installation by absolute path (it goes into the personal,
    uncommitted settings file, so the path of this clone is right there and nowhere else). `env`
    is set for the hook alone (`env NAME=VALUE …`): a default the options and the project's
    `.fleetmem.json` still override, as they override the same variable in a shell."""
    from fleetmem.invocation import installed_command

    prefix = ["env", *(f"{k}={v}" for k, v in sorted((env or {}).items()))] if env else []
    return shlex.join([*prefix, *installed_command(), *HOOK_SUBCOMMAND.split(), *extra])


def is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and f" {HOOK_SUBCOMMAND}" in str(handler.get("command", ""))


def settings_path(project: Path, name: str = LOCAL_SETTINGS) -> Path:
    return project / ".claude" / name


def _read_settings(path: Path) -> dict[str, Any]:
    from fleetmem.console import EXIT_FAILED, CommandFailed

    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, RecursionError) as exc:
        raise CommandFailed(
            "invalid_params",
            f"{path} is not valid JSON ({type(exc).__name__}: {exc}); nothing was changed.",
            f"Fix {path} by hand (Claude Code cannot read it either), then run the command again.",
            exit_code=EXIT_FAILED,
        ) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("hooks", {}), dict):
        raise CommandFailed(
            "invalid_params",
            f"{path} does not hold a settings object with a `hooks` object; nothing was changed.",
            f"Fix {path} by hand, then run the command again.",
            exit_code=EXIT_FAILED,
        )
    return doc


def _without_ours(hooks: dict[str, Any]) -> tuple[dict[str, Any], int]:
    removed = 0
    out: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            out[event] = groups
            continue
        kept_groups = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not is_ours(h)]
            removed += len(handlers) - len(kept)
            if kept:
                kept_groups.append({**group, "hooks": kept})
            elif not handlers:
                kept_groups.append(group)
        if kept_groups:
            out[event] = kept_groups
    return out, removed


def _write_settings(path: Path, old_text: str | None, doc: dict[str, Any]) -> Path | None:
    """Replace `path` with `doc`; the backup holds the file as it was before fleetmem's FIRST
    change and is never overwritten (a second install must not replace the user's original with
    settings fleetmem already edited). Returns the backup, if the file existed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if old_text is not None:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        if not backup.exists():
            backup.write_text(old_text, encoding="utf-8")
    tmp = path.with_name(f".{path.name}.fleetmem.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return backup


def _take_ours_out(path: Path, doc: dict[str, Any], old_text: str | None) -> tuple[int, Path | None]:
    """Remove fleetmem's hooks from a settings file already read; (how many, the backup)."""
    hooks, removed = _without_ours(doc.get("hooks") or {})
    if not removed:
        return 0, None
    if hooks:
        doc["hooks"] = hooks
    else:
        doc.pop("hooks", None)
    return removed, _write_settings(path, old_text, doc)


def _load(path: Path) -> tuple[dict[str, Any], str | None]:
    old_text = path.read_text(encoding="utf-8") if path.exists() else None
    return _read_settings(path), old_text


def install(
    project: Path, extra_args: list[str], timeout_s: int = HARNESS_TIMEOUT_S, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Merge our SessionStart and PreCompact hooks into the project's .claude/settings.local.json,
    and take any earlier fleetmem hooks out of the committed .claude/settings.json."""
    path, shared = settings_path(project), settings_path(project, SHARED_SETTINGS)
    doc, old_text = _load(path)
    shared_doc, shared_text = _load(shared)  # both are read before either is changed
    moved, shared_backup = _take_ours_out(shared, shared_doc, shared_text)
    hooks, replaced = _without_ours(doc.get("hooks") or {})
    command = hook_command(extra_args, env)
    handler = {"type": "command", "command": command, "timeout": timeout_s}
    for event, matcher in (("SessionStart", SESSION_START_MATCHER), ("PreCompact", PRE_COMPACT_MATCHER)):
        hooks.setdefault(event, []).append({"matcher": matcher, "hooks": [dict(handler)]})
    doc["hooks"] = hooks
    backup = _write_settings(path, old_text, doc)
    return {
        "settings": str(path),
        "backup": str(backup) if backup else None,
        "backups": [str(b) for b in (backup, shared_backup) if b],
        "moved_from": str(shared) if moved else None,
        "command": command,
        "events": list(HOOK_EVENTS),
        "replaced": replaced + moved,
    }


def uninstall(project: Path) -> dict[str, Any]:
    """Remove only fleetmem's hooks, from settings.local.json and from settings.json (where earlier
    installs put them); everything else in both files stays as it is."""
    paths = [settings_path(project), settings_path(project, SHARED_SETTINGS)]
    loaded = [(path, *_load(path)) for path in paths if path.exists()]  # read both before changing either
    removed, changed, backups = 0, [], []
    for path, doc, old_text in loaded:
        count, backup = _take_ours_out(path, doc, old_text)
        if count:
            removed += count
            changed.append(str(path))
            backups += [str(backup)] if backup else []
    return {
        "settings": str(paths[0]),
        "changed": changed,
        "backup": backups[0] if backups else None,
        "backups": backups,
        "removed": removed,
    }
