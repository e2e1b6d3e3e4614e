"""The daemon's Bundles service on the fake model: versions put over gRPC,
CURRENT moved by Promote and Rollback while a stream of Decide calls runs
(no call fails; auto serves L1/L2 from the promoted version right after
each move), CURRENT loaded again at start, and every bad input refused with
its status code while nothing stored is lost."""
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import grpc
import pytest

from conftest import dpb
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc

LOCK = "0190586d" * 8
WRITER = os.environ.get("MESA_ANYJEV_BUNDLE_WRITER", "build/tests/bundle_writer")
TOPICS = ["genes", "proteins", "cells", "viruses"]
QUESTION = dpb.Question(id="topic", kind="choice", text=b"What is it about?",
                        options=[t.encode() for t in TOPICS])


def code_of(call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def bundles(daemon):
    return bundles_pb2_grpc.BundlesStub(daemon.channel)


@pytest.fixture
def fitted(start_daemon):
    """An L1 artifact and an L2 head for QUESTION, fit on a helper daemon."""
    helper = start_daemon(name="helper")
    texts = [f"About {TOPICS[i % 4]}, item {i}" for i in range(24)]
    states = [dpb.State(text=t.encode()) for t in texts]
    key = None
    for level in ("L1", "L2"):
        fit = helper.decisions.Fit(dpb.FitRequest(question=QUESTION, states=states,
                                                  labels=[i % 4 for i in range(24)],
                                                  level=level), timeout=60)
        key = fit.question_key
    exported = json.loads(helper.decisions.ExportArtifacts(
        dpb.ExportArtifactsRequest(), timeout=10).artifacts_json)
    helper.stop()
    l1 = {"model": "fake", "artifacts": exported["artifacts"], "heads": {}}
    l2 = {"model": "fake", "artifacts": {}, "heads": exported["heads"]}
    return key, l1, l2


def manifest(key, level, acc, ece, qid="topic"):
    return json.dumps({"per_question": {qid: {"key": key, "level": level}},
                       "validation": {qid: {"loco": {"acc": acc, "ece": ece}}},
                       "fitted_on": {"backend_kind": "hf", "served_model": "fake"}}).encode()


def put(daemon, artifacts, manifest_json, lock=LOCK):
    return bundles(daemon).Put(bpb.PutBundleRequest(
        lock_sha=lock, artifacts_json=json.dumps(artifacts).encode(),
        manifest_json=manifest_json), timeout=10)


def level_now(daemon):
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=b"About cells")], questions=[QUESTION], level="auto"), timeout=30)
    return reply.decisions[0].level


def test_promote_and_rollback_are_served_live_without_failing_calls(
        start_daemon, fitted, tmp_path):
    key, l1, l2 = fitted
    store = tmp_path / "store"
    d = start_daemon("--set", f"decisions.bundles_dir={store}")
    assert d.health_status("mesa.anyjev.v1.Bundles") == "SERVING"
    v1 = put(d, l1, manifest(key, "L1", 0.70, 0.10))
    v2 = put(d, l2, manifest(key, "L2", 0.80, 0.05))
    assert (v1.version, v2.version) == (1, 2)
    assert v2.path == str(store / "fake" / LOCK[:8] / "v2")
    assert level_now(d) == "L0"  # put is not promote

    stop = threading.Event()
    seen, errors = [], []

    def stream():
        while not stop.is_set():
            try:
                seen.append(level_now(d))
            except grpc.RpcError as e:  # any failure is a test failure
                errors.append(f"{e.code()}: {e.details()}")

    threads = [threading.Thread(target=stream) for _ in range(3)]
    for t in threads:
        t.start()
    stub = bundles(d)
    try:
        for _ in range(4):
            moved = stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=1,
                                                          question_id="topic"), timeout=10)
            assert moved.served and level_now(d) == "L1"
            moved = stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=2,
                                                          question_id="topic"), timeout=10)
            assert (moved.version, moved.previous) == (2, 1)
            assert level_now(d) == "L2"
            back = stub.Rollback(bpb.RollbackBundleRequest(lock_sha=LOCK, question_id="topic"),
                                 timeout=10)
            assert (back.version, back.previous) == (1, 2)
            assert level_now(d) == "L1"  # the head is gone again
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert errors == []
    assert len(seen) > 20 and {"L1", "L2"} <= set(seen), (len(seen), set(seen))

    listed = stub.List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10)
    assert [v.version for v in listed.versions] == [1, 2]
    assert dict(listed.current) == {"topic": 1} and listed.served_lock_sha == LOCK[:8]
    got = stub.Get(bpb.GetBundleRequest(lock_sha=LOCK, version=2), timeout=10)
    assert json.loads(got.manifest_json)["model_identity"] == json.loads(
        listed.versions[1].manifest_json)["model_identity"] != ""
    assert key in json.loads(got.artifacts_json)["heads"]

    # Promote v2 for good, restart: CURRENT is served before SERVING.
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=2, question_id="topic"),
                 timeout=10)
    d.stop()
    again = start_daemon("--set", f"decisions.bundles_dir={store}")
    assert level_now(again) == "L2"
    assert "serving 1 question(s)" in again.output()


