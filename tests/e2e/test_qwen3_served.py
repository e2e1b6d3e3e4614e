"""mesa-anyjevd serving a real (tiny, random) Qwen3 checkpoint over gRPC:
GetModelInfo, Tokenize, Logprobs and HiddenStates answer from the model and
agree with transformers and tokenizers."""
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

from conftest import pb  # noqa: E402

SYSTEM = "You are a decision function."
PREFIX = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
          "State:\nA table of protein structures.\n\nQuestion: What is it about?\nOptions:\n")
SUFFIXES = ["A. genes\nB. proteins\nAnswer with the letter only.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n",
            "A. proteins\nB. genes\nAnswer with the letter only.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("served") / "tiny-qwen3", heads=4, kv_heads=2, tied=False)


def test_served_model_matches_transformers(start_daemon, checkpoint):
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    assert (info.name, info.n_layers, info.hidden_size, info.vocab_size) == ("tiny/qwen3", 3, 64, 151936)
    assert (info.dtype, info.device, info.attention) == ("float32", "cpu", "eager")
    assert len(info.identity) == 64 and info.hidden_states and info.early_stop
    assert_start_names_cpu_paths(daemon.output())

    hf_tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    texts = [PREFIX, *SUFFIXES, "A", " Yes", "naïve café 你好 🙂"]
    reply = daemon.stub.Tokenize(pb.TokenizeRequest(texts=[t.encode() for t in texts]), timeout=30)
    for text, item in zip(texts, reply.items):
        assert list(item.ids) == hf_tok.encode(text, add_special_tokens=False).ids, text

    a, b = hf_tok.token_to_id("A"), hf_tok.token_to_id("B")
    group = pb.PromptGroup(prefix=pb.Segment(text=PREFIX.encode()),
                           suffixes=[pb.Segment(text=s.encode()) for s in SUFFIXES], label_ids=[a, b])
    logprobs = daemon.stub.Logprobs(pb.LogprobsRequest(groups=[group], top_k=5), timeout=60)
    hidden = daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[group], layers=[0, 2, -1]),
                                      timeout=60)
    assert list(hidden.layers) == [0, 2, 3]
    got_hidden = np.frombuffer(hidden.hidden.data, "<f4").reshape(list(hidden.hidden.shape))

    model = Qwen3ForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        for i, suffix in enumerate(SUFFIXES):
            ids = hf_tok.encode(PREFIX + suffix, add_special_tokens=False).ids
            out = model(torch.tensor([ids]), output_hidden_states=True)
            want = out.logits[0, -1].float().log_softmax(-1).numpy()
            prompt = logprobs.groups[0].prompts[i]
            assert prompt.n_tokens == len(ids)
            np.testing.assert_allclose(list(prompt.label_logprobs), want[[a, b]], atol=1e-4)
            assert [t.id for t in prompt.top] == np.argsort(-want)[:5].tolist()
            for j, layer in enumerate([0, 2, 3]):
                ref = out.hidden_states[layer][0, -1].numpy()
                assert np.linalg.norm(got_hidden[i, j] - ref) / np.linalg.norm(ref) < 1e-4
    assert "mesa_anyjev_model_loaded 1" in daemon.metrics()


def assert_start_names_cpu_paths(log):
    """The start log names the CPU paths this model runs (docs/model.md): the
    projections' GEMM as cpu_gemm auto measured it (both timings), then the
    norms, attention, heap and host block cache. The heap is glibc's kept
    one, except in make test-asan's daemon: ASan's allocator takes no
    mallopt setting, and the line says so."""
    from conftest import DAEMON
    asan = b"__asan_init" in Path(DAEMON).read_bytes()
    heap = r"glibc defaults \(mallopt not taken\)" if asan else r"kept \(mallopt\)"
    assert re.search(r"Qwen3 on cpu in float32, eager attention, projections by (onednn|aten) "
                     r"\(cpu_gemm auto: measured \d+ us at::linear, \d+ us oneDNN packed ", log), log
    assert re.search(r"CPU paths: norms fused \(row_norm\), attention eager \(ATen\), "
                     rf"heap {heap}, host block cache 2147483648 bytes$", log, re.M), log


