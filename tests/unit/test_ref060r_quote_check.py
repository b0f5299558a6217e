"""The synthesize quote check (D30, `fleetmem.memory.quote_check`): exact, near and unfound quotes."""

from __future__ import annotations

from fleetmem.memory import quote_check

EVIDENCE = ["Acme chose Stripe over Adyen because onboarding took two days.", "Kai owns the billing service."]


def test_an_exact_quote_stays_whatever_its_spacing_or_case():
    out = quote_check.check('She said "acme chose  Stripe over Adyen" [companies/acme].', EVIDENCE)
    assert out.answer == 'She said "acme chose  Stripe over Adyen" [companies/acme].'
    assert (out.grounded, out.repaired, out.unverified) == (1, 0, [])


def test_a_near_quote_takes_the_evidences_wording_inside_the_same_curly_marks():
    out = quote_check.check("Notes: \u201cKai own the billing service\u201d.", EVIDENCE)
    assert out.answer == "Notes: \u201cKai owns the billing service.\u201d."
    assert (out.grounded, out.repaired, out.unverified) == (0, 1, [])


def test_an_unfound_quote_loses_its_marks_and_is_marked_unverified():
    out = quote_check.check('The CFO wrote "we will never use Stripe again" last year.', EVIDENCE)
    assert out.answer == "The CFO wrote we will never use Stripe again [unverified] last year."
    assert out.unverified == ["we will never use Stripe again"]
    assert out.fields("raw")["unverified_quotes"] == [
        {"text": "we will never use Stripe again", "reason": "not_in_evidence"}
    ]


def test_short_quoted_words_are_not_checked():
    out = quote_check.check('The project is called "Apollo" and "so-called" ones too.', EVIDENCE)
    assert out.quotes == 0 and out.answer == 'The project is called "Apollo" and "so-called" ones too.'
