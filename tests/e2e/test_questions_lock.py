"""questions.lock.json against an independent Python oracle: the 17 questions
of the reference's set written out again here, keyed with the anyjev
0.2.0 package's Question.key, and the lock rebuilt with Python's json module
(json.dumps(indent=1, ensure_ascii=False) + "\\n"; lock_sha over
json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)). The
shipped file must equal it byte for byte; `mesa-anyjev questions --check`
must report sync, drift (reworded, removed, missing file) and exit codes as
the reference does."""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from anyjev import Question

CLI = os.environ.get("MESA_ANYJEV_CLI", "build/client/mesa-anyjev")
ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "questions.lock.json"

ASPECT_OPTIONS = [
    "taxon: the organisms observed, sampled or identified",
    "environment: the biome, habitat or environmental material at a site",
    "method: the sampling protocol, device, assay or processing step",
    "measurement: a measured quantity, quality or attribute of a thing",
    "unit: the unit of measure of a measured quantity",
    "data_type: the kind of record, identifier, dataset or information artifact",
    "location: a named place, region, plot or geographic feature",
    "other: none of the above or not an annotatable column",
]
ONTOLOGY_OPTIONS = [
    "ENVO: environments, biomes, habitats and environmental materials",
    "NCBITaxon: organisms and taxa at every rank",
    "PATO: qualities and attributes of things (size, sex, age, colour)",
    "UO: units of measurement (meter, degree Celsius, percent)",
    "OBI: investigations, assays, protocols, devices and specimens",
    "IAO: information artifacts, data items, identifiers and documents",
    "PCO: populations, communities and their collective properties",
    "BCO: biological collections, sampling and identification processes",
    "GAZ: named geographic places and administrative regions",
    "RO: relations between entities (part of, located in, participates in)",
    "TAXRANK: taxonomic ranks (species, genus, family, order)",
    "GENEPIO: sample collection, identification and metadata fields",
]
VALUE_KINDS = ["the term label", "the site code", "the column name",
               "the most frequent data value"]
CONTRIBUTOR_TYPES = (
    "ContactPerson DataCollector DataCurator DataManager Distributor Editor "
    "HostingInstitution Producer ProjectLeader ProjectManager ProjectMember "
    "RegistrationAgency RegistrationAuthority RelatedPerson Researcher "
    "ResearchGroup RightsHolder Sponsor Supervisor WorkPackageLeader Other").split()
RELATION_TYPES = (
    "IsCitedBy Cites IsSupplementTo IsSupplementedBy IsContinuedBy Continues "
    "IsDescribedBy Describes IsPartOf HasPart IsReferencedBy References "
    "IsDocumentedBy Documents IsCompiledBy Compiles IsVariantFormOf "
    "IsDerivedFrom IsSourceOf IsVersionOf HasVersion IsNewVersionOf "
    "IsObsoletedBy").split()
DATE_TYPES = ("Accepted Available Copyrighted Collected Created Issued "
              "Submitted Updated Valid Withdrawn").split()
DESCRIPTION_TYPES = ("Abstract Methods SeriesInformation TableOfContents "
                     "TechnicalInfo Other").split()

