"""GPU checks for the Qwen3 path (run by tests/gpu/run.sh on a machine with an
NVIDIA GPU): tiny-config parity in CUDA bf16 against transformers, and prefill
tokens/s of a Qwen3-8B-shaped random checkpoint, ours against transformers on
the same GPU in one run. Prints JSON and writes it to $OUT/gpu_check.json."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

DUMP = os.environ.get("MESA_ANYJEV_QWEN3_DUMP", "build/tests/qwen3_dump")
OUT = Path(os.environ.get("OUT", "/tmp"))
WORK = Path(os.environ.get("GPU_WORK", "/tmp/mesa-anyjev-gpu"))


def dump(directory, request, dtype="bfloat16", attention="eager", device="cuda"):
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
                                             attn_implementation="eager").cuda().eval()
    with torch.no_grad():
        want = np.stack([model(torch.tensor([p]).cuda()).logits[0, -1].float().log_softmax(-1).cpu().numpy()
                         for p in prompts])
    result = {}
    for attention in ("eager", "sdpa"):
        ours = dump(directory, {"prompts": prompts, "label_ids": labels, "top_k": 1}, attention=attention)
        got = np.array(ours["label_logprobs"])
        result[attention] = {
            "argmax_equal": [t[0][0] for t in ours["top"]] == want.argmax(-1).tolist(),
            "max_abs_label_logprob_diff": float(np.abs(got - want[:, labels]).max()),
        }
    return result


def prefill(layers):
    config = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                         num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128, tie_word_embeddings=False, rope_theta=1000000.0)
    directory = WORK / f"qwen3-8b-shaped-{layers}"
    if not (directory / "config.json").exists():
        with torch.device("cuda"):
            model = Qwen3ForCausalLM(config).to(torch.bfloat16)
        model.save_pretrained(directory, max_shard_size="5GB")
        del model
        torch.cuda.empty_cache()
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16,
                                             attn_implementation="sdpa").cuda().eval()
    rows = []
    for tokens in (128, 512, 2048):
        ids = torch.randint(0, 151000, (1, tokens), device="cuda")
        with torch.no_grad():
            model(ids)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(5):
                model.model(ids)  # the backbone; lm_head at every position would favour us
                torch.cuda.synchronize()
            theirs = tokens * 5 / (time.perf_counter() - start)
        ours = {a: dump(directory, {"time_prefill": {"tokens": tokens, "batch": 1, "repeat": 5}},
                        attention=a)["tokens_per_second"] for a in ("eager", "sdpa")}
        rows.append({"tokens": tokens, "transformers_sdpa_tok_s": theirs,
                     "ours_eager_tok_s": ours["eager"], "ours_sdpa_tok_s": ours["sdpa"],
                     "ratio_sdpa": ours["sdpa"] / theirs})
    # A bf16 GEMM peak on this GPU, the ceiling for prefill.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    peak = 20 * 2 * 8192 ** 3 / (time.perf_counter() - start)
    return {"layers": layers, "rows": rows, "bf16_gemm_peak_tflops": peak / 1e12,
            "gpu": torch.cuda.get_device_name()}


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    report = {"torch": torch.__version__, "cuda": torch.version.cuda, "parity": parity(),
              "prefill": prefill(int(os.environ.get("GPU_LAYERS", "36")))}
    text = json.dumps(report, indent=2)
    print(text)
    (OUT / "gpu_check.json").write_text(text)
    ok = all(r["argmax_equal"] and r["max_abs_label_logprob_diff"] < 0.05 for r in report["parity"].values())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
