"""The tool subcommands, generated from the registry: every tool is a subcommand built from its
params model, so the CLI never drifts from tools/list. They act directly on the data directory as
the trusted-local caller (remote=False: `--include-private` works here and nowhere else) through
the same `dispatch()` the MCP server uses, so validation, idempotency and error envelopes are
identical. With `--url`/`--profile` the same subcommand is a remote MCP call instead
(`fleetmem.remote`). Successes print through `fleetmem.cli.render`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser, exit_code_for, load_registry, print_error, print_notices
from fleetmem.cli.render import render_body
from fleetmem.config import ClientSettings
from fleetmem.console import EXIT_CONFIRM, EXIT_NO_RESULTS, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import local_caller, open_deps, render_notices, settings_from
from fleetmem.protocol import CONTRACT_VERSION

#: The tool subcommands that may start a new memory in an empty data directory (they store
#: something); every other one refuses a data directory without a database.
STORING_TOOLS = frozenset({"remember", "put_page"})


def cli_name(tool: str) -> str:
    return tool.replace("_", "-")


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Unwrap `anyOf [X, null]` and local `$ref`s so the option kind can be read."""
    if "anyOf" in prop:
        options = [p for p in prop["anyOf"] if p.get("type") != "null"]
        if len(options) == 1:
            merged = {**prop, **options[0]}
            merged.pop("anyOf", None)
            return _resolve(merged, defs)
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.rsplit("/", 1)[-1], {})
        return _resolve({**target, **{k: v for k, v in prop.items() if k != "$ref"}}, defs)
    return prop