def test_broken_checkpoint_is_refused_at_start(tmp_path, checkpoint):
    import shutil
    import subprocess
    from conftest import DAEMON
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    data = bytearray((broken / "model.safetensors").read_bytes())
    (broken / "model.safetensors").write_bytes(bytes(data[:-100]))  # truncated
    out = subprocess.run([DAEMON, "--model", str(broken), "--listen", "127.0.0.1:0",
                          "--metrics-listen", ""], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "model.safetensors" in out.stderr


def test_a_libtorch_error_while_loading_is_one_line_not_an_abort(tmp_path, checkpoint):
    # libtorch's allocator throws while loading: the KV pool (4 GiB) passes
    # the memory check (the host has the memory) but not the 6 GiB address
    # space the daemon is given (it maps about 4 GiB of libraries first).
    # Under ASan, which reserves terabytes of shadow at start and so cannot
    # run under an address-space limit, its allocator's cap on one
    # allocation (256 MB, below each layer's share of the pool) refuses it
    # instead, returning null as make test-asan's options allow.
    # The daemon exits 1 with one line saying what failed and what to check.
    import resource
    import subprocess
    from conftest import DAEMON
    limit = 6 << 30
    sanitized = "libasan" in subprocess.run(["ldd", DAEMON], capture_output=True,
                                            text=True).stdout
    env, limit_address_space = dict(os.environ), None
    if sanitized:
        env["ASAN_OPTIONS"] = ":".join(filter(None, [
            env.get("ASAN_OPTIONS", ""), "allocator_may_return_null=1",
            "max_allocation_size_mb=256"]))
    else:
        def limit_address_space():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = subprocess.run([DAEMON, "--model", str(checkpoint), "--listen", "127.0.0.1:0",
                          "--metrics-listen", "", "--set", f"engine.kv_pool_bytes={4 << 30}",
                          "--set", "engine.host_cache_bytes=0",
                          "--set", "engine.memory_reserve_bytes=0"],
                         capture_output=True, text=True, timeout=120, env=env,
                         preexec_fn=limit_address_space)
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if "loading the model on cpu" in line]
    assert len(lines) == 1, out.stderr
    assert "allocate" in lines[0] and "check model.device" in lines[0], lines[0]
    assert "Exception raised from" not in out.stderr and "frame #" not in out.stderr


def pool_in_use(daemon):
    for line in daemon.metrics().splitlines():
        if line.startswith('mesa_anyjev_kv_pool_blocks{state="in_use"}'):
            return float(line.split()[-1])
    raise AssertionError("no mesa_anyjev_kv_pool_blocks{state=\"in_use\"}")


def passes_run(daemon):
    for line in daemon.metrics().splitlines():
        if line.startswith("mesa_anyjev_batch_tokens_count"):
            return float(line.split()[-1])
    return 0.0


def test_a_call_stopped_between_passes_releases_the_kv_pool(start_daemon, checkpoint):
    # Passes of 16 tokens over 30 groups of ~1500 tokens: thousands of passes.
    # A cancel after the first pass, and a deadline that passes during the
    # call, each end the call between passes with their own code; the blocks
    # the call held go back to the pool, and the daemon answers the next call.
    import grpc
    daemon = start_daemon("--model", str(checkpoint), "--set", "engine.batch_tokens=16",
                          "--set", "server.max_deadline_s=600")
    words = " ".join(f"w{i}" for i in range(500))
    groups = [pb.PromptGroup(prefix=pb.Segment(text=f"{g} {words}".encode()),
                             suffixes=[pb.Segment(text=s.encode()) for s in SUFFIXES],
                             label_ids=[32]) for g in range(30)]
    request = pb.LogprobsRequest(groups=groups)
    call = daemon.stub.Logprobs.future(request, timeout=600)
    while passes_run(daemon) < 1 and not call.done():
        time.sleep(0.05)  # polls an event (a pass ran), not a timing window
    assert call.cancel()
    with pytest.raises(grpc.FutureCancelledError):
        call.result()
    with pytest.raises(grpc.RpcError) as late:
        daemon.stub.Logprobs(request, timeout=1.0)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    small = pb.LogprobsRequest(groups=groups[:1])
    # Each answered call ran after the stopped ones finished on the one
    # engine thread, so the pool holds nothing for them any more.
    assert len(daemon.stub.Logprobs(small, timeout=120).groups) == 1
    assert pool_in_use(daemon) == 0


def test_a_head_past_the_last_block_is_refused_not_run(start_daemon, checkpoint):
    # The case: layer_abs 99 on a 3-block model used to load and
    # then fail every L2 Decide with a libtorch stack trace.
    from conftest import dpb
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")
    q = dpb.Question(kind="choice", text=b"What is it about?",
                     options=[b"genes", b"proteins", b"cells", b"viruses"])
    texts = [f"A table about {t}, item {i}" for i in range(8)
             for t in ("genes", "proteins", "cells", "viruses")]
    fit = daemon.decisions.Fit(dpb.FitRequest(
        question=q, states=[dpb.State(text=t.encode()) for t in texts],
        labels=[i % 4 for i in range(len(texts))], level="L2", dry_run=True), timeout=300)
    file = json.loads(fit.artifacts_json)
    (key, head), = file["heads"].items()
    assert head["layer_abs"] <= 3
    head["layer_abs"] = 99
    with pytest.raises(Exception) as err:
        daemon.decisions.LoadArtifacts(dpb.LoadArtifactsRequest(
            artifacts_json=json.dumps(file).encode()), timeout=30)
    assert err.value.code().name == "INVALID_ARGUMENT", err.value.details()
    assert "layer_abs" in err.value.details() and "n_layers=3" in err.value.details()
    # Through the decider's own path too: nothing reached the forward.
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=b"A table about cells")], questions=[q], level="L0"), timeout=120)
    assert reply.decisions[0].level == "L0"
