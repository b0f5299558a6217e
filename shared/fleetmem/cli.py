"""The `fleetmem` command: the local server, tokens, and the trusted-local lane to the memory.

Every tool in the registry is a subcommand generated from its params model, so the CLI never
drifts from tools/list. Tool subcommands act directly on the data directory as the trusted-local
caller (remote=False: `--include-private` works here and nowhere else) through the same
`dispatch()` the MCP server uses, so validation, idempotency and error envelopes are identical.
With `--url`/`--profile` the same subcommand is a remote MCP call instead (`fleetmem.remote`).

Output contract (AGENT_OPERATOR): human text by default; with `--json` exactly one JSON document
on stdout and everything else on stderr. Exit codes: 0 ok, 1 failed, 2 usage or invalid input,
3 confirmation required, 12 no results (only with FLEETMEM_FAIL_ON_EMPTY=1).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from fleetmem import invocation
from fleetmem.config import CALL_THREADS_MAX, DEFAULT_CALL_THREADS, ENV_CALL_THREADS, whole_number
from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION, SCOPES, SURFACES, Scope

if TYPE_CHECKING:
    from fleetmem.ports import Deps, VectorMaintenance

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIRM = 3
EXIT_NO_RESULTS = 12

#: Error codes that mean "the caller asked for something wrong": fix the command, exit 2.
CALLER_CODES = frozenset({"invalid_params", "provenance_required", "not_found", "unknown_tool", "usage"})

LOCAL_CLIENT_ID = "local"
#: The tool subcommands that may start a new memory in an empty data directory (they store
#: something); every other one refuses a data directory without a database.
STORING_TOOLS = frozenset({"remember", "put_page"})
ALL_SCOPES: frozenset[Scope] = frozenset(SCOPES)


class CommandFailed(Exception):
    """A failure the command reports itself (the `command_failed` fallback document under --json)."""

    def __init__(self, code: str, message: str, suggestion: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion
        self.exit_code = exit_code


class Output:
    """Keeps the one-document rule: stdout carries data, stderr carries everything else."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.document_written = False

    def document(self, doc: Any) -> None:
        if self.document_written:
            raise RuntimeError("a --json command writes exactly one document")
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2, default=str) + "\n")
        sys.stdout.flush()
        self.document_written = True

    def text(self, line: str = "") -> None:
        sys.stdout.write(line + "\n")

    @staticmethod
    def err(line: str = "") -> None:
        # Every command named on stderr (fixes, hints, suggestions) as this machine runs it.
        sys.stderr.write(invocation.in_text(line) + "\n")
        sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `--json` can still write its fallback document.
    Options are never abbreviated: `--token fm_x` must not quietly become `--token-file fm_x`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CommandFailed("usage", message, f"Check the command: {self.prog} --help", exit_code=EXIT_USAGE)


# --------------------------------------------------------------------------- settings and deps


def _settings(args: argparse.Namespace, **overrides: Any) -> Any:
    from fleetmem.config import Settings

    values: dict[str, Any] = {"data_dir": getattr(args, "data_dir", None)}
    for name in ("backend", "embedder", "surface", "host", "port", "model_dir", "call_threads"):
        if getattr(args, name, None) is not None:
            values[name] = getattr(args, name)
    values.update(overrides)
    try:
        return Settings.from_env(**values)
    except ValueError as exc:  # a FLEETMEM_* variable that does not parse
        problem, _, fix = str(exc).partition("; ")
        raise CommandFailed(
            "invalid_config",
            f"The configuration from the environment is not valid: {problem}",
            fix or "Correct or unset the FLEETMEM_* variable it names, then run: fleetmem doctor",
            exit_code=EXIT_USAGE,
        ) from None


def store_state(settings: Any) -> str:
    """The local data directory as a command finds it: `ok` (it holds a database), `missing` (no
    such directory, or no database in it), `file` (the path is not a directory); `ok` off-local."""
    from fleetmem.adapters.local.sqlite.db import DB_FILENAME

    if settings.backend != "local":
        return "ok"
    data_dir = Path(settings.data_dir)
    if data_dir.exists() and not data_dir.is_dir():
        return "file"
    return "ok" if (data_dir / DB_FILENAME).is_file() else "missing"


def _data_dir_failure(settings: Any, state: str) -> CommandFailed:
    data_dir = Path(settings.data_dir)
    quoted = shlex.quote(str(data_dir))
    if state == "file":
        return CommandFailed(
            "invalid_params",
            f"The data directory {data_dir} is a file, not a directory; nothing was read or written.",
            "Pass the directory that holds fleetmem.db (`fleetmem serve` prints it at startup), or the "
            "path of a new directory for a new memory: --data-dir DIR",
            exit_code=EXIT_USAGE,
        )
    why = "no such directory" if not data_dir.exists() else "no fleetmem.db in it"
    return CommandFailed(
        "data_dir_not_found",
        f"No fleetmem memory in {data_dir} ({why}); nothing was read.",
        "Check the path: `fleetmem serve` prints its data directory at startup (without --data-dir it is "
        f"$FLEETMEM_DATA_DIR or the per-user directory). To start a new, empty memory there: "
        f"fleetmem init --data-dir {quoted}",
        exit_code=EXIT_USAGE,
    )


def _build_deps(settings: Any, *, creates: bool = False, announce: bool = True) -> Any:
    """The stores for a command. A command that only reads (`creates=False`) refuses a data
    directory without a database: a mistyped --data-dir would otherwise read an empty memory and
    report nothing found. A command that stores (remember, put-page, import, token create) starts a
    new memory there and says so on stderr."""
    from fleetmem.wiring import build_deps

    state = store_state(settings)
    if state == "file" or (state == "missing" and not creates):
        raise _data_dir_failure(settings, state)
    try:
        deps = build_deps(settings)
    except Exception as exc:  # the store could not be opened: say where and how to fix it
        raise CommandFailed(
            "unavailable",
            f"Could not open the {settings.backend} store: {type(exc).__name__}: {exc}",
            f"Check that the data directory {settings.data_dir} is writable, then run: fleetmem doctor",
        ) from exc
    if state == "missing" and announce:
        Output.err(
            f"Note [data_dir_created]: {settings.data_dir} held no fleetmem memory; a new, empty one was "
            "started there (a server on another --data-dir does not see it)."
        )
    return deps


