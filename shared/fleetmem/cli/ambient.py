"""The ambient-recall commands: `fleetmem profile`, `fleetmem hook`, `fleetmem heartbeat`; what the
hooks and the heartbeat do is `fleetmem.hooks`, this module is their command line.

They share the CLI's output contract (one JSON document with --json, human text otherwise, notices
and errors on stderr through the CLI's own printers, the same exit codes).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser, exit_code_for, print_error, print_notices
from fleetmem.cli.tools import tool_commands
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.remote import add_remote_options

AMBIENT_COMMANDS = frozenset({"profile", "hook", "heartbeat"})
HARNESSES = ("claude-code",)


def add_commands(sub: Any, common: Parser) -> None:
    from fleetmem.hooks.claude_code import DEFAULT_TIMEOUT_S as HOOK_TIMEOUT_S

    prof = sub.add_parser("profile", parents=[common], help="saved remote endpoints for --profile")
    psub = prof.add_subparsers(dest="profile_command", metavar="ACTION", parser_class=Parser, required=True)
    p = psub.add_parser("add", help="save (or replace) a profile: a URL and the path of a token file")
    p.add_argument("name")
    p.add_argument("--url", required=True, help="MCP endpoint, e.g. https://…/mcp")
    p.add_argument("--token-file", default=None, metavar="PATH", help="file holding the token (else $FLEETMEM_TOKEN)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profile_add)
    p = psub.add_parser("list", help="list profiles (never shows tokens)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profile_list)
    p = psub.add_parser("remove", help="delete a profile")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profile_remove)

    hook = sub.add_parser("hook", parents=[common], help="ambient recall hooks for agent harnesses")
    hsub = hook.add_subparsers(dest="hook_command", metavar="ACTION", parser_class=Parser, required=True)
    p = hsub.add_parser(
        "claude-code",
        parents=[common],
        help="run one Claude Code hook event (JSON on stdin): SessionStart injects a pack, PreCompact banks",
    )
    add_remote_options(p, HOOK_TIMEOUT_S)
    p.set_defaults(handler=cmd_hook_run)
    for action, helptext in (
        ("install", "write the hooks into the project's .claude/settings.local.json (personal; merged, with a backup)"),
        ("uninstall", "remove only fleetmem's hooks from the project's .claude/settings.local.json and settings.json"),
    ):
        p = hsub.add_parser(action, parents=[common], help=helptext)
        p.add_argument("--harness", choices=HARNESSES, required=True)
        p.add_argument("--project", default=None, metavar="DIR", help="project directory (default: current)")
        if action == "install":
            add_remote_options(p, HOOK_TIMEOUT_S)
            p.add_argument("--force", action="store_true", help="install even into a fleetmem source checkout")
            p.add_argument(
                "--hook-timeout", type=int, default=None, metavar="SECONDS", help="the harness's kill timeout"
            )
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=cmd_hook_install if action == "install" else cmd_hook_uninstall)

    p = sub.add_parser(
        "heartbeat", parents=[common], help="one periodic wake: delta for a session (catches up expired cursors)"
    )
    p.add_argument("--session-id", required=True, help="a stable id for this heartbeat loop")
    p.add_argument("--budget-tokens", type=int, default=None, metavar="N", help="token budget (default 600)")
    p.add_argument("--entities", default=None, metavar="A,B", help="entities whose open-thread events to include")
    p.add_argument("--tenant", default=None, help="tenant (brain) on the local lane (default: default)")
    p.add_argument("--json", action="store_true")
    add_remote_options(p)
    p.set_defaults(handler=cmd_heartbeat)


# --------------------------------------------------------------------------- profile


def cmd_profile_add(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.profiles import Profile, load_profiles, save_profiles, valid_name

    if not valid_name(args.name):
        raise CommandFailed.usage(
            f"Profile name {args.name!r} is not allowed.",
            "Use letters, digits, '.', '_' or '-' (up to 64), e.g. fleetmem profile add stage …",
            code="usage",
        )
    if not args.url.startswith(("http://", "https://")):
        raise CommandFailed.usage(
            f"--url {args.url!r} is not an http(s) URL.",
            "Pass the endpoint, e.g. https://…/mcp",
            code="usage",
        )
    token_file = None
    if args.token_file:
        path = Path(args.token_file).expanduser().resolve()
        if not path.is_file():
            raise CommandFailed.usage(
                f"The token file {path} does not exist.",
                "Write the token (from `fleetmem token create`) into a file first, chmod 600 it, then add the profile.",
                code="usage",
            )
        token_file = str(path)
    profiles = load_profiles()
    profiles[args.name] = Profile(args.name, args.url, token_file)
    path = save_profiles(profiles)
    doc = {"profile": profiles[args.name].doc(), "file": str(path)}
    if out.as_json:
        out.document(doc)
    else:
        source = f"token from {token_file}" if token_file else "token from $FLEETMEM_TOKEN"
        out.text(f"Saved profile {args.name}: {args.url} ({source}) in {path}")
    return EXIT_OK


def cmd_profile_list(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.profiles import load_profiles, profile_path

    profiles = load_profiles()
    docs = [p.doc() for p in sorted(profiles.values(), key=lambda p: p.name)]
    if out.as_json:
        out.document({"profiles": docs, "file": str(profile_path())})
    elif not docs:
        Output.err("No profiles. Add one: fleetmem profile add NAME --url URL --token-file PATH")
    else:
        for d in docs:
            out.text(f"{d['name']}  {d['url']}  token: {d['token_file'] or '$FLEETMEM_TOKEN'}")
    return EXIT_OK


def cmd_profile_remove(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.profiles import load_profiles, save_profiles

    profiles = load_profiles()
    if profiles.pop(args.name, None) is None:
        raise CommandFailed.usage(
            f"No profile named {args.name!r}.",
            "Profile names come from `fleetmem profile list`.",
            code="not_found",
        )
    save_profiles(profiles)
    if out.as_json:
        out.document({"removed": args.name})
    else:
        out.text(f"Removed profile {args.name}")
    return EXIT_OK


# --------------------------------------------------------------------------- hook


def cmd_hook_run(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.hooks.claude_code import run_hook

    try:
        stdin_text = sys.stdin.read()
    except (OSError, UnicodeDecodeError):
        stdin_text = ""
    document = run_hook(args, stdin_text)
    if document:
        out.text(document)
        sys.stdout.flush()
    return EXIT_OK  # never a failing status: a hook must not break the harness


def _project(args: argparse.Namespace) -> Path:
    project = Path(args.project or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()).expanduser().resolve()
    if not project.is_dir():
        raise CommandFailed.usage(
            f"{project} is not a directory.",
            "Pass the project directory with --project DIR",
            code="usage",
        )
    return project


def _is_fleetmem_checkout(project: Path) -> bool:
    """The directory is a fleetmem source checkout (its pyproject.toml declares the project)."""
    import tomllib

    try:
        doc = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return (doc.get("project") or {}).get("name") == "fleetmem"


def _project_names_endpoint(project: Path, args: argparse.Namespace) -> bool:
    """Check the endpoint the project's `.fleetmem.json` names (the hook uses it when the command
    line names none); True when the file names one, so the hook will not use the default store."""
    from fleetmem.hooks.claude_code import ProjectConfig
    from fleetmem.lanes import data_dir_failure, settings_from, store_state
    from fleetmem.remote import resolve_endpoint

    cfg = ProjectConfig.find(project)
    if cfg.url or cfg.profile:
        resolve_endpoint(
            url=cfg.url, token_file=cfg.token_file, profile=cfg.profile, profile_source=f'"profile" in {cfg.path}'
        )
        return True
    if cfg.data_dir:
        settings = settings_from(args, data_dir=cfg.data_dir)
        if (state := store_state(settings)) != "ok":
            raise data_dir_failure(settings, state)
        return True
    return False


def cmd_hook_install(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.config import ENV_DATA_DIR
    from fleetmem.hooks.claude_code_install import HARNESS_TIMEOUT_S, install
    from fleetmem.lanes import data_dir_failure, settings_from, store_state
    from fleetmem.remote import endpoint_from_args

    project = _project(args)
    if _is_fleetmem_checkout(project) and not args.force:
        raise CommandFailed.usage(
            f"{project} is the fleetmem source checkout, not a project of yours: the hooks would run "
            "only for sessions opened in this clone; nothing was written.",
            "Run it for the project your agent works in: fleetmem hook install --harness claude-code "
            "--project ~/path/to/your-project (or pass --force to install into this checkout anyway)",
            code="usage",
        )
    # What the hook will use must work now, not fail quietly in every session: an endpoint without
    # a token, an unknown profile or a data directory without a memory is refused here with its fix.
    notes: list[str] = []
    env: dict[str, str] = {}
    if args.url or args.profile:
        endpoint_from_args(args)
        if args.url and not args.token_file:
            notes.append(
                "the hook reads its token from $FLEETMEM_TOKEN, which must be set in Claude Code's "
                "environment too (or install with --token-file PATH)"
            )
    elif getattr(args, "data_dir", None):
        settings = settings_from(args)
        if (state := store_state(settings)) != "ok":
            raise data_dir_failure(settings, state)
    else:
        project_decides = _project_names_endpoint(project, args)
        if os.environ.get(ENV_DATA_DIR):
            # The data directory `fleetmem serve` uses in this shell; Claude Code's environment need
            # not carry the variable, so the hook gets it pinned (a default: .fleetmem.json still wins).
            settings = settings_from(args)
            if not project_decides and (state := store_state(settings)) != "ok":
                raise data_dir_failure(settings, state)
            env[ENV_DATA_DIR] = str(Path(settings.data_dir).expanduser().resolve())
    extra: list[str] = []
    if args.url:
        extra += ["--url", args.url]
    if args.token_file:
        extra += ["--token-file", str(Path(args.token_file).expanduser().resolve())]
    if args.profile:
        extra += ["--profile", args.profile]
    if getattr(args, "data_dir", None):
        extra += ["--data-dir", str(Path(args.data_dir).expanduser().resolve())]
    if args.timeout:
        extra += ["--timeout", f"{args.timeout:g}"]
    report = install(project, extra, args.hook_timeout or HARNESS_TIMEOUT_S, env)
    report["notes"] = notes
    if out.as_json:
        out.document(report)
    else:
        out.text(f"Installed fleetmem hooks (SessionStart, PreCompact) in {report['settings']}")
        out.text("  (your personal project settings: Claude Code reads them, git should not carry them)")
        out.text(f"  command: {report['command']}")
        for backup in report["backups"]:
            out.text(f"  the settings as they were before fleetmem's first change: {backup}")
        if report["moved_from"]:
            out.text(f"  removed fleetmem's earlier hooks from {report['moved_from']}")
        for note in notes:
            Output.err(f"Note: {note}.")
    return EXIT_OK


def cmd_hook_uninstall(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.hooks.claude_code_install import uninstall

    report = uninstall(_project(args))
    if out.as_json:
        out.document(report)
    elif report["removed"]:
        out.text(f"Removed {report['removed']} fleetmem hook(s) from {', '.join(report['changed'])}")
        for backup in report["backups"]:
            out.text(f"  the settings as they were before fleetmem's first change: {backup}")
    else:
        out.text(f"No fleetmem hooks in {report['settings']}; nothing changed")
    return EXIT_OK


# --------------------------------------------------------------------------- heartbeat


def cmd_heartbeat(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.hooks.calls import client_lane
    from fleetmem.hooks.heartbeat import HEARTBEAT_BUDGET_TOKENS, wake
    from fleetmem.remote import RemoteUnavailable, endpoint_from_args, unavailable_failure

    lane = client_lane(endpoint_from_args(args), args.data_dir, args.tenant)
    budget = args.budget_tokens if args.budget_tokens is not None else HEARTBEAT_BUDGET_TOKENS
    try:
        result = wake(lane, args.session_id, budget, args.entities)
    except RemoteUnavailable as exc:
        raise unavailable_failure(exc) from exc
    finally:
        lane.close()
    commands = tool_commands()
    if "error" in result:
        if out.as_json:
            out.document(result["error"])
        else:
            print_error(result["error"], commands)
        return exit_code_for(result["error"])
    if out.as_json:
        out.document(result)
    else:
        out.text(result["text"])
        if result["established"]:
            Output.err("Note [cursor_established]: the session cursor was new or expired; caught up from state.")
        print_notices(result["notices"], commands)
    return EXIT_OK
