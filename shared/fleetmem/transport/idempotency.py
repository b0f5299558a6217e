"""D2 idempotency of one keyed call, apart from the call pipeline (`fleetmem.transport.dispatch`),
in the spirit of Powertools' idempotency utility: `IdempotentCall` owns the key's extraction
(`take_key`), the request hash (`request_hash`), claim with a lease, complete and release in the
store (`deps.idempotency`) and the wait for a call in flight with the same key (`_claim`).

`dispatch` hands it the call's execution in one line; what the caller sees:
- the first call with a key claims it (a lease: once it lapses, a retry takes the key over), runs,
  and completes it with its result; an error releases the claim, so a retry runs again;
- a retry with the same key and arguments waits (up to `deps.policy.idempotency_wait_s`) for the
  first call's result and answers it with `idempotent_replay: true`, or `unavailable` (in flight);
- the same key with other arguments is `invalid_params` (`key_conflict`).

D22 (request ids and durable receipts): the key is the write's request id (`take_request_id`:
`request_id`, or `idempotency_key` mapped the same way, or one the server makes), the record is
keyed by (tenant, client, request id) and its hash includes the tool; every success answer carries
its receipt (`write_request`, spread at the top level); a write still running past the wait is
`unavailable` with `write_error: "write_pending"` and its receipt; on the local server a claim whose
holder process is gone is taken over at once. `run_keyed_write` runs one keyed write.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from fleetmem.contract.result import DispatchResult
from fleetmem.contract.tools import IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_MAX
from fleetmem.errors import Conflict, Notice, PortError, VerbError
from fleetmem.memory import receipts
from fleetmem.memory.registry import ToolSpec
from fleetmem.models import IdempotencyRecord
from fleetmem.ports import Deps
from fleetmem.protocol import IDEMPOTENCY_TTL_HOURS, REQUEST_ID, REQUEST_ID_MAX, request_uuid, tool_request_hash
from fleetmem.transport import errors
from fleetmem.transport.errors import CallView

log = logging.getLogger("fleetmem.transport.dispatch")

#: pauses between looks at an in-flight idempotency key (doubling from the first to the cap)
_WAIT_FIRST_PAUSE_S = 0.01
_WAIT_MAX_PAUSE_S = 0.25


def request_hash(params: BaseModel) -> str:
    """What makes two calls with one key "the same call": their validated parameters, canonical
    JSON, without the key itself."""
    data = params.model_dump(mode="json", exclude={IDEMPOTENCY_KEY} & set(type(params).model_fields))
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def take_key(spec: ToolSpec, args: dict[str, Any], is_param: bool, view: CallView) -> str | None:
    """The call's idempotency key, taken out of `args` unless the tool defines it as a parameter;
    None when the tool takes none or the call sends none. A key that is not a non-empty string of
    at most `IDEMPOTENCY_KEY_MAX` characters is refused (`bad_key`)."""
    if not spec.idempotency or IDEMPOTENCY_KEY not in args:
        return None
    raw_key = args[IDEMPOTENCY_KEY] if is_param else args.pop(IDEMPOTENCY_KEY)
    if raw_key is None:
        return None
    if not isinstance(raw_key, str) or not raw_key.strip() or len(raw_key) > IDEMPOTENCY_KEY_MAX:
        raise errors.bad_key(view, spec)
    return raw_key


@dataclass(frozen=True)
class RequestId:
    """One write's identity (D22): the id it is stored under (a UUID) and the caller's own id when
    that was not a UUID."""

    request_id: str
    client_request_id: str | None = None
    #: made by the server for a call that sent none: no retry can name it before the answer does
    generated: bool = False

    @classmethod
    def of(cls, raw: str) -> RequestId:
        return cls(*request_uuid(raw))

    @classmethod
    def new(cls) -> RequestId:
        return cls(str(uuid.uuid4()), generated=True)


def valid_request_id(raw: object) -> bool:
    """1–128 printable ASCII characters (0x21–0x7E)."""
    return isinstance(raw, str) and 0 < len(raw) <= REQUEST_ID_MAX and all("!" <= c <= "~" for c in raw)


def take_request_id(spec: ToolSpec, args: dict[str, Any], is_param: bool, view: CallView) -> RequestId | None:
    """The write's request id on a tool that keeps receipts (`spec.idempotency`), taken out of
    `args`: `request_id`, or `idempotency_key` (its older name, mapped the same way), or a new one
    the server makes. Both given and naming different requests is `invalid_params`."""
    key = take_key(spec, args, is_param, view)
    if not spec.idempotency:
        return None
    raw = args.pop(REQUEST_ID, None)
    if raw is not None and not valid_request_id(raw):
        raise errors.bad_request_id(view)
    given = RequestId.of(raw) if raw is not None else None
    keyed = RequestId.of(key) if key is not None else None
    if given and keyed and given.request_id != keyed.request_id:
        raise errors.two_request_ids(view)
    return given or keyed or RequestId.new()


@dataclass
class IdempotentCall:
    """One write with a request id, run at most once per id (D2, D22)."""

    deps: Deps
    spec: ToolSpec
    #: the write's request id; a plain string (an older key, a batch item's child key) is mapped
    #: as `request_id` is
    key: RequestId | str
    view: CallView
    correlation_id: str
    #: How the pipeline answers a `VerbError` (its envelope for this call).
    answer_error: Callable[[VerbError], DispatchResult]

    @property
    def rid(self) -> RequestId:
        return self.key if isinstance(self.key, RequestId) else RequestId.of(self.key)

    def run(self, params: BaseModel, notices: list[Notice], execute: Callable[[], DispatchResult]) -> DispatchResult:
        """Claim, `execute()`, complete — or the stored result (with the call's own `notices`), or
        the refusal of the id."""
        record = self._record(params)
        if self.rid.generated:
            return self._run_unclaimed(record, execute)
        try:
            existing = self._claim(record)
        except PortError as exc:
            return self.answer_error(errors.port_error(self.view, self.spec, exc))
        if existing is not None:
            return self._answer_existing(existing, record, notices)
        try:
            result = execute()
        except BaseException:
            self._release(record)
            raise
        if result.is_error:
            self._release(record)
            return result
        return self._complete(record, result)

    def _run_unclaimed(self, record: IdempotencyRecord, execute: Callable[[], DispatchResult]) -> DispatchResult:
        """A call with an id the server made: no retry can send that id before this answer names it,
        so nothing is claimed first; the receipt is stored once, complete, after the write (one store
        request instead of a claim and its completion)."""
        result = execute()
        if result.is_error:
            return result
        now = self.deps.clock.now()
        outcome = receipts.outcome_of(self.spec.name, result.body)
        body = receipts.spread(dict(result.body), receipts.receipt(self._done(record, now, outcome), now=now))
        stored = self._done(record, now, outcome).model_copy(update={"result": body, "holder": None})
        self._logged_if_lost(
            lambda: self.deps.idempotency.claim(stored, now=now),
            "idempotency receipt not stored",
            "idempotency_complete_failed",
        )
        return DispatchResult(body, False, result.notices, result.correlation_id)

    @staticmethod
    def _done(record: IdempotencyRecord, now: datetime, outcome: dict[str, Any] | None) -> IdempotencyRecord:
        return record.model_copy(update={"state": "committed", "updated_at": now, "outcome": outcome})

    def _record(self, params: BaseModel) -> IdempotencyRecord:
        now = self.deps.clock.now()
        return IdempotencyRecord(
            tenant=self.view.caller.tenant,
            client_id=self.view.caller.client_id,
            verb=self.spec.name,
            key=self.rid.request_id,
            request_hash=tool_request_hash(self.spec.name, request_hash(params)),
            result=None,
            created_at=now,
            expires_at=now + timedelta(hours=IDEMPOTENCY_TTL_HOURS),
            claim_id=uuid.uuid4().hex,
            client_request_id=self.rid.client_request_id,
            updated_at=now,
            holder=receipts.process_holder() if self.deps.policy.claim_holders else None,
        )

    def _answer_existing(
        self, existing: IdempotencyRecord, record: IdempotencyRecord, notices: list[Notice]
    ) -> DispatchResult:
        if existing.request_hash != record.request_hash:
            return self.answer_error(errors.key_conflict(self.view, self.spec))
        if existing.result is None:
            err = errors.write_pending(self.view, self.spec, existing.key)
            err.write_request = receipts.receipt(existing, now=self.deps.clock.now())
            return self.answer_error(err)
        body = dict(existing.result)
        body["idempotent_replay"] = True
        return DispatchResult(body, False, notices, self.correlation_id)

    def _complete(self, record: IdempotencyRecord, result: DispatchResult) -> DispatchResult:
        """The answer with its receipt, stored for replays."""
        caller = self.view.caller
        now = self.deps.clock.now()
        outcome = receipts.outcome_of(self.spec.name, result.body)
        done = self._done(record, now, outcome)
        body = receipts.spread(dict(result.body), receipts.receipt(done, now=now))
        # The write itself succeeded; a lost receipt only means a retry runs the (deduplicating)
        # verb again, so the caller still gets its result.
        self._logged_if_lost(
            lambda: self.deps.idempotency.complete(
                caller.tenant, caller.client_id, self.spec.name, record.key, body, outcome=outcome, at=now
            ),
            "idempotency receipt not stored",
            "idempotency_complete_failed",
        )
        return DispatchResult(body, False, result.notices, result.correlation_id)

    def _logged_if_lost(self, step: Callable[[], object], message: str, event: str) -> None:
        """Run one bookkeeping `step` on the idempotency store; the store failing it (`PortError`)
        is logged as `event`, never raised: the call's own answer stands."""
        try:
            step()
        except PortError:
            log.warning(message, extra={"event": event, "tool": self.spec.name})

    def _claim(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Claim the id, or wait for the call that holds it: while that call is in flight (same
        arguments, no result yet) claim again with a growing pause, up to `deps.policy.idempotency_wait_s`.
        Every waiter then returns the first call's stored result; when the first call failed (its
        claim released) or died (its lease, `deps.policy.idempotency_lease_s` from its claim, lapsed;
        or, on the local server, its holder process is gone: taken over at once), the store lets
        exactly one waiter claim the id and run. Each look claims with a lease from that moment. A
        record that changed between the store's check and read (`Conflict`) is looked at again."""
        give_up = time.monotonic() + self.deps.policy.idempotency_wait_s
        pause = _WAIT_FIRST_PAUSE_S
        now = record.created_at
        lease = timedelta(seconds=self.deps.policy.idempotency_lease_s)
        take_over: str | None = None
        while True:
            try:
                existing = self.deps.idempotency.claim(
                    record.model_copy(update={"lease_until": now + lease}), now=now, take_over=take_over
                )
            except Conflict:
                if time.monotonic() >= give_up:
                    raise
            else:
                in_flight = (
                    existing is not None and existing.result is None and existing.request_hash == record.request_hash
                )
                if in_flight and existing is not None and take_over is None and self._holder_gone(existing):
                    take_over = existing.claim_id  # D22: its holder is gone, so take it over now
                    continue
                if not in_flight or time.monotonic() >= give_up:
                    return existing
            take_over = None
            time.sleep(min(pause, max(0.0, give_up - time.monotonic())))
            pause = min(pause * 2, _WAIT_MAX_PAUSE_S)
            now = self.deps.clock.now()

    def _holder_gone(self, existing: IdempotencyRecord) -> bool:
        return (
            self.deps.policy.claim_holders and existing.claim_id is not None and receipts.holder_gone(existing.holder)
        )

    def _release(self, record: IdempotencyRecord) -> None:
        caller = self.view.caller
        self._logged_if_lost(
            lambda: self.deps.idempotency.release(
                caller.tenant, caller.client_id, self.spec.name, record.key, record.claim_id
            ),
            "idempotency claim not released",
            "idempotency_release_failed",
        )


def run_keyed_write(
    deps: Deps,
    spec: ToolSpec,
    params: BaseModel,
    request_id: RequestId,
    view: CallView,
    correlation_id: str,
    answer_error: Callable[[VerbError], DispatchResult],
    execute: Callable[[], DispatchResult],
    notices: list[Notice] | None = None,
) -> DispatchResult:
    """Run one keyed write under `request_id` (a batch item under its child id, say): claim it,
    `execute()` it, store its answer with its receipt — or replay / refuse as `IdempotentCall` does."""
    keyed = IdempotentCall(deps, spec, request_id, view, correlation_id, answer_error)
    return keyed.run(params, list(notices or ()), execute)
