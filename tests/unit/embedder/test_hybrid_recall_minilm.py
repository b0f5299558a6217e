"""End to end over the real dispatch and the real MiniLM model: recall finds facts by meaning."""

from __future__ import annotations

import pytest

from fleetmem.adapters.local.embedder import MiniLMEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

pytestmark = pytest.mark.slow

FACTS = [
    "Alice prefers async standups over meetings",
    "The billing service runs on Postgres 16",
    "Bob is allergic to peanuts",
    "Invoices are sent on the first business day of the month",
    "The mobile app crash rate dropped after the rewrite",
    "Carol plays the cello in a community orchestra",
    "Our API rate limit is 600 requests per minute",
    "The design system switched from Bootstrap to Tailwind",
    "Dan drives an electric car to the office",
    "Support tickets are triaged every morning at nine",
    "The staging database is refreshed every Sunday night",
    "Erin speaks fluent Portuguese",
    "Code reviews require two approvals",
    "The legacy desktop client will be retired in December",
    "Frank volunteers at an animal shelter on weekends",
    "The search index is rebuilt nightly",
    "Grace is on parental leave until March",
    "Cloud costs grew eight percent last quarter",
    "The vendor contract for laptops expires in April",
    "Heidi studied marine biology before switching to software",
    "The marketing site is hosted on a static CDN",
    "Ivan dislikes phone calls and wants everything in writing",
    "The data warehouse migration finished in May",
    "Judy got promoted to engineering manager",
    "Security patches are applied within 48 hours",
    "The chatbot answers a third of support questions",
    "Karl is training for a marathon",
    "We dropped support for Internet Explorer",
    "Payroll runs on the 25th of each month",
    "Liam has a fear of flying and takes the train",
]
#: (stored fact, query sharing no content word with it)
BY_MEANING = [
    ("Karl is training for a marathon", "who is getting ready for a long-distance running race"),
    ("Bob is allergic to peanuts", "which colleague cannot eat nuts"),
    ("Liam has a fear of flying and takes the train", "who avoids airplanes"),
]


@pytest.fixture
def minilm_deps(stores, clock, minilm_model_dir):
    return Deps.over(
        stores,
        clock=clock,
        ids=SortableIds(),
        embedder=MiniLMEmbedder(minilm_model_dir),
        llm=None,
    )


def _remember(deps, caller, text):
    res = dispatch("remember", {"fact": text, "provenance": "test"}, caller, deps)
    assert not res.is_error, res.body
    return res.body["id"]


@pytest.mark.parametrize(("fact", "query"), BY_MEANING)
def test_recall_finds_a_fact_sharing_no_keyword_with_the_query(minilm_deps, remote_caller, fact, query):
    ids = {text: _remember(minilm_deps, remote_caller, text) for text in FACTS}

    res = dispatch("recall", {"query": query}, remote_caller, minilm_deps)

    assert not res.is_error
    assert "search_degraded" not in res.body
    top5 = [f["fact_id"] for f in res.body["facts"][:5]]
    assert ids[fact] in top5
