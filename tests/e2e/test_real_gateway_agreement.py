"""Issue 39 against the real gateway of the tests (real_gateway.py: vLLM's
CPU build on loopback) and mesa-anyjevd on a tiny random Qwen3.

vLLM serving the daemon's own checkpoint: bench compare finds every
question agrees (no flip, probabilities equal to rounding); the daemon's
L1 temperature is adopted by the gateway backend and then serves the same
L1 decisions there; a gateway stopped in the middle of a composite run is
failed over to the daemon, each decision after the stop marked with the
daemon's model, the ones before unmarked. vLLM serving another checkpoint
(seed 1): disagreement, adopt refused, and a stopped gateway is not failed
over."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import real_gateway as rg  # noqa: E402
from conftest import CLI, CLI_HOME, Daemon, dpb, run_cli  # noqa: E402
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LOCK_DOC = json.loads((ROOT / "questions.lock.json").read_text())
LOCK = LOCK_DOC["lock_sha"]
KEY_ENV = {"MESA_LLM_API_KEY": rg.MASTER_KEY}
TOL = 1e-5
MODEL = "tiny/qwen3"
SUBJECTS = ["forest birds", "ground beetles per trap", "soil temperature", "plot identifiers",
            "mass of the sample in grams", "taxon names", "trap collection dates", "site codes"]


def state(i):
    return f"Column 'c{i}': {SUBJECTS[i % len(SUBJECTS)]} at site {i % 7}"


def labels_file(path):
    rows = []
    for i in range(48):
        for qid, label in (("term.fits", i % 2), ("column.aspect", i % 8)):
            rows.append({"question_id": qid, "state": state(i), "label": label,
                         "source": "curator", "card": f"card-{i % 3}"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two tiny checkpoints (seeds 0 and 1), the daemon on seed 0, a label
    store; the vLLMs are started by the tests, one at a time."""
    tmp = tmp_path_factory.mktemp("agreement")
    tok = Tokenizer.from_file(str(ROOT / "tests" / "data" / "qwen3-tokenizer" /
                                  "tokenizer.json"))
    same = make(tmp / "seed0", head_dim=rg.HEAD_DIM, reachable=rg.lifted(tok))
    other = make(tmp / "seed1", head_dim=rg.HEAD_DIM, reachable=rg.lifted(tok), seed=1)
    (tmp / "daemon").mkdir()
    daemon = Daemon(tmp / "daemon", args=("--model", str(same), "--set", f"model.name={MODEL}"),
                    start_timeout=120)
    common = ["--set", f"labels.dir={tmp}/labels", "--set", f"artifacts.dir={tmp}/bundles",
              "--set", f"client.address={daemon.address}", "--set", "compare.resamples=200"]
    r = run_cli("learn", "ingest", "--labels", str(labels_file(tmp / "labels.jsonl")), *common)
    assert r.returncode == 0, r.stderr
    try:
        yield tmp, same, other, daemon, common
    finally:
        daemon.stop()


def gateway(checkpoint, url, name):
    return ["--set", f"backend.gateway_base_url={url}", "--set", f"backend.served_model={rg.SERVED}",
            "--set", f"backend.tokenizer={checkpoint}", "--set", f"backend.canonical_model={name}"]


def compare(common, gw, out):
    r = run_cli("bench", "compare", "--a", "gateway", "--b", "hf", "--out", str(out), "--json",
                *common, *gw, env=KEY_ENV, timeout=900)
    return r, json.loads(r.stdout) if r.stdout else None


def promote_l1_on_daemon(daemon):
    q = LOCK_DOC["questions"]["term.fits"]
    reply = daemon.decisions.Fit(dpb.FitRequest(
        question=dpb.Question(id="term.fits", kind="noul", text=q["text"].encode()),
        states=[dpb.State(text=state(i).encode()) for i in range(48)],
        labels=[i % 2 for i in range(48)], level="L1", dry_run=True), timeout=300)
    stub = bundles_pb2_grpc.BundlesStub(daemon.channel)
    manifest = {"per_question": {"term.fits": {"key": reply.question_key, "level": "L1"}},
                "validation": {"term.fits": {"loco": {"acc": 0.6, "ece": 0.1}}}}
    version = stub.Put(bpb.PutBundleRequest(lock_sha=LOCK, artifacts_json=reply.artifacts_json,
                                            manifest_json=json.dumps(manifest).encode()),
                       timeout=60).version
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=version,
                                          question_id="term.fits"), timeout=60)


def decide_lines(args, lines, level, env=KEY_ENV):
    r = run_cli("decide", *args, "--question", "term.fits", "--level", level, "--states-file",
                "-", env=env, input="".join(json.dumps(s) + "\n" for s in lines), timeout=600)
    assert r.returncode == 0, r.stderr
    return [json.loads(x)["decisions"][0] for x in r.stdout.splitlines()]


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b))


