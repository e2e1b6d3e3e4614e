"""Bundles across question locks (issue 39; docs/bundles.md, Across question
locks): when the questions lock changes, a question with no CURRENT under
the new lock is served by the earlier lock's CURRENT of the same key.

On the daemon (fake model) over gRPC: term.fits at L1 and column.aspect at
L2 are promoted under the shipped lock; a new lock that adds a question
inherits both (List says from which lock), a promote of the added question
makes the daemon serve the new lock, and Decide gives the very decisions it
gave before, also after a restart; promote and rollback under the new lock
act on it alone; a lock that rewords term.fits inherits column.aspect only.
Through the CLI (local fake store): versions promoted under an earlier lock
directory are listed as inherited and served."""
import hashlib
import json
import shutil
from pathlib import Path

import grpc
import pytest

from conftest import Daemon, dpb, run_cli
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
LOCK_DOC = json.loads((ROOT / "questions.lock.json").read_text())
LOCK = LOCK_DOC["lock_sha"]
QUESTIONS = LOCK_DOC["questions"]


def lock_sha(questions):
    """The reference's lock_sha: sha256 of the mapping, sorted keys, compact."""
    text = json.dumps(questions, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def question(qid, text=None):
    q = QUESTIONS[qid]
    return dpb.Question(id=qid, kind=q["kind"], text=(text or q["text"]).encode(),
                        options=[] if q["kind"] == "noul" else [o.encode() for o in q["options"]])


STATES = [f"Column 'c{i}': {['beetle counts per trap', 'plot identifier', 'mass in grams', 'taxon name'][i % 4]} at site {i}"
          for i in range(48)]


def fit(daemon, q, level, labels):
    reply = daemon.decisions.Fit(dpb.FitRequest(
        question=q, states=[dpb.State(text=s.encode()) for s in STATES], labels=labels,
        level=level, dry_run=True), timeout=120)
    return reply.question_key, json.loads(reply.artifacts_json)


def put_and_promote(stub, lock, questions, qid, key, artifacts):
    manifest = {"per_question": {qid: {"key": key, "level": "L1"}},
                "validation": {qid: {"loco": {"acc": 0.7, "ece": 0.1}}}}
    qjson = json.dumps(questions).encode()
    version = stub.Put(bpb.PutBundleRequest(
        lock_sha=lock, artifacts_json=json.dumps(artifacts).encode(),
        manifest_json=json.dumps(manifest).encode(), questions_json=qjson), timeout=30).version
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=lock, version=version, question_id=qid,
                                          questions_json=qjson), timeout=30)
    return version


def decide(daemon):
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=s.encode()) for s in STATES[:12]],
        questions=[question("term.fits"), question("column.aspect")], level="auto",
        carry_priors=True), timeout=120)
    return [(d.level, list(d.probs)) for d in reply.decisions]