def test_bad_bundle_input_is_refused_and_nothing_is_lost(start_daemon, fitted, tmp_path):
    key, l1, l2 = fitted
    store = tmp_path / "store"
    d = start_daemon("--set", f"decisions.bundles_dir={store}",
                     "--set", "limits.max_bundle_bytes=65536")
    stub = bundles(d)
    put(d, l1, manifest(key, "L1", 0.80, 0.10))
    put(d, l2, manifest(key, "L2", 0.70, 0.10))
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=1, question_id="topic"),
                 timeout=10)

    def refused(call, code, *needles):
        got, details = code_of(call)
        assert got == code, details
        for needle in needles:
            assert needle in details, details

    P, INV = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT
    refused(lambda: stub.Put(bpb.PutBundleRequest(lock_sha=LOCK, artifacts_json=b"{nope",
                                                  manifest_json=manifest(key, "L1", 1, 0)),
                             timeout=10), INV, "artifacts_json")
    refused(lambda: stub.Put(bpb.PutBundleRequest(lock_sha=LOCK, artifacts_json=b"[" * 5000,
                                                  manifest_json=b"{}"), timeout=10),
            INV, "artifacts_json", "nested")
    refused(lambda: put(d, l1, b"{}"), INV, "manifest.per_question")
    refused(lambda: put(d, dict(l1, model="Qwen/Qwen3-8B"), manifest(key, "L1", 1, 0)),
            P, "Qwen/Qwen3-8B", "fake")
    other = json.loads(manifest(key, "L1", 1, 0))
    other["model_identity"] = "f" * 64
    refused(lambda: put(d, l1, json.dumps(other).encode()), P, "f" * 64)
    big = dict(l1, padding="x" * 70000)
    refused(lambda: put(d, big, manifest(key, "L1", 1, 0)), INV, "artifacts_json",
            "65536", "limits.max_bundle_bytes")
    refused(lambda: put(d, l1, manifest(key, "L1", 1, 0), lock="NOTHEX"), INV, "lock_sha")
    refused(lambda: stub.Get(bpb.GetBundleRequest(lock_sha=LOCK, version=9), timeout=10),
            grpc.StatusCode.NOT_FOUND, "no version v9")
    refused(lambda: stub.Get(bpb.GetBundleRequest(lock_sha=LOCK, version=0), timeout=10),
            INV, "version")
    refused(lambda: stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=7,
                                                          question_id="topic"), timeout=10),
            grpc.StatusCode.NOT_FOUND, "no version v7")
    refused(lambda: stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=2,
                                                          question_id="../x"), timeout=10),
            INV, "question_id")
    refused(lambda: stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=2,
                                                          question_id="topic"), timeout=10),
            P, "v2 regresses against v1: acc 0.700 vs 0.800, ece 0.100 vs 0.100")
    refused(lambda: stub.Rollback(bpb.RollbackBundleRequest(lock_sha=LOCK, question_id="topic"),
                                  timeout=10), P, "no earlier CURRENT")

    # A tampered version: Get and Promote say DATA_LOSS naming the file, and
    # the old version keeps serving.
    artifacts = store / "fake" / LOCK[:8] / "v2" / "artifacts.json"
    artifacts.write_bytes(artifacts.read_bytes() + b" ")
    refused(lambda: stub.Get(bpb.GetBundleRequest(lock_sha=LOCK, version=2), timeout=10),
            grpc.StatusCode.DATA_LOSS, "v2/artifacts.json")
    refused(lambda: stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=2,
                                                          question_id="topic", force=True),
                                 timeout=10), grpc.StatusCode.DATA_LOSS, "v2/artifacts.json")
    assert level_now(d) == "L1"
    listed = stub.List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10)
    assert [v.version for v in listed.versions] == [1, 2] and dict(listed.current) == {"topic": 1}
    # Every refused Put left nothing behind.
    names = sorted(p.name for p in (store / "fake" / LOCK[:8]).iterdir())
    assert names == [".lock", "current", "v1", "v2"]


