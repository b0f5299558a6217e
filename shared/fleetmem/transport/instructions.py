"""The server instructions (D29): the operating contract a connecting model reads in `initialize`'s
`instructions` (handshake era) and `server/discover`'s (2026-07-28 era), written per surface and
per the caller's scopes.

The contract is a fixed list of points (`CONTRACT`). A point that names tools is kept only when the
caller can call every tool it names (its tools/list on this surface), so a read-only token is never
told to call `remember` or `forget` and the verbs surface is never told about page tools. The
operator's own text (`FLEETMEM_MCP_INSTRUCTIONS`, e.g. a deployment identity) follows the contract,
capped at `OPERATOR_MAX_CHARS`. The local server and the Lambda edge build the same app, so they
give the same text.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from fleetmem.models import Caller
from fleetmem.protocol import Surface

#: The operator's addition is cut to this many characters (an instruction is read on every connect).
OPERATOR_MAX_CHARS = 2000


@dataclass(frozen=True)
class Point:
    text: str
    #: The tools the point tells the model to call: all must be callable, or the point is left out.
    tools: tuple[str, ...] = ()


HEAD = "fleetmem is long-term memory shared by the agents of one brain (MEMORY_VERBS v1). Operating contract:"

CONTRACT: tuple[Point, ...] = (
    Point(
        "Before answering about a person, project or company, look it up: `entity` with its name for its "
        "card, `recall` with a query for the facts and pages that match.",
        ("entity", "recall"),
    ),
    Point(
        "At the start of a task, call `context_pack` with the entities involved and a `budget_tokens`.",
        ("context_pack",),
    ),
    Point(
        "On a heartbeat or when resuming, call `delta` with your `session_id` for what changed since your last wake.",
        ("delta",),
    ),
    Point(
        "Save a durable fact with `remember`: one short fact per call, the `entity` it is about, and its "
        "`provenance` (where it came from), which is required.",
        ("remember",),
    ),
    Point(
        "Correct a wrong fact with `forget` (its `id`), or save the new value with `remember` and `supersedes`.",
        ("forget", "remember"),
    ),
    Point(
        "Never store credentials, tokens, passwords, keys or other secrets, nor one-off chatter or what only "
        "this conversation needs.",
        ("remember",),
    ),
    Point(
        "Read and write longer documents as pages: `get_page` and `list_pages` read them, `put_page` writes "
        "one (markdown, a slug such as people/alice-example).",
        ("get_page", "list_pages", "put_page"),
    ),
    Point("Read longer documents as pages with `get_page` and `list_pages`.", ("get_page", "list_pages")),
    Point(
        "Budgets: pass `budget_tokens` to cap an answer's size; what did not fit is counted in `dropped_count`, "
        "never silently lost."
    ),
    Point(
        "A successful result may carry `notices` (in its JSON body): read each one's `why`, show its "
        "`user_message` to the user, and follow its `fix` as `fix.next` says."
    ),
    Point(
        "An error result carries a `fix`: act on `fix.next` (run, ask_user, tell_user_to_run, wait, report) "
        "and never guess around it."
    ),
    Point("Ids (`id`, `fact_id`, slugs, cursors, `request_id`) are opaque strings: pass them back unchanged."),
)


def operating_contract(callable_tools: Collection[str]) -> str:
    """The numbered points this caller can act on (a point naming a tool it cannot call is left out;
    of two points on pages, the first that applies)."""
    kept: list[str] = []
    pages_told = False
    for point in CONTRACT:
        if not all(t in callable_tools for t in point.tools):
            continue
        if "get_page" in point.tools:
            if pages_told:
                continue
            pages_told = True
        kept.append(point.text)
    lines = [HEAD, *(f"{i}. {text}" for i, text in enumerate(kept, 1))]
    return "\n".join(lines)


def operator_addition(text: str | None) -> str:
    """The operator's text, trimmed and capped at `OPERATOR_MAX_CHARS` ("" when none)."""
    text = (text or "").strip()
    return text[:OPERATOR_MAX_CHARS].rstrip()


def server_instructions(surface: Surface, caller: Caller | None, operator: str | None = None) -> str:
    """The instructions for this caller on this surface: the contract, then the operator's addition.
    No caller (an unauthenticated request the edge let through): the points that name no tool."""
    from fleetmem.transport.dispatch import visible_tools

    tools = {s.name for s in visible_tools(surface, caller)} if caller is not None else set()
    text = operating_contract(tools)
    extra = operator_addition(operator)
    return f"{text}\n\n{extra}" if extra else text
