"""Retrieval quality of recall: keyword-only (BM25) vs hybrid (BM25 + MiniLM, RRF), and embedder speed.

`run_quality(model_dir)` builds a deterministic evaluation set (seeded): people with facts, and
project pages with Status / Risks / Decisions sections. Every stored statement has two questions:
a *paraphrase* that shares no content word with it, and a *lexical* one that reuses its words.
Fact questions name the person, half of them by first name only (several people share first or
last names, and the same statement is stored for several people, so neither the name nor the
content alone pins the answer); page questions name nothing and must find the page by content
among pages of identical structure. Everything is ingested through the real
`dispatch("remember" | "put_page")` into a local store in a temporary directory, then asked
through `dispatch("recall")` twice over the same data: once with no embedder (keyword-only) and
once with the MiniLM embedder (hybrid).

Metrics per question type: recall@1/5/10 (answer in the top k) and MRR (rank cut at 10).
`bench_embedder(model_dir)` measures texts/s at batch 32 (onnxruntime and the numpy fallback) and
the single-text latency.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SEED = 20260611
TENANT = "bench"
KS = (1, 5, 10)
RECALL_LIMIT = 10

FIRST_NAMES = ["Maya", "Daniel", "Priya", "Tomás", "Ingrid", "Kwame", "Lena", "Hiroshi"]
LAST_NAMES = ["Okafor", "Chen", "Lindqvist", "Moreau", "Alvarez", "Novak", "Haddad", "Sato"]
PEOPLE_COUNT = 24
FACTS_PER_PERSON = 5

# (stored statement, paraphrased question, lexical question); {e} is the person's name.
PERSON_FACTS: list[tuple[str, str, str]] = [
    (
        "{e} is allergic to peanuts.",
        "Which food should {e} stay away from for health reasons?",
        "What is {e} allergic to?",
    ),
    (
        "{e} is training for the Lisbon marathon.",
        "What long-distance running race is {e} preparing for?",
        "Which marathon is {e} training for?",
    ),
    (
        "{e} plays the cello in a community orchestra.",
        "Which musical instrument does {e} perform on?",
        "Does {e} play the cello in an orchestra?",
    ),
    (
        "{e} prefers async standups over meetings.",
        "How does {e} like daily team check-ins to happen?",
        "Does {e} prefer async standups over meetings?",
    ),
    (
        "{e} is on parental leave until March.",
        "When will {e} be back at work after having a baby?",
        "Until when is {e} on parental leave?",
    ),
    (
        "{e} speaks fluent Portuguese.",
        "Which foreign language can {e} hold a conversation in?",
        "Does {e} speak fluent Portuguese?",
    ),
    (
        "{e} relocated to Toronto in the spring.",
        "Which city did {e} move to recently?",
        "When did {e} relocate to Toronto?",
    ),
    ("{e} is vegetarian.", "Does {e} eat meat or fish?", "Is {e} vegetarian?"),
    (
        "{e} drives an electric car to the office.",
        "How does {e} commute to work?",
        "Does {e} drive an electric car to the office?",
    ),
    (
        "{e} got promoted to engineering manager.",
        "Did {e} recently step into a leadership role?",
        "Was {e} promoted to engineering manager?",
    ),
    (
        "{e} dislikes phone calls and wants everything in writing.",
        "Which way of communicating does {e} avoid?",
        "Does {e} dislike phone calls?",
    ),
    (
        "{e} volunteers at an animal shelter on weekends.",
        "What charity work does {e} do on Saturdays and Sundays?",
        "Where does {e} volunteer on weekends?",
    ),
    (
        "{e} has a fear of flying and takes the train.",
        "Why does {e} avoid airplanes when travelling?",
        "Does {e} have a fear of flying?",
    ),
    (
        "{e} studied marine biology before switching to software.",
        "What was {e}'s academic background before working in tech?",
        "Did {e} study marine biology?",
    ),
]

PROJECTS = [
    "Atlas",
    "Beacon",
    "Cascade",
    "Driftwood",
    "Evergreen",
    "Falcon",
    "Granite",
    "Harbor",
    "Ion",
    "Juniper",
    "Keystone",
    "Lighthouse",
]

# Page sections; each statement is used by exactly one project page.
STATUS: list[tuple[str, str, str]] = [
    (
        "The beta went out to forty pilot customers last week.",
        "Which effort already shipped an early release to a small group of clients?",
        "Which project sent the beta to forty pilot customers?",
    ),
    (
        "Load testing showed the API handles 12,000 requests per second.",
        "Which system was benchmarked for throughput under heavy traffic?",
        "Which project did load testing showing the API handles 12,000 requests per second?",
    ),
    (
        "The data migration finished and the old warehouse was switched off.",
        "Where did we complete moving records and retire the legacy storage?",
        "Which project finished the data migration and switched off the old warehouse?",
    ),
    (
        "Design sign-off is still waiting on the accessibility audit.",
        "Which initiative cannot get visual approval until the review for users with disabilities is done?",
        "Which project's design sign-off waits on the accessibility audit?",
    ),
    (
        "Mobile crash rate dropped from 3% to 0.4% after the rewrite.",
        "Which app became far more stable once its code was rebuilt?",
        "Which project's mobile crash rate dropped after the rewrite?",
    ),
    (
        "Invoices are now generated automatically at month end.",
        "Where did billing statements stop being produced by hand?",
        "Which project generates invoices automatically at month end?",
    ),
    (
        "The search index was rebuilt and latency fell below 50 ms.",
        "Which effort made lookups much quicker?",
        "Which project rebuilt the search index so latency fell below 50 ms?",
    ),
    (
        "Onboarding time for new customers went from two weeks to three days.",
        "Where did bringing clients on board become much quicker?",
        "Which project cut onboarding time for new customers to three days?",
    ),
    (
        "The chatbot now answers sixty percent of support tickets without a human.",
        "Which tool resolves most help requests automatically?",
        "Which project's chatbot answers support tickets without a human?",
    ),
    (
        "All servers were moved from the on-premise datacenter to the cloud.",
        "Which initiative got rid of our own hardware racks?",
        "Which project moved all servers from the datacenter to the cloud?",
    ),
    (
        "The hiring pipeline filled eight of the ten open engineering roles.",
        "Which effort is close to finishing recruiting developers?",
        "Which project's hiring pipeline filled eight open engineering roles?",
    ),
    (
        "Energy use in the warehouse fell by a fifth after the lighting retrofit.",
        "Where did power consumption go down thanks to new lamps?",
        "Which project's lighting retrofit cut warehouse energy use?",
    ),
]
RISKS: list[tuple[str, str, str]] = [
    (
        "The vendor contract expires before the rollout is complete.",
        "Which plan is endangered because a supplier agreement ends too early?",
        "Which project's vendor contract expires before the rollout is complete?",
    ),
    (
        "Only one engineer understands the legacy billing code.",
        "Where do we depend on a single person's knowledge of old invoicing software?",
        "Which project has only one engineer who understands the legacy billing code?",
    ),
    (
        "New privacy regulation in the EU could block the launch.",
        "Which initiative might be stopped by European data protection law?",
        "Which project's launch could be blocked by EU privacy regulation?",
    ),
    (
        "Cloud costs are growing faster than revenue.",
        "Where is infrastructure spending outpacing income?",
        "Which project has cloud costs growing faster than revenue?",
    ),
    (
        "The main customer is threatening to churn over missing SSO.",
        "Which effort may lose its biggest client because single sign-on is not there?",
        "Which project's main customer threatens to churn over missing SSO?",
    ),
    (
        "Hardware shipments from the factory are delayed by the port strike.",
        "Which plan is waiting on equipment held up by dock workers walking out?",
        "Which project's hardware shipments are delayed by the port strike?",
    ),
    (
        "Test coverage is below twenty percent, so regressions slip through.",
        "Where do bugs reach production because few automated checks exist?",
        "Which project has test coverage below twenty percent?",
    ),
    (
        "The team is burning out after three months of weekend work.",
        "Which group is exhausted from working Saturdays and Sundays?",
        "Which project's team is burning out after weekend work?",
    ),
    (
        "A competitor launched a nearly identical product at half the price.",
        "Which initiative faces a cheaper rival offering?",
        "Which project has a competitor with an identical product at half the price?",
    ),
    (
        "The third-party maps API will be deprecated next year.",
        "Which effort relies on a location service that is being retired?",
        "Which project depends on the maps API that will be deprecated?",
    ),
    (
        "Key stakeholders in finance have not approved the budget.",
        "Which plan still lacks money sign-off from the accounting leaders?",
        "Which project's budget have finance stakeholders not approved?",
    ),
    (
        "The open-source license of a core library changed to non-commercial.",
        "Which product may need to replace a dependency because its usage terms became restrictive?",
        "Which project's core library license changed to non-commercial?",
    ),
]
DECISIONS: list[tuple[str, str, str]] = [
    (
        "We chose Postgres over MongoDB for the order service.",
        "Which effort picked a relational database for purchases?",
        "Which project chose Postgres over MongoDB for the order service?",
    ),
    (
        "The team agreed to ship weekly instead of monthly.",
        "Where did we decide to release more frequently?",
        "Which project agreed to ship weekly instead of monthly?",
    ),
    (
        "We decided to outsource the mobile app to an agency.",
        "Which initiative handed phone application development to an external firm?",
        "Which project decided to outsource the mobile app to an agency?",
    ),
    (
        "Pricing moved from per-seat to usage-based billing.",
        "Where do customers now pay for what they consume rather than per user?",
        "Which project moved pricing from per-seat to usage-based billing?",
    ),
    (
        "We dropped support for Internet Explorer.",
        "Which product no longer works on Microsoft's old browser?",
        "Which project dropped support for Internet Explorer?",
    ),
    (
        "The launch event will be held in Lisbon.",
        "Where is the kickoff celebration taking place?",
        "Which project's launch event will be held in Lisbon?",
    ),
    (
        "All customer data will be stored in Frankfurt to satisfy residency rules.",
        "Which system keeps client records in Germany for compliance?",
        "Which project stores customer data in Frankfurt?",
    ),
    (
        "We will hire a dedicated security engineer before going live.",
        "Which effort plans to add a specialist to protect against attacks before launch?",
        "Which project will hire a dedicated security engineer before going live?",
    ),
    (
        "Code reviews now require two approvals.",
        "Where must every change be signed off by a pair of reviewers?",
        "Which project's code reviews require two approvals?",
    ),
    (
        "The legacy desktop client will be retired in December.",
        "Which old installed application is being shut down at the end of the year?",
        "Which project will retire the legacy desktop client in December?",
    ),
    (
        "We switched the design system from Bootstrap to Tailwind.",
        "Which product changed its CSS framework?",
        "Which project switched the design system from Bootstrap to Tailwind?",
    ),
    (
        "Support hours were extended to cover Asian time zones.",
        "Where is customer help now available overnight for clients in Tokyo and Singapore?",
        "Which project extended support hours to cover Asian time zones?",
    ),
]
OVERVIEW = (
    "{p} is an internal initiative owned by {owner}. It started in {month} and reports to the "
    "steering group every two weeks. The working notes below are kept current by the team."
)
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October"]


@dataclass(frozen=True)
class Question:
    text: str
    qtype: str  # "fact/paraphrase", "fact/lexical", "page/paraphrase", "page/lexical"
    #: acceptable answers: fact keys (resolved to fact ids) or one page slug
    targets: tuple[str, ...]


@dataclass
class EvalSet:
    facts: list[tuple[str, str, str]]  # (key, entity name, fact text)
    pages: list[tuple[str, str, str]]  # (slug, title, markdown content)
    questions: list[Question]


def build_eval_set(seed: int = SEED) -> EvalSet:
    """The deterministic evaluation set (same seed, same set)."""
    rng = random.Random(seed)
    names = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(names)
    people = names[:PEOPLE_COUNT]
    facts: list[tuple[str, str, str]] = []
    questions: list[Question] = []
    assigned = {person: rng.sample(range(len(PERSON_FACTS)), FACTS_PER_PERSON) for person in people}
    for person in people:
        first = person.split()[0]
        for idx in assigned[person]:
            stored, paraphrase, lexical = PERSON_FACTS[idx]
            key = f"{person}#{idx}"
            facts.append((key, person, stored.format(e=person)))
            # Half the questions use the first name only, as people do; every namesake holding the
            # same statement is then a correct answer, and the other namesakes' facts distract.
            if rng.random() < 0.5:
                said = first
                targets = tuple(f"{p}#{idx}" for p in people if p.split()[0] == first and idx in assigned[p])
            else:
                said, targets = person, (key,)
            questions.append(Question(paraphrase.format(e=said), "fact/paraphrase", targets))
            questions.append(Question(lexical.format(e=said), "fact/lexical", targets))
    pages: list[tuple[str, str, str]] = []
    pools = {"Status": STATUS[:], "Risks": RISKS[:], "Decisions": DECISIONS[:]}
    for pool in pools.values():
        rng.shuffle(pool)
    for i, project in enumerate(PROJECTS):
        slug = f"projects/{project.lower()}"
        title = f"Project {project}"
        owner = rng.choice(people)
        body = [
            f"# {title}",
            "",
            "## Overview",
            "",
            OVERVIEW.format(p=title, owner=owner, month=rng.choice(MONTHS)),
            "",
        ]
        for section, pool in pools.items():
            stored, paraphrase, lexical = pool[i]
            body += [f"## {section}", "", stored, ""]
            questions.append(Question(paraphrase, "page/paraphrase", (slug,)))
            questions.append(Question(lexical, "page/lexical", (slug,)))
        content = f"---\ntitle: {title}\ntype: project\n---\n" + "\n".join(body)
        pages.append((slug, title, content))
    return EvalSet(facts, pages, questions)


def _deps(stores: Any, embedder: Any, problem: str | None) -> Any:
    from fleetmem.ports import Deps, Diagnostics
    from fleetmem.wiring import FixedClock, SortableIds

    return Deps.over(
        stores,
        clock=FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC)),
        ids=SortableIds(),
        embedder=embedder,
        llm=None,
        diagnostics=Diagnostics(embedder_problem=problem),
    )


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = max(1, len(ranks))
    out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in KS}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    out["n"] = len(ranks)
    return out


def run_quality(
    model_dir: Path | str,
    *,
    out: Callable[[str], Any] = print,
    open_stores: Callable[[Path, Any], Any] | None = None,
) -> dict[str, Any]:
    """Ingest the evaluation set, ask every question keyword-only and hybrid, print a markdown table.

    `open_stores(tmp_dir, embedder)` picks the adapter set (default: the local SQLite stores);
    tests/aws/bench_quality_parity.py passes the AWS set on DynamoDB Local and OpenSearch.

    Returns {"modes": {mode: {qtype: metrics}}, "table": markdown, "questions": n, ...}.
    """
    import fleetmem.memory.verbs.put_page  # noqa: F401  (registers the page tools it needs)
    from fleetmem.models import Caller
    from fleetmem.transport.dispatch import dispatch
    from fleetmem.wiring import load_local_embedder, open_local

    embedder, problem = load_local_embedder(model_dir)
    if embedder is None:
        raise RuntimeError(problem or "the local embedder is unavailable")
    data = build_eval_set()
    caller = Caller(tenant=TENANT, client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fleetmem-quality-") as tmp:
        stores = open_stores(Path(tmp), embedder) if open_stores else open_local(Path(tmp))
        try:
            hybrid = _deps(stores, embedder, None)
            keyword = _deps(stores, None, "keyword-only baseline")
            fact_ids: dict[str, str] = {}
            for key, person, text in data.facts:
                res = dispatch(
                    "remember",
                    {"fact": text, "entity": person, "provenance": "quality bench"},
                    caller,
                    hybrid,
                )
                if res.is_error:
                    raise RuntimeError(f"remember failed: {res.body.get('code')}")
                fact_ids[key] = res.body["id"]
            for slug, _title, content in data.pages:
                res = dispatch("put_page", {"slug": slug, "content": content}, caller, hybrid)
                if res.is_error:
                    raise RuntimeError(f"put_page failed: {res.body.get('code')}")
            ingest_s = time.monotonic() - started
            modes: dict[str, dict[str, Any]] = {}
            latencies: dict[str, list[float]] = {}
            for mode, deps in (("keyword-only", keyword), ("hybrid", hybrid)):
                ranks: dict[str, list[int | None]] = {}
                latencies[mode] = []
                for q in data.questions:
                    t0 = time.perf_counter()
                    res = dispatch("recall", {"query": q.text, "limit": RECALL_LIMIT}, caller, deps)
                    latencies[mode].append((time.perf_counter() - t0) * 1000)
                    if res.is_error:
                        raise RuntimeError(f"recall failed: {res.body.get('code')}")
                    if mode == "hybrid" and res.body.get("search_degraded"):
                        raise RuntimeError(f"hybrid recall degraded: {res.body['search_degraded']}")
                    if q.qtype.startswith("fact/"):
                        found = [f["fact_id"] for f in res.body["facts"]]
                        wanted = {fact_ids[t] for t in q.targets}
                    else:
                        found = [r["slug"] for r in res.body["results"]]
                        wanted = set(q.targets)
                    rank = next((i for i, x in enumerate(found, start=1) if x in wanted), None)
                    ranks.setdefault(q.qtype, []).append(rank)
                    ranks.setdefault("all", []).append(rank)
                modes[mode] = {qtype: _metrics(r) for qtype, r in ranks.items()}
        finally:
            stores.close()
    table = quality_table(modes)
    out(table)
    return {
        "modes": modes,
        "table": table,
        "questions": len(data.questions),
        "facts": len(data.facts),
        "pages": len(data.pages),
        "ingest_seconds": round(ingest_s, 2),
        "recall_p50_ms": {m: round(statistics.median(v), 2) for m, v in latencies.items()},
        "seconds": round(time.monotonic() - started, 2),
    }


def quality_table(modes: dict[str, dict[str, dict[str, float]]]) -> str:
    qtypes = ["fact/paraphrase", "fact/lexical", "page/paraphrase", "page/lexical", "all"]
    lines = [
        "| question type | n | mode | recall@1 | recall@5 | recall@10 | MRR |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for qtype in qtypes:
        for mode, per_type in modes.items():
            m = per_type.get(qtype)
            if m is None:
                continue
            lines.append(
                f"| {qtype} | {int(m['n'])} | {mode} | {m['recall@1']:.2f} | {m['recall@5']:.2f} | "
                f"{m['recall@10']:.2f} | {m['mrr']:.3f} |"
            )
    return "\n".join(lines)


def bench_embedder(model_dir: Path | str, *, texts: int = 256, singles: int = 50) -> dict[str, Any]:
    """Embedding speed: texts/s at batch 32 for onnxruntime and the numpy fallback, single-text p50."""
    from fleetmem.embedder_build import ONNX_FILE, model_path
    from fleetmem.wiring import BATCH_SIZE, MiniLMEmbedder

    data = build_eval_set()
    corpus = [t for _k, _e, t in data.facts] + [q.text for q in data.questions]
    corpus = (corpus * (texts // max(1, len(corpus)) + 1))[:texts]
    result: dict[str, Any] = {
        "batch": BATCH_SIZE,
        "texts": texts,
        "onnx_mb": round((model_path(model_dir) / ONNX_FILE).stat().st_size / 1e6, 1),
    }
    # numpy first: it only runs where onnxruntime is absent, so it is timed before ORT's threads exist
    for backend in ("numpy", "onnx"):
        embedder = MiniLMEmbedder(model_dir, backend=backend)
        t0 = time.perf_counter()
        embedder.embed(corpus[:BATCH_SIZE])  # load + warm-up
        result[f"{backend}_load_s"] = round(time.perf_counter() - t0, 3)
        n = texts if backend == "onnx" else min(texts, 128)
        t0 = time.perf_counter()
        embedder.embed(corpus[:n])
        result[f"{backend}_texts_per_s"] = round(n / (time.perf_counter() - t0), 1)
        lat = []
        for text in corpus[: singles if backend == "onnx" else 20]:
            t0 = time.perf_counter()
            embedder.embed([text])
            lat.append((time.perf_counter() - t0) * 1000)
        result[f"{backend}_single_p50_ms"] = round(statistics.median(lat), 2)
    return result


if __name__ == "__main__":
    import json
    import sys

    from fleetmem.config import Settings

    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Settings().model_dir
    summary = run_quality(model_dir)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("table", "modes")}, indent=2))
    print(json.dumps(bench_embedder(model_dir), indent=2))
