"""The annotation workload of the engine issue, side by side in one run:
32 states of about 400 tokens x 17 questions (K from 2 to 8) at L0 through
the daemon's Decisions.Decide, against anyjev 0.2.0's HFBackend on
transformers (the reference's local path: its Decider, score_shared over the
K shifts) deciding the same states and questions on the same checkpoint,
dtype and threads; and against the limit: the new tokens the workload must
compute (the distinct token prefixes of all its prompts) over our own prefill
rate at engine.batch_tokens. Used by bench_engine.py and tests/gpu/gpu_check.py."""
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tools"))
from conftest import Daemon, dpb, pb  # noqa: E402
from make_tiny_qwen3 import make  # noqa: E402
from mesa.anyjev.v1 import decisions_pb2_grpc as dpb_grpc  # noqa: E402

WORDS = ("data sample gene protein cell tissue patient cohort study measure assay sequence "
         "variant expression level control treatment dose response time series region image "
         "signal noise label annotation column value unit file record table source method "
         "species mouse human yeast plant soil water climate survey census income school "
         "city river forest model network graph node edge text corpus token sentence").split()


def checkpoint(work, layers, hidden):
    """The benchmarks' generated Qwen3 (bench-engine, bench-gateway), made
    once under `work`. head_dim 64: vLLM's CPU attention takes it too."""
    directory = Path(work) / f"qwen3-{layers}x{hidden}"
    if not (directory / "config.json").exists():
        make(directory, layers=layers, hidden=hidden, heads=8, kv_heads=4, head_dim=64,
             intermediate=hidden * 3, tied=True, seed=7)
    return directory


