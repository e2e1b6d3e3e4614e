"""Labels, leave-one-card-out fitting and the bench through the real CLI
(docs/learning.md), on the synthetic task set of
data/bench whose planted effects the fake backend must show: on
column.aspect, L0 flips less than raw under option reversal, and an L2 head
is more accurate than L0 (data/bench/make_bench.py says why). Also: ingest
refuses a file with any bad row and stores nothing, ingest is idempotent,
fit refuses with the reference's statuses, a bench L2 cell equals the fit
report of the same labels (one fitting path), and the hf backend fits through the
daemon's dry-run Fit without touching what it serves."""
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import dpb, metric, run_cli

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "data" / "bench" / "labels.jsonl"
DATE = "2026-01-02"


def store_args(store):
    # Labels and the local bundle store live in the test's directory.
    return ["--set", f"labels.dir={store}", "--set", f"artifacts.dir={store}/bundles"]


def ingest(store, path=LABELS):
    return run_cli("learn", "ingest", "--labels", str(path), "--json", *store_args(store))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("labels")
    r = ingest(d)
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="module")
def bench(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    r = run_cli("bench", "run", "--backend", "fake", "--levels", "raw,L0,L2",
                "--out", str(out), "--date", DATE, *store_args(store), timeout=300)
    assert r.returncode == 0, r.stderr
    return out, r


def rows_of():
    return [json.loads(line) for line in LABELS.read_text().splitlines() if line.strip()]


# --- ingest ------------------------------------------------------------------

def test_ingest_summary_counts_every_row_and_is_idempotent(tmp_path):
    rows = rows_of()
    r = ingest(tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["inserted"] == len(rows) and summary["skipped_existing"] == 0
    want = {}
    for row in rows:
        per = want.setdefault(row["question_id"], {})
        per[row["source"]] = per.get(row["source"], 0) + 1
    assert summary["per_question"] == want
    stored = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert len(stored) == len(rows)
    assert {s["label_source"] for s in stored} == {r["source"] for r in rows}
    # The source's weight of 8.1 when a row gives none.
    weights = {"consensus_majority": 0.6, "consensus_negative": 0.5, "curator": 1.0}
    assert all(s["weight"] == weights[s["label_source"]] for s in stored)
    again = json.loads(ingest(tmp_path).stdout)
    assert again["inserted"] == 0 and again["skipped_existing"] == len(rows)
    assert len((tmp_path / "labels.jsonl").read_text().splitlines()) == len(rows)


def test_ingest_names_every_bad_row_and_stores_nothing(tmp_path):
    good = {"question_id": "term.fits", "state": {"a": 1}, "label": 0, "source": "gold",
            "card": "c1"}
    bad = [
        {**good, "question_id": "no.such"},
        {**good, "label": 2},
        {**good, "source": "oracle"},
        {**good, "weight": 1.5},
        {**good, "weight": 0},
        {k: v for k, v in good.items() if k != "card"},
        {**good, "state": 3},
        {**good, "extra": 1},
        {**good, "question_id": "column.aspect", "label": 8},
    ]
    lines = [json.dumps(good)] + [json.dumps(b) for b in bad] + ["{not json", json.dumps(good)]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    r = ingest(store, path)
    assert r.returncode == 1
    err = r.stderr.splitlines()
    expect = [
        (2, "question_id: unknown question 'no.such'"),
        (3, "label: 2 is outside [0, 2) for term.fits (K=2)"),
        (4, "source: 'oracle' is not one of curator, curator_implicit"),
        (5, "weight: 1.5 is outside (0, 1]"),
        (6, "weight: 0 is outside (0, 1]"),
        (7, "card: a non-empty card id is required"),
        (8, "state: a JSON object or a string is required"),
        (9, "unknown field 'extra'"),
        (10, "label: 8 is outside [0, 8) for column.aspect (K=8)"),
        (11, "not valid JSON"),
        (12, "duplicate of line 1"),
    ]
    for line, needle in expect:
        assert any(e.startswith(f"{path}:{line}: ") and needle in e for e in err), (line, err)
    assert err[-1].endswith("11 bad row(s); nothing stored")
    assert not store.exists()
    assert run_cli("learn", "ingest", *store_args(store)).returncode == 2


# --- fit ---------------------------------------------------------------------

def test_fit_l1_term_fits_with_loco_and_a_guarded_fold(store, tmp_path):
    out = tmp_path / "fit"
    r = run_cli("learn", "fit", "--json", "--backend", "fake", "--question", "term.fits",
                "--level", "L1", "--out", str(out), *store_args(store), timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "fitted" and report["level"] == "L1"
    assert report["n_labels"] == 147 and report["class_counts"] == {"0": 75, "1": 72}
    assert report["skipped_folds"] == {
        "DP1.10093.001.tck_fielddata": "insufficient_heldout_per_class {0: 3}"}
    assert len(report["folds"]) == 6
    for fold in report["folds"].values():
        assert set(fold) == {"n", "acc", "ece", "cov@5%", "n_neg", "prior_frozen"}
        assert fold["n"] == 24 and fold["n_neg"] == 12 and fold["prior_frozen"] is True
    loco = report["loco"]
    assert loco["n"] == 144 and loco["n_neg"] == 72 and loco["n_folds"] == 6
    # Pooled over the union of held-out decisions, not a mean of folds.
    accs = [f["acc"] for f in report["folds"].values()]
    assert loco["acc"] == pytest.approx(sum(accs) / len(accs))  # equal folds
    # A new immutable bundle version in the local store, and a copy in --out.
    assert report["version"] >= 1
    bundle = Path(report["artifact_path"]).parent
    assert bundle.name == f"v{report['version']}"
    assert bundle.parent.parent == store / "bundles" / "fake"
    stored = json.loads((bundle / "manifest.json").read_text())
    assert stored["files"]["artifacts.json"] and stored["version"] == report["version"]
    listed = run_cli("bundles", "list", "--backend", "fake", *store_args(store))
    assert f"v{report['version']}" in listed.stdout
    artifacts = json.loads((out / "artifacts.json").read_text())
    assert artifacts["model"] == "fake" and len(artifacts["artifacts"]) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    pq = manifest["per_question"]["term.fits"]
    assert pq["level"] == "L1" and pq["n_calib"] == 147 and pq["min_weight"] == 0.5
    assert pq["temperature"] > 0 and manifest["fitted_on"]["backend_kind"] == "fake"
    assert manifest["validation"]["term.fits"]["loco"] == loco
    full = json.loads((out / "report.json").read_text())
    assert "macro_f1" in next(iter(full["folds"].values()))


def test_fit_refusals_use_the_reference_statuses(tmp_path):
    few = tmp_path / "few.jsonl"
    few.write_text("".join(line + "\n" for line in LABELS.read_text().splitlines()
                           if "tck_fielddata" in line))
    store = tmp_path / "s"
    assert ingest(store, few).returncode == 0
    r = run_cli("learn", "fit", "--json", "--backend", "fake", "--question", "term.fits",
                *store_args(store))
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["status"] == "insufficient_labels"
    assert report["detail"] == "3 < 100 labels at min_weight 0.5"
    r = run_cli("learn", "fit", "--json", "--backend", "fake", "--question", "term.fits",
                "--level", "L2", *store_args(store))
    assert json.loads(r.stdout)["detail"] == "3 < 40 labels at min_weight 0.5"
    # Positives only: 40 Yes rows of term.fits.
    yes = [row for row in rows_of() if row["question_id"] == "term.fits" and row["label"] == 0]
    pos = tmp_path / "pos.jsonl"
    pos.write_text("".join(json.dumps(row) + "\n" for row in yes[:45]))
    store2 = tmp_path / "s2"
    assert ingest(store2, pos).returncode == 0
    r = run_cli("learn", "fit", "--json", "--backend", "fake", "--question", "term.fits",
                "--level", "L2", *store_args(store2))
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["status"] == "insufficient_negatives"
    assert report["detail"] == "class counts {0: 45}; need >= 30 per class (A2)"


# --- bench -------------------------------------------------------------------

def cells(out):
    doc = json.loads((out / DATE / "fake.fake.json").read_text())
    return doc, doc["tasks"]["labels_column_aspect"]["cells"]


def test_bench_shows_the_planted_effects(bench):
    out, r = bench
    doc, aspect = cells(out)
    raw, l0, l2 = aspect["raw"], aspect["L0"], aspect["L2"]
    assert doc["tasks"]["labels_column_aspect"]["n_items"] == 119
    assert l0["flip"] < raw["flip"]
    assert l2["acc"] > l0["acc"]
    assert l2["loco"] is True and l2["n_folds"] == 7 and l2["n"] == 119
    assert raw["loco"] is False and raw["levels"] == ["raw"] and l2["levels"] == ["L2"]
    print(f"planted: raw flip {raw['flip']:.3f} L0 flip {l0['flip']:.3f}; "
          f"L0 acc {l0['acc']:.3f} L2 acc {l2['acc']:.3f}")
    keys = {"acc", "aurc", "brier", "class_counts", "cov@10%", "cov@5%", "ece", "flip",
            "levels", "loco", "macro_f1", "masked", "mean_p_true", "missing_labels",
            "ms_per_decision", "n", "n_neg", "nll", "prompts", "seconds"}
    assert keys <= set(raw) and keys | {"folds", "skipped_folds", "n_folds"} <= set(l2)
    # K = 8 shifts per item at L0, and the reversal probe doubles it.
    assert l0["prompts"] == 2 * 8 * 119 and raw["prompts"] == 2 * 119
    assert l0["prompts_per_decision"] == 16.0
    term = doc["tasks"]["labels_term_fits"]["cells"]
    assert term["raw"]["flip"] is None and term["L0"]["n_neg"] == 72
    assert term["L2"]["skipped_folds"] == {
        "DP1.10093.001.tck_fielddata": "insufficient_heldout_per_class {0: 3}"}
    env = doc["environment"]
    assert env["backend_kind"] == "fake" and env["model"] == "fake"
    assert doc["backend"] == "fake" and doc["date"] == DATE
    assert "== labels_column_aspect: 119 items" in r.stderr
    assert "== labels_term_fits: 147 items" in r.stderr


def test_bench_files_table_and_plots(bench, store):
    out, r = bench
    path = out / DATE / "fake.fake.json"
    lines = r.stdout.splitlines()
    assert lines[0] == str(path)
    md = (out / DATE / "fake.fake.md").read_text()
    assert "\n".join(lines[1:]) + "\n" == md
    assert md.startswith(f"# bench {DATE} \u00b7 fake \u00b7 fake\n\n")
    assert "| task | n | level | acc | ece | brier | cov@5% | cov@10% | flip | n_neg | " \
           "prompts | ms/dec |\n|" + "---|" * 12 + "\n" in md
    assert re.search(r"^\| labels_column_aspect \| 119 \| L2 \(LOCO\) \| \d\.\d{3} \|", md, re.M)
    raw_text = path.read_text()
    assert raw_text == json.dumps(json.loads(raw_text), indent=1, sort_keys=True) + "\n"
    t = run_cli("bench", "table", "--results", str(path))
    assert t.returncode == 0
    # The file is key-sorted, so its rows come L0, L2, raw per task.
    assert "| labels_column_aspect | 119 | L0 |" in t.stdout
    assert sorted(t.stdout.splitlines()) == sorted(md.splitlines())
    for task in ("labels_column_aspect", "labels_term_fits"):
        for level in ("raw", "L0", "L2"):
            for kind in ("reliability", "risk_coverage"):
                svg = out / DATE / f"fake.fake.{task}.{level}.{kind}.svg"
                root = ET.fromstring(svg.read_text())
                assert root.tag.endswith("svg") and root.findall(".//{*}polyline")
    assert run_cli("bench", "table").returncode == 2


def test_bench_l2_cell_equals_the_fit_report(bench, store):
    out, _ = bench
    doc, _ = cells(out)
    cell = doc["tasks"]["labels_term_fits"]["cells"]["L2"]
    r = run_cli("learn", "fit", "--json", "--backend", "fake", "--question", "term.fits",
                "--level", "L2", *store_args(store), timeout=300)
    assert r.returncode == 0, r.stderr
    loco = json.loads(r.stdout)["loco"]
    for key in ("acc", "ece", "brier", "nll", "cov@5%", "cov@10%", "n", "n_neg"):
        assert loco[key] == pytest.approx(cell[key], abs=1e-12), key
    assert loco["n_folds"] == cell["n_folds"]


def test_bench_unknown_task_and_bad_flags(store, tmp_path):
    r = run_cli("bench", "run", "--backend", "fake", "--tasks", "nope,labels_term_fits",
                "--out", str(tmp_path), *store_args(store))
    assert r.returncode == 1
    assert r.stderr.strip() == ("unknown or empty tasks: ['nope']; available: "
                                "['labels_column_aspect', 'labels_term_fits']")
    r = run_cli("bench", "run", "--backend", "fake", "--levels", "raw,L9",
                "--out", str(tmp_path), *store_args(store))
    assert r.returncode == 2 and "--levels: 'L9'" in r.stderr
    r = run_cli("bench", "run", "--backend", "fake", "--date", "yesterday",
                "--out", str(tmp_path), *store_args(store))
    assert r.returncode == 2 and "--date" in r.stderr
    r = run_cli("bench", "run", "--backend", "fake", "--levels", "L1", "--no-loco",
                "--tasks", "labels_term_fits", "--out", str(tmp_path), "--date", DATE,
                *store_args(store))
    assert r.returncode == 0, r.stderr
    cell = json.loads((tmp_path / DATE / "fake.fake.json").read_text())[
        "tasks"]["labels_term_fits"]["cells"]["L1"]
    assert cell == {"not_applicable": True, "reason": "L1 needs --loco"}


# --- hf: the daemon fits and decides in scratch deciders ---------------------

def test_hf_fit_through_the_daemon_matches_in_process_and_installs_nothing(
        store, start_daemon, tmp_path):
    # The fit becomes a version in the daemon's store; serving changes only
    # on promote.
    daemon = start_daemon("--set", f"decisions.bundles_dir={tmp_path / 'bundles'}")
    args = ["--set", f"client.address={daemon.address}", "--set", "backend.hf_model=fake"]
    r = run_cli("learn", "fit", "--json", "--backend", "hf", "--question", "column.aspect",
                "--level", "L2", *args, *store_args(store), timeout=300)
    assert r.returncode == 0, r.stderr + daemon.output()
    hf = json.loads(r.stdout)
    fake = json.loads(run_cli("learn", "fit", "--json", "--backend", "fake", "--question",
                              "column.aspect", "--level", "L2", *store_args(store),
                              timeout=300).stdout)
    assert hf["status"] == fake["status"] == "fitted"
    for key in ("acc", "ece", "brier", "nll", "n"):
        assert hf["loco"][key] == pytest.approx(fake["loco"][key], abs=1e-6), key
    exported = json.loads(daemon.decisions.ExportArtifacts(
        dpb.ExportArtifactsRequest(), timeout=10).artifacts_json)
    assert exported["artifacts"] == {} and exported["heads"] == {}
    assert hf["version"] == 1
    assert (tmp_path / "bundles" / "fake").is_dir()
    # learn fit and bench run are dataset work: every call they make asks
    # the batch priority class (auth is off here: tenant "").
    r = run_cli("bench", "run", "--backend", "hf", "--levels", "raw", "--tasks",
                "labels_term_fits", "--no-loco", "--no-flip", "--out", str(tmp_path / "b"),
                "--date", DATE, *args, *store_args(store), timeout=300)
    assert r.returncode == 0, r.stderr
    scrape = daemon.metrics()
    for cls, calls in [("batch", lambda n: n > 0), ("interactive", lambda n: n == 1)]:
        n = metric(scrape, "mesa_anyjev_tenant_requests_total", tenant="", code="OK",
                   **{"class": cls})
        assert calls(n), (cls, n)  # interactive: the test's own ExportArtifacts