# (id, options or None for a noul, twin, wording), in the reference's order.
QUESTIONS = [
    ("column.annotate", None, None,
     "Should this column receive an ontology-grounded annotation? Answer No for "
     "record identifiers, internal codes, timestamps and bookkeeping fields."),
    ("column.aspect", ASPECT_OPTIONS, None,
     "Which aspect of the dataset does this column describe?"),
    ("column.ontology", ONTOLOGY_OPTIONS, "column.ontology_fits",
     "Which ontology should be searched for a term that annotates this column?"),
    ("column.ontology_fits", None, None,
     "Does the ontology described in the state contain the right kind of term "
     "for annotating this column?"),
    ("term.fits", None, None,
     "Is the candidate ontology term a correct annotation for the described "
     "column, site or dataset: the right concept at an appropriate "
     "specificity, not merely related?"),
    ("term.fits.chooser", None, None,
     "Is the candidate ontology term the correct term for the value the user "
     "wants to annotate with: the right concept at an appropriate "
     "specificity, not merely related?"),
    ("avu.value_kind", VALUE_KINDS, None, "What should the AVU value be?"),
    ("avu.keep", None, None,
     "Given the annotations already selected for this dataset, does this "
     "annotation add correct, non-redundant information worth keeping?"),
    ("dataset.ontology_applies", None, None,
     "Does this ontology apply to the dataset as a whole: would at least one of "
     "its terms correctly describe what the dataset measures, observes, "
     "samples or records?"),
    ("datacite.resource_type_fits", None, None,
     "Is the DataCite ResourceTypeGeneral value the right general type for "
     "this resource?"),
    ("datacite.contributor_type", CONTRIBUTOR_TYPES,
     "datacite.contributor_type_fits",
     "Which DataCite ContributorType best describes this contributor's role?"),
    ("datacite.contributor_type_fits", None, None,
     "Is the DataCite ContributorType value the right role for this "
     "contributor?"),
    ("datacite.relation_type", RELATION_TYPES, "datacite.relation_type_fits",
     "Which DataCite RelationType describes how this resource relates to the "
     "related identifier?"),
    ("datacite.relation_type_fits", None, None,
     "Is the DataCite RelationType value the right relation from this resource "
     "to the related identifier?"),
    ("datacite.date_type", DATE_TYPES, "datacite.date_type_fits",
     "Which DataCite DateType describes this date?"),
    ("datacite.date_type_fits", None, None,
     "Is the DataCite DateType value the right type for this date?"),
    ("datacite.description_type", DESCRIPTION_TYPES, None,
     "Which DataCite DescriptionType describes this description text?"),
]

PUBLISHED_KEYS = {
    "column.annotate": "8b8c7f14be35925d",
    "column.aspect": "982e2baa2c1c7762",
    "column.ontology": "2de03cc737b509ec",
    "column.ontology_fits": "f45eb7fe2fbefdb5",
    "term.fits": "0ccc8d141ffd30ff",
    "term.fits.chooser": "2675e6ebec9d41e9",
    "avu.value_kind": "18a3a5159c3a8492",
    "avu.keep": "926b627a33d6acb4",
}
PUBLISHED_8_SHA = "0190586d51b5d961dab9bf972e4683ebbf2356d6adf1911a5b2d63cee3ab01e2"
M5_SHA_PREFIX = "9f9370e0"


def anyjev_question(qid, options, text):
    if options is None:
        return Question.noul(text, name=qid)
    return Question.choice(text, options, name=qid)


def locked_questions(rows):
    out = {}
    for qid, options, twin, text in rows:
        q = anyjev_question(qid, options, text)
        out[qid] = {"kind": q.kind, "text": q.text, "options": list(q.options),
                    "key": q.key, "twin": twin}
    return out