def states(n, tokens, tokenizer, seed):
    """n texts of about `tokens` tokens each."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), size=tokens)]
        text = f"Record {seed}-{i}: " + " ".join(words)
        ids = tokenizer.encode(text).ids
        while len(ids) > tokens:
            words = words[: len(words) - (len(ids) - tokens)]
            text = f"Record {seed}-{i}: " + " ".join(words)
            ids = tokenizer.encode(text).ids
        out.append(text)
    return out


def questions(n=17):
    """(text, options): choice questions with K = 2..8 options."""
    qs = []
    for q in range(n):
        k = 2 + q % 7
        options = [f"{WORDS[(q * 7 + j * 3) % len(WORDS)]} {j}" for j in range(k)]
        qs.append((f"Question {q}: which {WORDS[q % len(WORDS)]} does the record describe?",
                   options))
    return qs


def distinct_prefix_tokens(prompts, tokenizer):
    """Tokens a perfect prefix cache computes: the nodes of the token trie."""
    root, nodes = {}, 0
    for text in prompts:
        node = root
        for t in tokenizer.encode(text).ids:
            nxt = node.get(t)
            if nxt is None:
                nxt = node[t] = {}
                nodes += 1
            node = nxt
    return nodes


def metric(text, name):
    m = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def pass_counters(daemon):
    text = daemon.metrics()
    return (metric(text, "mesa_anyjev_batch_tokens_count"),
            metric(text, "mesa_anyjev_batch_size_sum"),
            metric(text, "mesa_anyjev_batch_tokens_sum"))


def prefill_rate(daemon, batch_tokens=8192, prompt=512, rounds=3):
    """The limit's denominator, measured on the daemon that ran the workload
    (same process, GEMM choice, threads and heap): tokens/s of one pass of
    `batch_tokens` new tokens, whole prompts of `prompt` tokens with
    logprobs at each last position, fresh ids every round (nothing cached);
    the median of `rounds`."""
    rng = np.random.default_rng()  # new ids on every call: nothing cached
    rates = []
    for _ in range(rounds):
        groups = [pb.PromptGroup(
            prefix=pb.Segment(ids=pb.TokenIds(ids=rng.integers(1000, 100000, prompt - 1).tolist())),
            suffixes=[pb.Segment(ids=pb.TokenIds(ids=[int(rng.integers(1000, 100000))]))],
            label_ids=[32]) for _ in range(batch_tokens // prompt)]
        before = pass_counters(daemon)
        reused = metric(daemon.metrics(), "mesa_anyjev_prefix_cache_reused_tokens_total")
        start = time.perf_counter()
        daemon.stub.Logprobs(pb.LogprobsRequest(groups=groups), timeout=3600)
        rates.append(batch_tokens / (time.perf_counter() - start))
        assert pass_counters(daemon)[0] - before[0] == 1, "the prompts did not fill one pass"
        assert metric(daemon.metrics(), "mesa_anyjev_prefix_cache_reused_tokens_total") == \
            reused, "the prefill found its prompts cached"
    return statistics.median(rates)


def run(directory, daemon_args, threads, n_states=32, n_questions=17,
        state_tokens=400, rounds=3, peer=True, device="cpu", dtype="float32",
        attention="sdpa"):
    """Returns (table rows, printed facts, figures: seconds, passes, tokens
    computed, prefill_rate: our tokens/s for one pass of engine.batch_tokens
    tokens on the same daemon, the limit's denominator)."""
    import torch
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(directory) / "tokenizer.json"))
    qs = questions(n_questions)
    request_questions = [dpb.Question(kind="choice", text=t.encode(),
                                      options=[o.encode() for o in opts]) for t, opts in qs]
    rows, facts = [], []
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-") as tmp:
        daemon = Daemon(Path(tmp), args=["--model", str(directory), "--set", "model.name=bench",
                                         "--set", f"model.threads={threads}",
                                         "--set", f"model.attention={attention}",
                                         "--set", f"model.device={device}",
                                         "--set", f"model.dtype={dtype}",
                                         "--set", "server.default_deadline_s=3600",
                                         "--set", "server.max_deadline_s=3600", *daemon_args],
                        start_timeout=900)  # a bound on failure only: an 8B load
        # Replies with every prompt's text run to megabytes.
        channel = grpc.insecure_channel(daemon.address, options=[
            ("grpc.max_receive_message_length", 256 << 20)])
        stub = dpb_grpc.DecisionsStub(channel)
        try:
            def decide(texts, prompts=False):
                return stub.Decide(dpb.DecideRequest(
                    states=[dpb.State(text=t.encode()) for t in texts],
                    questions=request_questions, level="L0", return_prompts=prompts),
                    timeout=3600)

            # The first call of a fresh daemon: its decisions are compared
            # with anyjev's on the same states (a fresh Decider; later calls
            # carry the running batch prior of earlier ones).
            first = decide(states(n_states, state_tokens, tokenizer, seed=99))
            ours_probs = [list(d.probs) for d in first.decisions]
            seconds, counters = [], []
            for r in range(rounds):
                texts = states(n_states, state_tokens, tokenizer, seed=r)  # nothing cached
                before = pass_counters(daemon)
                start = time.perf_counter()
                reply = decide(texts, prompts=r == 0)
                seconds.append(time.perf_counter() - start)
                after = pass_counters(daemon)
                counters.append([a - b for a, b in zip(after, before)])
                if r == 0:
                    prompts = [p for d in reply.decisions for p in d.diagnostics.prompt_texts]
            rate = prefill_rate(daemon, rounds=rounds)
        finally:
            channel.close()
            daemon.stop()
    ours = statistics.median(seconds)
    passes, segments, tokens = counters[0]
    distinct = distinct_prefix_tokens(prompts, tokenizer)
    facts.append(f"annotation workload: {n_states} states x {n_questions} questions, "
                 f"{len(prompts)} prompts; ours {ours:.2f} s median of {rounds} "
                 f"(spread {min(seconds):.2f}-{max(seconds):.2f}); {passes:.0f} passes, "
                 f"{segments / max(passes, 1):.1f} segments and {tokens / max(passes, 1):.0f} "
                 f"tokens a pass; {tokens:.0f} tokens computed, {distinct} distinct")
    if peer:
        from anyjev import Decider, Question
        from anyjev.backends.hf import HFBackend
        torch.set_num_threads(threads)
        backend = HFBackend(str(directory), device=device, dtype=dtype,
                            attn_implementation=attention)
        oracle = Decider(backend)
        texts = states(n_states, state_tokens, tokenizer, seed=99)
        py_questions = [Question.choice(t, opts) for t, opts in qs]
        start = time.perf_counter()
        theirs_probs = [oracle.decide_batch(texts, q, level="L0") for q in py_questions]
        theirs = time.perf_counter() - start
        # Same decisions: ours are states x questions, theirs per question.
        diff = max(float(np.max(np.abs(np.asarray(ours_probs[s * n_questions + q]) -
                                       theirs_probs[q][s].probs)))
                   for s in range(n_states) for q in range(n_questions))
        facts.append(f"anyjev HFBackend: {theirs:.1f} s for the same decisions "
                     f"(max |p ours - p anyjev| = {diff:.1e})")
        rows.append((f"annotation {n_states} states x {n_questions} questions at L0 via Decide "
                     "vs anyjev HFBackend (seconds)", ours, theirs, theirs / ours, ">= 8"))
    limit = distinct / rate
    facts.append(f"prefill on the same daemon: {rate:.0f} tokens/s for a pass of 8192 "
                 f"(16 prompts of 512, median of {rounds})")
    rows.append(("annotation vs the limit: distinct tokens / prefill rate at batch_tokens "
                 "(seconds)", ours, limit, limit / ours, ">= 0.9"))
    return rows, facts, {"seconds": ours, "passes": passes, "tokens": tokens,
                         "prefill_rate": rate}