def option_kind(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    """One of string|integer|number|boolean|list|json — how a command-line value becomes an argument."""
    variants = [v for v in prop.get("anyOf") or () if v.get("type") != "null"]
    if sorted(v.get("type") for v in variants) == ["array", "string"]:
        return "list"  # a string or an array of strings (context_pack's entities, D32): a comma list
    p = _resolve(prop, defs)
    kind = p.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the value's own type decides
        kind = next((k for k in kind if k != "null"), None)
    if kind == "array":
        items = _resolve(p.get("items", {}), defs)
        return "list" if items.get("type") in ("string", None) and "properties" not in items else "json"
    if kind in ("integer", "number", "boolean", "string"):
        return str(kind)
    if "enum" in p or "const" in p:
        return "string"
    return "json"


class ToolCommand:
    """How one registry tool maps to argv: an option per parameter, one positional shortcut."""

    #: Arguments the CLI adds itself; a parameter with the same name would be shadowed.
    RESERVED = frozenset(
        {"json", "data_dir", "tenant", "yes", "file", "help", "url", "token_file", "profile", "timeout"}
    )

    def __init__(self, spec: Any) -> None:
        from fleetmem.contract.tools import tool_schema

        self.spec = spec
        schema = tool_schema(spec)  # what tools/list shows, idempotency_key included
        self.defs = schema.get("$defs", {})
        self.props: dict[str, dict[str, Any]] = {
            k: v for k, v in schema.get("properties", {}).items() if k not in self.RESERVED and k != "_meta"
        }
        self.kinds = {name: option_kind(prop, self.defs) for name, prop in self.props.items()}
        required = schema.get("required", [])
        self.positional = getattr(spec.params, "cli_positional", "") or next(
            (n for n in required if self.kinds.get(n) == "string"), None
        )
        if self.positional is None and spec.writes:
            self.positional = next((n for n in self.props if self.kinds[n] == "string"), None)
        #: Admin-scope hard deletes (purge: destructive, not idempotent) are beyond recall: they need
        #: the user's yes. Minting a token (not destructive) and revoking one (idempotent) do not,
        #: as `fleetmem token create` / `token revoke` do not ask.
        hints = spec.annotations
        self.needs_confirmation = (
            spec.scope == "admin"
            and bool(spec.writes)
            and hints.get("destructiveHint", True) is True
            and hints.get("idempotentHint") is not True
        )

    @property
    def name(self) -> str:
        return cli_name(self.spec.name)

    def summary(self) -> str:
        """The description's first sentence (after the `MEMORY VERB (v1):` tag), for `--help` lists;
        synthesize's leading cost warning shrinks to a short `(slow, costs money)` mark."""
        text = " ".join((self.spec.description or "").split())
        costly = text.startswith("[EXPENSIVE")
        text = re.sub(r"^\[EXPENSIVE[^\]]*\]\s*", "", text).removeprefix("MEMORY VERB (v1):").strip()
        first = re.split(r"(?<!e\.g)(?<!i\.e)\.\s", text, maxsplit=1)[0].rstrip(".")
        if costly:
            first = f"(slow, costs money) {first}"
        return first

    def add_parser(self, sub: Any, common: Parser) -> None:
        p = sub.add_parser(self.name, parents=[common], help=self.summary(), description=self.spec.description)
        p.set_defaults(handler=cmd_tool, tool=self)
        if self.positional:
            p.add_argument(
                "_positional",
                nargs="?",
                metavar=self.positional.upper(),
                help=f"same as --{cli_name(self.positional)}",
            )
        for name, prop in self.props.items():
            flag = "--" + cli_name(name)
            help_text = (prop.get("description") or "").replace("%", "%%")
            kind = self.kinds[name]
            if kind == "boolean":
                p.add_argument(
                    flag,
                    dest=f"p_{name}",
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=help_text,
                )
            elif kind == "list":
                p.add_argument(
                    flag,
                    dest=f"p_{name}",
                    action="append",
                    default=None,
                    metavar="A,B",
                    help=help_text + " (comma-separated or repeated)",
                )
            else:
                metavar = "JSON" if kind == "json" else name.upper()
                p.add_argument(flag, dest=f"p_{name}", default=None, metavar=metavar, help=help_text)
        if "content" in self.props:
            p.add_argument(
                "--file",
                dest="content_file",
                default=None,
                metavar="PATH",
                help="read content from PATH ('-' = stdin); stdin is read when neither is given",
            )
        p.add_argument("--tenant", default=None, help="tenant (brain) to act on (default: default)")
        if self.needs_confirmation:
            p.add_argument("--yes", action="store_true", help="confirm this permanent deletion")
        p.add_argument("--json", action="store_true", help="print the response body as one JSON document")
        from fleetmem.remote import add_remote_options

        add_remote_options(p)

    @staticmethod
    def _convert(kind: str, raw: Any) -> Any:
        # Values that do not convert pass through unchanged, so dispatch's validation answers
        # with the same invalid_params envelope (and fix) an MCP caller would get.
        if kind == "integer":
            try:
                return int(raw)
            except ValueError:
                return raw
        if kind == "number":
            try:
                return float(raw)
            except ValueError:
                return raw
        if kind == "list":
            return [item.strip() for chunk in raw for item in str(chunk).split(",") if item.strip()]
        if kind == "json":
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                return raw
        return raw

    def arguments(self, args: argparse.Namespace) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.props:
            raw = getattr(args, f"p_{name}", None)
            if raw is not None:
                out[name] = self._convert(self.kinds[name], raw)
        pos = getattr(args, "_positional", None)
        if pos is not None and self.positional:
            if self.positional in out:
                raise CommandFailed.usage(
                    f"{self.positional} given twice (positional and --{cli_name(self.positional)})",
                    f"Pass it once: fleetmem {self.name} {self.positional.upper()}",
                    code="usage",
                )
            out[self.positional] = pos
        if "content" in self.props and "content" not in out:
            source = getattr(args, "content_file", None)
            if source == "-" or (source is None and not sys.stdin.isatty()):
                data = sys.stdin.read()
                if data or source == "-":
                    out["content"] = data
            elif source is not None:
                try:
                    out["content"] = Path(source).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise CommandFailed.usage(
                        f"Cannot read {source}: {exc}",
                        "Pass a readable UTF-8 markdown file with --file, or pipe the content on stdin.",
                    ) from exc
        return out

    def argv(self, arguments: dict[str, Any]) -> list[str]:
        """The command line equivalent of an MCP call of this tool (used to render fixes)."""
        argv = ["fleetmem", self.name]
        rest = dict(arguments)
        if self.positional and isinstance(rest.get(self.positional), str):
            argv.append(rest.pop(self.positional))
        for name, value in rest.items():
            if value is None:
                continue
            kind = self.kinds.get(name, "json")
            flag = "--" + cli_name(name)
            if kind == "boolean":
                argv.append(flag if value else "--no-" + cli_name(name))
            elif kind == "list" and isinstance(value, list):
                argv += [flag, ",".join(str(v) for v in value)]
            elif kind == "json" or not isinstance(value, str | int | float):
                argv += [flag, json.dumps(value)]
            else:
                argv += [flag, str(value)]
        return argv


def tool_commands() -> dict[str, ToolCommand]:
    registry, _problem = load_registry()
    return {spec.name: ToolCommand(spec) for spec in registry.values()}


def _is_empty_result(tool: str, body: dict[str, Any], arguments: dict[str, Any] | None = None) -> bool:
    """FLEETMEM_FAIL_ON_EMPTY: did the call find nothing? A query recall's page results always
    include weak vector neighbours, and without a filter its facts arm ranks every fact (D13), so
    neither counts by its presence: the recall is empty unless a result has evidence stronger than
    `weak_semantic`, or a fact holds every word of the query (the `keyword_exact` rule; recall gives
    facts no evidence field, so a fact found only by meaning does not count here)."""
    if tool == "recall":
        args = arguments or {}
        query = str(args.get("query") or "").strip()
        facts = body.get("facts") or []
        results = body.get("results") or []
        if not query:
            return not facts and not results
        if any(r.get("evidence") != "weak_semantic" for r in results):
            return False
        if any(str(args.get(k) or "").strip() for k in ("entity", "session_id", "since")):
            return not facts  # a filter selects facts: each one is a hit
        from fleetmem.memory.search import tokens

        words = tokens(query)
        return not any(set(words) <= set(tokens(str(f.get("fact") or ""))) for f in facts)
    if tool == "entity":
        return body.get("found") is False
    return False


def _confirmation_payload(cmd: ToolCommand, arguments: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    argv = [*cmd.argv(arguments), "--yes"]
    from fleetmem.remote import endpoint_from_args

    endpoint = endpoint_from_args(args)
    argv += list(endpoint.argv) if endpoint else []
    if args.data_dir:
        argv += ["--data-dir", str(args.data_dir)]
    if args.tenant:
        argv += ["--tenant", args.tenant]
    target = arguments.get(cmd.positional or "", "the item")
    commands = tool_commands()
    preview = None
    if "trace_fact" in commands and cmd.positional:
        preview = (
            commands["trace_fact"].argv({cmd.positional: target})
            if cmd.positional in commands["trace_fact"].props
            else None
        )
    user_message = f"Permanently delete {target} and its index entries? This cannot be undone."
    why = f"{cmd.spec.name} hard-deletes data (it is audited, but the content is gone for good)."
    payload: dict[str, Any] = {
        "status": "confirmation_required",
        "error": "confirmation_required",
        "code": "confirmation_required",
        "message": f"{cmd.name} needs the user's approval before it runs; nothing was changed.",
        "suggestion": f"Ask the user: {user_message} If they agree, run: {shlex.join(argv)}",
        "effects": ["destructive"],
        "actor": "agent",
        "why": why,
        "risk": "The fact and its search entries are deleted permanently.",
        "user_message": user_message,
        "fix": {
            "argv": argv,
            "command": shlex.join(argv),
            "consent": ["destructive"],
            "actor": "agent",
            "next": "ask_user",
            "why": why,
            "user_message": user_message,
        },
        "contract_version": CONTRACT_VERSION,
    }
    if preview:
        payload["preview"] = {"argv": preview, "command": shlex.join(preview)}
    return payload


def _agent_block(payload: dict[str, Any]) -> str:
    def flat(value: Any) -> str:
        text = " ".join(str(value).split())
        return text.replace("[/", "(/").replace("[AGENT]", "(AGENT]").replace("[SHOW USER]", "(SHOW USER]")

    lines = [
        "[AGENT]",
        f"ask: {flat(payload['user_message'])}",
        f"why: {flat(payload['why'])}",
        f"risk: {flat(payload['risk'])}",
        f"consent: {', '.join(payload['effects'])}",
        f"actor: {payload['actor']}",
        "next: ask_user",
        f"if_yes: {flat(payload['fix']['command'])}",
        "if_no: Nothing runs; nothing was changed.",
    ]
    if payload.get("preview"):
        lines.append(f"verify: {flat(payload['preview']['command'])}")
    lines += ["[SHOW USER]", flat(payload["user_message"]), "[/SHOW USER]", "[/AGENT]"]
    return "\n".join(lines)


def remote_reply(endpoint: Any, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool, list[Any]]:
    """One verb subcommand on an endpoint, through the typed client over MCP (`fleetmem.client`):
    (body, is_error, notices) for the CLI's one set of renderers; an endpoint that gave no answer
    is the command's `unavailable`."""
    from fleetmem.client import Client, FleetmemError
    from fleetmem.client.transports import McpTransport
    from fleetmem.remote import NOTICES_KEY, RemoteUnavailable, unavailable_failure

    with Client.over(McpTransport(endpoint), retry_wait_s=0) as client:
        try:
            body = client.call(tool, arguments)
        except FleetmemError as err:
            if err.unanswered is not None:
                raise unavailable_failure(RemoteUnavailable(endpoint.url, err.unanswered)) from None
            return err.envelope, True, []
    notices = body.pop(NOTICES_KEY, None)
    return body, False, list(notices) if isinstance(notices, list) else []


def cmd_tool(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.remote import endpoint_from_args

    cmd: ToolCommand = args.tool
    arguments = cmd.arguments(args)
    endpoint = endpoint_from_args(args)
    remote = list(endpoint.argv) if endpoint is not None else []

    def call(arguments: dict[str, Any], *, embedder: str | None = None) -> tuple[dict[str, Any], bool, list[Any]]:
        if endpoint is not None:  # a remote MCP call: the server's body, notices and envelope as they are
            return remote_reply(endpoint, cmd.spec.name, arguments)
        from fleetmem.transport.dispatch import dispatch

        settings = settings_from(args, embedder=embedder) if embedder else settings_from(args)
        deps = open_deps(settings, creates=cmd.spec.name in STORING_TOOLS)
        result = dispatch(cmd.spec.name, arguments, local_caller(args.tenant), deps, transport="cli")
        return dict(result.body), result.is_error, render_notices(result.notices)

    if cmd.needs_confirmation and not args.yes and arguments.get("dry_run") is not True:
        # Check first (a dry run deletes nothing): an unknown id answers not_found, not a question.
        check, failed, _ = call({**arguments, "dry_run": True}, embedder="none")  # an id lookup needs no model
        if failed:
            if out.as_json:
                out.document(check)
            else:
                print_error(check, tool_commands(), remote)
            return exit_code_for(check)
        payload = _confirmation_payload(cmd, arguments, args)
        if out.as_json:
            out.document(payload)
        else:
            Output.err(_agent_block(payload))
        return EXIT_CONFIRM
    body, is_error, notices = call(arguments)
    commands = tool_commands()
    if is_error:
        if out.as_json:
            out.document(body)
        else:
            print_error(body, commands, remote)
        return exit_code_for(body)
    if out.as_json:
        out.document({**body, "notices": notices} if notices else body)
    else:
        render_body(cmd.spec.name, body, out)
        print_notices(notices, commands, remote)
    if ClientSettings.from_env().fail_on_empty and _is_empty_result(cmd.spec.name, body, arguments):
        return EXIT_NO_RESULTS
    return EXIT_OK


def add_commands(sub: Any, common: Parser) -> None:
    for cmd in tool_commands().values():
        cmd.add_parser(sub, common)
