"""`fleetmem hook claude-code`: ambient recall at Claude Code's session boundaries.

The Claude Code hook contract this follows (Hooks reference, code.claude.com/docs/en/hooks):
- a command hook gets one JSON object on stdin with `session_id`, `transcript_path`, `cwd`,
  `hook_event_name`, plus `source` (startup | resume | clear | compact) for SessionStart and
  `trigger` (manual | auto) for PreCompact;
- SessionStart may add context with `{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": "..."}}` on stdout (exit 0); PreCompact cannot add context (its only
  output is a decision to block compaction), so it prints nothing;
- settings.json: `{"hooks": {EVENT: [{"matcher": "...", "hooks": [{"type": "command",
  "command": "...", "timeout": SECONDS}]}]}}`; the matcher filters on `source` / `trigger`.

SessionStart injects a budget-packed `context_pack` for the session's standing entities: those
configured for the project (`.fleetmem.json`) and those banked for this session by PreCompact
(banked first after a compaction, when they are what the summary dropped). PreCompact banks the
window's standing entities: candidate names from the transcript tail, resolved through `entity`
(only `found: true` is banked), kept per session id (at most 8 per session, 200 sessions).

The hook never blocks or breaks the harness: any failure (server down, bad token, timeout, bad
input, bad config) injects nothing, logs one line on stderr and in the state directory's
`hook.log`, and exits 0. A configuration that cannot work in any session (an unknown profile, an
endpoint without a token, a data directory without a memory) also prints `{"systemMessage": …}`
with the fix, which Claude Code shows to the user; a down or slow server prints nothing.

`fleetmem hook install` writes the settings entries that run it (`fleetmem.hooks.claude_code_install`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetmem.config import ClientSettings
from fleetmem.contract.session_context import injected_context
from fleetmem.hooks.state import StateFile, now_iso
from fleetmem.hooks.transcript import DEFAULT_TAIL_BYTES, candidates, last_mentions, read_tail_texts
from fleetmem.profiles import state_dir

PROJECT_CONFIG = ".fleetmem.json"
DEFAULT_TIMEOUT_S = 2.0
GUARD_GRACE_S = 0.5
#: Token budgets per boundary (docs/ambient.md's cadence table): a start can afford more than a rehydration.
START_BUDGET_TOKENS = 2000
COMPACT_BUDGET_TOKENS = 1500
BANK_CAP = 8
MAX_SESSIONS = 200
MAX_LOOKUPS = 24
PACK_MAX_ENTITIES = 8
HOOK_EVENTS = ("SessionStart", "PreCompact")
BANK_FILE = "hook-sessions.json"
LOG_FILE = "hook.log"
LOG_MAX_BYTES = 256 * 1024


class HookSkipped(Exception):
    """The hook gives up quietly (one log line, nothing injected)."""


@dataclass
class ProjectConfig:
    """`.fleetmem.json` in the project directory (or a parent): what the hook needs per project."""

    path: Path | None = None
    entities: list[str] = field(default_factory=list)
    budget_tokens: int = START_BUDGET_TOKENS
    compact_budget_tokens: int = COMPACT_BUDGET_TOKENS
    profile: str | None = None
    url: str | None = None
    token_file: str | None = None
    data_dir: str | None = None
    timeout_seconds: float | None = None
    include_private: bool = False
    transcript_tail_bytes: int = DEFAULT_TAIL_BYTES
    problems: list[str] = field(default_factory=list)

    @classmethod
    def find(cls, start: Path) -> ProjectConfig:
        for directory in (start, *start.parents):
            candidate = directory / PROJECT_CONFIG
            if candidate.is_file():
                return cls.load(candidate)
        return cls()

    @classmethod
    def load(cls, path: Path) -> ProjectConfig:
        cfg = cls(path=path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, RecursionError) as exc:
            cfg.problems.append(f"{path} is unreadable ({type(exc).__name__}); using defaults")
            return cfg
        if not isinstance(raw, dict):
            cfg.problems.append(f"{path} is not a JSON object; using defaults")
            return cfg
        if "token" in raw:
            cfg.problems.append(f"{path} holds a token, which is ignored: use token_file or a profile")
        ents = raw.get("entities")
        if isinstance(ents, str):
            ents = ents.split(",")
        cfg.entities = [str(e).strip() for e in ents or [] if str(e).strip()]
        for name in ("budget_tokens", "compact_budget_tokens", "transcript_tail_bytes"):
            value = raw.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                setattr(cfg, name, value)
        for name in ("profile", "url", "token_file", "data_dir"):
            value = raw.get(name)
            if isinstance(value, str) and value.strip():
                setattr(cfg, name, os.path.expanduser(value.strip()))
        if cfg.token_file and not os.path.isabs(cfg.token_file):
            cfg.token_file = str(path.parent / cfg.token_file)
        if cfg.data_dir and not os.path.isabs(cfg.data_dir):
            cfg.data_dir = str(path.parent / cfg.data_dir)
        timeout = raw.get("timeout_seconds")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            cfg.timeout_seconds = float(timeout)
        cfg.include_private = raw.get("include_private") is True
        return cfg


# --------------------------------------------------------------------------- logging


class HookLog:
    def __init__(self, event: str, session_id: str) -> None:
        self.prefix = f"fleetmem hook {event or '?'} session={session_id[:40] or '?'}"

    def _file(self, line: str) -> None:
        try:
            path = state_dir() / LOG_FILE
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
                path.replace(path.with_name(LOG_FILE + ".1"))
            with path.open("a", encoding="utf-8") as fh:
                fh.write(f"{now_iso()} {line}\n")
        except OSError:
            pass

    def info(self, what: str) -> None:
        self._file(f"{self.prefix}: {what}")

    def failure(self, what: str) -> None:
        line = f"{self.prefix}: {' '.join(what.split())} (nothing injected)"
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self._file(line)


# --------------------------------------------------------------------------- bank


def bank_file() -> StateFile:
    return StateFile(BANK_FILE, MAX_SESSIONS)


def banked_entities(session_id: str) -> list[str]:
    entry = bank_file().get(session_id) or {}
    return [str(e) for e in entry.get("entities") or []]


def bank_entities(session_id: str, slugs: list[str], project: str | None = None) -> list[str]:
    """Newest first, deduplicated, at most BANK_CAP per session."""

    def change(entry: dict[str, Any] | None) -> dict[str, Any]:
        merged: list[str] = []
        for slug in [*slugs, *((entry or {}).get("entities") or [])]:
            if slug not in merged:
                merged.append(slug)
        return {"entities": merged[:BANK_CAP], "project": project}

    return list(bank_file().update(session_id, change)["entities"])


# --------------------------------------------------------------------------- the two events


def _ordered_entities(configured: list[str], banked: list[str], *, compact: bool) -> list[str]:
    out: list[str] = []
    for name in [*banked, *configured] if compact else [*configured, *banked]:
        if name.lower() not in {o.lower() for o in out}:
            out.append(name)
    return out[:PACK_MAX_ENTITIES]


def session_start(event: dict[str, Any], cfg: ProjectConfig, lane: Any, log: HookLog) -> str | None:
    """The additionalContext text, or None when there is nothing to inject."""
    session_id = str(event.get("session_id") or "")
    source = str(event.get("source") or "startup")
    compact = source == "compact"
    banked = banked_entities(session_id) if session_id else []
    entities = _ordered_entities(cfg.entities, banked, compact=compact)
    budget = cfg.compact_budget_tokens if compact else cfg.budget_tokens
    arguments: dict[str, Any] = {"entities": ",".join(entities), "budget_tokens": budget}
    if cfg.include_private and not lane.remote:
        arguments["include_private"] = True  # honoured on the trusted-local lane only
    reply = lane.call("context_pack", arguments)
    if reply.is_error:
        raise HookSkipped(f"context_pack failed: [{reply.body.get('code')}] {reply.body.get('message', '')}")
    text = injected_context(reply.body)
    if text is None:
        log.info(f"source={source}: nothing known for {len(entities)} entit(ies); nothing injected")
        return None
    log.info(
        f"source={source}: injected a pack of {len(reply.body.get('cards') or [])} card(s), "
        f"{reply.body.get('budget_used')}/{budget} tokens"
    )
    return text


def pre_compact(event: dict[str, Any], cfg: ProjectConfig, lane: Any, log: HookLog) -> list[str]:
    """Bank the window's standing entities for this session; returns the slugs banked now."""
    session_id = str(event.get("session_id") or "")
    transcript = event.get("transcript_path")
    if not session_id or not isinstance(transcript, str) or not transcript:
        raise HookSkipped("no session_id or transcript_path in the hook input")
    try:
        texts = read_tail_texts(os.path.expanduser(transcript), cfg.transcript_tail_bytes)
    except OSError as exc:
        raise HookSkipped(f"cannot read the transcript: {type(exc).__name__}") from exc
    names = candidates(texts, limit=MAX_LOOKUPS)
    if not names:
        log.info("no candidate names in the transcript tail")
        return []
    replies = lane.call_many([("entity", {"name": name}) for name in names])
    mentioned = last_mentions(texts)
    newest: dict[str, float] = {}  # slug -> its newest mention under any of the names that found it
    for name, reply in zip(names, replies, strict=True):
        if reply.is_error:
            code = reply.body.get("code")
            if code in ("unauthorized", "scope_denied"):
                raise HookSkipped(f"entity failed: [{code}] {reply.body.get('message', '')}")
            continue
        card = reply.body.get("card") or {}
        slug = (card.get("entity") or {}).get("slug")
        if reply.body.get("found") is True and isinstance(slug, str):
            if slug in newest or len(newest) < BANK_CAP:
                newest[slug] = max(newest.get(slug, 0), mentioned.get(name.lower(), 0))
    # The best candidates are banked, newest (last mentioned) first, as the rehydration reads them.
    found = sorted(newest, key=lambda slug: -newest[slug])
    if found:
        project = str(cfg.path.parent) if cfg.path else None
        bank_entities(session_id, found, project)
    log.info(f"banked {len(found)} of {len(names)} candidate(s): {', '.join(found) or '-'}")
    return found


