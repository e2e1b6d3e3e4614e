"""client/cards against a Python oracle written independently from the
reference's rules (docs/annotate.md; AVU construction and static rules): card parsing with Python's `re`,
str.strip/splitlines/lower, the states with their key order and cuts,
state_sha256, split_camel, the query rules and the AVU functions. The C++ side
runs through tests/tools/cards_tool."""
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

TOOL = os.environ.get("MESA_ANYJEV_CARDS_TOOL")
DATA = Path(os.environ.get("MESA_ANYJEV_DATA", Path(__file__).parents[2] / "data"))
pytestmark = pytest.mark.skipif(not TOOL, reason="MESA_ANYJEV_CARDS_TOOL not set")

# ---- the oracle: card parsing ---------------------------------------------
HEADER = re.compile(r"^#\s*Dataset:\s*(\S+)\s*/\s*(\S+)\s*$")
PRODUCT = re.compile(r"^Product:\s*(\S+)\s*[—-]+\s*([^.]+)\.?\s*(.*)$")
SITE = re.compile(r"([A-Z]{4})\s*\(([^,]+),\s*([^,]+),\s*domain\s+(D\d{2})\s*([^;]*);\s*([^)]*)\)")
ROWS = re.compile(r"^Rows:\s*(\d+);\s*months covered:\s*(\S+)\s+to\s+(\S+)")
COLUMN = re.compile(r"^-\s*([^|]+)\|([^|]*)\|([^|]*)\|([^|]*)\|(.*)$")


