"""List questions ("Which hobbies have Maya and Leo taken up?"): their topic is searched without the
names and ranked among the hits of the people named (`ranking.topic` / `named` / `statements_first`,
used by `search.hybrid_search`), so the small talk of those people no longer fills the top k."""

from __future__ import annotations

import pytest

from fleetmem.memory import search
from fleetmem.memory.ranking import BEST_HIT, LIST_DEPTH, distinct, lists, named, searches, statements_first, topic
from fleetmem.models import SearchHit, SearchHits, SearchQuery


def hit(doc_id: str, text: str, title: str) -> SearchHit:
    return SearchHit(doc_id=doc_id, kind="fact", slug=title, title=title, text=text, fact_id=doc_id, score=0.5)


def test_a_question_naming_someone_has_a_topic_without_the_names():
    assert topic("Which hobbies have Maya and Leo taken up?") == "Which hobbies have and taken up?"
    assert topic("What did Leo and Ana each adopt?") == "What did and each adopt?"
    assert topic("What milestones did Jonas reach?") == "What milestones did reach?"
    assert topic("What is Tomás allergic to?") == "What is allergic to?"
    assert topic("How have Priya's drinking habits changed?") == "How have drinking habits changed?"
    # Months and weekdays are not names; a question naming a day is narrowed by the day already.
    assert topic("What charity work does Lena do on all Saturdays?") == "What charity work does do on all Saturdays?"
    assert topic("What news did Maya share on 14 March 2026?") is None
    assert topic("What did Maya do the week after the wedding?") is None
    # Names in any script; a word in a script without capitals is not taken for one.
    assert topic("What is Émile allergic to?") == "What is allergic to?"
    assert topic("What did Łukasz and Тимур each adopt?") == "What did and each adopt?"
    assert topic("How have Øystein's drinking habits changed?") == "How have drinking habits changed?"
    assert topic("What did May's friend say?") is None
    assert topic("What did 李明 say?") is None
    # No name to take out: no topic.
    assert topic("which things are loud?") is None
    assert topic("Where is the team retreat happening?") is None


def test_a_list_question_is_told_from_one_thing_asked():
    for several in (
        "Which hobbies have Maya and Leo taken up?",
        "What did Leo and Ana each adopt?",
        "What milestones did Jonas reach?",
        "How are things at work for Kwame?",
        "What have Łukasz and Тимур been learning?",
    ):
        assert lists(several), several
    for one in (
        "What is Tomás allergic to?",
        "Which band did Lena see at the Ziggo Dome?",
        "Did Kwame recently step into a leadership role?",
        "How have Priya's drinking habits changed?",
    ):
        assert not lists(one), one


def test_the_topic_is_searched_after_the_parts():
    asked = "What breed is the puppy Maya adopted, and which hobbies have Maya and Leo taken up?"
    extra, about = searches(asked)
    assert about == "What breed is the puppy adopted, and which hobbies have and taken up?"
    assert extra == ["What breed is the puppy Maya adopted", "which hobbies have Maya and Leo taken up", about]
    assert searches("Where is the team retreat happening?") == ([], None)


def test_named_keeps_the_hits_of_the_people_asked_about_most_names_first():
    titles = {"a": "Maya Moreau", "b": "Ana", "c": "Maya Sato", "d": "Maya Moreau"}
    ranking = [("b", 0.9), ("c", 0.8), ("a", 0.7), ("d", 0.6)]
    assert named("What did Maya Moreau buy?", ranking, titles) == [("a", 0.7), ("d", 0.6), ("c", 0.8)]
    assert named("What did somebody buy?", ranking, titles) == []


def test_statements_come_before_questions():
    texts = {"q": "Was it as good as you hoped?", "s": "I adopted a beagle.", "t": "Started pottery."}
    ranking = [("q", 0.9), ("s", 0.8), ("t", 0.7)]
    assert [d for d, _ in statements_first(ranking, texts)] == ["s", "t", "q"]


class CannedSearch:
    """A SearchIndex answering canned arms per query text (the topic's differ from the whole query's)."""

    write_through = False

    def __init__(self, arms: dict[str, list[SearchHit]]) -> None:
        self.arms = arms
        self.asked: list[str] = []
        self.depths: list[int] = []

    def search(self, query: SearchQuery) -> SearchHits:
        self.asked.append(query.text)
        self.depths.append(query.k)
        return SearchHits(keyword=(), vector=tuple(self.arms.get(query.text, [])))

    def search_many(self, queries: list[SearchQuery]) -> list[SearchHits]:
        return [self.search(q) for q in queries]


