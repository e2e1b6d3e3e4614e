"""make bench-engine: mesa-anyjev's engine (the daemon's Qwen3Backend, through
tests/tools/qwen3_dump) against Hugging Face transformers, side by side in
one run, same generated Qwen3 checkpoint, float32 on CPU, same thread count.
Prints one table of ratios; the figures go in docs/benchmarks.md.

`compare` is shared with tests/gpu/gpu_check.py, which runs the same
measurements on a Qwen3-8B-shaped checkpoint in CUDA bfloat16."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from transformers import Qwen3ForCausalLM  # noqa: E402

import annotation_workload  # noqa: E402

LABELS = [32, 33, 34, 35, 36]


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def best_of(fn, repeat, device="cpu"):
    fn()  # warm-up
    sync(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return min(times)


class DumpServer:
    """One qwen3_dump --serve process: one load, a request and its answer a
    line each."""

    def __init__(self, command):
        self.errors = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([*command, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errors, text=True)

    def ask(self, request):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.errors.seek(0)
            raise RuntimeError(f"qwen3_dump exited {self.proc.wait()}: "
                               f"{self.errors.read().decode(errors='replace')[-4000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=600)
        self.errors.close()


class Ours:
    """Times calls through qwen3_dump: a fresh process per measurement, or
    with `persistent` one process per prefix-cache setting for all of them
    (the GPU check: an 8B load costs seconds). `overrides`: configuration
    settings ("engine.cuda_graphs=true") passed as --set."""

    def __init__(self, dump, directory, threads=None, attention="sdpa", gemm="onednn",
                 dtype="float32", device="cpu", persistent=False, overrides=()):
        self.dump, self.directory, self.threads = dump, directory, threads
        self.attention, self.gemm, self.dtype, self.device = attention, gemm, dtype, device
        self.persistent, self.overrides, self.servers = persistent, list(overrides), {}

    def command(self, *settings):
        sets = [a for kv in [*self.overrides, *settings] for a in ("--set", kv)]
        return [self.dump, str(self.directory), self.dtype, self.attention, self.device,
                self.gemm, *sets]

    def server(self, cache=True):
        """The persistent process with the prefix cache on or off."""
        if cache not in self.servers:
            settings = [f"engine.prefix_caching={str(cache).lower()}"]
            if self.threads:
                settings.append(f"model.threads={self.threads}")
            self.servers[cache] = DumpServer(self.command(*settings))
        return self.servers[cache]

    def close(self):
        for server in self.servers.values():
            server.close()
        self.servers = {}

    def _run(self, request):
        if self.persistent:
            return self.server(request.pop("prefix_caching", True)).ask(request)
        if self.threads:
            request["threads"] = self.threads  # model.threads, as the daemon sets it
        out = subprocess.run(self.command(), input=json.dumps(request),
                             capture_output=True, text=True, timeout=3600)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return json.loads(out.stdout)

    def seconds(self, calls=None, passes=None, repeat=3, cache=True):
        """Best seconds per pass: `calls` repeated (after a warm-up pass), or
        each of `passes` after the first (so no pass finds its prefixes cached
        by an earlier one)."""
        timing = {"passes": passes} if passes is not None else {"calls": calls, "repeat": repeat}
        request = {"time": timing}
        if not cache:
            request["prefix_caching"] = False
        return self._run(request)["seconds"]


def backbone_params(model):
    """Parameters a prompt token multiplies: the blocks and norms, without the
    embedding lookup and the lm_head (applied at one position per prompt)."""
    return sum(p.numel() for name, p in model.named_parameters()
               if "embed" not in name and "lm_head" not in name)


def counted(seconds, tokens, weight_reads=1, depth=1.0):
    """What a timed figure computed, for the GPU check's ceilings: at least
    `tokens` new tokens through `depth` of the blocks, reading the blocks'
    weights at least `weight_reads` times (once per pass), in `seconds`."""
    return {"seconds": seconds, "tokens": tokens, "weight_reads": weight_reads, "depth": depth}


def compare(model, ours, n_layers, device="cpu", prefill_lengths=(128, 512, 2048),
            aten_peer=None, seed=0):
    """The issue-4 measurements, ours against `model` (transformers, loaded on
    `device` in the dtype ours runs), in one run. Returns table rows
    (name, ours, peer, ratio, target, {"ours": counted, "peer": counted})
    and ours' prefill tokens/s at 512."""
    rng = np.random.default_rng(seed)
    tok = lambda k: rng.integers(0, 151000, size=k).tolist()  # noqa: E731
    rows = []
    tokens_per_s_512 = None

    # 1. Prefill throughput: one prompt, logprobs at its last position. The
    # headline has both sides on at::linear (ours with cpu_gemm aten, where
    # there is a choice); the packed-weight gain is a row of its own.
    for t in prefill_lengths:
        ids = tok(t)
        x = torch.tensor([ids], device=device)

        def hf_prefill():
            with torch.no_grad():
                h = model.model(x).last_hidden_state[:, -1]
                model.lm_head(h).float().log_softmax(-1)

        theirs = best_of(hf_prefill, 3, device)
        call = [{"prompts": [ids], "label_ids": LABELS}]
        mine = ours.seconds(call, cache=False)
        plain = aten_peer.seconds(call, cache=False) if aten_peer is not None else mine
        name = "both on at::linear" if aten_peer is not None else "ours against transformers"
        rows.append((f"prefill {t} tokens, {name} (tokens/s)", t / plain, t / theirs,
                     theirs / plain, ">= 1.2",
                     {"ours": counted(plain, t), "peer": counted(theirs, t)}))
        if t == 512:
            tokens_per_s_512 = t / mine
            if aten_peer is not None:
                rows.append((f"prefill {t} tokens, ours: default cpu_gemm vs at::linear "
                             "(tokens/s)", t / mine, t / plain, plain / mine, "-"))

    # 2. L0: a 5-option choice over a 400-token state = 5 cyclic shifts.
    state = tok(400)
    suffixes = [tok(24) for _ in range(5)]
    hf_batch = torch.tensor([state + s for s in suffixes], device=device)

    def hf_l0():
        with torch.no_grad():
            h = model.model(hf_batch).last_hidden_state[:, -1]
            model.lm_head(h).float().log_softmax(-1)

    theirs = best_of(hf_l0, 3, device)
    mine = ours.seconds([{"groups": [{"prefix": state, "suffixes": suffixes}],
                          "label_ids": LABELS}], cache=False)
    rows.append(("L0 decision, 5 shifts over 400 tokens (decisions/s)", 1 / mine, 1 / theirs,
                 theirs / mine, ">= 4",
                 {"ours": counted(mine, 400 + 5 * 24), "peer": counted(theirs, 5 * 424)}))

    # The same with transformers sharing the prefix too: its cache expanded
    # over the 5 suffixes, as anyjev's score_shared does.
    prefix_ids = torch.tensor([state], device=device)
    suffix_ids = torch.tensor(suffixes, device=device)

    def hf_l0_shared():
        with torch.no_grad():
            cache = model.model(prefix_ids, use_cache=True).past_key_values
            cache.batch_repeat_interleave(len(suffixes))
            h = model.model(suffix_ids, past_key_values=cache).last_hidden_state[:, -1]
            model.lm_head(h).float().log_softmax(-1)

    theirs_shared = best_of(hf_l0_shared, 3, device)
    rows.append(("L0 decision, transformers also sharing the prefix (decisions/s)", 1 / mine,
                 1 / theirs_shared, theirs_shared / mine, "-",
                 {"ours": counted(mine, 400 + 5 * 24),
                  "peer": counted(theirs_shared, 400 + 5 * 24, weight_reads=2)}))

    # 3. L2: hidden state at block round(2n/3) against our own full forward
    # (every block, the final norm and lm_head: what a logprobs read costs),
    # and against every block without lm_head (the floor of the saving).
    block = round(2 * n_layers / 3)
    prompt = [state + suffixes[0]]
    early = ours.seconds([{"prompts": prompt, "layers": [block]}], cache=False)
    full = ours.seconds([{"prompts": prompt, "label_ids": LABELS}], cache=False)
    last = ours.seconds([{"prompts": prompt, "layers": [n_layers]}], cache=False)
    depth = block / n_layers
    rows.append((f"L2 state at block {block}/{n_layers} vs full forward (time ratio)", early, full,
                 early / full, "<= 0.70",
                 {"ours": counted(early, 424, depth=depth), "peer": counted(full, 424)}))
    rows.append((f"L2 state at block {block}/{n_layers} vs hidden state {n_layers} (time ratio)",
                 early, last, early / last, "-",
                 {"ours": counted(early, 424, depth=depth), "peer": counted(last, 424)}))
    # L2 over 32 states: hidden states at the block against the L0 depth
    # (logprobs), each in passes of the whole batch.
    states = [{"prompts": [tok(400) for _ in range(32)]}]
    early32 = ours.seconds([{**states[0], "layers": [block]}], cache=False, repeat=1)
    full32 = ours.seconds([{**states[0], "label_ids": LABELS}], cache=False, repeat=1)
    rows.append((f"L2 over 32 states at block {block}/{n_layers} vs the L0 depth (time ratio)",
                 early32, full32, early32 / full32, "<= 0.70",
                 {"ours": counted(early32, 32 * 400, depth=depth),
                  "peer": counted(full32, 32 * 400)}))

    # 4. 17 questions over one 400-token state, with the prefix cache against
    # without. Each pass asks about a new state: the cache starts with no
    # part of it, the first question computes it and the other 16 reuse it.
    def questions_pass():
        s = tok(400)
        return [{"groups": [{"prefix": s + tok(12), "suffixes": [tok(16) for _ in range(4)]}],
                 "label_ids": LABELS} for _ in range(17)]

    passes = [questions_pass() for _ in range(3)]
    cached = ours.seconds(passes=passes, cache=True)
    uncached = ours.seconds(passes=passes, cache=False)
    # Each question is a call of its own: a pass, a weight read, each.
    rows.append(("17 questions over one state, cache vs none (time ratio)", cached, uncached,
                 uncached / cached, ">= 3",
                 {"ours": counted(cached, 400 + 17 * 76, weight_reads=17),
                  "peer": counted(uncached, 17 * 476, weight_reads=17)}))
    return rows, tokens_per_s_512