def test_the_same_checkpoint_agrees_adopts_and_fails_over(world):
    tmp, same, _, daemon, common = world
    vllm = rg.start_vllm(same, tmp)
    try:
        gw = gateway(same, vllm.url, "tiny/qwen3-vllm")
        r, doc = compare(common, gw, tmp / "out")
        assert r.returncode == 0, r.stdout + r.stderr
        for task in doc["tasks"].values():
            assert task["verdict"] == "agree", task
            for level in ("raw", "L0"):
                cell = task["cells"][level]
                assert cell["flips"] == 0 and cell["p95_abs_dp"] < 1e-4, (task["task"], cell)
        assert doc["models"][0]["model"] == "tiny/qwen3-vllm"
        assert doc["models"][1]["model"] == MODEL
        assert len(doc["records"]) == 2

        # The daemon's L1 temperature loads for the gateway's model.
        promote_l1_on_daemon(daemon)
        hf = ["--backend", "hf", *common]
        gw_args = ["--backend", "gateway", *common, *gw]
        r = run_cli("bundles", "adopt", *gw_args, "--from", "hf", "--question", "term.fits",
                    env=KEY_ENV)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "(its L1 artifact; no head)" in r.stdout  # the gateway has no hidden states
        probe = [state(i) for i in range(100, 112)]
        ours = decide_lines(hf, probe, "L1")
        theirs = decide_lines(gw_args, probe, "L1")
        for a, b in zip(ours, theirs):
            assert a["level"] == b["level"] == "L1"
            assert close(a["probs"], b["probs"]), (a["probs"], b["probs"])

        # Without the switch a stopped gateway fails the call (below); with
        # it, the composite fails over for the agreed questions, marked.
        composite = ["--backend", "composite", *common, *gw, "--set",
                     "backend.failover_to_daemon=true", "--set", f"backend.hf_model={MODEL}"]
        env = {**KEY_ENV, "HOME": CLI_HOME}
        proc = subprocess.Popen(
            [str(Path(CLI).resolve()), "decide", *composite, "--question", "term.fits",
             "--level", "L0", "--states-file", "-"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        first = [state(i) for i in range(200, 264)]
        second = [state(i) for i in range(300, 364)]
        proc.stdin.write("".join(json.dumps(s) + "\n" for s in first))
        proc.stdin.flush()
        before = [json.loads(proc.stdout.readline()) for _ in first]  # the first chunk is out
        vllm.stop()
        proc.stdin.write("".join(json.dumps(s) + "\n" for s in second))
        proc.stdin.close()
        after = [json.loads(line) for line in proc.stdout.read().splitlines()]
        err = proc.stderr.read()
        assert proc.wait(timeout=600) == 0, err
        assert "failover: when the gateway fails, tiny/qwen3 may serve" in err
        assert "term.fits" in err.split("failover:")[1].splitlines()[0]
        assert [len(before), len(after)] == [64, 64]
        for line in before:
            d = line["decisions"][0]
            assert "served_by" not in d["diagnostics"] and d["level"] == "L0"
        for line in after:
            d = line["decisions"][0]
            assert d["level"] == "L0"
            assert d["diagnostics"]["served_by"] == MODEL
            assert d["diagnostics"]["failover"].startswith("gateway UNAVAILABLE")
        # They are the daemon's L0 decisions of those states (one call's prior).
        direct = decide_lines(hf, second, "L0")
        for line, d in zip(after, direct):
            assert close(line["decisions"][0]["probs"], d["probs"])

        # The switch off: the same stopped gateway fails the command.
        r = run_cli("decide", "--backend", "composite", *common, *gw, "--question", "term.fits",
                    "--level", "L0", "--state", state(1), "--set", "backend.label_readout=token_ids",
                    env=KEY_ENV, timeout=600)
        assert r.returncode == 1
    finally:
        vllm.stop()


def test_another_checkpoint_disagrees_and_unlocks_nothing(world):
    tmp, same, other, daemon, common = world
    vllm = rg.start_vllm(other, tmp)
    try:
        gw = gateway(other, vllm.url, "tiny/qwen3-seed1")
        r, doc = compare(common, gw, tmp / "out-other")
        assert r.returncode == 1, r.stdout + r.stderr
        verdicts = {t["question_id"]: t["verdict"] for t in doc["tasks"].values()}
        assert verdicts == {"term.fits": "disagree", "column.aspect": "disagree"}
        for task in doc["tasks"].values():
            assert task["cells"]["raw"]["flip_interval"][1] > 0.1
        r = run_cli("bundles", "adopt", "--backend", "gateway", *common, *gw, "--from", "hf",
                    "--question", "term.fits", env=KEY_ENV)
        assert r.returncode == 1
        assert "says disagree for term.fits" in r.stdout
        assert "mesa-anyjev bench compare --a gateway --b hf" in r.stdout
        r = run_cli("bundles", "list", "--backend", "gateway", *common, *gw)
        assert "tiny/qwen3 (hf)" in r.stdout and "term.fits disagree" in r.stdout

        composite = ["--backend", "composite", *common, *gw, "--set",
                     "backend.failover_to_daemon=true", "--set",
                     "backend.label_readout=token_ids"]
        vllm.stop()
        r = run_cli("decide", *composite, "--question", "term.fits", "--level", "L0",
                    "--state", state(1), env=KEY_ENV, timeout=600)
        assert r.returncode == 1, r.stdout
        assert "failover: no question may be served by the daemon" in r.stderr
        assert "served_by" not in r.stdout
    finally:
        vllm.stop()
