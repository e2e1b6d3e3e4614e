"""The aarch64 mesa-anyjevd under qemu-user against the x86_64 one on the same
tiny random Qwen3, on the CPU in float32 (`make check-arm64`, issue 26):
Logprobs, HiddenStates and Decide at L0 and L2 agree within the x86_64
parity tests' tolerances (1e-4 on label logprobs, 1e-4 relative on hidden
states) with the same decisions, in each set of CPU paths the daemon
chooses, and both name the same paths at start. scripts/check_arm64.sh runs
it and names the two daemons and the emulator."""
import json
import os
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "e2e"))
sys.path.insert(0, str(TESTS / "tools"))
from conftest import Daemon, dpb, pb  # noqa: E402
from make_tiny_qwen3 import make  # noqa: E402

ARM64_DAEMON = os.environ.get("MESA_ANYJEVD_ARM64", "")
QEMU = shlex.split(os.environ.get("MESA_ANYJEV_QEMU", ""))
# Failure bounds for work under emulation (libtorch's load, a Decide).
START_S, CALL_S = 900, 900

LOGPROB_TOL = 1e-4
HIDDEN_REL_TOL = 1e-4
PROB_TOL = 1e-4

# The CPU paths the daemon chooses between, each set run on both builds:
# the packed oneDNN GEMM and the fused norms with eager attention; ATen's
# GEMM with the CPU flash kernel (sdpa). Both keep the heap (mallopt) and
# the host block cache (on by default).
CONFIGS = {
    "onednn-eager": ("--set", "model.cpu_gemm=onednn", "--set", "model.attention=eager"),
    "aten-sdpa": ("--set", "model.cpu_gemm=aten", "--set", "model.attention=sdpa"),
}
WANT_LOG = {
    "onednn-eager": ("projections by onednn", "CPU paths: norms fused (row_norm), attention "
                     "eager (ATen), heap kept (mallopt), host block cache"),
    "aten-sdpa": ("projections by aten", "CPU paths: norms fused (row_norm), attention "
                  "flash (CPU kernel), heap kept (mallopt), host block cache"),
}

TOPICS = ["genes", "proteins", "cells", "viruses"]
TEXTS = [f"Item {i}: a dataset about {TOPICS[i % 4]} measured in {['mice', 'humans', 'yeast'][i % 3]}"
         for i in range(40)]
LABELS = [i % 4 for i in range(40)]
PREFIX = ("<|im_start|>system\nYou are a decision function.<|im_end|>\n<|im_start|>user\n"
          "State:\nA table of protein structures.\n\nQuestion: What is it about?\nOptions:\n")
SUFFIXES = [f"A. {a}\nB. {b}\nAnswer with the letter only.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
            for a, b in (("genes", "proteins"), ("proteins", "genes"))]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    assert ARM64_DAEMON and QEMU, \
        "MESA_ANYJEVD_ARM64 and MESA_ANYJEV_QEMU are unset: run make check-arm64"
    return make(tmp_path_factory.mktemp("arm64") / "tiny-qwen3", tied=False)


@pytest.fixture(scope="module", params=list(CONFIGS))
def daemons(request, checkpoint, tmp_path_factory):
    """(x86_64, aarch64) daemons on one checkpoint with one set of paths."""
    args = ("--model", str(checkpoint), "--set", "model.name=tiny/qwen3",
            *CONFIGS[request.param])
    started = []
    try:
        for name, options in (("x86_64", {}), ("aarch64", {"binary": ARM64_DAEMON,
                                                           "wrapper": QEMU})):
            d = tmp_path_factory.mktemp(f"{request.param}-{name}")
            started.append(Daemon(d, args=args, start_timeout=START_S, **options))
        yield request.param, started[0], started[1]
    finally:
        for daemon in started:
            daemon.stop()


def start_lines(daemon):
    return [line for line in daemon.output().splitlines()
            if "projections by" in line or "CPU paths:" in line]


