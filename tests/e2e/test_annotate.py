"""`mesa-anyjev annotate` end to end: the real CLI on every sample card with
the fake model in process and through a real mesa-anyjevd serving the fake
model, the --out evaluation result, the run record, and each error exit."""
import json
import re
from pathlib import Path

import pytest

from conftest import dpb, run_cli

CARDS = sorted(p.stem for p in Path("data/cards").glob("*.md"))
SUMMARY = re.compile(
    r"^run (?P<id>[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}): "
    r"(?P<proposals>\d+) proposals, (?P<rejected>\d+) rejected, (?P<decisions>\d+) decisions, "
    r"(?P<prompts>\d+) prompts, missing_labels=(?P<missing>\d+), \d+\.\ds; "
    r"outcomes (?P<outcomes>\{.*\})$")
PROPOSAL = re.compile(r"^  (?P<outcome>\S+)\s+(?P<attr>[a-z]+\.\w+) = '(?P<value>[^']*)' "
                      r"\[(?P<unit>[A-Za-z]+:\w+)\] p\(fits\)=\d\.\d\d (?P<level>L[012]|raw)")
EVAL_KEYS = ["model", "family", "card", "run_id", "parse_ok", "avus", "n_decisions",
             "n_prompts", "missing_labels", "seconds", "outcomes", "skipped"]
AVU_KEYS = ["attribute", "value", "unit", "ontology_id", "curie", "iri", "label", "aspect",
            "column", "rationale", "p", "level", "outcome", "link_id"]


def annotate(card, *extra, candidates=True, timeout=120):
    args = ["annotate", "--card", f"data/cards/{card}.md", *extra]
    if candidates:
        args += ["--candidates", f"data/candidates/{card}.json"]
    return run_cli(*args, timeout=timeout)


def python_dict(text):
    # The outcomes dict is Python's repr: single-quoted keys, int values.
    return json.loads(text.replace("'", '"'))


def check_run(result, out_path, card, expect_avus=True):
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("planner audit: agree=[")
    summary = SUMMARY.match(lines[1])
    assert summary, lines[1]
    proposals = lines[2:]
    assert len(proposals) == int(summary["proposals"])
    for line in proposals:
        assert PROPOSAL.match(line), line
        assert line[2:11] in ("proposed ", "escalated")
    doc = json.loads(Path(out_path).read_text(encoding="utf-8"))
    assert list(doc) == EVAL_KEYS
    assert doc["model"] == "static" and doc["family"] == "mesa-anyjev"
    assert doc["card"] == card and doc["run_id"] == summary["id"] and doc["parse_ok"] is True
    assert doc["n_decisions"] == int(summary["decisions"])
    assert doc["n_prompts"] == int(summary["prompts"]) > 0
    assert doc["outcomes"] == python_dict(summary["outcomes"])
    assert sum(doc["outcomes"].values()) == doc["n_decisions"]
    assert "auto" not in doc["outcomes"]  # the shipped policy is proposed-only
    assert len(doc["avus"]) == len(proposals)
    assert len(proposals) > 0 or not expect_avus
    for avu in doc["avus"]:
        assert list(avu) == AVU_KEYS
        assert avu["level"] in ("raw", "L0", "L1", "L2") and avu["outcome"] == "proposed"
        assert avu["unit"] == avu["curie"]
        assert avu["attribute"].startswith(avu["ontology_id"] + ".")
    assert doc["skipped"] == []
    # JSON indent 1, as the reference writes it.
    assert Path(out_path).read_text(encoding="utf-8").startswith('{\n "model": "static",')
    return doc


@pytest.mark.parametrize("card", CARDS)
def test_fake_backend_on_every_sample_card(card, tmp_path):
    out = tmp_path / "nested" / "dir" / f"{card}.json"  # parents are created
    doc = check_run(annotate(card, "--backend", "fake", "--out", str(out)), out, card)
    # A second run on the same card proposes the same AVU triples: each run
    # starts from a clean running prior.
    out2 = tmp_path / "again.json"
    doc2 = check_run(annotate(card, "--backend", "fake", "--out", str(out2)), out2, card)
    triples = [(a["attribute"], a["value"], a["unit"]) for a in doc["avus"]]
    assert triples == [(a["attribute"], a["value"], a["unit"]) for a in doc2["avus"]]
    assert doc["run_id"] != doc2["run_id"]


