"""bench compare, agreement records and what they unlock (issue 39), on the
fake model at two temperatures: the CLI's fake (0.7, "fake") against a
daemon's (1.4, "fake-t1.4"), over the synthetic labels of data/bench.

The compared figures are checked against an oracle: the same states
decided at raw through `decide` on each side, and the flip rate, Wilson
interval, |p_a - p_b|, accuracy, log loss, ECE and the paired bootstrap
intervals recomputed here with scipy, scikit-learn and numpy's RandomState
(test_eval_metrics.py's oracles). Then: the record kept beside both
models' bundles (the local store and, through Bundles.PutAgreement, the
daemon's), shown by bundles list and doctor; bundles adopt of the
daemon's L1 temperature and L2 head into the local fake, served at L1 and
L2 with the daemon's numbers; the refusals (no record, a disagreement by
the configured tolerances, a record made stale by new labels); and bad
input."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import grpc
import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import accuracy_score, log_loss

from conftest import Daemon, pb, run_cli
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc
from test_eval_metrics import bootstrap_oracle, ece_oracle

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "data" / "bench" / "labels.jsonl"
LOCK = json.loads((ROOT / "questions.lock.json").read_text())["lock_sha"]
DATE = "2026-02-03"
RESAMPLES = 300
MIN_WEIGHT = {"term.fits": 0.5, "column.aspect": 0.6}  # the write policy's


@pytest.fixture()
def setup(tmp_path):
    """A daemon serving the fake at 1.4, and the CLI's stores: the labels of
    data/bench and a local bundle store."""
    (tmp_path / "daemon").mkdir()
    daemon = Daemon(tmp_path / "daemon", args=("--set", "model.fake_temperature=1.4"))
    args = ["--set", f"labels.dir={tmp_path}/labels", "--set",
            f"artifacts.dir={tmp_path}/bundles", "--set", f"client.address={daemon.address}",
            "--set", f"compare.resamples={RESAMPLES}"]
    r = run_cli("learn", "ingest", "--labels", str(LABELS), *args)
    assert r.returncode == 0, r.stderr
    yield daemon, args, tmp_path
    daemon.stop()


def compare(args, out, *extra):
    return run_cli("bench", "compare", "--a", "fake", "--b", "hf", "--out", str(out),
                   "--date", DATE, "--json", *args, *extra, timeout=300)


def task_states(tmp_path, question):
    """The bench task's states in its order: the label store's rows of the
    question at its min_weight, one per state (highest weight), by sha."""
    best = {}
    for line in (tmp_path / "labels" / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["question_id"] != question or row["weight"] < MIN_WEIGHT[question]:
            continue
        sha = row["state_sha256"]
        if sha not in best or row["weight"] > best[sha]["weight"]:
            best[sha] = row
    rows = [best[sha] for sha in sorted(best)]
    return [json.loads(r["state_json"]) for r in rows], np.array([r["label_index"] for r in rows])


def decide_raw(tmp_path, args, backend, question, states):
    path = tmp_path / f"{question}.states.jsonl"
    path.write_text("".join(json.dumps({"json": s}) + "\n" for s in states))
    r = run_cli("decide", "--backend", backend, "--question", question, "--level", "raw",
                "--states-file", str(path), *args, timeout=300)
    assert r.returncode == 0, r.stderr
    return np.array([json.loads(line)["decisions"][0]["probs"]
                     for line in r.stdout.splitlines()])


def bundles_stub(daemon):
    return bundles_pb2_grpc.BundlesStub(daemon.channel)


def test_figures_match_an_oracle_and_the_record_is_kept_beside_both(setup):
    daemon, args, tmp = setup
    r = compare(args, tmp / "out")
    doc = json.loads(r.stdout)
    verdicts = {t["question_id"]: t["verdict"] for t in doc["tasks"].values()}
    assert set(verdicts) == {"term.fits", "column.aspect"}
    assert r.returncode == (0 if set(verdicts.values()) == {"agree"} else 1), r.stderr
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
    a, b = doc["models"]
    assert (a["model"], a["backend_kind"], a["hidden"]) == (
        "fake", "fake", {"n_layers": 4, "hidden_size": 64})
    assert (b["model"], b["model_identity"], b["backend_kind"]) == (
        "fake-t1.4", info.identity, "hf")
    assert a["model_identity"] != b["model_identity"]
    assert doc["questions_lock_sha"] == LOCK
    assert doc["bootstrap"] == {"resamples": RESAMPLES, "seed": 0}

    for task in doc["tasks"].values():
        question = task["question_id"]
        states, labels = task_states(tmp, question)
        assert task["n_items"] == len(states)
        pa = decide_raw(tmp, args, "fake", question, states)
        pb_ = decide_raw(tmp, args, "hf", question, states)
        cell = task["cells"]["raw"]
        flips = int(np.sum(pa.argmax(axis=1) != pb_.argmax(axis=1)))
        assert flips == 0  # a temperature divides every logit alike
        assert cell["n"] == len(states) and cell["flips"] == flips
        ci = binomtest(flips, len(states)).proportion_ci(method="wilson")
        assert cell["flip_interval"] == pytest.approx([ci.low, ci.high], abs=1e-12)
        tv = 0.5 * np.abs(pa - pb_).sum(axis=1)
        assert cell["mean_abs_dp"] == pytest.approx(tv.mean(), abs=1e-9)
        assert cell["p95_abs_dp"] == pytest.approx(np.percentile(tv, 95), abs=1e-9)
        k = pa.shape[1]
        for side, p in (("a", pa), ("b", pb_)):
            assert cell[side]["acc"] == pytest.approx(accuracy_score(labels, p.argmax(axis=1)))
            assert cell[side]["nll"] == pytest.approx(log_loss(labels, p, labels=list(range(k))),
                                                      rel=1e-6)
            assert cell[side]["ece"] == pytest.approx(ece_oracle(p, labels), abs=1e-9)
        for name, (lo, hi) in zip(("acc", "nll", "ece"),
                                  bootstrap_oracle(pa, pb_, labels, RESAMPLES, 0)):
            got = cell["difference"][name]
            assert (got["lo"], got["hi"]) == pytest.approx((lo, hi), abs=1e-9), (question, name)
        # No temperature promoted on either side yet: L1 is not compared.
        assert task["cells"]["L1"]["not_applicable"] is True
        assert "does not serve L1" in task["cells"]["L1"]["reason"]
        assert set(task["cells"]) == {"raw", "L0", "L1"}

    # Files: the JSON, the Markdown, and a p_a-against-p_b picture per cell.
    base = tmp / "out" / DATE / "compare.fake.fake.vs.fake-t1.4.hf"
    assert doc["path"] == f"{base}.json"
    assert json.loads(Path(doc["path"]).read_text())["tasks"] == doc["tasks"]
    assert "| term.fits | raw |" in Path(f"{base}.md").read_text()
    for task in doc["tasks"].values():
        svg = ET.parse(f"{base}.{task['task']}.raw.agreement.svg").getroot()
        circles = svg.findall(".//{http://www.w3.org/2000/svg}circle")
        k = 2 if task["question_id"] == "term.fits" else 8
        assert len(circles) == task["n_items"] * (1 if k == 2 else k)

    # The record, beside both models' bundles, the same in both places.
    local = tmp / "bundles" / "fake" / LOCK[:8] / "agreements" / \
        f"fake-t1.4.{info.identity[:12]}.json"
    record = json.loads(local.read_text())
    listed = bundles_stub(daemon).List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10)
    assert [json.loads(x.record_json) for x in listed.agreements] == [record]
    assert sorted(doc["records"]) == sorted([str(local), listed.agreements[0].path])
    assert record["record"] == "mesa-anyjev agreement v1"
    assert record["models"] == doc["models"]
    assert record["questions"]["term.fits"]["verdict"] == verdicts["term.fits"]
    assert record["questions"]["term.fits"]["key"] == json.loads(
        (ROOT / "questions.lock.json").read_text())["questions"]["term.fits"]["key"]
    assert record["tolerances"] == {"max_flip": 0.1, "max_acc_diff": 0.03}

    # bundles list and doctor show it, per question.
    r = run_cli("bundles", "list", "--backend", "fake", *args)
    assert r.returncode == 0, r.stderr
    assert f"fake-t1.4 (hf) {record['date']}: term.fits {verdicts['term.fits']}" in r.stdout
    r = run_cli("bundles", "list", "--backend", "hf", "--json", *args)
    listing = json.loads(r.stdout)
    assert listing["agreements"][0]["other"]["model"] == "fake"
    assert listing["agreements"][0]["questions"]["column.aspect"]["verdict"] == \
        verdicts["column.aspect"]
    r = run_cli("doctor", "--backend", "hf", *args)
    assert f"[ok] agreements: fake (fake) {record['date']}: column.aspect" in r.stdout


def fit_and_promote_on_daemon(args, question, level):
    r = run_cli("learn", "fit", "--backend", "hf", "--question", question, "--level", level,
                "--json", *args, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    version = json.loads(r.stdout)["version"]
    r = run_cli("learn", "promote", "--backend", "hf", "--version", str(version),
                "--question", question, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return version


def decide_one(args, backend, question, level):
    r = run_cli("decide", "--backend", backend, "--question", question, "--level", level,
                "--state", "Column 'bet_count': ground beetles per trap", "--json", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["decisions"][0]


def test_adopt_needs_a_current_agreeing_record(setup):
    daemon, args, tmp = setup
    fit_and_promote_on_daemon(args, "term.fits", "L1")
    adopt = ["bundles", "adopt", "--backend", "fake", "--from", "hf", "--question",
             "term.fits", *args]
    # No record yet: refused, naming the command that would measure one.
    r = run_cli(*adopt)
    assert r.returncode == 1
    assert "no agreement record between 'fake' and 'fake-t1.4'" in r.stdout
    assert "`mesa-anyjev bench compare --a fake --b hf`" in r.stdout

    # Tolerances the pair cannot meet: disagreement, and still refused.
    r = compare(args, tmp / "out", "--set", "compare.max_flip=0.001")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert {t["verdict"] for t in doc["tasks"].values()} == {"disagree"}
    r = run_cli(*adopt)
    assert r.returncode == 1 and "says disagree for term.fits" in r.stdout

    # Measured with the defaults: term.fits agrees, and adopting takes the
    # daemon's temperature into the local fake's store, promoted.
    r = compare(args, tmp / "out")
    doc = json.loads(r.stdout)
    verdict = {t["question_id"]: t for t in doc["tasks"].values()}["term.fits"]
    assert verdict["verdict"] == "agree", verdict
    # Model b serves L1 now, model a does not: the L1 cell says so.
    assert "model a (fake) does not serve L1" in verdict["cells"]["L1"]["reason"]
    r = run_cli(*adopt)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("adopted v1 of fake-t1.4 for term.fits as v1")
    manifest = json.loads((tmp / "bundles" / "fake" / LOCK[:8] / "v1" /
                           "manifest.json").read_text())
    assert manifest["adopted_from"]["model"] == "fake-t1.4"
    assert manifest["adopted_from"]["backend_kind"] == "hf"
    assert manifest["model"] == "fake"
    theirs = decide_one(args, "hf", "term.fits", "L1")
    ours = decide_one(args, "fake", "term.fits", "L1")
    assert ours["level"] == theirs["level"] == "L1"
    assert ours["diagnostics"]["temperature"] == theirs["diagnostics"]["temperature"]
    # Both sides serve term.fits at L1 now, each with its own promoted
    # version: the L1 cell is compared.
    r = compare(args, tmp / "out", "--tasks", "labels_term_fits", "--no-record")
    l1 = json.loads(r.stdout)["tasks"]["labels_term_fits"]["cells"]["L1"]
    assert l1["n"] == 147 and l1["flips"] == 0 and l1["verdict"] == "agree", l1

    # New labels for term.fits make the record stale: it unlocks nothing.
    extra = tmp / "more.jsonl"
    extra.write_text(json.dumps({"question_id": "term.fits", "state": {"added": 1}, "label": 0,
                                 "source": "curator", "card": "new-card"}) + "\n")
    assert run_cli("learn", "ingest", "--labels", str(extra), *args).returncode == 0
    r = run_cli("bundles", "list", "--backend", "fake", *args)
    assert "term.fits stale (the question's labels changed since" in r.stdout
    r = run_cli("doctor", "--backend", "fake", *args)
    assert "term.fits stale (the question's labels changed since" in r.stdout
    r = run_cli(*adopt)
    assert r.returncode == 1 and "says stale for term.fits" in r.stdout


def test_adopt_crosses_a_head_between_models_of_one_shape(setup):
    daemon, args, tmp = setup
    fit_and_promote_on_daemon(args, "column.aspect", "L2")
    r = compare(args, tmp / "out", "--tasks", "labels_column_aspect",
                "--set", "compare.max_flip=0.5", "--set", "compare.max_acc_diff=0.5")
    doc = json.loads(r.stdout)
    assert doc["tasks"]["labels_column_aspect"]["verdict"] == "agree", r.stdout
    r = run_cli("bundles", "adopt", "--backend", "fake", "--from", "hf", "--question",
                "column.aspect", "--json", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["head"] is True  # 4 layers x 64 on both sides
    theirs = decide_one(args, "hf", "column.aspect", "L2")
    ours = decide_one(args, "fake", "column.aspect", "L2")
    assert ours["level"] == theirs["level"] == "L2"
    assert ours["diagnostics"]["exit_layer"] == theirs["diagnostics"]["exit_layer"]


def test_bad_input_names_the_flag(setup):
    daemon, args, tmp = setup
    r = compare(args, tmp / "out", "--levels", "raw,L2")
    assert r.returncode == 2 and "--levels: 'L2' is not one of raw, L0, L1" in r.stderr
    r = compare(args, tmp / "out", "--a-set", "nonsense")
    assert r.returncode == 2 and "--a-set" in r.stderr
    r = compare(args, tmp / "out", "--b-set", "compare.max_flip=2")
    assert r.returncode == 2 and "compare.max_flip: 2" in r.stderr and "--b-set" in r.stderr
    r = compare(args, tmp / "out", "--date", "yesterday")
    assert r.returncode == 2 and "--date" in r.stderr
    r = compare(args, tmp / "out", "--tasks", "labels_nope")
    assert r.returncode == 1 and "unknown or empty task 'labels_nope'" in r.stderr
    r = run_cli("bundles", "adopt", "--from", "hf", "--question", "term.fit", *args)
    assert r.returncode == 2 and "did you mean 'term.fits'" in r.stderr


def test_put_agreement_refuses_what_is_not_this_models_record(setup):
    daemon, args, tmp = setup
    stub = bundles_stub(daemon)
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)

    def record(**changes):
        r = {"record": "mesa-anyjev agreement v1", "date": "2026-02-03T00:00:00Z",
             "questions_lock_sha": LOCK, "labels_sha256": "00",
             "models": [{"model": "fake", "model_identity": "aa", "backend_kind": "fake",
                         "hidden": None},
                        {"model": "fake-t1.4", "model_identity": info.identity,
                         "backend_kind": "hf", "hidden": None}],
             "questions": {"term.fits": {"key": "k", "labels_sha256": "00",
                                         "verdict": "agree"}}}
        r.update(changes)
        return json.dumps(r).encode()

    def refused(request, code, needle):
        with pytest.raises(grpc.RpcError) as e:
            stub.PutAgreement(request, timeout=10)
        assert e.value.code() == code and needle in e.value.details(), e.value.details()

    ok = stub.PutAgreement(bpb.PutAgreementRequest(lock_sha=LOCK, record_json=record()),
                           timeout=10)
    assert ok.path.endswith(f"/fake-t1.4/{LOCK[:8]}/agreements/fake.aa.json")
    refused(bpb.PutAgreementRequest(lock_sha=LOCK, record_json=b"{"),
            grpc.StatusCode.INVALID_ARGUMENT, "record_json")
    refused(bpb.PutAgreementRequest(lock_sha=LOCK, record_json=record(models=[])),
            grpc.StatusCode.INVALID_ARGUMENT, "models: needs exactly two")
    other = json.loads(record())
    other["models"][1]["model"] = "Qwen/Qwen3-8B"
    refused(bpb.PutAgreementRequest(lock_sha=LOCK, record_json=json.dumps(other).encode()),
            grpc.StatusCode.FAILED_PRECONDITION, "not of 'fake-t1.4'")
    refused(bpb.PutAgreementRequest(lock_sha="0" * 64, record_json=record()),
            grpc.StatusCode.INVALID_ARGUMENT, "measured under questions lock")
    refused(bpb.PutAgreementRequest(lock_sha=LOCK, record_json=record(
        questions={"term.fits": {"key": "k", "labels_sha256": "0", "verdict": "maybe"}})),
            grpc.StatusCode.INVALID_ARGUMENT, "verdict: 'maybe'")
    # A questions mapping that does not hash to the lock is refused too.
    with pytest.raises(grpc.RpcError) as e:
        stub.List(bpb.ListBundlesRequest(lock_sha=LOCK, questions_json=b'{"q": {}}'),
                  timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "questions_json: hashes to" in e.value.details()
