"""GPU checks for the Qwen3 path (run by tests/gpu/run.sh on a machine with an
NVIDIA GPU): tiny-config parity in CUDA bf16 against transformers, prefill
tokens/s of a Qwen3-8B-shaped random checkpoint (ours eager and sdpa against
transformers' sdpa), and the engine comparison of make bench-engine (L0 with
the shared prefix, the L2 early stop, 17 questions with the prefix cache,
achieved TFLOP/s against a measured bf16 GEMM peak) on that checkpoint, all in
one run on the same GPU. Prints JSON and writes it to $OUT/gpu_check.json.

GPU_SMOKE=1 runs the same code on the CPU with a small shape (2 blocks,
hidden 512) to check the script itself where there is no GPU."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tools"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_engine import Ours, achieved_row, backbone_params, compare, sync  # noqa: E402
from make_tiny_qwen3 import copy_tokenizer, make  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

DUMP = os.environ.get("MESA_ANYJEV_QWEN3_DUMP", "build/tests/qwen3_dump")
OUT = Path(os.environ.get("OUT", "/tmp"))
WORK = Path(os.environ.get("GPU_WORK", "/tmp/mesa-anyjev-gpu"))
SMOKE = os.environ.get("GPU_SMOKE") == "1"
DEVICE = "cpu" if SMOKE else "cuda"


def dump(directory, request, dtype="bfloat16", attention="eager", device=DEVICE):
    out = subprocess.run([DUMP, str(directory), dtype, attention, device], input=json.dumps(request),
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout)


def parity():
    directory = make(WORK / "tiny", heads=8, kv_heads=2, head_dim=16, dtype="bfloat16")
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 151669, size=n).tolist() for n in (1, 7, 33, 120)]
    labels = list(range(0, 151936, 997))
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16,
                                             attn_implementation="eager").to(DEVICE).eval()
    with torch.no_grad():
        want = np.stack([model(torch.tensor([p], device=DEVICE)).logits[0, -1].float()
                         .log_softmax(-1).cpu().numpy() for p in prompts])
    result = {}
    for attention in ("eager", "sdpa"):
        ours = dump(directory, {"prompts": prompts, "label_ids": labels, "top_k": 1}, attention=attention)
        got = np.array(ours["label_logprobs"])
        result[attention] = {
            "argmax_equal": [t[0][0] for t in ours["top"]] == want.argmax(-1).tolist(),
            "max_abs_label_logprob_diff": float(np.abs(got - want[:, labels]).max()),
        }
    return result


def eight_b_shaped(layers):
    """A random Qwen3-8B-shaped checkpoint (SMOKE: a small one), bf16."""
    if SMOKE:
        config = Qwen3Config(vocab_size=151936, hidden_size=512, intermediate_size=1536,
                             num_hidden_layers=layers, num_attention_heads=8,
                             num_key_value_heads=4, head_dim=64, tie_word_embeddings=False)
    else:
        config = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                             num_hidden_layers=layers, num_attention_heads=32,
                             num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
                             rope_theta=1000000.0)
    directory = WORK / f"qwen3-{'smoke' if SMOKE else '8b'}-shaped-{layers}"
    if not (directory / "config.json").exists():
        with torch.device(DEVICE):
            model = Qwen3ForCausalLM(config).to(torch.bfloat16)
        model.save_pretrained(directory, max_shard_size="5GB")
        copy_tokenizer(directory)
        del model
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    return directory


def bf16_gemm_peak():
    """A bf16 GEMM peak on this device, the ceiling for prefill."""
    n = 2048 if SMOKE else 8192
    a = torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16)
    a @ a
    sync(DEVICE)
    start = time.perf_counter()
    for _ in range(20):
        a @ a
    sync(DEVICE)
    return 20 * 2 * n ** 3 / (time.perf_counter() - start)


def prefill(model, directory):
    rows = []
    for tokens in ((128,) if SMOKE else (128, 512, 2048)):
        ids = torch.randint(0, 151000, (1, tokens), device=DEVICE)
        with torch.no_grad():
            model(ids)
            sync(DEVICE)
            start = time.perf_counter()
            for _ in range(5):
                model.model(ids)  # the backbone; lm_head at every position would favour us
                sync(DEVICE)
            theirs = tokens * 5 / (time.perf_counter() - start)
        ours = {a: dump(directory, {"time_prefill": {"tokens": tokens, "batch": 1, "repeat": 5}},
                        attention=a)["tokens_per_second"] for a in ("eager", "sdpa")}
        rows.append({"tokens": tokens, "transformers_sdpa_tok_s": theirs,
                     "ours_eager_tok_s": ours["eager"], "ours_sdpa_tok_s": ours["sdpa"],
                     "ratio_sdpa": ours["sdpa"] / theirs})
    return rows


def engine(model, directory, layers, peak):
    """make bench-engine's table on this checkpoint, bf16, sdpa both sides."""
    ours = Ours(DUMP, directory, attention="sdpa", dtype="bfloat16", device=DEVICE)
    rows, per_s = compare(model, ours, layers, device=DEVICE,
                          prefill_lengths=(128, 512) if SMOKE else (128, 512, 2048))
    rows.append(achieved_row(model, per_s, peak, "TFLOP/s", 1e12))
    return [dict(zip(("measurement", "ours", "peer", "ratio", "target"), r)) for r in rows]


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    layers = int(os.environ.get("GPU_LAYERS", "2" if SMOKE else "36"))
    report = {"torch": torch.__version__, "cuda": torch.version.cuda, "smoke": SMOKE,
              "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
              "parity": parity()}
    directory = eight_b_shaped(layers)
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16,
                                             attn_implementation="sdpa").to(DEVICE).eval()
    peak = bf16_gemm_peak()
    report["bf16_gemm_peak_tflops"] = peak / 1e12
    report["layers"] = layers
    report["backbone_params"] = backbone_params(model)
    report["prefill"] = prefill(model, directory)
    report["engine"] = engine(model, directory, layers, peak)
    text = json.dumps(report, indent=2)
    print(text)
    (OUT / "gpu_check.json").write_text(text)
    ok = all(r["argmax_equal"] and r["max_abs_label_logprob_diff"] < 0.05 for r in report["parity"].values())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