def test_json_prints_the_whole_run_record():
    card = CARDS[0]
    result = annotate(card, "--backend", "fake", "--json")
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert run["status"] == "decided" and run["planner"] == "static"
    assert run["planner_fallback"] is False and run["backend_kind"] == "fake"
    assert len(run["decisions"]) == run["n_decisions"]
    assert [d["seq"] for d in run["decisions"]] == list(range(1, run["n_decisions"] + 1))
    for d in run["decisions"]:
        assert d["scope"] in ("dataset", "column", "site", "avu")
        assert d["outcome"] in ("proposed", "abstain", "rule", "rejected")
        if d["provider"] == "rule":
            assert d["level"] == "none" and d["answer"] == "No" and d["probs"] is None
        else:
            assert d["level"] == "L0" and d["threshold_propose"] is not None
    kept = {p["link_id"] for p in run["proposals"]}
    assert {l["link_id"] for l in run["links"] if l["write_status"] == "proposed"} == kept
    assert all(g["question_id"] == "term.fits" for g in run["groups"])


def test_without_candidates_the_term_stages_are_skipped(tmp_path):
    out = tmp_path / "out.json"
    result = annotate(CARDS[1], "--backend", "fake", "--out", str(out), candidates=False)
    assert result.returncode == 0, result.stderr
    assert "no --candidates file: term.fits, avu.value_kind and avu.keep skipped" in result.stderr
    doc = json.loads(out.read_text())
    assert doc["skipped"] == ["term.fits", "avu.value_kind", "avu.keep"]
    assert doc["avus"] == []
    assert SUMMARY.match(result.stdout.splitlines()[1])


def test_an_explicit_level_that_cannot_be_served_exits_1():
    result = annotate(CARDS[0], "--backend", "fake", "--level", "L2")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert "level L2 cannot be served" in result.stderr
    assert "dataset.ontology_applies" in result.stderr and "head" in result.stderr
    result = annotate(CARDS[0], "--backend", "fake", "--level", "L1")
    assert result.returncode == 1 and "L1 artifact" in result.stderr


def test_a_file_that_is_not_a_card_exits_2(tmp_path):
    bogus = tmp_path / "notes.md"
    bogus.write_text("# Notes\nnothing here\n")
    result = run_cli("annotate", "--backend", "fake", "--card", str(bogus))
    assert result.returncode == 2
    assert "not a dataset card: missing '# Dataset: <product> / <table>' header" in result.stderr
    bad = tmp_path / "candidates.json"
    bad.write_text('{"searches": [{"ontology_id": "pato", "query": "x", "hits": [{"curie": 1}]}]}')
    result = run_cli("annotate", "--backend", "fake", "--card", f"data/cards/{CARDS[0]}.md",
                     "--candidates", str(bad))
    assert result.returncode == 2 and "$.searches[0].hits[0]" in result.stderr


def test_against_the_daemon_levels_come_from_the_daemon(daemon, tmp_path):
    card = CARDS[0]
    args = ["--backend", "hf", "--set", f"client.address={daemon.address}",
            "--set", "backend.hf_model=fake"]
    # No artifacts in the daemon: auto serves everything at L0, and the
    # daemon's fake model proposes what the in-process one does.
    out = tmp_path / "hf.json"
    doc = check_run(annotate(card, *args, "--out", str(out)), out, card)
    assert {a["level"] for a in doc["avus"]} == {"L0"}
    local = tmp_path / "fake.json"
    fake = check_run(annotate(card, "--backend", "fake", "--out", str(local)), local, card)
    assert [(a["attribute"], a["value"], a["unit"]) for a in doc["avus"]] == \
        [(a["attribute"], a["value"], a["unit"]) for a in fake["avus"]]

    # A head for term.fits' exact key: auto now serves term.fits at L2 and
    # every other question (no artifact) at L0, as the daemon resolves them.
    lock = json.loads(Path("questions.lock.json").read_text(encoding="utf-8"))["questions"]
    fits = lock["term.fits"]
    texts = [f"candidate {i}: {'a good' if i % 2 == 0 else 'a poor'} match" for i in range(24)]
    reply = daemon.decisions.Fit(dpb.FitRequest(
        question=dpb.Question(id="term.fits", kind="noul", text=fits["text"].encode()),
        states=[dpb.State(text=t.encode()) for t in texts], labels=[i % 2 for i in range(24)],
        level="L2"), timeout=120)
    assert reply.question_key == fits["key"]
    out = tmp_path / "hf-l2.json"
    doc = check_run(annotate(card, *args, "--out", str(out)), out, card, expect_avus=False)
    assert all(a["level"] == "L2" for a in doc["avus"])
    result = annotate(card, *args, "--json")
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    levels = {}
    for d in run["decisions"]:
        levels.setdefault(d["question_id"], set()).add(d["level"])
    assert levels.pop("term.fits") == {"L2"}
    assert levels.pop("column.annotate") == {"L0", "none"}  # identifiers by rule
    assert all(v == {"L0"} for v in levels.values()), levels
    assert run["backend_kind"] == "hf" and run["canonical_model"] == "fake"

    # An explicit level the daemon cannot serve is a clean exit 1.
    result = annotate(card, *args, "--level", "L1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "level L1 cannot be served" in result.stderr and "L1 artifact" in result.stderr
