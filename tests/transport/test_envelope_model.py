"""The envelope as one typed model: a failed `DispatchResult` carries its code and its envelope, the
body is that envelope dumped once, and a body read back (across a process edge, off the wire) is
the same envelope with the same keys in the same order."""

from __future__ import annotations

import json

from fleetmem.contract.envelope import ErrorEnvelope, envelope_code
from fleetmem.contract.result import DispatchResult
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch


def test_a_failed_result_carries_its_code_and_its_envelope(deps: Deps, remote_caller: Caller) -> None:
    result = dispatch("recal", {"query": "x"}, remote_caller, deps)
    assert result.code == "unknown_tool"
    envelope = result.envelope
    assert isinstance(envelope, ErrorEnvelope)
    assert envelope.code == envelope.error == "unknown_tool"
    assert envelope.body() == result.body
    assert list(envelope.body()) == list(result.body)


def test_a_success_has_no_code_and_no_envelope(deps: Deps, remote_caller: Caller) -> None:
    result = dispatch("recall", {"query": "x"}, remote_caller, deps)
    assert not result.is_error
    assert result.code is None and result.envelope is None


def test_an_envelope_that_crossed_a_process_edge_reads_back_to_the_same_body(deps: Deps, remote_caller: Caller) -> None:
    """The Lambda invoke's JSON round trip: the envelope read back from the body dumps the same keys
    (only those that were set, `class` under its wire name) in the same order."""
    sent = dispatch("remember", {"fact": "x", "entity": "y", "provenance": "p", "bogus": 1}, remote_caller, deps)
    received = DispatchResult.from_json(json.loads(json.dumps(sent.to_json())))
    assert received.code == "invalid_params"
    assert received.envelope is not None
    assert json.dumps(received.envelope.body()) == json.dumps(sent.body)
    assert "class" in received.body and "why" in received.body and "notices" not in received.body


def test_a_wire_body_is_read_for_its_code_once_whoever_answered() -> None:
    assert envelope_code({"error": "not_found", "code": "not_found", "message": "m"}) == "not_found"
    assert envelope_code({"error": "rate_limited", "message": "from a proxy"}) == "rate_limited"
    assert envelope_code({"message": "Forbidden"}) is None
