"""recall by query does no work twice: a repeated query is embedded once (per tenant and embedder,
and the kept vector is the one a fresh call gives), the ranked facts arm reads only the facts its
answer can hold, and a hit's words are read once for both `repeats_down` and `distinct`. Each test
also checks that the answer is the one the full work gives."""

from __future__ import annotations

from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.memory import ranking
from fleetmem.memory import search as search_arm
from fleetmem.memory.verbs import recall, remember
from fleetmem.models import Caller, SearchHit
from fleetmem.ports import CallContext

CTX = CallContext("test-correlation")


class CountingEmbedder(HashEmbedder):
    """The real hash embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


class CountingFacts:
    """The real fact store, recording the ids each `many` call reads."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.read: list[str] = []

    def many(self, tenant, fact_ids):
        self.read.extend(fact_ids)
        return self.inner.many(tenant, fact_ids)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def ask(deps, caller, **args):
    return recall.run(deps, caller, recall.RecallParams.model_validate(args), CTX).body


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX).body


def test_a_repeated_query_is_embedded_once_and_its_kept_vector_is_a_fresh_ones(deps, remote_caller):
    counting = CountingEmbedder()
    deps.embedder = counting
    save(deps, remote_caller, fact="Acme renewal is due in March", provenance="chat")
    counting.texts.clear()
    first = ask(deps, remote_caller, query="acme renewal")
    second = ask(deps, remote_caller, query="acme renewal")
    assert counting.texts == ["acme renewal"]  # the second recall asked the model nothing
    assert first == second and first["facts"]
    kept = search_arm.query_vector(deps, "acme renewal", tenant=remote_caller.tenant)
    fresh = HashEmbedder().embed(["acme renewal"])[0]
    assert kept.vector == search_arm.pack(fresh) and kept.problem is None


def test_the_kept_query_vectors_are_per_tenant(deps, remote_caller):
    counting = CountingEmbedder()
    deps.embedder = counting
    other = Caller(tenant="t2", client_id="agent-b", scopes=frozenset({"read", "write"}), remote=True)
    ask(deps, remote_caller, query="pricing roadmap")
    ask(deps, remote_caller, query="pricing roadmap")
    assert counting.texts == ["pricing roadmap"]
    ask(deps, other, query="pricing roadmap")
    # another tenant's same words are embedded again: no tenant's hit tells what another one asked
    assert counting.texts == ["pricing roadmap", "pricing roadmap"]


def test_a_multi_part_query_is_kept_with_its_parts(deps, remote_caller):
    counting = CountingEmbedder()
    deps.embedder = counting
    query = "What breed is Maya's puppy, and how often does Daniel have Japanese lessons?"
    ask(deps, remote_caller, query=query)
    asked = list(counting.texts)
    ask(deps, remote_caller, query=query)
    assert len(asked) > 1 and counting.texts == asked


def test_the_ranked_facts_arm_reads_only_the_facts_its_answer_can_hold(deps, remote_caller, clock):
    expiring = set()
    for i in range(20):
        ttl = {"ttl": "1h"} if i % 2 else {}
        saved = save(
            deps, remote_caller, fact=f"Launch checklist item {i} for the orbital launch", provenance="c", **ttl
        )
        if ttl:
            expiring.add(saved["id"])
    clock.advance(hours=2)  # every other fact is past its ttl: still indexed, filtered at read time
    facts = CountingFacts(deps.facts)
    deps.facts = facts
    # the ranking recall's facts arm reads (limit 3: k = 3 * 2 + 10 per arm)
    hits = search_arm.hybrid_search(deps, remote_caller.tenant, "orbital launch", kinds=("fact",), k=16).hits
    ranked = [f.hit.fact_id for f in hits if f.hit.fact_id]
    assert len(ranked) > 6 and expiring & set(ranked[:4])
    body = ask(deps, remote_caller, query="orbital launch", limit=3)
    # the answer every ranked fact read would give: the first three live ones, in rank order
    assert [f["fact_id"] for f in body["facts"]] == [r for r in ranked if r not in expiring][:3]
    # read in rank order, and none past the batch where the third live one was found
    assert facts.read == ranked[: len(facts.read)] and len(facts.read) < len(ranked)


def _hit(doc_id: str, text: str) -> SearchHit:
    return SearchHit(doc_id=doc_id, kind="chunk", slug=f"s/{doc_id}", title="Omar, 3 May 2026", text=text, score=1.0)


def test_a_hits_words_are_read_once_for_repeats_down_and_distinct():
    ranking._said_of.cache_clear()
    hits = {
        "a": _hit("a", "Omar (3 May 2026): Miss our Friday drinks, we should restart them."),
        "b": _hit("b", "Omar (31 May 2026): Miss our Friday drinks, we should restart them."),
        "c": _hit("c", "Something else entirely."),
    }
    order = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    down = ranking.repeats_down(order, hits)
    moved = ranking.distinct(order, hits)
    assert [d for d, _ in down] == ["c", "a", "b"] and [d for d, _ in moved] == ["a", "c", "b"]
    info = ranking._said_of.cache_info()
    assert (info.misses, info.hits) == (2, 2)  # a and b end alike: each read whole once