def test_default_store_no_store_and_auth(start_daemon, tmp_path):
    # decisions.bundles_dir: auto (the default) is under the state directory
    # (conftest points XDG_STATE_HOME into the daemon's tmp dir).
    default = start_daemon()
    reply = bundles(default).List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10)
    assert reply.dir == str(default.tmp / "state" / "mesa-anyjev" / "bundles" / "fake" / LOCK[:8])
    assert reply.write_error == ""
    assert "bundles: store under " in default.output()
    off = start_daemon("--set", "decisions.bundles_dir=off")
    code, details = code_of(lambda: bundles(off).List(bpb.ListBundlesRequest(lock_sha=LOCK),
                                                      timeout=10))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "decisions.bundles_dir" in details
    d = start_daemon("--set", f"decisions.bundles_dir={tmp_path / 's'}",
                     "--set", "auth.token_env=BUNDLE_TOKEN", env={"BUNDLE_TOKEN": "s3cret"})
    code, _ = code_of(lambda: bundles(d).List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    reply = bundles(d).List(bpb.ListBundlesRequest(lock_sha=LOCK), timeout=10,
                            metadata=[("authorization", "Bearer s3cret")])
    assert list(reply.versions) == [] and reply.model == "fake"


def test_unservable_versions_are_refused_at_put_and_skipped_at_start(
        start_daemon, fitted, tmp_path):
    key, l1, _ = fitted
    store = tmp_path / "store"
    d = start_daemon("--set", f"decisions.bundles_dir={store}")
    stub = bundles(d)
    put(d, l1, manifest(key, "L1", 0.80, 0.10))
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=1, question_id="topic"),
                 timeout=10)
    # A head for a second question, fit without installing it, then broken:
    # it reads block 99 of a 4-block model.
    noul = dpb.Question(id="cells", kind="noul", text=b"Is it about cells?")
    texts = [f"About {TOPICS[i % 4]}, item {i}" for i in range(24)]
    fit = d.decisions.Fit(dpb.FitRequest(
        question=noul, states=[dpb.State(text=t.encode()) for t in texts],
        labels=[int(i % 4 == 2) for i in range(24)], level="L2", dry_run=True), timeout=60)
    bad = json.loads(fit.artifacts_json)
    bad["heads"][fit.question_key]["layer_abs"] = 99
    bad_manifest = json.dumps({"per_question": {"cells": {"key": fit.question_key,
                                                          "level": "L2"}}}).encode()
    code, details = code_of(lambda: put(d, bad, bad_manifest))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "artifacts_json" in details and "layer_abs" in details and "99" in details
    version_dir = store / "fake" / LOCK[:8]
    assert sorted(p.name for p in version_dir.iterdir()) == [".lock", "current", "v1"]
    d.stop()

    # The same version written by an older writer that did not check it,
    # and made CURRENT: the daemon starts, serves the rest, counts it.
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "bad-manifest.json").write_bytes(bad_manifest)
    out = subprocess.run([WRITER, "put", "--root", str(store), "--lock", LOCK,
                          "--artifacts-file", str(tmp_path / "bad.json"),
                          "--manifest-file", str(tmp_path / "bad-manifest.json")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"
    (version_dir / "current" / "cells").write_text("v2\n")
    again = start_daemon("--set", f"decisions.bundles_dir={store}")
    assert level_now(again) == "L1"
    assert "not serving v2 of cells" in again.output() and "layer_abs" in again.output()
    assert "mesa_anyjev_bundles_refused_total 1" in again.metrics()
    code, details = code_of(lambda: again.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=b"About cells")], questions=[noul], level="L2"), timeout=30))
    assert code == grpc.StatusCode.FAILED_PRECONDITION, details


def test_list_questions_names_the_promoted_bundle_version(start_daemon, tmp_path):
    # A served question (the CLI's set) fitted, put under the set's lock and
    # promoted: ListQuestions says the level and the version behind it.
    d = start_daemon("--set", f"decisions.bundles_dir={tmp_path / 'store'}")
    listed = d.decisions.ListQuestions(dpb.ListQuestionsRequest(ids=["avu.keep"]), timeout=10)
    (keep,) = listed.questions
    assert keep.level == "L0" and not keep.HasField("bundle_version")
    texts = [f"An annotation, {'new' if i % 2 else 'redundant'} item {i}" for i in range(16)]
    fit = d.decisions.Fit(dpb.FitRequest(question=keep.question,
                                         states=[dpb.State(text=t) for t in texts],
                                         labels=[i % 2 for i in range(16)], level="L1",
                                         dry_run=True), timeout=60)
    version = put(d, json.loads(fit.artifacts_json),
                  manifest(keep.key, "L1", 0.7, 0.1, qid="avu.keep"), lock=listed.lock_sha).version
    bundles(d).Promote(bpb.PromoteBundleRequest(lock_sha=listed.lock_sha, version=version,
                                                question_id="avu.keep"), timeout=10)
    (now,) = d.decisions.ListQuestions(dpb.ListQuestionsRequest(ids=["avu.keep"]),
                                       timeout=10).questions
    assert (now.level, now.bundle_version) == ("L1", version)
