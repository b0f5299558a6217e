"""How the console's neighbourhood graph breaks a label into lines (`web.svg.label_lines`): whole
when it fits the line budget, cut with "…" only past it. No browser: the function's output."""

from __future__ import annotations

from fleetmem.web.svg import label_lines


def test_a_label_breaks_after_its_separators_and_stays_whole() -> None:
    slug = "projects/the-quarterly-planning-programme"
    lines = label_lines(slug, width=20, most=4)
    assert "".join(lines) == slug and all(len(line) <= 20 for line in lines)
    assert lines == ["projects/the-", "quarterly-planning-", "programme"]


def test_an_unbroken_run_is_cut_and_only_a_label_past_the_budget_ends_with_an_ellipsis() -> None:
    assert label_lines("x" * 45, width=20, most=4) == ["x" * 20, "x" * 20, "x" * 5]
    cut = label_lines("y" * 100, width=20, most=3)
    assert cut == ["y" * 20, "y" * 20, "y" * 19 + "…"]
    assert label_lines("", width=20, most=3) == [""]
