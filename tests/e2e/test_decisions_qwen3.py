"""Decide on a tiny random Qwen3 served by mesa-anyjevd: every level end to
end through the daemon (raw, L0, Fit L1 -> L1, Fit L2 -> L2, auto with
require), the prompt in Qwen3's chat format, bad input on the real
tokenizer, and agreement with anyjev 0.2.0 running the same checkpoint in
transformers (its HFBackend): raw and L0 probabilities, and L1 and L2 from
artifacts anyjev fit, loaded into the daemon."""
import json
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import dpb  # noqa: E402

TOPICS = ["genes", "proteins", "cells", "viruses"]
TEXTS = [f"Item {i}: a dataset about {TOPICS[i % 4]} measured in {['mice', 'humans', 'yeast'][i % 3]}"
         for i in range(40)]
LABELS = [i % 4 for i in range(40)]
# float32 forwards in two implementations (and anyjev's left padding):
# readouts agree to ~1e-6; the decision maths adds nothing.
TOL = 2e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("decide") / "tiny-qwen3", tied=False)


@pytest.fixture(scope="module")
def anyjev_backend(checkpoint):
    from anyjev.backends.hf import HFBackend
    return HFBackend(str(checkpoint), device="cpu", dtype="float32")


@pytest.fixture
def served(start_daemon, checkpoint):
    return start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")


def choice(options=TOPICS, **kw):
    return dpb.Question(kind="choice", text=b"What is it about?",
                        options=[o.encode() for o in options], **kw)


def decide(daemon, texts, questions, level, **kw):
    return daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=t.encode()) for t in texts], questions=questions, level=level,
        **kw), timeout=120)


def fit(daemon, question, level, n=len(TEXTS)):
    return daemon.decisions.Fit(dpb.FitRequest(
        question=question, states=[dpb.State(text=t.encode()) for t in TEXTS[:n]],
        labels=LABELS[:n], level=level), timeout=300)


def test_every_level_through_the_daemon(served):
    q = choice(id="topic")
    raw = decide(served, TEXTS[:2], [q, dpb.Question(kind="noul", text=b"Is it human?")],
                 "raw", return_prompts=True)
    prompt = raw.decisions[0].diagnostics.prompt_texts[0]
    assert prompt.startswith("<|im_start|>system\nYou are a decision function.")
    assert prompt.endswith("Answer with the letter only.<|im_end|>\n<|im_start|>assistant\n"
                           "<think>\n\n</think>\n\n")
    l0 = decide(served, TEXTS[:8], [q], "L0")
    assert {d.level for d in l0.decisions} == {"L0"}
    assert l0.decisions[0].diagnostics.shifts_read == 4
    assert l0.decisions[0].diagnostics.prior_method == "batch"  # 8 states

    code = None
    try:
        decide(served, TEXTS[:1], [q], "auto", require="L1")
    except grpc.RpcError as e:
        code = e.code()
    assert code == grpc.StatusCode.FAILED_PRECONDITION

    l1_fit = fit(served, q, "L1")
    assert json.loads(l1_fit.artifact_json)["model"] == "tiny/qwen3"
    l1 = decide(served, TEXTS[:4], [q], "auto", require="L1")
    assert {d.level for d in l1.decisions} == {"L1"}
    l2_fit = fit(served, q, "L2")
    assert l2_fit.layer in (2, 3)  # default candidates of 3 blocks: {2, 3}
    l2 = decide(served, TEXTS[:4], [q], "auto", require="L2")
    d = l2.decisions[0]
    assert d.level == "L2" and d.diagnostics.blocks_executed == l2_fit.layer
    assert d.diagnostics.n_blocks == 3 and d.diagnostics.early_stop
    for level in ("raw", "L0", "L1", "L2"):
        reply = decide(served, TEXTS[:2], [q], level)
        assert all(x.level == level and abs(sum(x.probs) - 1) < 1e-9 for x in reply.decisions)


def test_bad_input_on_the_qwen3_tokenizer(served):
    def code_of(call):
        with pytest.raises(grpc.RpcError) as err:
            call()
        return err.value.code(), err.value.details()

    code, details = code_of(lambda: decide(
        served, ["x"], [choice(labels=[b"A", b"B", b"C", b"apple pie"])], "L0"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and '"apple pie"' in details
    code, _ = code_of(lambda: decide(served, ["x"], [choice(options=[])], "L0"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    code, _ = code_of(lambda: decide(served, ["x"], [choice(options=[f"o{i}" for i in range(27)])],
                                     "L0"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    code, _ = code_of(lambda: decide(served, ["x"], [choice()], "L4"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    # A score of 10 levels falls back to letters: "10" is no single token.
    reply = decide(served, ["x"], [dpb.Question(kind="score", text=b"How much?", bins=10)], "raw",
                   return_prompts=True)
    assert "J. 0.9 to 1\nAnswer with the letter only." in \
        reply.decisions[0].diagnostics.prompt_texts[0]


def test_agrees_with_anyjev_on_the_same_checkpoint(served, anyjev_backend):
    from anyjev import Decider, Question
    q_py = Question.choice("What is it about?", TOPICS)
    oracle = Decider(anyjev_backend)
    q = choice()
    # raw and L0 (a first call on both sides: the same batch prior).
    for level in ("raw", "L0"):
        got = decide(served, TEXTS[:10], [q], level).decisions
        want = oracle.decide_batch(TEXTS[:10], q_py, level=level)
        for g, w in zip(got, want):
            assert np.max(np.abs(np.asarray(g.probs) - w.probs)) < TOL, level
            assert g.diagnostics.prior_method == w.diagnostics.get("prior_method", "")
    # L1 and L2 fit by anyjev, served by the daemon from its heads file.
    oracle.calibrate(q_py, TEXTS[:24], LABELS[:24])
    oracle.fit_head(q_py, TEXTS[:32], LABELS[:32])
    file = oracle.export_artifacts()
    file["model"] = "tiny/qwen3"
    for section in ("artifacts", "heads"):
        for art in file[section].values():
            art["model"] = "tiny/qwen3"
    loaded = served.decisions.LoadArtifacts(dpb.LoadArtifactsRequest(
        artifacts_json=json.dumps(file).encode()), timeout=30)
    assert loaded.loaded == 2
    for level in ("L1", "L2"):
        got = decide(served, TEXTS[32:], [q], level).decisions
        want = oracle.decide_batch(TEXTS[32:], q_py, level=level)
        for g, w in zip(got, want):
            assert g.level == w.level == level
            assert np.max(np.abs(np.asarray(g.probs) - w.probs)) < TOL * 10, level
