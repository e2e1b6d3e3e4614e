"""Writes data/bench: synthetic dataset cards and a labels file (JSON lines,
docs/learning.md) whose truth the fake backend knows, with two planted
effects the bench must show on it (tests/e2e/test_learn_bench.py):

* column.aspect (K = 8). Each column's description names exactly one option
  head word (the fake's readout rewards the option whose head word occurs in
  the state). Taxon, environment and location columns name their own aspect.
  Abundance and mass columns are measurements but are described "per unit of
  effort" or "per unit area": the readout is drawn to "unit", a consistent
  confusion. The fake's hidden state carries which option won the readout, so
  an L2 head learns "unit-worded -> measurement" and L2 accuracy beats L0's.
  Bookkeeping columns (gold "other") name no head word: the raw readout then
  follows the position bias [0.6, 0.2, 0, -0.1] and flips when the options
  are reversed, while L0 cancels the bias, so L0 flip < raw flip.
* term.fits (noul). The fake says Yes when the candidate shares a word with
  the column. Most labels agree; per card two "merely related" candidates
  share a word but are No, and two synonyms share none but are Yes, so no
  level is perfect. Six cards have 12 + 12; a seventh has only three Yes, so
  its leave-one-card-out fold is skipped (insufficient_heldout_per_class).

Also: rows under a question's min_weight (consensus_negative on
column.aspect, 0.5 < 0.6) that fitting must ignore, and states labelled by two
sources where the heavier must win. Deterministic: run it to regenerate.
States avoid every option head word except the intended one (the fake's test
is a substring test on the lower-cased rendered state).
"""
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent

CARDS = [
    ("DP1.10003.001", "brd_countdata", "Breeding landbird point counts", "bird"),
    ("DP1.10022.001", "bet_sorting", "Ground beetles sampled from pitfall traps", "beetle"),
    ("DP1.10072.001", "mam_pertrapnight", "Small mammal box trapping", "mammal"),
    ("DP1.10058.001", "div_1m2data", "Plant presence and percent cover", "plant"),
    ("DP1.20120.001", "inv_fieldcollection", "Macroinvertebrate collection", "insect"),
    ("DP1.10043.001", "mos_trapping", "Mosquitoes sampled from CO2 traps", "mosquito"),
    ("DP1.10093.001", "tck_fielddata", "Ticks sampled using drag cloths", "tick"),
]
ASPECTS = ["taxon", "environment", "method", "measurement", "unit", "data_type",
           "location", "other"]


def columns(org):
    """(name, description, dtype, gold aspect) for one card's organism."""
    return [
        ("taxonID", f"Code of the {org} taxon observed", "string", "taxon"),
        ("scientificName", f"Name of the lowest taxon each {org} was keyed to", "string", "taxon"),
        ("taxonRank", "Rank of the taxon that could be determined", "string", "taxon"),
        ("familyName", f"Family of the {org} taxon", "string", "taxon"),
        ("nlcdClass", "Land cover environment class at the plot", "string", "environment"),
        ("habitatType", "Broad environment class of the plot", "string", "environment"),
        ("aquaticHabitat", "Water environment where the trap stood", "string", "environment"),
        ("individualCount", f"Number of {org}s per unit of sampling effort", "integer", "measurement"),
        ("dryMass", f"Dry mass of {org}s per unit area", "real", "measurement"),
        ("catchRate", f"{org.capitalize()} catch per unit of trap time", "real", "measurement"),
        ("coverPercent", "Share of ground covered per unit plot", "real", "measurement"),
        ("plotID", "Plot location code", "string", "location"),
        ("decimalLatitude", "Latitude of the sampling location", "real", "location"),
        ("namedLocation", "Named location of the trap", "string", "location"),
        ("elevation", "Height above sea level of the location", "real", "location"),
        ("uid", "Record key in the database", "string", "other"),
        ("remarks", "Free text notes by the technician", "string", "other"),
        ("recordedBy", "Person who entered the record", "string", "other"),
        ("dataQF", "Quality flag set during review", "string", "other"),
    ]


def card_text(product, table, title, org):
    lines = [
        f"# Dataset: {product} / {table}",
        "",
        f"Product: {product} - {title}. Synthetic card for the mesa-anyjev bench; "
        f"{org}s are counted and keyed by technicians.",
        "Source: synthetic card written for mesa-anyjev's bench (data/bench); values invented",
        "Sites: OSBS (Ordway-Swisher Biological Station NEON, FL, domain D03 Southeast; "
        "evergreen forest).",
        "Rows: 1200; months covered: 2019-04 to 2021-10 (24 distinct months).",
        "",
        "## Columns (name | NEON description | type | unit | profile)",
    ]
    for name, desc, dtype, _ in columns(org):
        lines.append(f"- {name} | {desc} | {dtype} | - | 40 distinct")
    return "\n".join(lines) + "\n"


