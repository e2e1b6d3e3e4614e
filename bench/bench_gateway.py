"""make bench-gateway (issue 17): the engine issue's annotation workload (32
states of about 400 tokens x 17 questions, K from 2 to 8, at L0) through the
daemon's Decisions.Decide, against the same decisions' prompts through vLLM
0.32 (its CPU build, the reference deployment's server) given what it does
best: one /v1/completions request per state holding all of that state's
prompts (every question, every shift), all states in flight at once, prefix
caching on (vLLM's default), labels read exactly by id (logprob_token_ids).

Like for like: the same generated checkpoint (bench-engine's), float32, the
same thread count, the same KV bytes (our engine.kv_pool_bytes, vLLM's
VLLM_CPU_KVCACHE_SPACE) and the same tokens per pass (engine.batch_tokens,
--max-num-batched-tokens). The prompts are the daemon's own (return_prompts),
so both sides compute the same token sequences; vLLM's label logprobs are
checked against the daemon's Inference.Logprobs on every prompt of the
first state. Each round decides fresh states, so no side finds an earlier
round's states cached. One side runs at a time."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import annotation_workload as aw  # noqa: E402
import real_gateway as rg  # noqa: E402
from conftest import Daemon, dpb, pb as ipb  # noqa: E402
from mesa.anyjev.v1 import decisions_pb2_grpc, inference_pb2_grpc  # noqa: E402

KV_GIB = 1  # engine.kv_pool_bytes' default, on both sides


def daemon_rounds(directory, args, tokenizer, request_questions):
    """Seconds per round and each round's prompts grouped by state."""
    seconds, prompts, passes = [], [], []
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-gateway-") as tmp:
        daemon = Daemon(Path(tmp), args=[
            "--model", str(directory), "--set", "model.name=bench",
            "--set", f"model.threads={args.threads}", "--set", "model.attention=sdpa",
            "--set", f"engine.batch_tokens={args.batch_tokens}",
            "--set", f"engine.kv_pool_bytes={KV_GIB << 30}",
            "--set", "server.default_deadline_s=3600", "--set", "server.max_deadline_s=3600"],
            start_timeout=120)
        channel = grpc.insecure_channel(daemon.address, options=[
            ("grpc.max_receive_message_length", 256 << 20)])
        try:
            stub = decisions_pb2_grpc.DecisionsStub(channel)
            for r in range(args.rounds):
                texts = aw.states(args.states, args.state_tokens, tokenizer, seed=1000 + r)
                before = aw.pass_counters(daemon)
                start = time.perf_counter()
                reply = stub.Decide(dpb.DecideRequest(
                    states=[dpb.State(text=t.encode()) for t in texts],
                    questions=request_questions, level="L0", return_prompts=True), timeout=3600)
                seconds.append(time.perf_counter() - start)
                passes.append(aw.pass_counters(daemon)[0] - before[0])
                print(f"daemon round {r}: {seconds[-1]:.1f} s, {passes[-1]:.0f} passes",
                      flush=True)
                per_state = [[] for _ in texts]
                for i, d in enumerate(reply.decisions):  # states x questions
                    per_state[i // len(request_questions)].extend(d.diagnostics.prompt_texts)
                prompts.append(per_state)
            # The oracle for vLLM's answers: our logprobs on the first
            # state's prompts of round 0.
            first = prompts[0][0]
            label_ids = labels(tokenizer)
            inference = inference_pb2_grpc.InferenceStub(channel)
            chunks = [first[i:i + 16] for i in range(0, len(first), 16)]  # max_suffixes
            answer = inference.Logprobs(ipb.LogprobsRequest(groups=[ipb.PromptGroup(
                suffixes=[ipb.Segment(text=p.encode()) for p in chunk], label_ids=label_ids)
                for chunk in chunks]), timeout=3600)
            oracle = [list(p.label_logprobs) for g in answer.groups for p in g.prompts]
        finally:
            channel.close()
            daemon.stop()
    return seconds, prompts, passes, oracle


def labels(tokenizer):
    """Choice labels A..H (K <= 8 in this workload), bare tokens."""
    return [tokenizer.token_to_id(chr(ord("A") + j)) for j in range(8)]


def vllm_request(url, prompts, label_ids):
    body = json.dumps({"model": rg.SERVED, "prompt": prompts, "max_tokens": 1,
                       "temperature": 0.0, "logprobs": 1, "logprob_token_ids": label_ids,
                       "return_tokens_as_token_ids": True}).encode()
    request = urllib.request.Request(f"{url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as r:
        choices = sorted(json.load(r)["choices"], key=lambda c: c["index"])
    return [[c["logprobs"]["top_logprobs"][0][f"token_id:{i}"] for i in label_ids]
            for c in choices]


def vllm_rounds(directory, args, prompts, label_ids, log_dir):
    seconds = []
    server = rg.start_vllm(directory, log_dir, threads=args.threads, kv_cache_gib=KV_GIB,
                           extra=["--max-num-batched-tokens", str(args.batch_tokens),
                                  "--max-num-seqs", "256"])
    binding = [line.split("]", 1)[-1].strip() for line in server.tail(200000).splitlines()
               if "core ids" in line]
    print(f"vLLM OpenMP binding: {binding[-1] if binding else 'not logged'}", flush=True)
    try:
        answers = None
        for per_state in prompts:
            start = time.perf_counter()
            with ThreadPoolExecutor(len(per_state)) as pool:
                got = list(pool.map(lambda p: vllm_request(server.url, p, label_ids), per_state))
            seconds.append(time.perf_counter() - start)
            print(f"vLLM round {len(seconds) - 1}: {seconds[-1]:.1f} s", flush=True)
            answers = answers or got
    finally:
        server.stop()
    return seconds, answers[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--states", type=int, default=32)
    ap.add_argument("--questions", type=int, default=17)
    ap.add_argument("--state-tokens", type=int, default=400)
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    directory = aw.checkpoint(args.work, args.layers, args.hidden)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    qs = aw.questions(args.questions)
    request_questions = [dpb.Question(kind="choice", text=t.encode(),
                                      options=[o.encode() for o in opts]) for t, opts in qs]
    ours, prompts, passes, oracle = daemon_rounds(directory, args, tokenizer, request_questions)
    label_ids = labels(tokenizer)
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-vllm-") as tmp:
        theirs, answers = vllm_rounds(directory, args, prompts, label_ids, Path(tmp))
    # Same numbers: vLLM's label logprobs on the first state's prompts
    # against ours (the labels a prompt has: its first K).
    diff = max(abs(a - b) for ours_row, their_row in zip(oracle, answers)
               for a, b in zip(ours_row, their_row))
    n_prompts = sum(len(p) for p in prompts[0])
    print(f"workload: {args.states} states x {args.questions} questions at L0, {n_prompts} "
          f"prompts a round, {args.rounds} rounds of fresh states; daemon passes a round: "
          f"{', '.join(f'{p:.0f}' for p in passes)}; max |label logprob vLLM - ours| on "
          f"{len(oracle)} prompts = {diff:.1e}")
    o, t = statistics.median(ours), statistics.median(theirs)
    print("\n| measurement | ours (s) | vLLM (s) | ratio | rounds | target |")
    print("|---|---|---|---|---|---|")
    ratios = [b / a for a, b in zip(ours, theirs)]
    print(f"| annotation {args.states} x {args.questions} at L0: Decide vs vLLM 0.32 CPU, one "
          f"request per state, all in flight | {o:.1f} | {t:.1f} | {t / o:.2f} | "
          f"{min(ratios):.2f}-{max(ratios):.2f} | >= 2 |")
    print(f"\nQwen3 {args.layers} blocks x hidden {args.hidden}, float32, {args.threads} threads, "
          f"{args.batch_tokens} tokens a pass, {KV_GIB} GiB KV on both sides")


if __name__ == "__main__":
    main()