def lock_sha(questions):
    canonical = json.dumps(questions, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sql(text):
    return "'" + text.replace("'", "''") + "'"


def hosted_sql(kind, text, options):
    if kind == "noul":
        return f"prompt_jev(state_text, {sql(text)}, noul := TRUE)"
    return (f"prompt_jev(state_text, {sql(text)}, {kind} := ["
            + ", ".join(sql(o) for o in options) + "])")


def lock_text(rows):
    questions = locked_questions(rows)
    doc = {"questions": questions,
           "hosted_sql": {qid: hosted_sql(e["kind"], e["text"], e["options"])
                          for qid, e in questions.items()},
           "lock_sha": lock_sha(questions)}
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def run(*args, cwd=None):
    return subprocess.run([os.path.abspath(CLI), "questions", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_published_keys_and_lock_shas():
    questions = locked_questions(QUESTIONS)
    for qid, key in PUBLISHED_KEYS.items():
        assert questions[qid]["key"] == key, qid
    assert lock_sha(locked_questions(QUESTIONS[:8])) == PUBLISHED_8_SHA
    assert lock_sha(questions).startswith(M5_SHA_PREFIX)


def test_shipped_lock_is_byte_identical_to_pythons():
    assert LOCK.read_bytes() == lock_text(QUESTIONS).encode("utf-8")


def test_every_key_matches_anyjev():
    shipped = json.loads(LOCK.read_text(encoding="utf-8"))
    assert list(shipped["questions"]) == [row[0] for row in QUESTIONS]
    for qid, entry in shipped["questions"].items():
        q = anyjev_question(qid, entry["options"] if entry["kind"] == "choice"
                            else None, entry["text"])
        assert entry["key"] == q.key, qid


def test_listing_matches_the_lock():
    result = run("--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    shipped = json.loads(LOCK.read_text(encoding="utf-8"))
    assert listing["lock_sha"] == shipped["lock_sha"]
    assert [(q["id"], q["key"], q["twin"], q["k"]) for q in listing["questions"]] == [
        (qid, e["key"], e["twin"], len(e["options"]))
        for qid, e in shipped["questions"].items()]


def test_check_in_sync(tmp_path):
    (tmp_path / "questions.lock.json").write_bytes(LOCK.read_bytes())
    result = run("--check", cwd=tmp_path)
    sha = json.loads(LOCK.read_text(encoding="utf-8"))["lock_sha"]
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"questions in sync; lock_sha {sha}\n"
    assert result.stderr == ""


def test_check_reports_drift(tmp_path):
    rows = [list(r) for r in QUESTIONS]
    # The lock as it would be had avu.keep been worded differently, with an
    # extra question that the code no longer defines and without term.fits.
    rows[7][3] = rows[7][3].replace("worth keeping", "worth storing")
    rows.append(["zzz.retired", None, None, "Is this retired?"])
    del rows[4]
    stale = tmp_path / "stale.lock.json"
    stale.write_text(lock_text([tuple(r) for r in rows]), encoding="utf-8")
    result = run("--check", "--lock", str(stale))
    assert result.returncode == 1
    assert result.stdout == ""
    old = anyjev_question("avu.keep", None, rows[6][3]).key
    assert result.stderr.splitlines() == [
        f"DRIFT: avu.keep: key {old} -> {PUBLISHED_KEYS['avu.keep']} "
        "(wording or options changed; labels and artifacts need migration, "
        "DESIGN D7)",
        "DRIFT: term.fits: new question, not in the lock",
        "DRIFT: zzz.retired: in the lock but no longer defined",
    ]


def test_check_missing_lock(tmp_path):
    result = run("--check", "--lock", str(tmp_path / "questions.lock.json"))
    assert result.returncode == 1
    assert result.stderr == ("DRIFT: questions.lock.json is missing; run "
                             "`mesa-anyjev questions --update-lock`\n")
    # Without --lock and without a lock in the working directory, the check
    # reads the source tree's lock, which is in sync.
    result = run("--check", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("questions in sync; lock_sha 9f9370e0")


def test_update_lock_writes_pythons_bytes(tmp_path):
    target = tmp_path / "questions.lock.json"
    target.write_text("{}", encoding="utf-8")
    result = run("--update-lock", cwd=tmp_path)
    sha = lock_sha(locked_questions(QUESTIONS))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"questions.lock.json updated; lock_sha {sha}\n"
    assert target.read_bytes() == lock_text(QUESTIONS).encode("utf-8")
    assert run("--check", cwd=tmp_path).returncode == 0


def test_broken_lock_is_an_error_not_drift(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    result = run("--check", "--lock", str(broken))
    assert result.returncode == 2
    assert "not valid JSON" in result.stderr


@pytest.mark.parametrize("args", [("--check", "--update-lock")])
def test_check_and_update_exclude_each_other(args):
    assert run(*args).returncode == 2