# --------------------------------------------------------------------------- the command


def _lane_for(args: Any, cfg: ProjectConfig, timeout: float) -> Any:
    from fleetmem.hooks.calls import client_lane
    from fleetmem.remote import resolve_endpoint

    url = getattr(args, "url", None)
    token_file = getattr(args, "token_file", None)
    profile = getattr(args, "profile", None)
    data_dir = getattr(args, "data_dir", None)
    source = "--profile"
    if not (url or profile or data_dir):  # nothing on the command line: the project's config
        url, profile, data_dir = cfg.url, cfg.profile, cfg.data_dir
        token_file = token_file or cfg.token_file
        source = f'"profile" in {cfg.path}'
    endpoint = resolve_endpoint(
        url=url,
        token_file=token_file,
        profile=profile,
        timeout=timeout,
        local_requested=bool(data_dir),
        profile_source=source,
    )
    return client_lane(endpoint, data_dir)  # locally without an embedder: the ambient verbs need none


def _bounded(work: Callable[[], Any], timeout: float) -> Any:
    """Run `work` in a daemon thread; give up (HookSkipped) when it has not finished in time."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="fleetmem-hook", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise HookSkipped(f"no answer within {timeout - GUARD_GRACE_S:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def run_hook(args: Any, stdin_text: str) -> str | None:
    """The stdout document for one hook event, or None. Never raises."""
    try:
        event = json.loads(stdin_text) if stdin_text.strip() else {}
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep to parse
        event = None
    if not isinstance(event, dict):
        HookLog("?", "").failure("the hook input on stdin is not a JSON object")
        return None
    name = str(event.get("hook_event_name") or getattr(args, "event", None) or "")
    log = HookLog(name, str(event.get("session_id") or ""))
    try:
        if name not in HOOK_EVENTS:
            log.info(f"event {name or '(none)'} is not handled; nothing to do")
            return None
        project = os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or os.getcwd()
        cfg = ProjectConfig.find(Path(str(project)).expanduser())
        for problem in cfg.problems:
            log.info(problem)
        timeout = (
            getattr(args, "timeout", None)
            or ClientSettings.from_env().hook_timeout_s
            or cfg.timeout_seconds
            or DEFAULT_TIMEOUT_S
        )

        lane = _lane_for(args, cfg, timeout)
        lane.warm()  # imports happen before the clock starts: the limit is for the memory server

        def work() -> str | None:
            if name == "PreCompact":
                pre_compact(event, cfg, lane, log)
                return None
            text = session_start(event, cfg, lane, log)
            if not text:
                return None
            doc = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
            return json.dumps(doc, ensure_ascii=False)

        # The remote client enforces `timeout` itself; the guard is the backstop (a stuck local store).
        result: str | None = _bounded(work, timeout + GUARD_GRACE_S)
        return result
    except HookSkipped as exc:
        log.failure(str(exc))
    except Exception as exc:
        log.failure(_describe(exc))
        if _misconfigured(exc):
            return json.dumps({"systemMessage": _system_message(exc)}, ensure_ascii=False)
    return None


def _misconfigured(exc: BaseException) -> bool:
    """A configuration that cannot work in any session (an unknown profile, an endpoint without a
    token, a data directory without a memory), as opposed to a down or slow server."""
    from fleetmem.console import EXIT_USAGE, CommandFailed

    return isinstance(exc, CommandFailed) and exc.exit_code == EXIT_USAGE


def _system_message(exc: Any) -> str:
    """Claude Code shows a hook's `systemMessage` to the user (exit 0, the session goes on): the
    one place a misconfigured hook is seen without reading hook.log."""
    from fleetmem.invocation import in_text

    return in_text(f"fleetmem hook: {exc.message} Fix: {exc.suggestion} (nothing was injected)")


def _describe(exc: BaseException) -> str:
    from fleetmem.console import CommandFailed
    from fleetmem.remote import RemoteUnavailable

    if isinstance(exc, RemoteUnavailable):
        return f"cannot reach {exc.url}: {exc.reason}"
    if isinstance(exc, CommandFailed):
        return f"[{exc.code}] {exc.message}"
    return f"{type(exc).__name__}: {exc}"
