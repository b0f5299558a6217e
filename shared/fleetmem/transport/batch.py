"""`remember{items}`: several facts in one call (docs/protocol.md: remember, "Batches"; D26).

`dispatch` hands a remember call that carries `items` to `RememberBatch.run`, which:
1. checks the call's shape (`items` is a list of 1 to `BATCH_MAX` strings or objects; no `fact`,
   `supersedes`/`replaces` or `entity` beside it; each object's keys are item keys), then every item
   as a single remember — the typed parameters and remember's checks that need no store
   (`remember_steps.parse`: fact size, ttl grammar, entity length). One bad item refuses the whole
   call before anything is written, its message starting `items[i]:`, its fix the same batch with
   that item corrected (or without it);
2. embeds every item's text in ONE embedder call up front; each item's run reads its vector from it;
3. writes each item as its own keyed write (`IdempotentCall`) under a CHILD key derived from the
   call's root id and the item's index (`child_request_id`, the reference's derivation): its own
   decision and its own transaction. A replay of the batch replays every item; a batch cut short
   (or with failed items) completes on retry, the saved items replaying;
4. answers one compact receipt per item (`RememberBatchResult`), `partial` when some failed.

The root id is the call's request id as the caller sent it (D22: `request_id` or its older name
`idempotency_key`; or one the server made), as the reference derives children from it; each item's
write is stored under its child id, which its receipt names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from fleetmem.contract.result import DispatchResult, error_result
from fleetmem.contract.tools import IDEMPOTENCY_KEY
from fleetmem.errors import Fix, Notice, PortError, Unavailable, VerbError
from fleetmem.memory import remember_steps
from fleetmem.memory.registry import ToolSpec
from fleetmem.memory.remember_batch_result import RememberBatchResult
from fleetmem.memory.remember_params import BATCH_MAX
from fleetmem.memory.write_source import check_source
from fleetmem.ports import CallContext, Deps, Embedder
from fleetmem.protocol import PROTOCOL_VERSION, REQUEST_ID, Transport
from fleetmem.transport import errors
from fleetmem.transport.errors import CallView
from fleetmem.transport.idempotency import IdempotentCall, RequestId

ITEMS = "items"
#: Keys an item object may hold (the reference's, plus fleetmem's `supersedes`); those remember
#: does not declare (yet) are refused like any unknown key.
ITEM_KEYS = ("fact", "provenance", "entity", "kind", "ttl", "visibility", "infer_entity", "replaces", "supersedes")
#: Top-level arguments that are every item's default (an item's own value wins).
DEFAULTS = ("provenance", "kind", "ttl", "visibility", "infer_entity", "session_id", "source_id")
#: Top-level arguments that name one fact, so they cannot stand beside `items` (nor can any other
#: argument a batch does not use, e.g. `restore_withdrawn`).
ONE_FACT = ("fact", "supersedes", "replaces", "entity")
#: The hint a batch carries when an item's dedup ran without an embedder (the single answer's
#: `degraded_dedup: true`, D7).
DEGRADED_DEDUP_HINT = (
    "Duplicates were checked on exact text only (no embedder was available), so a near-duplicate may "
    "have been saved as a new fact."
)
NEXT_AFTER_FAILURES = (
    "Fix each failed item as its error says, then send only the failed items in a new remember call "
    "with a new request_id; the saved items are already stored."
)


def is_batch(spec: ToolSpec, args: dict[str, Any]) -> bool:
    """A remember call with `items` (null counts as absent)."""
    return spec.name == "remember" and args.get(ITEMS) is not None


def child_request_id(root: str, index: int) -> str:
    """The write id of item `index` of the batch whose id is `root`: SHA-256 of
    `root NUL "remember-item" NUL index`, laid out as an RFC 4122 UUID (version 5, variant bits)."""
    h = hashlib.sha256(f"{root}\x00remember-item\x00{index}".encode()).hexdigest()
    variant = (int(h[16:18], 16) & 0x3F) | 0x80
    return f"{h[0:8]}-{h[8:12]}-5{h[13:16]}-{variant:02x}{h[18:20]}-{h[20:32]}"


@dataclass
class PreparedVectors:
    """The embedder one batch's items read their vectors from: every item's text embedded in one
    call (`prepare`); a text not prepared is embedded on demand. When the one call found the embedder
    unavailable, every item saves without a vector (degraded dedup), as a single call would."""

    inner: Embedder
    vectors: dict[str, list[float]] = field(default_factory=dict)
    problem: Unavailable | None = None
    model_id: str = field(init=False)
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        self.model_id, self.dim = self.inner.model_id, self.inner.dim

    def prepare(self, texts: Sequence[str]) -> None:
        unique = list(dict.fromkeys(texts))
        try:
            self.vectors.update(zip(unique, self.inner.embed(unique), strict=True))
        except Unavailable as exc:
            self.problem = exc

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.problem is not None:
            raise self.problem
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        return [self.vectors[t] for t in texts]


@dataclass
class RememberBatch:
    """One `remember{items}` call (see the module docstring)."""

    deps: Deps
    spec: ToolSpec
    view: CallView
    correlation_id: str
    transport: Transport
    #: How the pipeline answers a refusal of the whole call.
    answer_error: Callable[[VerbError], DispatchResult]
    #: the transport's `_meta.session_id` (D24): every item's session when no `session_id` is given
    meta_session_id: str | None = None

    def run(self, args: dict[str, Any], key: RequestId | None, notices: list[Notice], dry_run: bool) -> DispatchResult:
        try:
            items = self._items(args)
            checked = [self._checked(i, item, items) for i, item in enumerate(items)]
        except VerbError as err:
            return self.answer_error(err)
        if dry_run:
            body = {
                "dry_run": True,
                "tool": self.spec.name,
                "ran": False,
                "arguments": {ITEMS: [p.model_dump(mode="json", exclude_none=True) for p, _ in checked]},
                "protocol_version": PROTOCOL_VERSION,
            }
            return DispatchResult(body, False, notices, self.correlation_id)
        root = key if key is not None else RequestId.new()
        deps = self._with_prepared_vectors([p for p, _ in checked])
        entries: list[dict[str, Any]] = []
        hints: list[str] = []
        extra: list[Notice] = []
        for index, (params, item_args) in enumerate(checked):
            entry, result = self._write(
                deps, index, child_request_id(root.client_request_id or root.request_id, index), params, item_args
            )
            entries.append(entry)
            for hint in (result.body.get("hint"), DEGRADED_DEDUP_HINT if result.body.get("degraded_dedup") else None):
                if isinstance(hint, str) and hint not in hints:
                    hints.append(hint)
            extra += [n for n in result.notices if (n.code, n.why) not in {(m.code, m.why) for m in extra}]
        return DispatchResult(_answer(root, entries, hints), False, notices + extra, self.correlation_id)

    # -- the checks (each raises the VerbError that refuses the whole call) ----------------------

    def _items(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item as the arguments of a single remember: the top-level defaults, then its own keys."""
        raw = args[ITEMS]
        used = {*DEFAULTS, *ONE_FACT, ITEMS, IDEMPOTENCY_KEY, REQUEST_ID}  # the ids are the root's
        beside = [k for k in ONE_FACT if args.get(k) is not None]
        beside += [k for k, v in args.items() if k not in used and v is not None]
        if beside:
            raise self._one_fact_beside(beside[0], raw)
        if not isinstance(raw, list) or not 1 <= len(raw) <= BATCH_MAX:
            raise self._bad_count(raw)
        known = set(self.spec.params.model_fields)
        shared = {k: args[k] for k in DEFAULTS if k in known and args.get(k) is not None}
        allowed = [k for k in ITEM_KEYS if k in known]
        out = []
        for i, item in enumerate(raw):
            if isinstance(item, str):
                item = {"fact": item}
            if not isinstance(item, dict):
                raise self._refused(i, f"items[{i}] must be a string or an object.", None, raw)
            unknown = [str(k) for k in item if k not in allowed]
            if unknown:
                cleaned = {k: v for k, v in item.items() if k in allowed}
                message = f"items[{i}] has unknown field(s): {', '.join(u[:40] for u in unknown[:5])}."
                raise self._refused(i, message, cleaned, raw, why=f"An item takes only {', '.join(allowed)}.")
            out.append({**shared, **item})
        return out

    def _checked(
        self, index: int, item: dict[str, Any], items: list[dict[str, Any]]
    ) -> tuple[BaseModel, dict[str, Any]]:
        """The item as remember's parameters, after every check a single remember makes before it
        reads the store."""
        now = self.deps.clock.now()
        try:
            params = self.spec.params.model_validate(item, context={"tool": self.spec.name, "now": now, "keep": {}})
            remember_steps.parse(self.deps, params)  # type: ignore[arg-type]
            check_source(self.spec.name, params, self.view.caller)  # D27
        except VerbError as err:
            raise self._item_refused(index, err, item) from None
        return params, item

    # -- the writes ----------------------------------------------------------------------------

    def _with_prepared_vectors(self, checked: list[BaseModel]) -> Deps:
        if self.deps.embedder is None:
            return self.deps
        prepared = PreparedVectors(self.deps.embedder)
        prepared.prepare([p.fact.strip() for p in checked])  # type: ignore[attr-defined]
        return replace(self.deps, embedder=prepared)

    def _write(
        self, deps: Deps, index: int, child: str, params: BaseModel, item_args: dict[str, Any]
    ) -> tuple[dict[str, Any], DispatchResult]:
        """One item as its own keyed remember: (its receipt, its result)."""
        view = replace(self.view, args={**item_args, REQUEST_ID: child})

        def answer(err: VerbError) -> DispatchResult:
            return error_result(
                err,
                tool=self.spec.name,
                arguments=view.args,
                correlation_id=self.correlation_id,
                transport=self.transport,
                callable_tools=view.allowed,
            )

        def execute() -> DispatchResult:
            ctx = CallContext(
                self.correlation_id,
                transport=self.transport,
                keyed=True,
                surface=view.surface,
                meta_session_id=self.meta_session_id,
            )
            try:
                outcome = self.spec.run(deps, view.caller, params, ctx)
            except VerbError as err:
                return answer(err)
            except PortError as exc:
                return answer(errors.port_error(view, self.spec, exc))
            return DispatchResult(dict(outcome.body), False, list(outcome.notices), self.correlation_id)

        result = IdempotentCall(deps, self.spec, RequestId(child), view, self.correlation_id, answer).run(
            params, [], execute
        )
        return _receipt(index, child, result), result

    # -- the refusals --------------------------------------------------------------------------

    def _batch_fix(self, why: str, items: list[Any] | None, *, drop: str | None = None) -> Fix:
        """The same call with `items` replaced and `drop` left out (no items: no runnable step)."""
        if not items:
            return Fix(why=why)
        arguments = {k: v for k, v in self.view.args.items() if k != drop}
        arguments[ITEMS] = items
        return Fix(why=why, mcp=self.view.same_call(arguments))

    def _refused(
        self, index: int, message: str, corrected: dict[str, Any] | None, raw: list[Any], *, why: str | None = None
    ) -> VerbError:
        """`invalid_params` for item `index`: the fix is the batch with it corrected, or without it."""
        if corrected:
            items = [*raw[:index], corrected, *raw[index + 1 :]]
            how = f"items[{index}] corrected"
        else:
            items = [*raw[:index], *raw[index + 1 :]]
            how = f"items[{index}] left out (or corrected)"
        cause = why or "Each item is one fact: a sentence, or an object with `fact` and its own options."
        return VerbError(
            "invalid_params",
            f"{message} Nothing was saved; fix that item and resend the whole batch.",
            f"Problem: {message} Cause: {cause} Fix: send the batch again with {how}; every item is checked "
            "before any is saved.",
            why=cause,
            detail={"index": index},
            fix=self._batch_fix(f"Nothing was saved; this is the same batch with {how}.", items),
            klass="caller",
        )

    def _item_refused(self, index: int, err: VerbError, item: dict[str, Any]) -> VerbError:
        """An item's own refusal (as a single remember would answer it), naming `items[index]`."""
        raw = list(self.view.args[ITEMS])
        corrected = _corrected_item(err, item, self.view.args)
        if corrected is not None:
            items: list[Any] = [*raw[:index], corrected, *raw[index + 1 :]]
            how = f"items[{index}] corrected"
        else:
            items = [*raw[:index], *raw[index + 1 :]]
            how = f"items[{index}] left out (or corrected as the message says)"
        detail = err.detail if isinstance(err.detail, dict) else ({"detail": err.detail} if err.detail else {})
        fix = self._batch_fix(f"Nothing was saved; this is the same batch with {how}.", items)
        if corrected is None and err.fix is not None and not items:
            fix = Fix(why=err.fix.why)
        return VerbError(
            err.code,
            f"items[{index}]: {err.message} Nothing was saved; fix that item and resend the whole batch.",
            f"items[{index}]: {err.suggestion} Every item is checked before any is saved, so nothing was saved.",
            why=err.why,
            detail={"index": index, **detail},
            fix=fix,
            klass=err.klass or "caller",
        )

    def _bad_count(self, raw: Any) -> VerbError:
        count = len(raw) if isinstance(raw, list) else None
        message = f"items must be an array of 1 to {BATCH_MAX} facts" + (
            f" (got {count})." if count is not None else "."
        )
        if count is not None and count > BATCH_MAX:
            remedy = (
                f"split the facts into calls of at most {BATCH_MAX} items: send the first {BATCH_MAX} "
                "now and the rest in the next call"
            )
            fix = self._batch_fix(f"The first {BATCH_MAX} items; send the rest in a second call.", raw[:BATCH_MAX])
        elif isinstance(raw, str) and raw.strip():
            remedy = "pass the fact as a one-item list"
            fix = self._batch_fix("The same fact as a one-item list.", [raw])
        else:
            remedy = 'pass items as a list of facts, e.g. ["Alice prefers tea"], or one `fact` instead'
            fix = Fix(why="A batch holds at least one fact; nothing was saved.")
        return VerbError(
            "invalid_params",
            message,
            f"Problem: {message} Cause: one remember call saves 1 to {BATCH_MAX} facts. Fix: {remedy}.",
            why=f"one remember call saves 1 to {BATCH_MAX} facts; nothing was saved.",
            detail={"field": ITEMS, "reason": "items_count", "max_items": BATCH_MAX, "count": count},
            fix=fix,
            klass="caller",
        )

    def _one_fact_beside(self, name: str, raw: Any) -> VerbError:
        value = self.view.args[name]
        items = list(raw) if isinstance(raw, list) else None
        if name == "fact":
            message, cause = "Pass either fact or items, not both.", "`fact` saves one fact, `items` several."
            blank = not isinstance(value, str) or not value.strip()
            moved = items if blank else [value, *items] if items is not None and len(items) < BATCH_MAX else None
            how = "`fact` left out" if blank else "the fact moved into items"
        elif name == "entity":
            message = "entity names one fact's entity, so it cannot apply to a whole batch."
            cause = "each item names its own entity."
            moved = [_with(i, name, value) for i in items] if items is not None else None
            how = "entity moved onto each item that has none"
        elif name not in ONE_FACT:
            message = f"{name} applies to a remember of one fact, not to a batch."
            cause = "a batch takes its items and the defaults provenance, kind, ttl, visibility and session_id."
            moved, how = items, f"`{name}` left out"
        else:
            message = f"{name} names one fact, so it cannot apply to a whole batch."
            cause = f"put {name} on the item it belongs to."
            moved = [_with(items[0], name, value)] if items is not None and len(items) == 1 else None
            how = f"{name} moved onto the item"
        fix = self._batch_fix(f"Nothing was saved; this is the same call with {how}.", moved, drop=name)
        return VerbError(
            "invalid_params",
            message,
            f"Problem: {message} Cause: {cause} Fix: send the call again with {how}.",
            why=cause,
            detail={"field": name, "reason": "not_with_items"},
            fix=fix,
            klass="caller",
        )