def test_a_lock_that_adds_a_question_keeps_the_others_served(tmp_path):
    (tmp_path / "d").mkdir()
    daemon = Daemon(tmp_path / "d")
    try:
        stub = bundles_pb2_grpc.BundlesStub(daemon.channel)
        tf_key, tf = fit(daemon, question("term.fits"), "L1", [i % 2 for i in range(48)])
        ca_key, ca = fit(daemon, question("column.aspect"), "L2", [[0, 6, 3, 0][i % 4]
                                                                  for i in range(48)])
        assert tf_key == QUESTIONS["term.fits"]["key"]
        assert ca_key == QUESTIONS["column.aspect"]["key"]
        put_and_promote(stub, LOCK, QUESTIONS, "term.fits", tf_key, tf)
        put_and_promote(stub, LOCK, QUESTIONS, "column.aspect", ca_key, ca)
        before = decide(daemon)
        assert [level for level, _ in before] == ["L1", "L2"] * 12

        # The new lock: every question of the old one, and one more.
        added = dpb.Question(id="extra.added", kind="noul", text=b"Is the column a count?")
        added_key, added_l1 = fit(daemon, added, "L1", [i % 2 for i in range(48)])
        new = dict(QUESTIONS)
        new["extra.added"] = {"kind": "noul", "text": "Is the column a count?",
                              "options": ["Yes", "No"], "key": added_key, "twin": None}
        new_lock = lock_sha(new)
        listed = stub.List(bpb.ListBundlesRequest(lock_sha=new_lock,
                                                  questions_json=json.dumps(new).encode()),
                           timeout=30)
        assert dict(listed.current) == {}
        assert {q: (i.lock_sha, i.version) for q, i in listed.inherited.items()} == {
            "term.fits": (LOCK[:8], 1), "column.aspect": (LOCK[:8], 2)}
        put_and_promote(stub, new_lock, new, "extra.added", added_key, added_l1)
        listed = stub.List(bpb.ListBundlesRequest(lock_sha=new_lock), timeout=30)
        assert listed.served_lock_sha == new_lock[:8]  # the daemon moved to it
        assert dict(listed.current) == {"extra.added": 1}
        assert decide(daemon) == before  # equal, not close: the same versions

        # Promote and rollback under the new lock act on it alone.
        with pytest.raises(grpc.RpcError) as e:
            stub.Rollback(bpb.RollbackBundleRequest(lock_sha=new_lock, question_id="term.fits"),
                          timeout=30)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"under lock {new_lock[:8]}" in e.value.details()
        old = stub.List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=30)
        assert dict(old.current) == {"term.fits": 1, "column.aspect": 2}

        # A lock that rewords term.fits: its key is new, so it starts fresh.
        reworded = dict(QUESTIONS)
        reworded["term.fits"] = dict(QUESTIONS["term.fits"], text="Reworded?",
                                     key="0123456789abcdef")
        listed = stub.List(bpb.ListBundlesRequest(
            lock_sha=lock_sha(reworded), questions_json=json.dumps(reworded).encode()),
            timeout=30)
        assert set(listed.inherited) == {"column.aspect"}
        # A mapping that does not hash to the lock is refused.
        with pytest.raises(grpc.RpcError) as e:
            stub.List(bpb.ListBundlesRequest(lock_sha=new_lock,
                                             questions_json=json.dumps(QUESTIONS).encode()),
                      timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        daemon.stop()

    # Restarted on the same store, the daemon serves the new lock with what
    # it inherits.
    (tmp_path / "again").mkdir()
    again = Daemon(tmp_path / "again", env={"XDG_STATE_HOME": str(tmp_path / "d" / "state")})
    try:
        assert decide(again) == before
    finally:
        again.stop()


def test_the_cli_lists_and_serves_an_earlier_locks_versions(tmp_path):
    """learn fit (fake) under the CLI's lock, then that lock directory made an
    earlier lock's: the CLI inherits it, lists it and serves it equally."""
    store = tmp_path / "bundles"
    args = ["--set", f"labels.dir={tmp_path}/labels", "--set", f"artifacts.dir={store}"]
    assert run_cli("learn", "ingest", "--labels", str(ROOT / "data/bench/labels.jsonl"),
                   *args).returncode == 0
    r = run_cli("learn", "fit", "--question", "term.fits", "--level", "L1", *args, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert run_cli("learn", "promote", "--version", "1", "--question", "term.fits",
                   *args).returncode == 0

    def decided():
        r = run_cli("decide", "--question", "term.fits", "--level", "L1", "--json", "--state",
                    "Column 'bet_count': ground beetles per trap", *args)
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)["decisions"][0]
        return d["level"], d["probs"], d["diagnostics"]["temperature"]

    before = decided()
    assert before[0] == "L1"
    earlier = "0badc0de"
    shutil.move(store / "fake" / LOCK[:8], store / "fake" / earlier)
    r = run_cli("bundles", "list", *args)
    assert r.returncode == 0, r.stderr
    assert f"* inherited from lock {earlier}" in r.stdout
    listing = json.loads(run_cli("bundles", "list", "--json", *args).stdout)
    assert listing["inherited"]["term.fits"]["lock"] == earlier
    assert listing["current"] == {}
    assert decided() == before
    # A rollback under the CLI's lock does not touch the earlier one.
    r = run_cli("bundles", "rollback", "--question", "term.fits", *args)
    assert r.returncode == 1 and f"under lock {LOCK[:8]}" in r.stdout
    assert (store / "fake" / earlier / "current" / "term.fits").read_text() == "v1\n"
