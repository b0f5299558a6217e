"""The shipped fusion (`ranking.shipped`) and the date reading it uses (`memory.temporal`): pure
functions over SearchHits, so both backends rank the same."""

from __future__ import annotations

from datetime import date

import pytest

from fleetmem.memory.ranking import (
    BEST_HIT,
    MAX_PARTS,
    PLAIN,
    SHIPPED,
    cover,
    fuse,
    parts,
    questions_down,
    repeats_down,
    shipped,
)
from fleetmem.memory.temporal import Day, date_words, dates_in, mentioned_days, written_day
from fleetmem.models import SearchHit


def hit(doc_id: str, text: str, title: str = "") -> SearchHit:
    return SearchHit(doc_id=doc_id, kind="fact", slug=title, title=title, text=text, fact_id=doc_id, score=1.0)


def ids(ranked: list[tuple[str, float]]) -> list[str]:
    return [d for d, _ in ranked]


def test_dates_in_reads_iso_day_month_and_month_day_forms():
    assert dates_in("2026-03-14 and 3rd of April 2026, then May 7, 2026 and 9 June") == [
        Day(2026, 3, 14),
        Day(2026, 4, 3),
        Day(2026, 5, 7),
        Day(None, 6, 9),
    ]
    assert dates_in("nothing dated here, may we?") == []
    assert Day(None, 6, 9).matches(date(2031, 6, 9)) and not Day(2026, 6, 9).matches(date(2031, 6, 9))


def test_relative_expressions_resolve_against_the_texts_own_date():
    # 17 April 2026 is a Friday.
    text = "17 April 2026: Yesterday we moved, two days ago I packed, and last Saturday I sold the sofa."
    assert written_day(text) == date(2026, 4, 17)
    assert mentioned_days(text) == {
        date(2026, 4, 17),
        date(2026, 4, 16),
        date(2026, 4, 15),
        date(2026, 4, 11),
    }
    assert mentioned_days("no date, yesterday") == set()


def test_a_name_only_keyword_match_does_not_count_when_the_vector_arm_ran():
    kw = [hit("chat", "Maya: good night, talk tomorrow", "maya"), hit("cello", "Maya: cello lessons", "maya")]
    vec = [hit("cello", "Maya: cello lessons", "maya"), hit("chat", "Maya: good night, talk tomorrow", "maya")]
    query = "Which instrument does Maya play?"  # shares only the name with every turn
    plain = ids(fuse(PLAIN, query, kw, vec))
    assert plain[0] == "chat"  # both arms, keyword first: plain RRF keeps the name-only match on top
    assert ids(shipped(query, kw, vec))[0] == "cello"
    # Keyword-only (no vector arm): name-only matches are still returned, not dropped.
    assert set(ids(fuse(SHIPPED, query, kw, []))) == {"chat", "cello"}


def test_a_hit_that_is_itself_a_question_goes_below_the_statements_it_outscored():
    # The named person's small talk matches the name and outranks the second piece of the answer.
    vec = [
        hit("plan", "Omar: I'm planning a trip to Kyoto in the autumn", "omar"),
        hit("ask", "Omar: How are you feeling about it?", "omar"),
        hit("news", "Omar: What's new with you?", "omar"),
        hit("went", "Omar: Kyoto was amazing, a thousand torii gates", "omar"),
    ]
    query = "What trip did Omar plan and how did it go?"
    assert ids(fuse(BEST_HIT, query, [], vec)) == ["plan", "ask", "news", "went"]
    assert ids(fuse(SHIPPED, query, [], vec)) == ["plan", "went", "ask", "news"]
    # A question that matches far better than any statement still ranks first; ties keep their order.
    assert ids(questions_down([("faq", 1.0), ("note", 0.2), ("other", 0.2)], {"faq": "Who owns billing?"})) == [
        "faq",
        "note",
        "other",
    ]
    assert ids(questions_down([("faq", 1.0), ("note", 0.5)], {"faq": "Who owns billing?  "})) == ["note", "faq"]


def test_a_person_named_in_the_question_lifts_that_persons_hits():
    vec = [hit("omar", "I adopted a beagle puppy", "omar"), hit("maya", "We brought home a beagle", "maya")]
    assert ids(fuse(PLAIN, "What dog did Maya adopt?", [], vec))[0] == "omar"
    assert ids(shipped("What dog did Maya adopt?", [], vec))[0] == "maya"