def _local_caller(tenant: str | None) -> Any:
    from fleetmem.models import Caller

    return Caller(tenant=tenant or "default", client_id=LOCAL_CLIENT_ID, scopes=ALL_SCOPES, remote=False)


def _registry() -> tuple[dict[str, Any], str | None]:
    """The complete tool registry, or why it cannot be loaded (doctor reports it)."""
    try:
        from fleetmem.memory.verbs import REGISTRY
    except Exception as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return dict(REGISTRY), None


# --------------------------------------------------------------------------- tool subcommands


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
        self.spec = spec
        schema = spec.input_schema()
        self.defs = schema.get("$defs", {})
        self.props: dict[str, dict[str, Any]] = {
            k: v for k, v in schema.get("properties", {}).items() if k not in self.RESERVED and k != "_meta"
        }
        self.kinds = {name: option_kind(prop, self.defs) for name, prop in self.props.items()}
        if getattr(spec, "idempotency", False) and "idempotency_key" not in self.props:
            self.props["idempotency_key"] = {"type": "string", "description": "Retry key (24 h)."}
            self.kinds["idempotency_key"] = "string"
        required = schema.get("required", [])
        self.positional = next((n for n in required if self.kinds.get(n) == "string"), None)
        if self.positional is None and spec.writes:
            self.positional = next((n for n in self.props if self.kinds[n] == "string"), None)
        #: Admin-scope writes (purge) are destructive beyond recall: they need the user's yes.
        self.needs_confirmation = spec.scope == "admin" and bool(spec.writes)

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

    def add_parser(self, sub: Any, common: _Parser) -> None:
        p = sub.add_parser(
            self.name, parents=[common], help=self.summary(), description=self.spec.description
        )
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
                raise CommandFailed(
                    "usage",
                    f"{self.positional} given twice (positional and --{cli_name(self.positional)})",
                    f"Pass it once: fleetmem {self.name} {self.positional.upper()}",
                    exit_code=EXIT_USAGE,
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
                    raise CommandFailed(
                        "invalid_params",
                        f"Cannot read {source}: {exc}",
                        "Pass a readable UTF-8 markdown file with --file, or pipe the content on stdin.",
                        exit_code=EXIT_USAGE,
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


def _tool_commands() -> dict[str, ToolCommand]:
    registry, _problem = _registry()
    return {spec.name: ToolCommand(spec) for spec in registry.values()}


def render_notices(notices: Sequence[Any]) -> list[dict[str, Any]]:
    """Notices as the wire shows them (ordered by kind, `fix.next` computed for the CLI)."""
    from fleetmem.memory.envelope import order_notices, render_notice

    return [render_notice(n, "cli") for n in order_notices(notices)]


def _fix_line(fix: dict[str, Any] | None, commands: dict[str, ToolCommand], remote: Sequence[str] = ()) -> str | None:
    """The fix as a command line; `remote` (the endpoint flags of a remote call) is appended to
    fleetmem verb commands, so the fix of a remote call targets the same server."""
    if not fix:
        return None
    argv: list[str] | None = None
    if fix.get("argv"):
        argv = [str(a) for a in fix["argv"]]
    elif (mcp := fix.get("mcp")) and mcp.get("tool") in commands:
        argv = commands[mcp["tool"]].argv(mcp.get("arguments") or {})
    if argv is not None:
        if remote and argv[:1] == ["fleetmem"] and argv[1:2] and argv[1] in {c.name for c in commands.values()}:
            argv += remote
        return shlex.join(invocation.argv(argv))
    if fix.get("command"):
        return str(fix["command"])
    return None


def _print_notices(
    notices: list[dict[str, Any]], commands: dict[str, ToolCommand], remote: Sequence[str] = ()
) -> None:
    for n in notices:
        line = f"Note [{n.get('code')}]: {n.get('why', '')}"
        fix = _fix_line(n.get("fix"), commands, remote)
        if fix:
            line += f" Fix: {fix}"
        if n.get("user_message"):
            line += f" ({n['user_message']})"
        Output.err(line)


def _print_error(body: dict[str, Any], commands: dict[str, ToolCommand], remote: Sequence[str] = ()) -> None:
    Output.err(f"Error [{body.get('code') or body.get('error')}]: {body.get('message', '')}")
    if body.get("suggestion"):
        Output.err(f"  {body['suggestion']}")
    fix = _fix_line(body.get("fix"), commands, remote)
    if fix:
        Output.err(f"  Fix: {fix}")
    if body.get("correlation_id"):
        Output.err(f"  correlation_id: {body['correlation_id']}")


def exit_code_for(body: dict[str, Any]) -> int:
    code = body.get("code") or body.get("error")
    if code == "confirmation_required" or body.get("class") == "consent":
        return EXIT_CONFIRM
    if code in CALLER_CODES or body.get("class") == "caller":
        return EXIT_USAGE
    return EXIT_FAILED


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


def _confirmation_payload(
    cmd: ToolCommand, arguments: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    argv = [*cmd.argv(arguments), "--yes"]
    from fleetmem.remote import endpoint_from_args

    endpoint = endpoint_from_args(args)
    argv += list(endpoint.argv) if endpoint else []
    if args.data_dir:
        argv += ["--data-dir", str(args.data_dir)]
    if args.tenant:
        argv += ["--tenant", args.tenant]
    target = arguments.get(cmd.positional or "", "the item")
    commands = _tool_commands()
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


def cmd_tool(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.remote import endpoint_from_args, remote_reply

    cmd: ToolCommand = args.tool
    arguments = cmd.arguments(args)
    endpoint = endpoint_from_args(args)
    remote = list(endpoint.argv) if endpoint is not None else []

    def call(arguments: dict[str, Any], *, embedder: str | None = None) -> tuple[dict[str, Any], bool, list[Any]]:
        if endpoint is not None:  # a remote MCP call: the server's body, notices and envelope as they are
            return remote_reply(endpoint, cmd.spec.name, arguments)
        from fleetmem.transport.dispatch import dispatch

        settings = _settings(args, embedder=embedder) if embedder else _settings(args)
        deps = _build_deps(settings, creates=cmd.spec.name in STORING_TOOLS)
        result = dispatch(cmd.spec.name, arguments, _local_caller(args.tenant), deps, transport="cli")
        return dict(result.body), result.is_error, render_notices(result.notices)

    if cmd.needs_confirmation and not args.yes and arguments.get("dry_run") is not True:
        # Check first (a dry run deletes nothing): an unknown id answers not_found, not a question.
        check, failed, _ = call({**arguments, "dry_run": True}, embedder="none")  # an id lookup needs no model
        if failed:
            if out.as_json:
                out.document(check)
            else:
                _print_error(check, _tool_commands(), remote)
            return exit_code_for(check)
        payload = _confirmation_payload(cmd, arguments, args)
        if out.as_json:
            out.document(payload)
        else:
            Output.err(_agent_block(payload))
        return EXIT_CONFIRM
    body, is_error, notices = call(arguments)
    commands = _tool_commands()
    if is_error:
        if out.as_json:
            out.document(body)
        else:
            _print_error(body, commands, remote)
        return exit_code_for(body)
    if out.as_json:
        out.document({**body, "notices": notices} if notices else body)
    else:
        render_body(cmd.spec.name, body, out)
        _print_notices(notices, commands, remote)
    if os.environ.get("FLEETMEM_FAIL_ON_EMPTY") == "1" and _is_empty_result(cmd.spec.name, body, arguments):
        return EXIT_NO_RESULTS
    return EXIT_OK


# --------------------------------------------------------------------------- human rendering


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100).rstrip()


def _budget_line(result: Any) -> str | None:
    if result.budget_tokens is None:  # no budget asked: the response has no budget fields
        return None
    return f"budget: {result.budget_used}/{result.budget_tokens} tokens used, {result.dropped_count} dropped"


def _render_remember(r: Any, out: Output) -> None:
    out.text(f"{r.status_text or r.status}")
    out.text(f"  id: {r.id}   entity: {r.entity_slug}   valid_until: {r.valid_until}")


def _render_recall(r: Any, out: Output) -> None:
    out.text(f"{len(r.facts)} fact(s)")
    for f in r.facts:
        where = " · ".join(str(x) for x in (f.entity_slug, f.provenance) if x)
        out.text(f"  #{f.id} [{f.kind}] {f.fact}")
        out.text(f"      {where}  (fact_id {f.fact_id})")
    out.text(f"{len(r.results)} search result(s)")
    for hit in r.results:
        out.text(f"  {hit.slug} — {hit.title} [{hit.evidence}, {hit.create_safety}]")
        chunk = " ".join(hit.chunk.split())
        out.text(f"      {chunk[:200]}{'…' if len(chunk) > 200 else ''}")
    for line in (_budget_line(r), r.search_degraded and f"search degraded: {r.search_degraded}"):
        if line:
            out.text(line)


def _render_entity(r: Any, out: Output) -> None:
    if not r.found or r.card is None:
        out.text("No entity matched.")
        for s in r.suggestions:
            out.text(f"  did you mean {s.slug} ({s.title}) [{s.create_safety}]")
        return
    card, ent = r.card, r.card.entity
    out.text(f"{ent.title}  ({ent.slug}, {ent.type})")
    if card.aka:
        out.text(f"  aka: {', '.join(card.aka)}")
    if card.summary:
        out.text(f"  {card.summary}")
    for t in card.open_threads:
        out.text(f"  open: [{t.kind}] {t.text} {t.date or ''}".rstrip())
    for e in card.edges:
        out.text(f"  {'→' if e.direction == 'out' else '←'} {e.type} {e.slug}")
    out.text(f"  facts: {card.active_fact_count}   backlinks: {card.backlink_count}   ({r.latency_ms} ms)")
    for s in r.suggestions:
        out.text(f"  also: {s.slug} ({s.title})")


def _render_pack(r: Any, out: Output) -> None:
    """context_pack and delta: the ready-to-inject text on stdout, the bookkeeping on stderr."""
    out.text(r.text)
    extra = [_budget_line(r)]
    if hasattr(r, "has_more"):
        extra.append(f"has_more: {r.has_more}   next_cursor: {json.dumps(r.next_cursor.model_dump())}")
    if r.degraded_reason:
        extra.append(f"degraded: {r.degraded_reason}")
    for line in extra:
        if line:
            Output.err(line)


def _render_forget(r: Any, out: Output) -> None:
    verb = "Expired" if r.expired else "Already expired (nothing changed):"
    out.text(f"{verb} {r.id}" + (f" — {r.reason}" if r.reason else ""))


def _render_page(r: Any, out: Output) -> None:
    # The page itself (frontmatter + body): `fleetmem get-page X > x.md` round-trips via put-page.
    out.text(r.content.rstrip("\n"))


def _render_synthesize(r: Any, out: Output) -> None:
    out.text(r.answer)
    out.text(_yaml(r.model_dump(exclude={"answer", "protocol_version"}, exclude_unset=True)))


_RENDERERS: dict[str, Callable[[Any, Output], None]] = {
    "remember": _render_remember,
    "recall": _render_recall,
    "entity": _render_entity,
    "context_pack": _render_pack,
    "delta": _render_pack,
    "forget": _render_forget,
    "get_page": _render_page,
    "synthesize": _render_synthesize,
}


def render_body(tool: str, body: dict[str, Any], out: Output) -> None:
    """A success for humans, read through the tool's result model (the one statement of its shape);
    tools without a dedicated view, and any body that strays from its model, print as YAML."""
    from pydantic import ValidationError

    from fleetmem.memory.verbs import REGISTRY

    spec = REGISTRY.get(tool)
    renderer = _RENDERERS.get(tool)
    if spec is not None and renderer is not None:
        try:
            renderer(spec.validate_result(body), out)
            return
        except ValidationError:
            pass
    out.text(_yaml({k: v for k, v in body.items() if k != "protocol_version"}))


# --------------------------------------------------------------------------- serve / tokens


def cmd_serve(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.transport.http_local import PortUnavailable, run_server

    settings = _settings(args)
    if store_state(settings) == "file":
        raise _data_dir_failure(settings, "file")
    try:
        run_server(settings, out=sys.stderr)
    except PortUnavailable as exc:
        raise CommandFailed(
            "port_unavailable",
            f"fleetmem serve {exc.strerror}; nothing was started.",
            f"Stop the other server, or pick a free port: fleetmem serve --port {settings.port + 1}"
            if exc.errno == errno.EADDRINUSE
            else "Pick another address or a port of 1024 or above: fleetmem serve --host 127.0.0.1 --port 8765",
            exit_code=EXIT_FAILED,
        ) from None
    return EXIT_OK


def cmd_init(args: argparse.Namespace, out: Output) -> int:
    """Create the data directory's database (the one explicit way to start a memory besides
    `serve` and the commands that store); an existing memory is left as it is."""
    settings = _settings(args, embedder="none")
    if settings.backend != "local":
        raise CommandFailed(
            "usage",
            f"init starts a local memory; this configuration uses the {settings.backend} backend.",
            "Unset FLEETMEM_BACKEND (a deployed stage's tables are created by its deployment).",
            exit_code=EXIT_USAGE,
        )
    existed = store_state(settings) == "ok"
    _build_deps(settings, creates=True, announce=False)
    if out.as_json:
        out.document({"data_dir": str(settings.data_dir), "created": not existed})
    elif existed:
        out.text(f"{settings.data_dir} already holds a fleetmem memory; nothing changed.")
    else:
        out.text(f"Started a new, empty memory in {settings.data_dir}.")
    return EXIT_OK


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in low..high."""

    def parse(text: str) -> int:
        try:
            return whole_number(text, low, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _port(text: str) -> int:
    """argparse type for --port: 0..65535 (0 = any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535; 0 picks a free port)")
    return value


def _token_deps(args: argparse.Namespace, *, creates: bool = False) -> Any:
    # Token management needs only the client store: never load the embedder for it.
    return _build_deps(_settings(args, embedder="none"), creates=creates)


def _token_hint(args: argparse.Namespace) -> list[str]:
    """`fleetmem token create` for the tenant and data directory this command was given."""
    from fleetmem.transport.errors import TOKEN_CREATE, token_create_argv

    options = {"client": "NAME", "scopes": "read,write"}
    options |= {"tenant": args.tenant} if getattr(args, "tenant", None) else {}
    options |= {"data_dir": str(args.data_dir)} if getattr(args, "data_dir", None) else {}
    return token_create_argv(TOKEN_CREATE, **options)


def _client_doc(rec: Any) -> dict[str, Any]:
    from fleetmem.timefmt import iso

    return {
        "token_id": rec.token_id,
        "client": rec.client_id,
        "tenant": rec.tenant,
        "scopes": sorted(rec.scopes),
        "created": iso(rec.created_at),
        "revoked": iso(rec.revoked_at),
    }


def cmd_token_create(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.tokens import create_client

    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    bad = [s for s in scopes if s not in SCOPES]
    if not scopes or bad:
        raise CommandFailed(
            "invalid_params",
            f"Unknown scope(s): {', '.join(bad) or '(none given)'}",
            f"Use a comma-separated subset of {','.join(SCOPES)}, e.g. --scopes read,write",
            exit_code=EXIT_USAGE,
        )
    if not args.client.strip():
        raise CommandFailed(
            "invalid_params",
            "--client is blank",
            "Name the client, e.g. --client my-agent",
            exit_code=EXIT_USAGE,
        )
    from fleetmem.tokens import ID_FIX, id_problem

    for problem in (id_problem("tenant", args.tenant), id_problem("client", args.client.strip())):
        if problem:
            raise CommandFailed("invalid_params", problem, ID_FIX, exit_code=EXIT_USAGE)
    deps = _token_deps(args, creates=True)
    token, rec = create_client(
        deps.clients, deps.clock, tenant=args.tenant, client_id=args.client.strip(), scopes=frozenset(scopes)
    )
    doc = {
        "token": token,
        "client": rec.client_id,
        "tenant": rec.tenant,
        "scopes": sorted(rec.scopes),
        "token_id": rec.token_id,
    }
    if out.as_json:
        out.document(doc)
    else:
        Output.err(
            f"Token {rec.token_id} for client '{rec.client_id}' (tenant {rec.tenant}, scopes "
            f"{','.join(sorted(rec.scopes))}). It is shown once and stored only as a SHA-256:"
        )
        out.text(token)
    return EXIT_OK


def cmd_token_list(args: argparse.Namespace, out: Output) -> int:
    deps = _token_deps(args)
    records = deps.clients.list(args.tenant) if args.tenant else deps.clients.list()
    docs = [_client_doc(r) for r in sorted(records, key=lambda r: (r.created_at, r.token_id))]
    if out.as_json:
        out.document({"tokens": docs})
        return EXIT_OK
    if not docs:
        Output.err(f"No tokens. Create one: {shlex.join(_token_hint(args))}")
        return EXIT_OK
    header = ("TOKEN_ID", "CLIENT", "TENANT", "SCOPES", "CREATED", "REVOKED")
    rows = [
        (
            d["token_id"],
            d["client"],
            d["tenant"],
            ",".join(d["scopes"]),
            d["created"] or "",
            d["revoked"] or "-",
        )
        for d in docs
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        out.text("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def cmd_token_revoke(args: argparse.Namespace, out: Output) -> int:
    deps = _token_deps(args)
    if not deps.clients.revoke(args.token_id, at=deps.clock.now()):
        raise CommandFailed(
            "not_found",
            f"No active token with id {args.token_id}",
            "Token ids come from `fleetmem token list` (the TOKEN_ID column, not the token itself).",
            exit_code=EXIT_USAGE,
        )
    from fleetmem.tokens import revocation_bound_s, revocation_text

    settings = _settings(args, embedder="none")
    bound = revocation_bound_s(settings.backend, settings.authorizer_cache_ttl_s)
    if out.as_json:
        out.document({"token_id": args.token_id, "revoked": True, "refused_within_s": bound})
    else:
        Output.err(f"Revoked {args.token_id}; {revocation_text(bound)}.")
    return EXIT_OK


def cmd_token_deny_cognito(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.tokens import deny_cognito_client

    deps = _token_deps(args, creates=True)
    record = deny_cognito_client(deps.clients, deps.clock, app_client_id=args.app_client_id)
    if out.as_json:
        out.document({"app_client_id": args.app_client_id, "token_id": record.token_id, "denied": True})
    else:
        Output.err(
            f"Denied Cognito app client {args.app_client_id}; the authorizer refuses its access tokens "
            "(at once for new tokens, after the authorizer cache TTL for cached ones)."
        )
    return EXIT_OK


# --------------------------------------------------------------------------- protocol / import


def protocol_document() -> dict[str, Any]:
    """Tool schemas and response shapes, built from the same specs tools/list serves."""
    from fleetmem.protocol import ERROR_CODES, VERB_NAMES

    registry, problem = _registry()
    if problem:
        raise CommandFailed(
            "unavailable",
            f"The tool registry failed to load: {problem}",
            "Reinstall the package (pip install -e .) and run: fleetmem doctor",
        )
    listed: dict[str, dict[str, Any]] = {}
    try:  # the exact objects tools/list serves, when the transport can build them
        from fleetmem.transport import mcp_app

        to_tool = getattr(mcp_app, "tool_definition", None) or getattr(mcp_app, "to_mcp_tool", None)
        if to_tool is not None:
            for spec in registry.values():
                tool = to_tool(spec)
                dumped = (
                    tool.model_dump(by_alias=True, exclude_none=True) if hasattr(tool, "model_dump") else tool
                )
                listed[spec.name] = dumped
    except Exception:
        listed = {}
    tools = []
    for spec in registry.values():
        entry = dict(
            listed.get(spec.name)
            or {
                "name": spec.name,
                "description": spec.description,
                "inputSchema": spec.input_schema(),
                "annotations": dict(spec.annotations),
            }
        )
        entry["scope"] = spec.scope
        entry["surface"] = spec.surface
        entry["writes"] = spec.writes
        entry["idempotency_key"] = bool(spec.idempotency)
        entry["responseSchema"] = spec.result.model_json_schema()
        tools.append(entry)
    return {
        "protocol_version": PROTOCOL_VERSION,
        "contract_version": CONTRACT_VERSION,
        "verbs": list(VERB_NAMES),
        "error_codes": list(ERROR_CODES),
        "tools": tools,
    }


def cmd_protocol(args: argparse.Namespace, out: Output) -> int:
    doc = protocol_document()
    if out.as_json:
        out.document(doc)
    else:
        for t in doc["tools"]:
            props = t.get("inputSchema", {}).get("properties", {})
            out.text(f"{t['name']:<14} [{t['scope']}, {t['surface']}] {', '.join(props)}")
    return EXIT_OK


class Progress:
    """A stdlib progress bar on stderr (redrawn in place on a terminal, periodic lines otherwise)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(total, 1)
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last_pct = -1

    def update(self, done: int, note: str = "") -> None:
        pct = int(done * 100 / self.total)
        if self.tty:
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} {note[:40]:<40}")
            sys.stderr.flush()
        elif pct // 10 != self.last_pct // 10 or done == self.total:
            Output.err(f"{self.label}: {done}/{self.total} ({pct}%)")
        self.last_pct = pct

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


#: `fleetmem import --jobs`: enough concurrent files that the embedder batches their chunks
IMPORT_JOBS = 8
IMPORT_JOBS_MAX = 64


def _import_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def _import_one(root: Path, path: Path, caller: Any, deps: Any) -> str | dict[str, Any]:
    """Put one file through the put_page dispatch: put_page's status (created, updated or
    unchanged) when stored, else its error by name."""
    from fleetmem.transport.dispatch import dispatch

    rel = path.relative_to(root).as_posix()
    slug = rel[: -len(".md")]
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {
            "file": rel,
            "slug": slug,
            "code": "invalid_params",
            "message": f"not readable as UTF-8 text: {type(exc).__name__}",
        }
    result = dispatch("put_page", {"slug": slug, "content": content}, caller, deps, transport="cli")
    if not result.is_error:
        return str(result.body.get("status") or "created")
    return {
        "file": rel,
        "slug": slug,
        "code": result.body.get("code"),
        "message": result.body.get("message"),
        "suggestion": result.body.get("suggestion"),
    }


def cmd_import(args: argparse.Namespace, out: Output) -> int:
    from concurrent.futures import ThreadPoolExecutor

    if args.pack is not None:
        from fleetmem.cli_pack import cmd_import_pack

        return cmd_import_pack(args, out)
    if args.path is None:
        raise CommandFailed(
            "usage",
            "fleetmem import needs a folder of markdown pages or --pack FILE.",
            "Pass one: fleetmem import ./notes, or fleetmem import --pack brain.fmpack",
            exit_code=EXIT_USAGE,
        )
    root = Path(args.path).expanduser()
    if not root.is_dir():
        raise CommandFailed(
            "invalid_params",
            f"{root} is not a directory",
            "Pass a folder of markdown pages: fleetmem import ./notes",
            exit_code=EXIT_USAGE,
        )
    files = _import_files(root)
    deps = _build_deps(_settings(args), creates=True)
    caller = _local_caller(args.tenant)
    progress = Progress(len(files), "import")
    imported = unchanged = 0
    errors: list[dict[str, Any]] = []
    # Files go through put_page on `--jobs` threads (each file is its own page, so their order does
    # not matter); concurrent pages' chunks share the embedder's forward passes. Results are taken
    # in file order, so the progress and the error lines read as a sequential import's would.
    pool = ThreadPoolExecutor(max_workers=args.jobs, thread_name_prefix="import")
    try:
        results = pool.map(lambda path: _import_one(root, path, caller, deps), files)
        for i, (path, outcome) in enumerate(zip(files, results, strict=True), 1):
            rel = path.relative_to(root).as_posix()
            if outcome == "unchanged":
                unchanged += 1
            elif isinstance(outcome, str):
                imported += 1
            else:
                errors.append(outcome)
                if progress.tty:
                    sys.stderr.write("\n")
                Output.err(f"  {rel}: [{outcome['code']}] {outcome['message']}")
            progress.update(i, rel)
    finally:  # on Ctrl-C the pages being written finish; the files not started are not
        pool.shutdown(wait=True, cancel_futures=True)
    progress.close()
    summary = (
        f"Imported {imported} of {len(files)} page(s) from {root}; {unchanged} unchanged (already stored "
        f"as they are), {len(errors)} failed."
    )
    Output.err(summary)
    if out.as_json:
        out.document(
            {
                "path": str(root),
                "total": len(files),
                "imported": imported,
                "unchanged": unchanged,
                "failed": len(errors),
                "errors": errors,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_FAILED if errors else EXIT_OK


# --------------------------------------------------------------------------- doctor / maintenance


def _check(cid: str, status: str, detail: str, fix: str | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": cid, "status": status, "detail": detail}
    if fix:
        doc["fix"] = {"argv": shlex.split(fix), "command": fix}
    doc.update(extra)
    return doc


def _data_dir_check(data_dir: Path, state: str) -> dict[str, Any]:
    """Whether the data directory holds a memory and is writable; it is never created here (a
    mistyped --data-dir must not leave an empty memory behind)."""
    if state == "file":
        return _check("data_dir", "fail", f"{data_dir} is a file, not a directory", "fleetmem doctor --data-dir DIR")
    if state == "missing":
        why = "does not exist" if not data_dir.exists() else "holds no fleetmem.db"
        return _check(
            "data_dir",
            "warn",
            f"{data_dir} {why}: no memory there yet (a mistyped --data-dir?); `fleetmem serve` and the "
            "commands that store create it",
            f"fleetmem init --data-dir {shlex.quote(str(data_dir))}",
        )
    try:
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return _check(
            "data_dir",
            "fail",
            f"{data_dir} is not writable: {exc.strerror}",
            f"fleetmem doctor --data-dir {shlex.quote(str(Path.home() / 'fleetmem-data'))}",
        )
    return _check("data_dir", "ok", f"{data_dir} is writable")


def maintenance_stores(deps: Deps) -> VectorMaintenance:
    """The re-embedding queries `fleetmem reindex` and `doctor` use (the local backend's)."""
    if deps.maintenance is None:
        raise CommandFailed(
            "unavailable",
            "Maintenance runs on the local backend only (this backend embeds every write itself).",
            "On AWS the stream indexer embeds every write; run this against a data directory.",
        )
    return deps.maintenance


def doctor_report(args: argparse.Namespace) -> dict[str, Any]:
    settings = _settings(args)
    checks: list[dict[str, Any]] = []
    configured = {
        "backend": settings.backend,
        "data_dir": str(settings.data_dir),
        "embedder": settings.embedder,
        "model_dir": str(settings.model_dir),
        "llm": settings.llm,
        "surface": settings.surface,
    }
    state = store_state(settings)
    if settings.backend == "local":
        checks.append(_data_dir_check(Path(settings.data_dir), state))
    registry, problem = _registry()
    if problem:
        checks.append(
            _check("registry", "fail", f"tool registry failed to load: {problem}", "pip install -e .")
        )
    else:
        checks.append(_check("registry", "ok", f"{len(registry)} tools registered"))
    deps = None
    if state == "ok":
        try:
            deps = _build_deps(settings)
            checks.append(_check("store", "ok", f"{settings.backend} store opened"))
        except CommandFailed as exc:
            checks.append(_check("store", "fail", exc.message, "fleetmem doctor --json"))
    if state == "missing":  # no store to open (none is created here); the embedder is still checked
        from fleetmem.wiring import local_embedder

        emb, problem = local_embedder(settings)
        checks.append(_embedder_check(settings, emb, problem))
    if deps is not None:
        emb = deps.embedder
        checks.append(_embedder_check(settings, emb, deps.embedder_problem))
        if emb is not None:
            checks.append(_unembedded_check(deps, emb))
        if deps.llm is None:
            checks.append(
                _check(
                    "llm",
                    "info",
                    f"no LLM: {deps.llm_problem or 'not configured'}; synthesize answers `unavailable`",
                )
            )
        else:
            checks.append(_check("llm", "ok", f"{deps.llm.model_id}"))
        try:
            active = [r for r in deps.clients.list() if r.revoked_at is None]
            if active:
                checks.append(_check("tokens", "ok", f"{len(active)} active token(s)", count=len(active)))
            else:
                checks.append(
                    _check(
                        "tokens",
                        "warn",
                        "no active token: MCP clients cannot connect",
                        "fleetmem token create --client my-agent --scopes read,write",
                        count=0,
                    )
                )
        except Exception as exc:
            checks.append(_check("tokens", "fail", f"cannot list tokens: {type(exc).__name__}"))
    if getattr(args, "data_dir", None):  # fixes name the data directory they are about
        for c in checks:
            fix = c.get("fix")
            if fix and c["id"] != "data_dir" and fix["argv"][:1] == ["fleetmem"]:
                fix["argv"] = [*fix["argv"], "--data-dir", str(args.data_dir)]
                fix["command"] = shlex.join(fix["argv"])
    worst = "ok"
    for c in checks:
        if c["status"] == "fail":
            worst = "fail"
        elif c["status"] == "warn" and worst == "ok":
            worst = "warn"
    return {"status": worst, "configured": configured, "checks": checks, "contract_version": CONTRACT_VERSION}


def _embedder_check(settings: Any, emb: Any, problem: str | None) -> dict[str, Any]:
    if emb is None:
        return _check(
            "embedder",
            "warn",
            f"no embedder: {problem or 'not configured'}; recall is keyword-only "
            "(search_degraded) and dedup is exact-text only",
            "fleetmem embedder build",
        )
    status = "ok" if settings.embedder != "hash" else "warn"
    detail = f"{emb.model_id} (dim {emb.dim})" + (" — hash embedder is for tests only" if status == "warn" else "")
    return _check("embedder", status, detail, None if status == "ok" else "fleetmem serve")


def _unembedded_check(deps: Any, embedder: Any) -> dict[str, Any]:
    try:
        from fleetmem.maintenance import unembedded

        counts = unembedded(maintenance_stores(deps), embedder)
    except Exception as exc:
        return _check("unembedded", "info", f"not checked here ({type(exc).__name__})")
    counts = dict(counts)
    total = int(counts.get("total", counts.get("docs", 0) + counts.get("facts", 0)))
    detail = f"{counts.get('docs', 0)} search doc(s) and {counts.get('facts', 0)} fact(s)"
    if total:
        return _check(
            "unembedded",
            "warn",
            f"{detail} lack a vector of {embedder.model_id}",
            "fleetmem reindex",
            counts=counts,
        )
    return _check(
        "unembedded", "ok", f"every search doc and fact has a vector of {embedder.model_id}", counts=counts
    )


def cmd_doctor(args: argparse.Namespace, out: Output) -> int:
    report = doctor_report(args)
    if out.as_json:
        out.document(report)
    else:
        for c in report["checks"]:
            line = f"[{c['status']:>4}] {c['id']}: {c['detail']}"
            if c.get("fix"):
                line += f"\n       fix: {invocation.in_text(c['fix']['command'])}"
            out.text(line)
        out.text(f"overall: {report['status']}")
    return EXIT_FAILED if report["status"] == "fail" else EXIT_OK


def cmd_embedder_build(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.embedder_build import build_embedder

    model_dir = Path(args.model_dir).expanduser() if args.model_dir else _settings(args).model_dir
    path = build_embedder(model_dir, progress=Output.err)
    if out.as_json:
        out.document({"model_dir": str(path)})
    else:
        out.text(str(path))
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.maintenance import reindex

    deps = _build_deps(_settings(args))
    if deps.embedder is None:
        raise CommandFailed(
            "unavailable",
            f"No embedder to reindex with: {deps.embedder_problem}",
            "Build the local model first: fleetmem embedder build",
        )
    stats = reindex(maintenance_stores(deps), deps.embedder, progress=sys.stderr)
    if out.as_json:
        out.document(dict(stats))
    else:
        out.text(_yaml(dict(stats)))
    return EXIT_OK


def cmd_conformance(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.conformance import run

    report = run(
        args.target,
        args.token,
        json=out.as_json,
        read_token=args.read_token,
        eras=tuple(args.eras.split(",")),
        log=Output.err,
        surface=args.surface,
    )
    if out.as_json:
        out.document(report)
    return EXIT_FAILED if report["failed"] else EXIT_OK


def cmd_bench(args: argparse.Namespace, out: Output) -> int:
    rest = list(args.rest)
    what = rest.pop(0) if rest and rest[0] in ("latency", "quality", "search") else "latency"
    if what == "search":
        from fleetmem.bench.search import main as search_main

        out.text(search_main(rest, model_dir=_settings(args).model_dir, log=Output.err))
        return EXIT_OK
    if what == "quality":
        from fleetmem.bench.quality import run_quality

        model_dir = _settings(args).model_dir
        if rest[:2] == ["--set", "conversations"]:
            from fleetmem.bench.conversations import run_conversations

            run_conversations(Path(rest[2]) if len(rest) > 2 else model_dir, out=out.text)
            return EXIT_OK
        run_quality(Path(rest[0]) if rest else model_dir, out=out.text)
        return EXIT_OK
    from fleetmem.bench import main as bench_main

    return int(bench_main(rest, data_dir=getattr(args, "data_dir", None)) or 0)


# --------------------------------------------------------------------------- parser


BUILTIN_COMMANDS = frozenset(
    {"serve", "init", "token", "protocol", "import", "doctor", "embedder", "reindex", "conformance", "bench"}
)
#: The ambient-recall commands (fleetmem.hooks.commands): built-in too, so a hook skips the registry.
BUILTIN_COMMANDS = BUILTIN_COMMANDS | {"profile", "hook", "heartbeat"}
#: The portability commands (fleetmem.cli_pack).
BUILTIN_COMMANDS = BUILTIN_COMMANDS | {"export", "backup", "tenant", "admin"}  # admin: fleetmem.cli_admin


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand named in argv (skipping global options), without parsing."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--data-dir":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full parser. Given the argv it will parse, tool subcommands are generated only when the
    command is not a built-in one (loading the registry costs more than the rest of a token command)."""
    from fleetmem.cli_admin import add_commands as add_admin_commands
    from fleetmem.cli_pack import add_commands as add_pack_commands
    from fleetmem.cli_pack import add_import_options as add_pack_import_options

    with_tools = argv is None or (_command_word(argv) not in BUILTIN_COMMANDS and list(argv) != ["--version"])
    # Each subcommand repeats --data-dir with a SUPPRESS default so it works before or after the
    # command name without the subparser resetting a value given earlier.
    common = _Parser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="data directory (default: $FLEETMEM_DATA_DIR, else a per-user directory)",
    )
    parser = _Parser(prog="fleetmem", description="Long-term memory for fleets of AI agents (MCP).")
    parser.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="data directory (default: $FLEETMEM_DATA_DIR, else a per-user directory)",
    )
    parser.add_argument("--version", action="store_true", help="print the fleetmem version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("serve", parents=[common], help="serve MCP over streamable HTTP at POST /mcp")
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=None, help="port (default 8765; 0 = any free port)")
    p.add_argument(
        "--surface", choices=SURFACES, default=None, help="verbs: the seven verbs only; full (default)"
    )
    p.add_argument(
        "--embedder",
        choices=("minilm", "hash", "none"),
        default=None,
        help="minilm (default, the local model), hash (tests only), none (keyword-only)",
    )
    p.add_argument(
        "--threads",
        dest="call_threads",
        type=_whole_number(1, CALL_THREADS_MAX),
        default=None,
        help=f"calls run at once (default {DEFAULT_CALL_THREADS} or ${ENV_CALL_THREADS}); the rest wait their turn",
    )
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("init", parents=[common], help="start a new, empty memory in the data directory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_init)

    tok = sub.add_parser("token", parents=[common], help="create, list and revoke API tokens")
    tsub = tok.add_subparsers(dest="token_command", metavar="ACTION", parser_class=_Parser, required=True)
    backend = _Parser(add_help=False)
    backend.add_argument(
        "--backend",
        choices=("local", "aws"),
        default=None,
        help="local data directory (default) or the AWS stage named by the environment",
    )
    p = tsub.add_parser("create", parents=[common, backend], help="mint a token (printed once)")
    p.add_argument("--client", required=True, help="client name (shown in audit rows and cursors)")
    p.add_argument("--scopes", required=True, help="comma-separated: read,write[,admin]")
    p.add_argument("--tenant", default="default", help="tenant (brain) the token belongs to")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_create)
    p = tsub.add_parser("list", parents=[common, backend], help="list tokens (never shows the tokens)")
    p.add_argument("--tenant", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_list)
    p = tsub.add_parser("revoke", parents=[common, backend], help="revoke a token by its TOKEN_ID")
    p.add_argument("token_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_revoke)
    p = tsub.add_parser(
        "deny-cognito", parents=[common, backend], help="refuse every access token of a Cognito app client"
    )
    p.add_argument("app_client_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_token_deny_cognito)

    if with_tools:
        for cmd in _tool_commands().values():
            cmd.add_parser(sub, common)

    p = sub.add_parser("protocol", parents=[common], help="tool schemas and response shapes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_protocol)

    p = sub.add_parser("import", parents=[common], help="import a folder of markdown pages, or a memory pack")
    p.add_argument("path", nargs="?", default=None)
    add_pack_import_options(p)
    p.add_argument("--tenant", default=None)
    p.add_argument(
        "--jobs",
        type=_whole_number(1, IMPORT_JOBS_MAX),
        default=IMPORT_JOBS,
        help=f"files written at once (1-{IMPORT_JOBS_MAX}, default {IMPORT_JOBS}); their chunks share forward passes",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("doctor", parents=[common], help="what is configured, what is degraded, and the fixes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_doctor)

    emb = sub.add_parser("embedder", parents=[common], help="build the local MiniLM model")
    esub = emb.add_subparsers(dest="embedder_command", metavar="ACTION", parser_class=_Parser, required=True)
    p = esub.add_parser(
        "build", parents=[common], help="convert the all-MiniLM-L6-v2 wheel to ONNX (idempotent)"
    )
    p.add_argument("--model-dir", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_embedder_build)

    p = sub.add_parser("reindex", parents=[common], help="embed everything for the current model (resumable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_reindex)

    p = sub.add_parser("conformance", parents=[common], help="run the protocol conformance suite over HTTP")
    p.add_argument("--target", required=True, help="MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    p.add_argument("--token", required=True, help="a read,write token (admin optional)")
    p.add_argument("--read-token", default=None, help="a read-only token, for the scope cases")
    p.add_argument("--eras", default="legacy,auto", help="protocol eras to run: legacy,auto")
    p.add_argument(
        "--surface",
        choices=SURFACES,
        default=None,
        help="the surface the target serves (default: from tools/list)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_conformance)

    p = sub.add_parser(
        "bench",
        parents=[common],
        add_help=False,
        help="latency/throughput benchmark; `bench quality`: search quality; `bench search`: embedding and "
        "hybrid recall speed, vector memory (`fleetmem bench --help`)",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help="[latency|quality] and the benchmark's options")
    p.set_defaults(handler=cmd_bench)

    from fleetmem.hooks.commands import add_commands

    add_commands(sub, common)
    add_pack_commands(sub, common)
    add_admin_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = Output(as_json="--json" in argv)
    try:
        parser = build_parser(argv)
        if _command_word(argv) == "bench" and not {"-h", "--help"} & set(argv[: argv.index("bench")]):
            # The benchmark owns its options; only the global --data-dir is taken from around it.
            args = argparse.Namespace(data_dir=None, rest=[], handler=cmd_bench)
            words = argv[:]
            while "--data-dir" in words:
                i = words.index("--data-dir")
                args.data_dir = words[i + 1] if i + 1 < len(words) else None
                del words[i : i + 2]
            args.rest = words[words.index("bench") + 1 :]
        else:
            args = parser.parse_args(argv)
        if getattr(args, "version", False):
            from fleetmem import __version__

            print(f"fleetmem {__version__} (protocol {PROTOCOL_VERSION}, contract {CONTRACT_VERSION})")
            return EXIT_OK
        handler: Callable[[argparse.Namespace, Output], int] | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = handler(args, out)
    except CommandFailed as exc:
        code = exc.exit_code
        if out.as_json and not out.document_written:
            out.document(_fallback(exc.code, exc.message, exc.suggestion, code))
        else:
            Output.err(f"Error [{exc.code}]: {exc.message}\n  {exc.suggestion}")
    except KeyboardInterrupt:
        code = 130
        if out.as_json and not out.document_written:
            out.document(
                {
                    "error": "interrupted",
                    "code": "interrupted",
                    "message": "interrupted",
                    "exit_code": code,
                    "contract_version": CONTRACT_VERSION,
                }
            )
    except Exception as exc:
        code = EXIT_FAILED
        message = f"{type(exc).__name__}: {exc}"
        suggestion = "Run `fleetmem doctor` to see what is misconfigured; report it if it repeats."
        if out.as_json and not out.document_written:
            out.document(_fallback("internal", message, suggestion, code))
        else:
            Output.err(f"Error [internal]: {message}\n  {suggestion}")
    if out.as_json and code != EXIT_OK and not out.document_written:
        out.document(
            _fallback(
                "command_failed",
                "the command failed without a result",
                "Re-run without --json to see its messages.",
                code,
            )
        )
    return code


def _fallback(code: str, message: str, suggestion: str, exit_code: int) -> dict[str, Any]:
    return {
        "error": "command_failed",
        "code": code,
        "message": message,
        "suggestion": suggestion,
        "exit_code": exit_code,
        "contract_version": CONTRACT_VERSION,
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
