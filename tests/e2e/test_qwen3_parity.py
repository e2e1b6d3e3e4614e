"""Qwen3 on libtorch against Hugging Face transformers, on tiny random
checkpoints made at test time (no download): GQA ratios 1, 2 and 4, head_dim
unequal to hidden/heads, tied and untied embeddings, one and three shards,
float32 and bfloat16 files. The C++ side is the daemon's own Qwen3Backend
(through tests/tools/qwen3_dump), batching prompts of different lengths; the
oracle runs each prompt alone."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

DUMP = os.environ.get("MESA_ANYJEV_QWEN3_DUMP", "build/tests/qwen3_dump")

CONFIGS = {
    # name: (make() kwargs)
    "gqa1-headdim24-untied-1shard-f32": dict(heads=4, kv_heads=4, head_dim=24, tied=False, shards=1),
    "gqa2-tied-3shards-f32": dict(heads=4, kv_heads=2, head_dim=24, tied=True, shards=3),
    "gqa4-headdim16-untied-bf16file": dict(heads=8, kv_heads=2, head_dim=16, tied=False, shards=1,
                                            dtype="bfloat16"),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3")
    return {name: make(root / name, seed=i, **kw) for i, (name, kw) in enumerate(CONFIGS.items())}


def prompts(seed=0):
    rng = np.random.default_rng(seed)
    lengths = [1, 3, 17, 40, 9]
    return [rng.integers(0, 151669, size=n).tolist() for n in lengths]


def dump(directory, request, dtype="float32", attention="eager"):
    out = subprocess.run([DUMP, str(directory), dtype, attention], input=json.dumps(request),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def oracle(directory, ps, dtype=torch.float32, attention="eager"):
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=dtype, attn_implementation=attention)
    model.eval()
    hidden, logprobs = [], []
    with torch.no_grad():
        for p in ps:
            out = model(torch.tensor([p]), output_hidden_states=True)
            hidden.append(torch.stack([h[0, -1] for h in out.hidden_states]).float().numpy())
            logprobs.append(out.logits[0, -1].float().log_softmax(-1).numpy())
    return np.stack(hidden), np.stack(logprobs)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_float32_parity(checkpoints, name):
    directory = checkpoints[name]
    ps = prompts()
    n = json.loads((directory / "config.json").read_text())["num_hidden_layers"]
    labels = [32, 362, 9454, 7414, 2753, 2308, 151643, 151935]
    ours = dump(directory, {"prompts": ps, "layers": list(range(n + 1)), "label_ids": labels, "top_k": 10})
    hidden, logprobs = oracle(directory, ps)
    got = np.array(ours["hidden"])
    assert got.shape == hidden.shape
    for p in range(len(ps)):
        for layer in range(n + 1):
            rel = np.linalg.norm(got[p, layer] - hidden[p, layer]) / np.linalg.norm(hidden[p, layer])
            assert rel < 1e-4, (p, layer, rel)
    np.testing.assert_allclose(np.array(ours["label_logprobs"]), logprobs[:, labels], atol=1e-4)
    for p, top in enumerate(ours["top"]):
        ids = [t[0] for t in top]
        values = np.array([t[1] for t in top])
        np.testing.assert_allclose(values, logprobs[p, ids], atol=1e-4)
        want = np.sort(logprobs[p])[::-1][:10]
        np.testing.assert_allclose(values, want, atol=1e-4)  # the same top-10 values, in order


@pytest.mark.parametrize("name", list(CONFIGS))
def test_early_stop_is_bit_identical(checkpoints, name):
    directory = checkpoints[name]
    n = json.loads((directory / "config.json").read_text())["num_hidden_layers"]
    full = np.array(dump(directory, {"prompts": prompts(1), "layers": list(range(n + 1))})["hidden"])
    for b in range(1, n):
        early = np.array(dump(directory, {"prompts": prompts(1), "layers": [b]})["hidden"])
        assert np.array_equal(early[:, 0], full[:, b]), b


def test_bfloat16_compute(checkpoints):
    directory = checkpoints["gqa4-headdim16-untied-bf16file"]
    ps = prompts(2)
    labels = list(range(0, 151936, 997))
    ours = dump(directory, {"prompts": ps, "label_ids": labels, "top_k": 1}, dtype="bfloat16")
    _, logprobs = oracle(directory, ps, dtype=torch.bfloat16)
    assert [t[0][0] for t in ours["top"]] == logprobs.argmax(-1).tolist()
    np.testing.assert_allclose(np.array(ours["label_logprobs"]), logprobs[:, labels], atol=0.05)


def test_sdpa_matches_transformers_sdpa(checkpoints):
    directory = checkpoints["gqa2-tied-3shards-f32"]
    ps = prompts(3)
    ours = dump(directory, {"prompts": ps, "label_ids": [1, 2, 3], "layers": [1, 2]}, attention="sdpa")
    hidden, logprobs = oracle(directory, ps, attention="sdpa")
    np.testing.assert_allclose(np.array(ours["label_logprobs"]), logprobs[:, [1, 2, 3]], atol=1e-4)
    np.testing.assert_allclose(np.array(ours["hidden"]), hidden[:, 1:3], rtol=1e-4, atol=1e-4)


def test_identity_binds_config_and_headers(checkpoints, tmp_path):
    directory = checkpoints["gqa1-headdim24-untied-1shard-f32"]
    a = dump(directory, {"prompts": [[1]], "layers": [0]})["identity"]
    assert len(a) == 64 and a == dump(directory, {"prompts": [[1]], "layers": [0]})["identity"]
    other = checkpoints["gqa2-tied-3shards-f32"]
    assert dump(other, {"prompts": [[1]], "layers": [0]})["identity"] != a


def test_refusals_name_the_problem(checkpoints, tmp_path):
    import shutil
    src = checkpoints["gqa1-headdim24-untied-1shard-f32"]
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    config = json.loads((bad / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    (bad / "config.json").write_text(json.dumps(config))
    out = subprocess.run([DUMP, str(bad)], input="{}", capture_output=True, text=True)
    assert out.returncode == 1 and "yarn" in out.stderr
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    config["architectures"] = ["LlamaForCausalLM"]
    (bad / "config.json").write_text(json.dumps(config))
    out = subprocess.run([DUMP, str(bad)], input="{}", capture_output=True, text=True)
    assert out.returncode == 1 and "LlamaForCausalLM" in out.stderr
    config["architectures"] = ["Qwen3ForCausalLM"]
    config["num_hidden_layers"] = 2  # the file holds 3 blocks
    (bad / "config.json").write_text(json.dumps(config))
    out = subprocess.run([DUMP, str(bad)], input="{}", capture_output=True, text=True)
    assert out.returncode == 1 and "model.layers.2" in out.stderr


def test_resident_memory_after_load_is_the_weights(tmp_path):
    # ~320 MB of float32 weights, loaded alone after libtorch is warm: the
    # loader keeps no second copy (mapped files released, no temporaries).
    directory = make(tmp_path / "mid", layers=4, hidden=256, heads=4, kv_heads=2, head_dim=64,
                     intermediate=688, tied=False, shards=1)
    out = dump(directory, {"measure_rss": True})
    assert out["weight_bytes"] > 300e6
    assert out["weights_rss"] <= 1.15 * out["weight_bytes"], out
    print(out)