def test_a_date_in_the_question_lifts_hits_about_that_day_relative_ones_included():
    vec = [
        hit("a", "12 March 2026: I ran the half marathon", "maya"),
        hit("b", "15 March 2026: Yesterday I signed up for pottery", "maya"),
    ]
    assert ids(shipped("What did Maya do on 14 March 2026?", [], vec))[0] == "b"
    assert ids(shipped("What did Maya do on March 12?", [], vec))[0] == "a"


def test_a_line_said_again_and_again_goes_below_the_pieces_said_once():
    # In a long history one person's recurring small talk matches a question about them in every
    # session it was said: the copies, the first one too, would fill the top 5.
    def page(doc_id: str, who: str, day: str, text: str) -> SearchHit:
        return hit(doc_id, f"{who}, {day}\n\n{who} ({day}): {text}", f"{who}, {day}")

    drinks = [
        page(f"d{i}", "Priya", f"{i} May 2026", "Miss our Friday drinks, we should restart them.") for i in (3, 10, 17)
    ]
    before = page("before", "Priya", "15 May 2026", "I can't function without three espressos a day.")
    now = page("now", "Priya", "5 July 2026", "I quit coffee completely, it's green tea for me now.")
    vec = [*drinks, before, now]
    query = "What did Priya drink before and what does Priya drink now?"
    ranked = ids(fuse(SHIPPED, query, [], vec))
    assert ranked == ["before", "now", "d3", "d10", "d17"]
    assert ids(fuse(BEST_HIT, query, [], vec))[:3] == ["d3", "d10", "d17"]  # the whole query as before
    # A page that names its speaker in its text: the same line said by someone else is not a repeat.
    other = page("other", "Omar", "10 May 2026", "Miss our Friday drinks, we should restart them.")
    pages = {h.doc_id: h for h in [drinks[0], other, before]}
    assert ids(repeats_down([("d3", 1.0), ("other", 0.9), ("before", 0.5)], pages)) == ["d3", "other", "before"]
    # Facts say it without the speaker: two entities' copies of one sign-off both go down ...
    signoffs = {
        "p": hit("p", "3 May 2026: Okay I have to run, talk soon!", "priya"),
        "o": hit("o", "10 May 2026: Okay I have to run, talk soon!", "omar"),
        "news": hit("news", "12 May 2026: I got the keys to the new flat today.", "priya"),
    }
    assert ids(repeats_down([("p", 1.0), ("o", 0.9), ("news", 0.5)], signoffs)) == ["news", "p", "o"]
    # ... but one statement about two people, each named in it, is two facts.
    milk = {
        "ada": hit("ada", "Ada Lovelace drinks oat milk in her coffee.", "ada-lovelace"),
        "bob": hit("bob", "Bob Stone drinks oat milk in her coffee.", "bob-stone"),
        "tea": hit("tea", "Ada Lovelace likes green tea.", "ada-lovelace"),
    }
    assert ids(repeats_down([("ada", 1.0), ("bob", 0.9), ("tea", 0.5)], milk)) == ["ada", "bob", "tea"]


def test_the_words_of_an_asked_date_are_not_names_and_a_keyword_hit_about_that_day_counts():
    # Pages are titled "<speaker>, <date>": a question about a day shares its date words with the
    # title of every page of that day (and "2026" with every page of the year). The turn of that day
    # is found by the keyword arm only (a date means nothing to the vector arm of a long history).
    def page(doc_id: str, day: str, text: str) -> SearchHit:
        return hit(doc_id, f"Omar, {day}\n\nOmar ({day}): {text}", f"Omar, {day}")

    evidence = page("swims", "30 August 2026", "Morning swims at the outdoor pool, 7 am sharp.")
    kw = [page("coffee", "30 August 2026", "Morning! Coffee in hand?"), evidence]
    vec = [page(f"v{i}", f"{i} July 2026", "Okay I have to run, talk soon!") for i in range(1, 11)]
    ranked = ids(shipped("What did Omar tell the others on 30 August 2026?", kw, vec))
    assert ranked.index("swims") < 2 and ranked.index("coffee") < 2


