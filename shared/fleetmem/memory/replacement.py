"""remember's replacement rules (docs/protocol.md D17, D23): `replaces` (alias `supersedes`) and
the reference's refusals of its target, and the withdrawn-claim check (`fact_withdrawn`).

Public API: `replaced_id(params)`, `replaced(caller, fact_id, fact, ask, entity_slug, pool)`,
`withdrawn(deps, caller, claim, entity_slug, visibility)`, `fact_withdrawn(params, withdrawal)`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from fleetmem.errors import Fix, VerbError
from fleetmem.memory.common import given_args, invalid, normalize_text, shown_to
from fleetmem.memory.fact_dedup import candidates_at
from fleetmem.memory.verbs.forget import not_found
from fleetmem.models import Caller, Fact
from fleetmem.ports import Deps, Withdrawal
from fleetmem.protocol import Visibility

if TYPE_CHECKING:
    from fleetmem.memory.remember_params import RememberParams

TOOL = "remember"


class Ask(Protocol):
    """What the replacement rules read of the new fact (`remember_steps.Ask` is one)."""

    @property
    def text(self) -> str: ...

    @property
    def visibility(self) -> Visibility: ...

    @property
    def now(self) -> datetime: ...


def replaced_id(params: RememberParams) -> str | None:
    """`replaces` (the reference's name) or its alias `supersedes`; both given must agree."""
    given = [(name, value) for name, value in (("replaces", params.replaces), ("supersedes", params.supersedes))]
    named = [(name, value) for name, value in given if value is not None]
    if len(named) == 2 and named[0][1].strip() != named[1][1].strip():
        raise invalid(
            TOOL,
            params,
            "replaces and supersedes name different facts.",
            problem="`replaces` and `supersedes` are one parameter under two names, and they disagree.",
            cause="a fact replaces at most one fact.",
            field="supersedes",
            drop=True,
        )
    if not named:
        return None
    name, value = named[0]
    fact_id = value.strip()
    if not fact_id:
        raise invalid(
            TOOL,
            params,
            f"{name} is empty.",
            problem=f"`{name}` names no fact.",
            cause="it takes the `fact_id` of the fact the new one replaces; omit it to save a fact on its own.",
            field=name,
            drop=True,
        )
    return fact_id


def replaced(
    caller: Caller, fact_id: str, fact: Fact | None, ask: Ask, entity_slug: str | None, pool: list[Fact]
) -> Fact:
    """The fact `replaces` names, if the caller may replace it with this fact (D23): unknown,
    foreign, hidden or of another visibility is forget's `not_found`; the other refusals are
    `invalid_params` whose message starts with the reference's code."""
    if shown_to(caller, fact) is None or fact is None or fact.visibility != ask.visibility:
        raise not_found(TOOL, fact_id)
    recall_args: dict[str, Any] = {"limit": 10, **({"entity": fact.entity_slug} if fact.entity_slug else {})}
    if fact.superseded_by:
        raise _refused(
            "target_superseded",
            f"fact {fact_id!r} was already replaced by {fact.superseded_by!r}.",
            "replace the newest fact: the same call with `replaces` naming the successor",
            fix=Fix(
                why="The successor holds the current value.",
                amend={"replaces": fact.superseded_by},
                drop=("supersedes",),
            ),
            detail={"fact_id": fact_id, "superseded_by": fact.superseded_by},
        )
    if fact.expired_at is not None:
        raise _refused(
            "target_withdrawn",
            f"fact {fact_id!r} was forgotten.",
            "save the fact on its own: the same call without `replaces`",
            fix=Fix(why="A forgotten fact is history; the new one stands alone.", drop=("replaces", "supersedes")),
            detail={"fact_id": fact_id},
        )
    if not fact.is_active(ask.now):
        raise _refused(
            "target_expired",
            f"fact {fact_id!r} is past its valid_until.",
            "save the fact on its own: the same call without `replaces`",
            fix=Fix(why="An expired fact is history; the new one stands alone.", drop=("replaces", "supersedes")),
            detail={"fact_id": fact_id},
        )
    if fact.entity_slug is not None and fact.entity_slug != entity_slug:
        raise _refused(
            "replaces_entity_mismatch",
            f"fact {fact_id!r} is about {fact.entity_slug!r}, the new fact about {entity_slug!r}.",
            "file the new fact under the target's entity: the same call with `entity` set to it",
            fix=Fix(why="A fact replaces a fact about the same entity.", amend={"entity": fact.entity_slug}),
            detail={"fact_id": fact_id, "entity_slug": fact.entity_slug},
        )
    norm = normalize_text(ask.text)
    older = next(
        (
            f
            for f in candidates_at(caller, ask.visibility, ask.now, pool)
            if f.fact_id != fact_id and normalize_text(f.text) == norm and f.created_at < fact.created_at
        ),
        None,
    )
    if older is not None:
        raise _refused(
            "replaces_duplicate",
            f"the new text is already active as fact {older.fact_id!r}, older than {fact_id!r}.",
            f"if fact {fact_id!r} no longer holds, forget it",
            fix=Fix(
                why="The claim is already saved; only the outdated fact has to go.",
                mcp={"tool": "forget", "arguments": {"id": fact_id}},
                verify={"mcp": {"tool": "recall", "arguments": recall_args}},
            ),
            detail={"fact_id": fact_id, "duplicate_of": older.fact_id},
        )
    return fact


def _refused(code: str, what: str, remedy: str, *, fix: Fix, detail: dict[str, Any]) -> VerbError:
    """An `invalid_params` refusal whose message starts with the reference's `code` (D23)."""
    return VerbError(
        "invalid_params",
        f"{code}: {what}",
        f"remember cannot replace that fact. Cause: {what} Fix: {remedy}.",
        why=fix.why,
        detail={"reason": code, **detail},
        fix=fix,
        klass="caller",
    )


def withdrawn(
    deps: Deps, caller: Caller, claim: str, entity_slug: str | None, visibility: Visibility
) -> list[Withdrawal]:
    """D23: the withdrawals of this claim that cover the new fact — a remote caller is never
    refused on another writer's private withdrawal (it cannot see that fact)."""
    found = deps.facts.withdrawals(caller.tenant, claim, entity_slug=entity_slug, visibility=visibility)
    return [w for w in found if not (caller.remote and w.visibility == "private" and w.client_id != caller.client_id)]


def fact_withdrawn(params: RememberParams, w: Withdrawal) -> VerbError:
    args = given_args(params)
    args.pop("idempotency_key", None)  # a new call: the old key would replay this refusal
    args["restore_withdrawn"] = True
    scope = f"for {w.entity_slug!r}" if w.entity_slug else "for every entity"
    return VerbError(
        "invalid_params",
        f"fact_withdrawn: this claim was forgotten (fact {w.fact_id!r}) {scope}.",
        f"remember refused the fact up front. Cause: the same claim was forgotten as fact {w.fact_id!r}, "
        f"which withdrew it {scope}, so an old source cannot bring it back by itself. Fix: only if the user "
        "confirms it is true again, run the same call with `restore_withdrawn: true`; to link an "
        "unattributed fact to an entity, remember it with `entity` plus `replaces`.",
        why="A forgotten claim comes back only when someone decides it is true again.",
        detail={"reason": "fact_withdrawn", "withdrawn_fact_id": w.fact_id, "entity_slug": w.entity_slug},
        fix=Fix(
            why="The user confirmed the forgotten claim holds again.",
            mcp={"tool": TOOL, "arguments": args},
            actor="user",
            asks_user=True,
            user_message=f"This was forgotten before (fact {w.fact_id}). Is it true again?",
        ),
        klass="caller",
    )