def achieved_row(model, tokens_per_s, peak, unit, scale):
    """Prefill at 512 tokens: FLOP/s of the block GEMMs (2 x parameters per
    token; attention's own FLOPs not counted) against a measured GEMM peak."""
    achieved = 2 * backbone_params(model) * tokens_per_s
    return (f"prefill 512 FLOP/s vs GEMM peak ({unit})", achieved / scale, peak / scale,
            achieved / peak, "the limit")


def cpu_gemm_peak():
    """float32 GEMM peak of libtorch here: the faster of its two CPU paths,
    MKL's sgemm (a @ a) and oneDNN's matmul on a packed weight (what
    model.cpu_gemm onednn runs)."""
    a = torch.randn(2048, 2048)
    packed = torch.ops.mkldnn._reorder_linear_weight(a, None)
    mkl = 2 * 2048 ** 3 / best_of(lambda: a @ a, 5)
    onednn = 2 * 2048 ** 3 / best_of(
        lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], ""), 5)
    print(f"float32 GEMM 2048^3: MKL sgemm {mkl / 1e9:.0f} GFLOP/s, "
          f"oneDNN packed {onednn / 1e9:.0f} GFLOP/s")
    return max(mkl, onednn)


def print_table(title, rows):
    print(f"\n{title}\n")
    print("| measurement | ours | peer | ratio | rounds | target |")
    print("|---|---|---|---|---|---|")
    for name, a_, b_, r, spread, target in rows:
        print(f"| {name} | {a_:.4g} | {b_:.4g} | {r:.2f} | {spread} | {target} |")


