"""D31: a read ignores an unknown parameter with one `unknown_param` notice, and that notice never
renames a reference 0.60 read parameter to a fleetmem name that means something else; recall now
takes `budget_policy` itself. Runs `dispatch` over the real local stores."""

from __future__ import annotations

import pytest

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch


def test_recall_takes_budget_policy_without_a_notice(deps: Deps, remote_caller: Caller) -> None:
    r = dispatch("recall", {"query": "tea", "budget_policy": "query_first"}, remote_caller, deps)
    assert not r.is_error
    assert [n for n in r.notices if n.code == "unknown_param"] == []
    assert r.body["budget_packing"]["reason"] == "no_positive_finite_budget"


@pytest.mark.parametrize(
    ("tool", "args", "name"),
    [
        ("context_pack", {"entities": "people/alice"}, "budget_policy"),  # not budget_tokens
        ("delta", {"since": "2026-01-01T00:00:00Z"}, "budget_policy"),  # not budget_tokens
        ("context_pack", {"entities": "people/alice"}, "include_quarantined"),  # not include_private
    ],
)
def test_a_reference_read_parameter_is_ignored_without_a_rename(
    deps: Deps, local_caller: Caller, tool: str, args: dict[str, object], name: str
) -> None:
    r = dispatch(tool, {**args, name: "x"}, local_caller, deps)
    (notice,) = [n for n in r.notices if n.code == "unknown_param"]
    assert f"`{name}`" in notice.why and "did you mean" not in notice.why
    assert notice.fix is None