def _with(item: Any, key: str, value: Any) -> Any:
    """`item` (a string or an object) as an object with `key` set unless it has its own."""
    obj = {"fact": item} if isinstance(item, str) else dict(item) if isinstance(item, dict) else item
    if isinstance(obj, dict) and obj.get(key) is None:
        obj[key] = value
    return obj


def _corrected_item(err: VerbError, item: dict[str, Any], top: dict[str, Any]) -> Any:
    """The item as the refusal's corrected single call has it (None when the refusal has none), as an
    item: only item keys, without the values it takes from the top level unchanged."""
    fix = err.fix
    if fix is None:
        return None
    if fix.mcp is not None and fix.mcp.get("tool") == "remember":
        args = dict(fix.mcp.get("arguments") or {})
    elif fix.amend is not None or fix.drop:
        args = {k: v for k, v in item.items() if k not in fix.drop} | dict(fix.amend or {})
    else:
        return None
    obj = {k: v for k, v in args.items() if k in ITEM_KEYS and not (k in DEFAULTS and top.get(k) == v)}
    return obj["fact"] if set(obj) == {"fact"} else obj


def _receipt(index: int, child: str, result: DispatchResult) -> dict[str, Any]:
    """The item's compact receipt: what an agent acts on, not the whole single answer."""
    body = result.body
    if result.is_error:
        error = {"code": body.get("code"), "message": body.get("message")}
        error |= {k: body[k] for k in ("detail", "suggestion") if body.get(k) is not None}
        return {"index": index, "request_id": child, "status": "failed", "error": error}
    entry: dict[str, Any] = {"index": index, "request_id": child, "status": body.get("status")}
    entry |= {k: body[k] for k in ("id", "entity_slug", "superseded_fact_id") if k in body}
    if isinstance(body.get("warnings"), list) and body["warnings"]:
        entry["warnings"] = body["warnings"]
    if body.get("valid_until"):
        entry["valid_until"] = body["valid_until"]
    if isinstance(body.get("state"), str) and body["state"] != "committed":
        entry |= {"state": body["state"], "retry_after_ms": body.get("retry_after_ms")}
    return entry


def _answer(root: RequestId, entries: list[dict[str, Any]], hints: list[str]) -> dict[str, Any]:
    request_id, client_request_id = root.request_id, root.client_request_id
    failed = sum(1 for e in entries if e["status"] == "failed")
    body: dict[str, Any] = {"protocol_version": PROTOCOL_VERSION, "request_id": request_id}
    if client_request_id is not None:
        body["client_request_id"] = client_request_id
    body |= {"items": entries, "saved": len(entries) - failed, "failed": failed}
    body["partial"] = 0 < failed < len(entries)
    if hints:
        body["hints"] = hints
    if failed:
        body["next"] = NEXT_AFTER_FAILURES
    return RememberBatchResult.model_validate(body).model_dump(mode="json", exclude_unset=True)