def keep_freed_memory():
    """What the engine does on the CPU (docs/model.md), for the peers in this
    process too: no mmap for large blocks, no trimming of the heap."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's malloc.h
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 2 ** 31 - 1)


def main():
    keep_freed_memory()
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"],
                    help="both sides use it (transformers' attn_implementation)")
    ap.add_argument("--gemm", default="auto", choices=["auto", "onednn", "aten"],
                    help="our model.cpu_gemm (transformers always runs at::linear)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the engine rows")
    ap.add_argument("--skip-annotation", action="store_true",
                    help="leave out the annotation workload (the slowest rows)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    directory = annotation_workload.checkpoint(args.work, args.layers, args.hidden)
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                             attn_implementation=args.attention).eval()
    ours = Ours(args.dump, directory, args.threads, args.attention, args.gemm)
    aten = None if args.gemm == "aten" else Ours(args.dump, directory, args.threads,
                                                  args.attention, "aten")
    # Several rounds of the same measurements: the table shows the last, the
    # spread column every round's ratio.
    spreads = []
    for r in range(args.rounds):
        rows, per_s = compare(model, ours, args.layers, aten_peer=aten, seed=r)
        rows.append(achieved_row(model, per_s, cpu_gemm_peak(), "GFLOP/s", 1e9))
        spreads.append([row[3] for row in rows])
    rows = [(*row[:4], f"{min(col):.2f}-{max(col):.2f}", row[4])
            for row, col in zip(rows, zip(*spreads))]
    if not args.skip_annotation:
        del model  # the peer below loads its own copy
        daemon_args = ["--set", f"model.cpu_gemm={args.gemm}"]
        more, facts, _ = annotation_workload.run(directory, daemon_args, args.threads,
                                                 attention=args.attention)
        rows += [(*row[:4], "1 round", row[4]) for row in more]
        print("\n".join(facts))
    print_table(f"Qwen3 {args.layers} blocks x hidden {args.hidden}, float32, {args.attention} "
                f"attention on both sides, our cpu_gemm {args.gemm}, {args.threads} threads, "
                f"torch {torch.__version__}", rows)


if __name__ == "__main__":
    main()