def parse_card(text):
    card = dict(product_code="", table="", product_title="", product_description="",
                source="", sites=[], rows=0, months_from="", months_to="", columns=[])
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := HEADER.match(line):
            card["product_code"], card["table"] = m.group(1), m.group(2)
        elif m := PRODUCT.match(line):
            card["product_title"] = m.group(2).strip()
            card["product_description"] = m.group(3).strip()
        elif line.startswith("Source:"):
            card["source"] = line[len("Source:"):].strip()
        elif line.startswith("Sites:"):
            for m in SITE.finditer(line):
                code, name, state, domain, dname, habitat = (g.strip() for g in m.groups())
                card["sites"].append(dict(code=code, name=name, state=state, domain=domain,
                                          domain_name=dname, habitat=habitat))
        elif m := ROWS.match(line):
            card["rows"] = int(m.group(1))
            card["months_from"], card["months_to"] = m.group(2), m.group(3)
        elif m := COLUMN.match(line):
            name, desc, dtype, unit, profile = (g.strip() for g in m.groups())
            card["columns"].append(dict(name=name, description=desc, dtype=dtype,
                                        unit="" if unit == "-" else unit, profile=profile))
    if not card["product_code"]:
        raise ValueError("not a dataset card: missing '# Dataset: <product> / <table>' header")
    card["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    card["name"] = f"{card['product_code']}.{card['table']}"
    return card


def is_identifier(col):
    n = col["name"].lower()
    if n in {"uid", "remarks", "publicationdate", "release"}:
        return True
    if n != "taxonid" and n.endswith(("id", "uid", "code", "identifiedby", "recordedby", "measuredby")):
        return True
    if col["dtype"].lower() in {"datetime", "date"}:
        return True
    p = col["profile"].lower()
    return p.startswith("all blank") or "not profiled" in p

# ---- states -----------------------------------------------------------------
REGISTRY = {  # id -> (option text, aspects)
    "envo": ("ENVO: environments, biomes, habitats and environmental materials", ["environment", "location", "measurement"]),
    "pato": ("PATO: qualities and attributes of things (size, sex, age, colour)", ["measurement"]),
    "uo": ("UO: units of measurement (meter, degree Celsius, percent)", ["unit"]),
    "obi": ("OBI: investigations, assays, protocols, devices and specimens", ["method", "measurement", "data_type"]),
}


def card_header(c):
    return {"dataset": c["name"], "product_title": c["product_title"],
            "product_description": c["product_description"],
            "sites": [{"code": s["code"], "name": s["name"], "domain": s["domain"],
                       "habitat": s["habitat"]} for s in c["sites"]],
            "rows": c["rows"], "months": f"{c['months_from']} to {c['months_to']}",
            "columns": [col["name"] for col in c["columns"]]}


def column_dict(col):
    return {"name": col["name"], "description": col["description"], "dtype": col["dtype"],
            "unit": col["unit"], "profile": col["profile"][:300]}


def as_state(cand):
    return {"label": cand["label"], "curie": cand["curie"], "ontology_id": cand["ontology_id"],
            "description": cand.get("description", "")[:300],
            "synonyms": [str(s) for s in cand.get("synonyms", [])[:5]],
            "has_children": bool(cand.get("has_children", False))}


def build_state(c, op):
    col = next((x for x in c["columns"] if x["name"] == op.get("column")), None)
    b = op["builder"]
    if b == "card_header":
        return card_header(c)
    if b == "column_state":
        s = {"card": card_header(c), "column": column_dict(col)}
        if "aspect" in op:
            s["aspect"] = op["aspect"]
        return s
    if b == "ontology_state":
        text, aspects = REGISTRY[op["ontology_id"]]
        return {"card": card_header(c), "column": column_dict(col), "aspect": op["aspect"],
                "ontology": {"id": op["ontology_id"], "description": text, "aspects": sorted(aspects)}}
    if b == "candidate_state":
        s = {"card": card_header(c), "scope": op["scope"]}
        if op["scope"] == "column":
            s["column"] = column_dict(col)
        elif op["scope"] == "site":
            site = next(x for x in c["sites"] if x["code"] == op["site"])
            s["site"] = {k: site[k] for k in ("code", "name", "domain", "habitat")}
        s.update(aspect=op["aspect"], candidate=as_state(op["candidate"]),
                 n_candidates=op["n_candidates"])
        return s
    if b == "chooser_state":
        cand = as_state(op["candidate"])
        return {"ontology_id": op["ontology_id"], "value": op["value"],
                "candidate": {"label": cand["label"], "curie": cand["curie"],
                              "description": cand["description"][:300]},
                "n_candidates": op["n_candidates"]}
    if b == "value_kind_state":
        cand = as_state(op["candidate"])
        return {"card": card_header(c), "column": column_dict(col), "aspect": op["aspect"],
                "term": {"label": cand["label"], "curie": cand["curie"]}}
    if b == "avu_state":
        cand = as_state(op["candidate"])
        return {"card": card_header(c), "avu": op["avu"],
                "term": {"label": cand["label"], "description": cand["description"][:300]},
                "scope": op["scope"], "target": op["target"], "siblings": op["siblings"][:25]}
    if b == "dataset_ontology_state":
        return {"card": card_header(c), "ontology": REGISTRY[op["ontology_id"]][0]}
    if b == "datacite_state":
        s = {"vocabulary": op["vocabulary"], "text": op["text"][:1200]}
        if op.get("with_card"):
            s["card"] = card_header(c)
        if "value" in op:
            s["value"] = op["value"]
        return s
    raise AssertionError(b)


def canonical(state):
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

# ---- 7.5 AVU construction and static rules ---------------------------------
def label_to_snake(label):
    return re.sub(r"\s+", "_", re.sub(r"[^a-zA-Z0-9\s]", "", label).strip()).lower()


def top_profile_value(profile):
    if "top:" not in profile:
        return None
    first = profile.split("top:", 1)[1].split(",", 1)[0].strip()
    if " (" in first:
        first = first.rsplit(" (", 1)[0]
    return first or None


def split_camel(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    s = re.sub(r"([A-Z])([A-Z][a-z])", r"\1 \2", s)
    return " ".join(w.lower() for w in s.split())


def queries_for_column(col):
    out = []
    nq = split_camel(col["name"]).replace("_", " ")
    if nq:
        out.append(nq)
    dq = re.split(r"[;.(]", col["description"], maxsplit=1)[0].strip()[:80]
    if dq and dq.lower() != nq.lower():
        out.append(dq)
    if col["unit"]:
        out.append(col["unit"])
    return out[:3]


HABITAT_QUERIES = {
    "deciduous": ["temperate deciduous forest biome", "temperate broadleaf forest biome"],
    "mixed forest": ["temperate mixed forest biome", "mixed forest biome"],
    "desert": ["desert biome", "xeric shrubland biome"],
    "shrubland": ["shrubland biome"],
    "grassland": ["grassland biome", "desert grassland"],
    "wetland": ["wetland biome"],
    "tundra": ["tundra biome"],
    "coniferous": ["temperate coniferous forest biome"],
}
PRODUCT_TAXA = {"landbird": ["Aves"], "bird": ["Aves"], "beetle": ["Carabidae", "Coleoptera"],
                "mosquito": ["Culicidae"], "tick": ["Ixodida"],
                "small mammal": ["Mammalia", "Rodentia"], "plant": ["Viridiplantae"],
                "fish": ["Actinopterygii"]}


def keyed(table, text):
    out = []
    for key, qs in table.items():
        if key in text:
            out += [q for q in qs if q not in out]
    return out[:3]


def habitat_queries(site):
    h = site["habitat"].lower()
    return keyed(HABITAT_QUERIES, h) or [f"{h} biome"]

# ---- harness ---------------------------------------------------------------
def run_tool(request):
    proc = subprocess.run([TOOL], input=json.dumps(request), capture_output=True,
                          text=True, check=True, timeout=60)
    return json.loads(proc.stdout)["results"]


def sample_cards():
    return sorted((DATA / "cards").glob("*.md"))


EDGE_CARD = (
    "\u2003# Dataset:  DP9.00001.001 /caf\u00e9_tbl \u00a0\n"
    "Product: DP9.00001.001 \u2014\u2014 \u00c9tudes des \u03a3\u039f\u03a3 birds. Ca\u0300fe\u0301 \u2014 r\u00e9sum\u00e9; \u201cquoted\u201d \\ back\u00a0\n"
    "\x0bSource:\tsomewhere \u2028 Sites: ABCD (Nom \u00e9, ST, domain D07 Appalachians & Cumberland; mixed forest) and WXYZ (N2,S2,domain D\u0663\u0664 Far; wetland)\n"
    "Rows: \u0661\u0662; months covered: 2020-01\u3000to\u30002021-12 (2 distinct months)\n"
    "- t\u00e9mp\u00e9ratureMax | Maximum of \u00b0C (daily) | real | degreeCelsius | "
    + "\u00e9" * 310 + "\n"
    "-  Remar\u212As  | x | string | - | All Blank\r\n"
    "- notes | | string | - | n; Not Profiled | more\x1c"
    "- \u0130D | id | string | - | 1\x85"
    "- HTTPServerID2x | Http server | Date | - | top: \u00e9t\u00e9 (3), b (2)\n"
)


@pytest.mark.parametrize("path", sample_cards(), ids=lambda p: p.stem)
def test_sample_cards_match_the_oracle(path):
    text = path.read_text()
    check_card(text)


def test_edge_card_matches_the_oracle():
    check_card(EDGE_CARD)


def check_card(text):
    card = parse_card(text)
    ops = [{"op": "parse"}, {"op": "is_identifier"}, {"op": "queries"},
           {"op": "habitat_queries"}, {"op": "taxon_queries"}]
    state_ops = [{"builder": "card_header"}, {"builder": "datacite_state", "vocabulary": "DateType",
                  "text": "\u00e9" * 1300, "value": "Collected", "with_card": True},
                 {"builder": "datacite_state", "vocabulary": "RelationType", "text": "t"}]
    cand = {"label": "distance \u00e9", "curie": "PATO:0000040", "ontology_id": "pato",
            "description": "\u20ac" * 305, "synonyms": ["a", "b", "\u00e9", "d", "e", "f"],
            "has_children": True}
    avu = {"attribute": "pato.distance", "value": "1", "unit": "PATO:0000040"}
    for col in card["columns"]:
        n = col["name"]
        state_ops += [
            {"builder": "column_state", "column": n},
            {"builder": "column_state", "column": n, "aspect": "measurement"},
            {"builder": "ontology_state", "column": n, "aspect": "measurement", "ontology_id": "envo"},
            {"builder": "candidate_state", "scope": "column", "column": n, "aspect": "measurement",
             "candidate": cand, "n_candidates": 3},
            {"builder": "value_kind_state", "column": n, "aspect": "unit", "candidate": cand},
            {"builder": "avu_state", "avu": avu, "candidate": cand, "scope": "column", "target": n,
             "siblings": [avu] * 27},
        ]
    for site in card["sites"]:
        state_ops.append({"builder": "candidate_state", "scope": "site", "site": site["code"],
                          "aspect": "environment", "candidate": cand, "n_candidates": 1})
    state_ops += [{"builder": "candidate_state", "scope": "dataset", "aspect": "taxon",
                   "candidate": cand, "n_candidates": 2},
                  {"builder": "chooser_state", "ontology_id": "pato", "value": "v",
                   "candidate": cand, "n_candidates": 2},
                  {"builder": "dataset_ontology_state", "ontology_id": "obi"}]
    results = run_tool({"card_text": text, "ops": ops + [dict(op="state", **s) for s in state_ops]})
    parsed, ident, queries, habitats, taxa = results[:5]
    assert parsed == card
    assert ident == {c["name"]: is_identifier(c) for c in card["columns"]}
    assert queries == {c["name"]: queries_for_column(c) for c in card["columns"]}
    assert habitats == {s["code"]: habitat_queries(s) for s in card["sites"]}
    assert taxa == keyed(PRODUCT_TAXA, (card["product_title"] + " " + card["product_description"]).lower())
    for op, got in zip(state_ops, results[5:]):
        want = build_state(card, op)
        assert "error" not in got, (op, got)
        assert list(got["state"]) == list(want), op  # key order
        assert got["state"] == want, op
        assert got["canonical"] == canonical(want)
        assert got["sha256"] == hashlib.sha256(canonical(want).encode()).hexdigest()
        assert got["render"] == json.dumps(want, indent=2, ensure_ascii=False)


def test_the_edge_card_exercises_what_it_should():
    card = parse_card(EDGE_CARD)
    assert card["rows"] == 12 and card["name"] == "DP9.00001.001.caf\u00e9_tbl"
    # `re`'s \d takes Arabic-Indic digits; U+2028 ends the Source line.
    assert [s["domain"] for s in card["sites"]] == ["D07", "D\u0663\u0664"]
    assert card["source"] == "somewhere"
    assert len(card["columns"][0]["profile"]) == 310
    assert len(card["columns"]) == 5  # \x1c and \x85 end lines
    assert [is_identifier(c) for c in card["columns"]] == [False, True, True, False, True]


def test_not_a_card():
    results = run_tool({"card_text": "Product: X \u2014 Y.\n", "ops": [{"op": "parse"}]})
    with pytest.raises(ValueError) as raised:
        parse_card("Product: X \u2014 Y.\n")
    assert results[0]["error"] == {"code": "INVALID_ARGUMENT", "message": str(raised.value)}


STRINGS = ["observerDistance", "siteID", "identificationHistoryID", "HTTPServer2Go", "pH",
           "dbh_cm", "a1B", "ABCd", "aBCd", "x", "", "  spaced  Out ", "\u00e9t\u00e9Max",
           "degree Celsius", "pH value", "has number of", "3-D extent (quality)", "\u00e9\u00e9",
           "caf\u00e9\u00a0au lait", "\x1cx\x1fy\u3000z", "\u03a3\u039f\u03a3 \u0130x",
           "2 distinct; top: SRER (9416), HARV (6068)", "top: a (b) (3)", "top: , x", "all blank",
           "top:", "top: x(1)", "a\r\nb\rc\x0bd\u2028e\x85f\n"]


def test_string_functions_match_the_oracle():
    funcs = {"split_camel": split_camel, "label_to_snake": label_to_snake,
             "top_profile_value": top_profile_value, "py_lower": str.lower,
             "py_strip": str.strip, "py_splitlines": str.splitlines}
    ops = [{"op": f, "arg": s} for f in funcs for s in STRINGS]
    for op, got in zip(ops, run_tool({"ops": ops})):
        assert got == funcs[op["op"]](op["arg"]), op


def test_avu_functions_match_the_oracle():
    ops, want = [], []
    for label, curie, ont, value in [("degree Celsius", "UO:0000027", "uo", " 21 "),
                                     ("Aves", "NCBITaxon:8782", "NCBITaxon", "Aves"),
                                     ("--", "PATO:1", "pato", "x"), ("mass", "PATO:2", "pato", " ")]:
        ops.append({"op": "build_avu", "candidate": {"label": label, "curie": curie,
                                                     "ontology_id": ont}, "value": value})
        key = label_to_snake(label)
        if not key:
            want.append({"error": {"code": "INVALID_ARGUMENT",
                                   "message": f"label '{label}' does not snake-case to a key"}})
        elif not value.strip():
            want.append({"error": {"code": "INVALID_ARGUMENT",
                                   "message": f"could not build an AVU for {curie} with value '{value}'"}})
        else:
            want.append({"attribute": f"{ont.lower()}.{key}", "value": value.strip(), "unit": curie})
    for aspect in ["taxon", "environment", "location", "unit", "measurement", "other"]:
        for scope in ["column", "site", "dataset", "avu"]:
            ops.append({"op": "pre_rule_value_kind", "aspect": aspect, "scope": scope})
            if scope == "site" or (aspect in {"environment", "location"} and scope != "column"):
                want.append("the site code")
            elif aspect == "unit" or scope == "dataset":
                want.append("the term label")
            else:
                want.append(None)
    assert run_tool({"ops": ops}) == want


UNIT_TABLE = [("meter", "meter", "UO:0000008"), ("centimeter", "centimeter", "UO:0000015"),
              ("millimeter", "millimeter", "UO:0000016"), ("kilometer", "kilometer", "UO:0000009"),
              ("gram", "gram", "UO:0000021"), ("kilogram", "kilogram", "UO:0000009"),
              ("milligram", "milligram", "UO:0000022"), ("second", "second", "UO:0000010"),
              ("minute", "minute", "UO:0000031"), ("hour", "hour", "UO:0000032"),
              ("day", "day", "UO:0000033"), ("celsius", "degree Celsius", "UO:0000027"),
              ("percent", "percent", "UO:0000187"),
              ("kilometer per hour", "kilometer per hour", "UO:0010008"),
              ("number", "count unit", "UO:0000189"), ("count", "count unit", "UO:0000189"),
              ("degree", "degree", "UO:0000185"), ("milliliter", "milliliter", "UO:0000098"),
              ("liter", "liter", "UO:0000099")]


def unit_candidate(unit):
    name = unit.strip().lower()
    if not name:
        return None
    for key, label, curie in UNIT_TABLE:
        if name == key or name.endswith(key) or (key == "celsius" and "celsius" in name):
            return label, curie
    return None


def test_unit_table_matches_the_oracle():
    units = [k for k, _, _ in UNIT_TABLE] + ["degreeCelsius", "Meter ", "pH", "", "siemensPerCentimeter",
                                            "microgramsPerLiter", "perMinute"]
    got = run_tool({"ops": [{"op": "unit_candidate", "arg": u} for u in units]})
    for unit, result in zip(units, got):
        want = unit_candidate(unit)
        assert (None if result is None else (result["label"], result["curie"])) == want, unit