def test_both_name_the_same_cpu_paths(daemons):
    config, x86, arm = daemons
    for daemon in (x86, arm):
        lines = start_lines(daemon)
        print(f"{config} {'x86_64' if daemon is x86 else 'aarch64'}: {lines}")
        for want in WANT_LOG[config]:
            assert any(want in line for line in lines), (want, daemon.output())
    # Same choices, same wording (the lines without their time and level).
    x86_lines, arm_lines = ([line.split(" ", 2)[-1] for line in start_lines(d)] for d in (x86, arm))
    assert x86_lines == arm_lines


def test_logprobs_and_hidden_states_agree(daemons):
    _, x86, arm = daemons
    ids = x86.stub.Tokenize(pb.TokenizeRequest(texts=[b"A", b"B", b" Yes", b" No"]), timeout=30)
    labels = [item.ids[0] for item in ids.items]
    groups = [pb.PromptGroup(prefix=pb.Segment(text=(PREFIX + extra).encode()),
                             suffixes=[pb.Segment(text=s.encode()) for s in SUFFIXES],
                             label_ids=labels) for extra in ("", "(second group)\n")]
    got = {}
    for name, d in (("x86", x86), ("arm", arm)):
        logprobs = d.stub.Logprobs(pb.LogprobsRequest(groups=groups, top_k=5), timeout=CALL_S)
        hidden = d.stub.HiddenStates(pb.HiddenStatesRequest(groups=groups, layers=[0, 2, -1]),
                                     timeout=CALL_S)
        assert list(hidden.layers) == [0, 2, 3]
        states = np.frombuffer(hidden.hidden.data, "<f4").reshape(list(hidden.hidden.shape))
        got[name] = (logprobs, states)
    (x_lp, x_h), (a_lp, a_h) = got["x86"], got["arm"]
    for xg, ag in zip(x_lp.groups, a_lp.groups, strict=True):
        for xp, ap in zip(xg.prompts, ag.prompts, strict=True):
            assert xp.n_tokens == ap.n_tokens
            np.testing.assert_allclose(list(ap.label_logprobs), list(xp.label_logprobs),
                                       atol=LOGPROB_TOL, rtol=0)
            assert [t.id for t in ap.top] == [t.id for t in xp.top]
            np.testing.assert_allclose([t.logprob for t in ap.top], [t.logprob for t in xp.top],
                                       atol=LOGPROB_TOL, rtol=0)
    assert x_h.shape == a_h.shape == (4, 3, 64)
    rel = np.linalg.norm(a_h - x_h, axis=-1) / np.linalg.norm(x_h, axis=-1)
    assert rel.max() < HIDDEN_REL_TOL, rel


def decide(daemon, level, **kw):
    q = dpb.Question(kind="choice", text=b"What is it about?", id="topic",
                     options=[o.encode() for o in TOPICS])
    return daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=t.encode()) for t in TEXTS[:8]], questions=[q], level=level,
        **kw), timeout=CALL_S).decisions


def same_decisions(want, got, level):
    assert len(want) == len(got) == 8
    for w, g in zip(want, got):
        assert w.level == g.level == level
        np.testing.assert_allclose(list(g.probs), list(w.probs), atol=PROB_TOL, rtol=0)
        assert int(np.argmax(g.probs)) == int(np.argmax(w.probs)), (list(w.probs), list(g.probs))


def test_decide_at_l0_and_l2_agree(daemons):
    _, x86, arm = daemons
    same_decisions(decide(x86, "L0"), decide(arm, "L0"), "L0")
    # One L2 head, fit on the x86_64 daemon (not installed), read by both.
    q = dpb.Question(kind="choice", text=b"What is it about?", id="topic",
                     options=[o.encode() for o in TOPICS])
    fit = x86.decisions.Fit(dpb.FitRequest(
        question=q, states=[dpb.State(text=t.encode()) for t in TEXTS], labels=LABELS,
        level="L2", dry_run=True), timeout=CALL_S)
    assert json.loads(fit.artifacts_json)["heads"]
    same_decisions(decide(x86, "L2", artifacts_json=fit.artifacts_json),
                   decide(arm, "L2", artifacts_json=fit.artifacts_json), "L2")