def card_state(product, table, title):
    return {"dataset": f"{product} / {table}", "product_title": title}


def column_dict(name, desc, dtype):
    return {"name": name, "description": desc, "dtype": dtype}


def term_rows(card, cstate, org, n_yes, n_no):
    """term.fits rows: candidates against the card's taxon and mass columns."""
    cols = {c[0]: c for c in columns(org)}
    pairs = []
    # Agreeing Yes: the candidate shares a word with the column.
    yes = [("taxonID", f"{org} taxon {i}", f"NCBITaxon:{7000 + i}") for i in range(5)] + \
          [("individualCount", f"{org} sampling effort {i}", f"OBI:{8000 + i}") for i in range(5)]
    # Agreeing No: no shared word.
    no = [("taxonID", f"freshwater sponge {i}", f"NCBITaxon:{9000 + i}") for i in range(5)] + \
         [("individualCount", f"leaf wetness {i}", f"PATO:{9500 + i}") for i in range(5)]
    # Merely related (shares a word, but No) and synonyms (no shared word, but Yes).
    related = [("dryMass", "dry body shape", "PATO:0000052"),
               ("catchRate", f"{org} trap design", "OBI:0000968")]
    synonyms = [("taxonID", "Carabidae", "NCBITaxon:41073"),
                ("dryMass", "biomass", "PATO:0000125")]
    for col, lab, curie in yes + synonyms:
        pairs.append((col, lab, curie, 0))
    for col, lab, curie in no + related:
        pairs.append((col, lab, curie, 1))
    out = []
    n_taken = {0: 0, 1: 0}
    for col, lab, curie, gold in pairs:
        if n_taken[gold] >= (n_yes if gold == 0 else n_no):
            continue
        n_taken[gold] += 1
        name, desc, dtype, aspect = cols[col]
        state = {"card": cstate, "scope": "column",
                 "column": column_dict(name, desc, dtype), "aspect": aspect,
                 "candidate": {"label": lab, "curie": curie}, "n_candidates": 0}
        source = "curator" if (lab, curie) in {(r[1], r[2]) for r in related + synonyms} \
            else ("consensus_majority" if gold == 0 else "consensus_negative")
        out.append({"question_id": "term.fits", "state": state, "label": gold,
                    "source": source, "card": card,
                    "source_ref": "data/bench/make_bench.py"})
    return out


STOP = {"label", "curie", "ontology", "id", "description", "synonyms", "has", "children",
        "true", "false"}


def fake_says_yes(text):
    """The fake's noul rule (common/fake_backend.h) on a rendered state."""
    cand = re.search(r'"candidate":\s*\{(.*?)\}', text, re.S)
    target = re.search(r'"column":\s*\{(.*?)\}', text, re.S)
    words = set(re.findall(r"[a-z0-9]+", cand.group(1))) - STOP
    return bool(words & set(re.findall(r"[a-z0-9]+", target.group(1))))


def main():
    (HERE / "cards").mkdir(exist_ok=True)
    rows = []
    for i, (product, table, title, org) in enumerate(CARDS):
        card = f"{product}.{table}"
        (HERE / "cards" / f"{card}.md").write_text(card_text(product, table, title, org))
        cstate = card_state(product, table, title)
        small = i == len(CARDS) - 1
        cols = columns(org)[::4] if small else columns(org)
        for name, desc, dtype, aspect in cols:
            state = {"card": cstate, "column": column_dict(name, desc, dtype)}
            rows.append({"question_id": "column.aspect", "state": state,
                         "label": ASPECTS.index(aspect), "source": "consensus_majority",
                         "card": card, "source_ref": "data/bench/make_bench.py"})
        if not small:
            # A weaker opposite vote (below column.aspect's min_weight 0.6),
            # and a curator confirming a consensus label at a higher weight.
            name, desc, dtype, aspect = cols[0]
            state = {"card": cstate, "column": column_dict(name, desc, dtype)}
            rows.append({"question_id": "column.aspect", "state": state,
                         "label": ASPECTS.index("other"), "source": "consensus_negative",
                         "card": card})
            rows.append({"question_id": "column.aspect", "state": state,
                         "label": ASPECTS.index(aspect), "source": "curator", "card": card})
        rows += term_rows(card, cstate, org, 3 if small else 12, 0 if small else 12)
    for row in rows:
        text = json.dumps(row["state"], indent=2, ensure_ascii=False).lower()
        if row["question_id"] == "column.aspect":
            hits = [h for h in ASPECTS if h in text]
            want = [] if row["label"] == ASPECTS.index("other") else \
                ["unit" if ASPECTS[row["label"]] == "measurement" else ASPECTS[row["label"]]]
            assert hits == want or row["source"] == "consensus_negative", (hits, text)
        else:
            assert fake_says_yes(text) == (row["label"] == 0) or row["source"] == "curator"
    with open(HERE / "labels.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} label rows over {len(CARDS)} cards")


if __name__ == "__main__":
    main()