def test_a_list_question_ranks_each_named_persons_pieces_before_their_small_talk(deps):
    said = [("Maya", "Morning!"), ("Leo", "Long day."), ("Maya", "Ha!")]
    chat = [hit(f"chat{i}", t, p) for i, (p, t) in enumerate(said)]
    pottery = hit("pottery", "I signed up for a pottery class.", "Maya")
    guitar = hit("guitar", "I bought an acoustic guitar.", "Leo")
    asked = hit("asked", "Any new hobbies?", "Leo")
    chess = hit("chess", "I play chess online every evening.", "Ana")  # not asked about
    question = "Which hobbies have Maya and Leo taken up?"
    index = CannedSearch(
        {
            question: [*chat, pottery, guitar],
            "Which hobbies have and taken up?": [chess, asked, pottery, guitar, chat[1]],
        }
    )
    deps.search = index
    found = [f.hit.doc_id for f in search.hybrid_search(deps, "t1", question, kinds=("fact",)).hits]
    assert index.asked == [question, "Which hobbies have and taken up?"]
    assert found[:3] == ["pottery", "guitar", "chat1"]
    assert "chess" not in found and found.index("asked") > found.index("guitar")
    assert set(found) == {"pottery", "guitar", "asked", *(c.doc_id for c in chat)}
    # The whole query alone (what recall ranked before) lists the small talk first.
    alone = search.hybrid_search(deps, "t1", question, kinds=("fact",), ranking=BEST_HIT)
    best_hit = [f.hit.doc_id for f in alone.hits]
    assert best_hit[:3] == ["chat0", "chat1", "chat2"]


@pytest.mark.parametrize("person", ["Priya", "Øystein", "Тимур", "Émile Durand"])
def test_another_question_naming_someone_gets_their_topic_hits_after_the_first_round(deps, person):
    # The second piece of a change shares no word with the question, and the name fills the whole
    # query's vector with that person's small talk; among their lines the topic's vector finds it.
    before = hit("before", "I can't function without three espressos a day.", person)
    chat = [hit(f"chat{i}", t, person) for i, t in enumerate(["Morning!", "Long day.", "Ha!", "Sure.", "Oh wow."])]
    now = hit("now", "I quit coffee completely, it's green tea for me now.", person)
    tea = hit("tea", "Green tea every morning for me.", "Omar")  # not asked about
    question = f"How have {person}'s drinking habits changed?"
    index = CannedSearch({question: [before, *chat], "How have drinking habits changed?": [tea, now, chat[0]]})
    deps.search = index
    found = [f.hit.doc_id for f in search.hybrid_search(deps, "t1", question, kinds=("fact",)).hits]
    assert index.asked == [question, "How have drinking habits changed?"]
    # The whole query's best hit and second keep their places; the topic's joins after them.
    assert found[:4] == ["before", "chat0", "now", "chat1"]
    assert "tea" not in found
    alone = search.hybrid_search(deps, "t1", question, kinds=("fact",), ranking=BEST_HIT)
    assert "now" not in [f.hit.doc_id for f in alone.hits]


def test_a_list_questions_topic_is_searched_deeper_than_the_query(deps):
    """A list question wants every piece, and in a long history the named people's news lies below
    the first k hits of the topic; another question naming someone searches its topic at k."""
    listing = "Which hobbies have Maya and Leo taken up?"
    index = CannedSearch({})
    deps.search = index
    search.hybrid_search(deps, "t1", listing, kinds=("fact",), k=30)
    assert index.asked == [listing, "Which hobbies have and taken up?"]
    assert index.depths == [30, 30 * LIST_DEPTH] and LIST_DEPTH > 1
    index.asked, index.depths = [], []
    search.hybrid_search(deps, "t1", "How have Priya's drinking habits changed?", kinds=("fact",), k=30)
    assert index.depths == [30, 30]


def test_copies_of_a_line_go_after_the_other_hits_each_group_in_its_order():
    hits = {
        "a": hit("a", "3 May 2026: Hey! How was your week?", "Omar"),
        "b": hit("b", "3 May 2026: I ran the Rotterdam half marathon.", "Omar"),
        "c": hit("c", "10 May 2026: Hey! How was your week?", "Omar"),
        "d": hit("d", "5 June 2026: Hey!  How was your week?", "Felix"),
        "e": hit("e", "10 May 2026: Morning swims at the outdoor pool.", "Omar"),
    }
    ranking = [("a", 0.9), ("c", 0.8), ("b", 0.7), ("d", 0.6), ("e", 0.5)]
    assert [d for d, _ in distinct(ranking, hits)] == ["a", "b", "e", "c", "d"]
    once = [("a", 0.9), ("b", 0.7), ("e", 0.5)]
    assert distinct(once, hits) == once


def test_recall_lists_a_line_said_again_once_before_the_rest(deps):
    """Copies that different searches of one question find (the topic one, the whole query another)
    no longer take places in the top 5 that the rest can use: the first stays, the others go last."""
    question = "Which active things did Felix and Omar each do?"
    swims = hit("swims", "Morning swims at the outdoor pool, 7 am sharp.", "Omar")
    first = hit("first", "1 May 2026: Sorry I went quiet, work has been hectic.", "Omar")
    again = hit("again", "8 May 2026: Sorry I went quiet, work has been hectic.", "Omar")
    chat = [hit(f"chat{i}", t, "Felix") for i, t in enumerate(["Oh wow, I had no idea.", "Sure, sounds good."])]
    index = CannedSearch({question: [again, *chat], "Which active things did and each do?": [swims, first]})
    deps.search = index
    found = [f.hit.doc_id for f in search.hybrid_search(deps, "t1", question, kinds=("fact",)).hits]
    assert found == ["swims", "first", "chat0", "chat1", "again"]
