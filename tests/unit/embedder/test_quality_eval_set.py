"""The retrieval-quality evaluation set and harness (`fleetmem.bench.quality`)."""

from __future__ import annotations

import re

import pytest

from fleetmem.bench.quality import run_quality
from fleetmem.bench.quality_set import DECISIONS, PERSON_FACTS, RISKS, STATUS, build_eval_set

STOPWORDS = set(
    "a an the is are was were be been to of in on for at by with and or but from that this it its as do does "
    "did what which who where when why how our we us not no than there their they so has have had will can "
    "after before over into out about per".split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.replace("{e}", "").lower()) if w not in STOPWORDS} - {"s"}


def test_eval_set_is_deterministic():
    a, b = build_eval_set(), build_eval_set()
    assert a == b
    assert build_eval_set(seed=1) != a


@pytest.mark.parametrize(
    "pool", [PERSON_FACTS, STATUS, RISKS, DECISIONS], ids=["facts", "status", "risks", "decisions"]
)
def test_paraphrase_questions_share_no_content_word_with_the_stored_text(pool):
    for stored, paraphrase, _lexical in pool:
        assert not _content_words(stored) & _content_words(paraphrase), (stored, paraphrase)


def test_eval_set_has_name_sharing_distractors_and_both_answer_places():
    data = build_eval_set()
    people = {person for _key, person, _text in data.facts}
    first_names = [p.split()[0] for p in people]
    assert len(set(first_names)) < len(first_names)  # several people share a first name
    qtypes = {q.qtype for q in data.questions}
    assert qtypes == {"fact/paraphrase", "fact/lexical", "page/paraphrase", "page/lexical"}
    page_slugs = {slug for slug, _title, _content in data.pages}
    assert {t for q in data.questions if q.qtype.startswith("page/") for t in q.targets} == page_slugs
    fact_keys = {key for key, _person, _text in data.facts}
    assert all(set(q.targets) <= fact_keys for q in data.questions if q.qtype.startswith("fact/"))


@pytest.mark.slow
def test_hybrid_beats_keyword_only_on_paraphrase_questions(minilm_model_dir):
    lines: list[str] = []
    result = run_quality(minilm_model_dir, out=lines.append)
    keyword, hybrid = result["modes"]["keyword-only"], result["modes"]["hybrid"]
    for qtype in ("fact/paraphrase", "page/paraphrase"):
        assert hybrid[qtype]["mrr"] > keyword[qtype]["mrr"]
    for qtype in ("fact/lexical", "page/lexical"):
        assert hybrid[qtype]["recall@5"] >= keyword[qtype]["recall@5"]
    assert lines and lines[0].startswith("| question type")
