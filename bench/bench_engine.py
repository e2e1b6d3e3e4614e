"""make bench-engine: mesa-anyjev's engine (the daemon's Qwen3Backend, through
tests/tools/qwen3_dump) against Hugging Face transformers, side by side in
one run, same generated Qwen3 checkpoint, float32 on CPU, same thread count.
Prints one table of ratios; the figures go in docs/benchmarks.md."""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402


def best_of(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


class Ours:
    def __init__(self, dump, directory, threads, attention, gemm):
        self.dump, self.directory, self.threads = dump, directory, threads
        self.attention, self.gemm = attention, gemm

    def seconds(self, calls, repeat=3, cache=True):
        request = {"time": {"calls": calls, "repeat": repeat}}
        if not cache:
            request["prefix_cache_bytes"] = 0
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads))
        out = subprocess.run([self.dump, str(self.directory), "float32", self.attention, "cpu",
                              self.gemm],
                             input=json.dumps(request),
                             capture_output=True, text=True, env=env, timeout=3600)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return json.loads(out.stdout)["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"],
                    help="both sides use it (transformers' attn_implementation)")
    ap.add_argument("--gemm", default="onednn", choices=["onednn", "aten"],
                    help="our model.cpu_gemm (transformers always runs at::linear)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    directory = work / f"qwen3-{args.layers}x{args.hidden}"
    if not (directory / "config.json").exists():
        make(directory, layers=args.layers, hidden=args.hidden, heads=8, kv_heads=4, head_dim=64,
             intermediate=args.hidden * 3, tied=True, seed=7)
    n = args.layers
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                             attn_implementation=args.attention).eval()
    ours = Ours(args.dump, directory, args.threads, args.attention, args.gemm)
    rng = np.random.default_rng(0)
    tok = lambda k: rng.integers(0, 151000, size=k).tolist()  # noqa: E731
    labels = [32, 33, 34, 35, 36]
    rows = []

    # 1. Prefill throughput: one prompt, logprobs at its last position.
    for t in (128, 512, 2048):
        ids = tok(t)
        x = torch.tensor([ids])

        def hf_prefill():
            with torch.no_grad():
                h = model.model(x).last_hidden_state[:, -1]
                model.lm_head(h).float().log_softmax(-1)

        theirs = best_of(hf_prefill, 3)
        mine = ours.seconds([{"prompts": [ids], "label_ids": labels}], cache=False)
        rows.append((f"prefill {t} tokens (tokens/s)", t / mine, t / theirs, theirs / mine, ">= 1.2"))
        if t == 512 and args.gemm != "aten":
            # How much of it is the packed GEMM: ours on transformers' at::linear.
            aten = Ours(args.dump, directory, args.threads, args.attention, "aten")
            plain = aten.seconds([{"prompts": [ids], "label_ids": labels}], cache=False)
            rows.append((f"prefill {t} tokens, ours with cpu_gemm aten (tokens/s)", t / plain,
                         t / theirs, theirs / plain, "-"))

    # 2. L0: a 5-option choice over a 400-token state = 5 cyclic shifts.
    state = tok(400)
    suffixes = [tok(24) for _ in range(5)]
    hf_batch = torch.tensor([state + s for s in suffixes])

    def hf_l0():
        with torch.no_grad():
            h = model.model(hf_batch).last_hidden_state[:, -1]
            model.lm_head(h).float().log_softmax(-1)

    theirs = best_of(hf_l0, 3)
    mine = ours.seconds([{"groups": [{"prefix": state, "suffixes": suffixes}], "label_ids": labels}],
                        cache=False)
    rows.append(("L0 decision, 5 shifts over 400 tokens (decisions/s)", 1 / mine, 1 / theirs,
                 theirs / mine, ">= 4"))

    # 3. L2: hidden state at block round(2n/3) against our own full forward.
    block = round(2 * n / 3)
    prompt = [state + suffixes[0]]
    early = ours.seconds([{"prompts": prompt, "layers": [block]}], cache=False)
    full = ours.seconds([{"prompts": prompt, "layers": [n]}], cache=False)
    rows.append((f"L2 state at block {block}/{n} vs full forward (time ratio)", early, full,
                 early / full, "<= 0.70"))

    # 4. 17 questions over one 400-token state, with and without the cache.
    questions = [{"groups": [{"prefix": state + tok(12), "suffixes": [tok(16) for _ in range(4)]}],
                  "label_ids": labels} for _ in range(17)]
    cached = ours.seconds(questions, repeat=2, cache=True)
    uncached = ours.seconds(questions, repeat=2, cache=False)
    rows.append(("17 questions over one state, cache vs none (time ratio)", cached, uncached,
                 uncached / cached, ">= 3"))

    # 5. Achieved FLOP/s in prefill against libtorch's float32 GEMM peak here:
    # the faster of its two CPU paths, MKL's sgemm (a @ a) and oneDNN's matmul
    # on a packed weight (what cpu_gemm onednn runs).
    params = sum(p.numel() for name, p in model.named_parameters() if "embed" not in name)
    t = 512
    mine = ours.seconds([{"prompts": [tok(t)], "label_ids": labels}], cache=False)
    achieved = 2 * params * t / mine
    a = torch.randn(2048, 2048)
    packed = torch.ops.mkldnn._reorder_linear_weight(a, None)
    mkl = 2 * 2048 ** 3 / best_of(lambda: a @ a, 5)
    onednn = 2 * 2048 ** 3 / best_of(
        lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], ""), 5)
    peak = max(mkl, onednn)
    print(f"float32 GEMM 2048^3: MKL sgemm {mkl / 1e9:.0f} GFLOP/s, "
          f"oneDNN packed {onednn / 1e9:.0f} GFLOP/s")
    rows.append(("prefill 512 FLOP/s vs fp32 GEMM peak (GFLOP/s)", achieved / 1e9, peak / 1e9,
                 achieved / peak, "the limit"))

    print(f"\nQwen3 {n} blocks x hidden {args.hidden}, float32, {args.attention} attention on "
          f"both sides, our cpu_gemm {args.gemm}, {args.threads} threads, "
          f"torch {torch.__version__}\n")
    print("| measurement | ours | peer | ratio | target |")
    print("|---|---|---|---|---|")
    for name, a_, b_, r, target in rows:
        print(f"| {name} | {a_:.4g} | {b_:.4g} | {r:.2f} | {target} |")


if __name__ == "__main__":
    main()
