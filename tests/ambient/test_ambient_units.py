"""The zero-LLM pieces of the hooks: candidate names from a transcript tail, and the capped state files."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from fleetmem.hooks import claude_code
from fleetmem.hooks.state import StateFile
from fleetmem.hooks.transcript import candidates, read_tail_texts


def test_candidates_are_slugs_names_and_kebab_names_best_first() -> None:
    texts = [
        "Please ask Alice Example about [[companies/acme-example]] and people/bob-example.",
        "The API said JSON was fine. Then Alice Example met Carol Ng about the read-only flag.",
    ]
    found = candidates(texts)
    assert found[:3] == ["companies/acme-example", "people/bob-example", "Alice Example"]
    assert "Carol Ng" in found and "read-only" in found
    for noise in ("Please", "The", "API", "JSON", "Then"):
        assert noise not in found
    assert found.index("Alice Example") < found.index("Carol Ng")  # mentioned twice


def test_names_in_any_cased_script_are_candidates_whole() -> None:
    texts = ["Émile Durand met Łukasz Nowak and Тимур Ахметов in Zürich; Ελένη Παππά joined later."]
    found = candidates(texts)
    for name in ("Émile Durand", "Łukasz Nowak", "Тимур Ахметов", "Zürich", "Ελένη Παππά"):
        assert name in found, name
    # Not cut to the part written in ASCII capitals, and all-capital words are still no names.
    assert "Durand" not in found and "Nowak" not in found
    assert candidates(["ÉCOLE and ÜBER are shouted."]) == []


def test_candidates_skip_paths_urls_and_cap_the_lookups() -> None:
    texts = ["see src/app/main.py and https://example.com/people/x and ./docs/a-b"]
    assert candidates(texts) == []
    many = [", ".join(f"Person{i:02d} Name" for i in range(40))]
    assert len(candidates(many, limit=24)) == 24


def test_only_conversation_text_from_the_tail_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    records = [
        {"type": "user", "message": {"role": "user", "content": "Early Person said hello"}},
        *({"type": "user", "message": {"role": "user", "content": "x" * 500}} for _ in range(10)),
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Late Person replied"},
                    {"type": "tool_use", "name": "Bash", "input": {"command": "echo Tool Person"}},
                    {"type": "thinking", "thinking": "Thinking Person"},
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "Result Person"}]}},
        {"type": "summary", "summary": "Summary Person was discussed"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\nnot json\n")
    texts = read_tail_texts(path, max_bytes=1500)
    joined = " ".join(texts)
    assert "Late Person" in joined and "Summary Person" in joined
    for absent in ("Early Person", "Tool Person", "Thinking Person", "Result Person"):
        assert absent not in joined


def test_json_nested_too_deep_to_parse_is_read_as_damaged_not_raised(tmp_path: Path) -> None:
    """Regression: hook input, a transcript line or the state file nested deeper than the JSON
    parser's recursion limit raised RecursionError (not a JSONDecodeError) out of the hook, which
    must never raise."""
    import argparse

    deep = "[" * 5000 + "]" * 5000
    assert claude_code.run_hook(argparse.Namespace(event=None), deep) is None
    transcript = tmp_path / "t.jsonl"
    said = {"type": "user", "message": {"role": "user", "content": "Ada Lovelace"}}
    transcript.write_text(deep + "\n" + json.dumps(said) + "\n")
    assert "Ada Lovelace" in " ".join(read_tail_texts(transcript, max_bytes=100_000))
    (tmp_path / "s.json").write_text(deep)
    assert StateFile("s.json", max_entries=3, directory=tmp_path).get("k") is None


def test_the_state_file_is_private_and_evicts_the_oldest_entries(tmp_path: Path) -> None:
    sf = StateFile("s.json", max_entries=3, directory=tmp_path)
    for i in range(5):
        sf.update(f"k{i}", lambda old, i=i: {"n": i})
    sf.update("k2", lambda old: {"n": (old or {})["n"] + 10})  # touching k2 makes it the newest
    doc = json.loads((tmp_path / "s.json").read_text())["entries"]
    assert list(doc) == ["k3", "k4", "k2"]
    assert doc["k2"]["n"] == 12
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == 0o600


def test_a_damaged_state_file_starts_over(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{broken")
    sf = StateFile("s.json", max_entries=3, directory=tmp_path)
    assert sf.get("k") is None
    sf.update("k", lambda old: {"v": 1})
    assert sf.get("k")["v"] == 1  # type: ignore[index]


def test_a_session_banks_at_most_eight_entities_newest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMEM_STATE_DIR", str(tmp_path))
    claude_code.bank_entities("s", [f"people/p{i}" for i in range(6)])
    banked = claude_code.bank_entities("s", ["people/new1", "people/p0", "people/new2"])
    assert (
        banked
        == ["people/new1", "people/p0", "people/new2", "people/p1", "people/p2", "people/p3", "people/p4", "people/p5"][
            : claude_code.BANK_CAP
        ]
    )
    assert len(claude_code.banked_entities("s")) == claude_code.BANK_CAP == 8


def test_the_bank_keeps_at_most_200_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMEM_STATE_DIR", str(tmp_path))
    for i in range(claude_code.MAX_SESSIONS + 5):
        claude_code.bank_entities(f"session-{i}", ["people/x"])
    doc = json.loads((tmp_path / claude_code.BANK_FILE).read_text())["entries"]
    assert len(doc) == claude_code.MAX_SESSIONS == 200
    assert "session-0" not in doc and f"session-{claude_code.MAX_SESSIONS + 4}" in doc


def test_project_config_is_found_upwards_and_never_takes_a_token(tmp_path: Path) -> None:
    (tmp_path / ".fleetmem.json").write_text(
        json.dumps({"entities": "a, b ,", "budget_tokens": 900, "token": "fm_secret", "token_file": "tok"})
    )
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    cfg = claude_code.ProjectConfig.find(deep)
    assert cfg.entities == ["a", "b"] and cfg.budget_tokens == 900
    assert cfg.token_file == str(tmp_path / "tok")
    assert any("token" in p for p in cfg.problems)
    assert "fm_secret" not in json.dumps(cfg.__dict__, default=str)


def test_compaction_puts_banked_entities_first_and_caps_the_pack_at_eight() -> None:
    configured = ["projects/a", "people/b"]
    banked = [f"people/k{i}" for i in range(8)]
    assert claude_code._ordered_entities(configured, banked, compact=True)[:2] == ["people/k0", "people/k1"]
    assert claude_code._ordered_entities(configured, banked, compact=False)[:2] == configured
    assert len(claude_code._ordered_entities(configured, banked, compact=True)) == 8