def test_a_hit_of_the_named_person_about_the_asked_day_outranks_another_persons_that_both_arms_found():
    # A fact is "<date>: <text>" titled by its speaker. In a long history the vector arm finds the
    # small talk of everyone on that day, rarely the named person's news; the keyword arm finds both.
    news = hit("news", "31 October 2026: I'm taking Japanese lessons twice a week.", "omar")
    small_talk = hit("talk", "31 October 2026: Speak soon, have a good one.", "felix")
    kw, vec = [news, small_talk], [small_talk, hit("v2", "2 May 2026: Long day, finally home.", "felix")]
    query = "What did Omar tell the others on 31 October 2026?"
    # the two boosts multiply (x6) in the shipped ranking, and add (x4) in the baseline
    assert ids(fuse(SHIPPED, query, kw, vec))[0] == "news"
    assert ids(fuse(BEST_HIT, query, kw, vec))[0] == "talk"


def test_date_words_are_the_words_that_write_the_dates():
    assert date_words("What did Omar do on 30 August 2026 and 2026-03-14?") == {"30", "august", "2026", "03", "14"}
    assert date_words("What did Omar do in 2026 with 30 friends?") == set()


def test_the_week_after_an_event_lifts_what_was_said_in_that_window():
    kw = [hit("event", "1 March 2026: I ran the Rotterdam half marathon", "maya")]
    vec = [
        hit("event", "1 March 2026: I ran the Rotterdam half marathon", "maya"),
        hit("far", "30 March 2026: I bought a guitar", "maya"),
        hit("next", "8 March 2026: I started pottery", "maya"),
    ]
    ranked = ids(shipped("What did Maya do the week after the Rotterdam half marathon?", kw, vec))
    assert ranked.index("next") < ranked.index("far")


def test_an_unknown_ranking_is_refused():
    with pytest.raises(ValueError, match="unknown ranking"):
        fuse("bm42", "q", [], [])


def test_a_query_asking_several_questions_is_split_into_its_parts():
    asked = (
        "What breed is the puppy Maya adopted, who had a baby girl in Daniel's family, and how often does Daniel swim?"
    )
    assert parts(asked) == [
        "What breed is the puppy Maya adopted",
        "who had a baby girl in Daniel's family",
        "how often does Daniel swim",
    ]
    assert parts("Which class did Omar sign up for and where does Maya swim?") == [
        "Which class did Omar sign up for",
        "where does Maya swim",
    ]
    # One question: a clause that is not a question, a fragment, or no split point at all.
    for one in (
        "In the chat of 6 February 2026, what did Daniel announce?",
        "Which sport did Maya play before and which now?",
        "Where is the team retreat happening?",
    ):
        assert parts(one) == [one]
    many = ", ".join(f"what did person{i} buy" for i in range(MAX_PARTS + 1))
    assert parts(many) == [many]


def test_a_part_that_refers_back_is_searched_with_what_the_first_part_asks_about():
    # "how did it go" alone matches any small talk; the names would pull it to the named person's.
    assert parts("What party did Omar organise and how did it go?") == [
        "What party did Omar organise",
        "how did it go party organise",
    ]
    assert parts("What was Priya's diet before and what is it now?") == [
        "What was Priya's diet before",
        "what is it now diet",
    ]
    assert parts("What did Łukasz buy and how did they like it?") == ["What did Łukasz buy", "how did they like it buy"]
    # A part that names its own subject is searched as it is.
    assert parts("Which class did Omar sign up for and where does Maya swim?")[1] == "where does Maya swim"


def test_cover_puts_each_rankings_best_first_and_every_id_once():
    whole = [("puppy", 0.9), ("smalltalk", 0.8), ("smalltalk2", 0.7)]
    part1 = [("puppy", 0.9), ("smalltalk", 0.5)]
    part2 = [("lessons", 0.6), ("smalltalk", 0.4)]
    ranked = [d for d, _ in cover([whole, part1, part2])]
    # The second part's best hit comes before the whole query's second best.
    assert ranked == ["puppy", "lessons", "smalltalk", "smalltalk2"]
    scores = [s for _, s in cover([whole, part1, part2])]
    assert scores == sorted(scores, reverse=True)
    assert cover([]) == []
