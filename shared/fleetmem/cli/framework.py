"""The CLI's framework: the parser that raises instead of exiting, the printers of error bodies and
notices (with their fixes as command lines), the exit code of an error body, and the small argparse
types and options several command groups share.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, Protocol

from fleetmem import invocation
from fleetmem.config import whole_number
from fleetmem.console import EXIT_CONFIRM, EXIT_FAILED, EXIT_USAGE, CommandFailed, Output

#: Error codes that mean "the caller asked for something wrong": fix the command, exit 2.
CALLER_CODES = frozenset({"invalid_params", "provenance_required", "not_found", "unknown_tool", "usage"})


class CommandLine(Protocol):
    """A tool subcommand as the printers need it: its name and the argv of a call of it."""

    @property
    def name(self) -> str: ...

    def argv(self, arguments: dict[str, Any]) -> list[str]: ...


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, measuring subcommand names at the depth they are printed at (argparse
    measures them one level shallower, so a name longer than the others' column wrapped its help
    onto the next line). The help column may sit up to 30 characters in, so the longest command
    name (cancel-write-request) keeps its summary on its own line."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 30, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, width)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.help is argparse.SUPPRESS:
            return
        self._indent()
        names = [len(self._format_action_invocation(sub)) for sub in self._iter_indented_subactions(action)]
        if names:
            self._action_max_length = max(self._action_max_length, max(names) + self._current_indent)
        self._dedent()


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `--json` can still write its fallback document.
    Options are never abbreviated: `--token fm_x` must not quietly become `--token-file fm_x`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CommandFailed.usage(message, f"Check the command: {self.prog} --help", code="usage")


def backend_option(p: argparse.ArgumentParser) -> None:
    """`--backend local|aws`: the local data directory (default) or the AWS stage."""
    p.add_argument(
        "--backend",
        choices=("local", "aws"),
        default=None,
        help="local data directory (default) or the AWS stage named by the environment",
    )


def load_registry() -> tuple[dict[str, Any], str | None]:
    """The complete tool registry, or why it cannot be loaded (doctor reports it)."""
    try:
        from fleetmem.memory.verbs import REGISTRY
    except Exception as exc:
        return {}, f"{type(exc).__name__}: {exc}"
    return dict(REGISTRY), None


def fix_line(fix: dict[str, Any] | None, commands: Mapping[str, CommandLine], remote: Sequence[str] = ()) -> str | None:
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


def print_notices(
    notices: list[dict[str, Any]], commands: Mapping[str, CommandLine], remote: Sequence[str] = ()
) -> None:
    for n in notices:
        line = f"Note [{n.get('code')}]: {n.get('why', '')}"
        fix = fix_line(n.get("fix"), commands, remote)
        if fix:
            line += f" Fix: {fix}"
        if n.get("user_message"):
            line += f" ({n['user_message']})"
        Output.err(line)


def print_error(body: dict[str, Any], commands: Mapping[str, CommandLine], remote: Sequence[str] = ()) -> None:
    from fleetmem.contract.envelope import envelope_code

    Output.err(f"Error [{envelope_code(body)}]: {body.get('message', '')}")
    if body.get("suggestion"):
        Output.err(f"  {body['suggestion']}")
    fix = fix_line(body.get("fix"), commands, remote)
    if fix:
        Output.err(f"  Fix: {fix}")
    if body.get("correlation_id"):
        Output.err(f"  correlation_id: {body['correlation_id']}")


def exit_code_for(body: dict[str, Any]) -> int:
    from fleetmem.contract.envelope import envelope_code

    code = envelope_code(body)
    if code == "confirmation_required" or body.get("class") == "consent":
        return EXIT_CONFIRM
    if code in CALLER_CODES or body.get("class") == "caller":
        return EXIT_USAGE
    return EXIT_FAILED


def yaml_text(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=100).rstrip()


def whole_number_type(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in low..high."""

    def parse(text: str) -> int:
        try:
            return whole_number(text, low, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def port_type(text: str) -> int:
    """argparse type for --port: 0..65535 (0 = any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535; 0 picks a free port)")
    return value
