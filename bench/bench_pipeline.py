"""make bench-pipeline (issue 33): a dataset-scale run through the Python
client's Client.decide_stream against the daemon's own throughput on the
same work sent as ideal full calls, side by side in one run, on the bench
model (bench-engine's generated Qwen3, float32).

The work: --states states of about --state-tokens tokens (annotation_workload's
generator) x --questions choice questions (K = 2, 3, ...) at L0, cut as the
client cuts it (spans of --span states, every call carry_priors), so both
contenders send the same Decide requests:

- ideal: every span's Decide sent at once (one thread per call): the engine
  is never without work and packs what it holds into full passes;
- client: decide_stream with its defaults (--concurrency calls in flight),
  reading, retrying and yielding as a pipeline does.

Each contender gets a fresh daemon (no prefix cache carried over) warmed with
one call of other states, and the rounds alternate. Per contender: seconds,
decisions/s, the ratio to ideal (target >= 0.9), and the passes' fill from
the daemon's Prometheus metrics (new tokens a pass / engine.batch_tokens,
and segments a pass). A contender is one function (daemon, work) ->
decisions; the third is the CLI's `decide --states-file --out` (a process
of its own, its states read from a file and its OUT written and read back),
with the same span and calls in flight."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import annotation_workload as aw  # noqa: E402
from conftest import Daemon, client_package, dpb, metric  # noqa: E402
from mesa.anyjev.v1 import decisions_pb2_grpc  # noqa: E402

client = client_package()


class Work:
    """The run both contenders decide: texts, questions, span, level."""

    def __init__(self, texts, questions, span, level="L0"):
        self.texts, self.questions, self.span, self.level = texts, questions, span, level

    def spans(self):
        return [self.texts[i:i + self.span] for i in range(0, len(self.texts), self.span)]

    def request(self, texts):
        return dpb.DecideRequest(
            states=[dpb.State(text=t) for t in texts], level=self.level, carry_priors=True,
            questions=[dpb.Question(kind="choice", text=q, options=o) for q, o in self.questions])


def ideal(daemon, work):
    """Every span's Decide at once: probs per decision, in input order."""
    spans = work.spans()
    with grpc.insecure_channel(daemon.address) as channel:
        stub = decisions_pb2_grpc.DecisionsStub(channel)
        with ThreadPoolExecutor(max_workers=len(spans)) as pool:
            replies = list(pool.map(lambda t: stub.Decide(work.request(t), timeout=3600), spans))
    return [list(d.probs) for reply in replies for d in reply.decisions]


def python_client(daemon, work, concurrency=4):
    """Client.decide_stream as a pipeline runs it."""
    questions = [client.Question(id=f"q{i}", kind="choice", text=q, options=tuple(o))
                 for i, (q, o) in enumerate(work.questions)]
    out = []
    with client.Client(daemon.address) as c:
        for result in c.decide_stream(work.texts, questions, level=work.level, span=work.span,
                                      concurrency=concurrency,
                                      retry=client.RetryPolicy(attempt_timeout=3600)):
            assert result.ok, result.error
            out.extend(list(d.probs.values()) for d in result.decisions)
    return out


def cli(daemon, work, concurrency=4):
    """mesa-anyjev decide --states-file --out as a pipeline runs it: its own
    process, a fresh HOME (the default config), OUT read back at the end."""
    binary = Path(os.environ.get("MESA_ANYJEV_CLI", ROOT / "build" / "client" / "mesa-anyjev"))
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-cli-") as tmp:
        tmp = Path(tmp)
        states = tmp / "states.jsonl"
        states.write_text("".join(json.dumps(t) + "\n" for t in work.texts))
        questions = tmp / "questions.json"
        questions.write_text(json.dumps([{"id": f"q{i}", "kind": "choice", "text": q,
                                          "options": list(o)}
                                         for i, (q, o) in enumerate(work.questions)]))
        out = tmp / "out.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
        env["HOME"] = str(tmp)
        env["MESA_ANYJEV_CLIENT__TIMEOUT_S"] = "3600"  # the Python contender's attempt_timeout
        r = subprocess.run([str(binary.resolve()), "decide", "--backend", "hf", "--address",
                            daemon.address, "--level", work.level, "--questions-file",
                            str(questions), "--states-file", str(states), "--out", str(out),
                            "--span", str(work.span), "--concurrency", str(concurrency)],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        print(f"    {r.stderr.strip().splitlines()[-1]}", flush=True)  # its summary line
        lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(len(work.texts)))
    return [d["probs"] for line in lines for d in line["decisions"]]


CONTENDERS = {"ideal full calls, all at once": ideal,
              "Python client decide_stream": python_client,
              "CLI decide --states-file --out": cli}


def pass_counters(daemon):
    text = daemon.metrics()
    return {"passes": metric(text, "mesa_anyjev_batch_tokens_count"),
            "tokens": metric(text, "mesa_anyjev_batch_tokens_sum"),
            "segments": metric(text, "mesa_anyjev_batch_size_sum")}


def measure(name, contender, work, warm, daemon_args, batch_tokens):
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-pipeline-") as tmp:
        daemon = Daemon(Path(tmp), args=daemon_args, start_timeout=900)
        try:
            ideal(daemon, warm)  # the first passes of a fresh process
            before = pass_counters(daemon)
            start = time.perf_counter()
            probs = contender(daemon, work)
            seconds = time.perf_counter() - start
            after = pass_counters(daemon)
        finally:
            daemon.stop()
    d = {k: after[k] - before[k] for k in after}
    passes = max(d["passes"], 1)
    return {"name": name, "seconds": seconds, "decisions": len(probs),
            "per_s": len(probs) / seconds, "passes": d["passes"],
            "fill": d["tokens"] / passes / batch_tokens, "segments": d["segments"] / passes,
            "probs": probs}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--state-tokens", type=int, default=100)
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--span", type=int, default=64)
    ap.add_argument("--batch-tokens", type=int, default=8192, help="engine.batch_tokens")
    ap.add_argument("--rounds", type=int, default=1, help="each contender once per round")
    args = ap.parse_args()

    directory = aw.checkpoint(args.work, args.layers, args.hidden)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    questions = aw.questions(args.questions)
    work = Work(aw.states(args.states, args.state_tokens, tokenizer, seed=33), questions,
                args.span)
    warm = Work(aw.states(args.span, args.state_tokens, tokenizer, seed=34), questions,
                args.span)
    daemon_args = ["--model", str(directory), "--set", "model.name=bench",
                   "--set", f"model.threads={args.threads}",
                   "--set", f"engine.batch_tokens={args.batch_tokens}",
                   "--set", "server.default_deadline_s=3600", "--set", "server.max_deadline_s=3600"]
    rows = {name: [] for name in CONTENDERS}
    for _ in range(args.rounds):
        for name, contender in CONTENDERS.items():
            rows[name].append(measure(name, contender, work, warm, daemon_args,
                                      args.batch_tokens))
            r = rows[name][-1]
            print(f"  {name}: {r['seconds']:.1f} s, {r['per_s']:.1f} decisions/s, "
                  f"{r['passes']:.0f} passes, fill {r['fill']:.2f}", flush=True)

    base = next(iter(CONTENDERS))
    reference = rows[base][0]["probs"]
    print(f"\nQwen3 {args.layers} blocks x hidden {args.hidden}, float32, {args.threads} "
          f"threads; {args.states} states of ~{args.state_tokens} tokens x {args.questions} "
          f"questions (K = 2..{args.questions + 1}) at L0, spans of {args.span}, "
          f"engine.batch_tokens {args.batch_tokens}; {args.rounds} round(s), medians\n")
    print("| contender | seconds | decisions/s | vs ideal | passes | fill (tokens a pass / "
          "batch_tokens) | segments a pass | max abs p diff vs ideal |")
    print("|---|---|---|---|---|---|---|---|")
    ideal_per_s = statistics.median(r["per_s"] for r in rows[base])
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("seconds", "per_s", "passes", "fill", "segments")}
        diff = max(abs(a - b) for r in runs for pa, pb in zip(r["probs"], reference)
                   for a, b in zip(pa, pb))
        assert all(len(r["probs"]) == len(reference) for r in runs), name
        print(f"| {name} | {med['seconds']:.1f} | {med['per_s']:.1f} | "
              f"{med['per_s'] / ideal_per_s:.2f} | {med['passes']:.0f} | {med['fill']:.2f} | "
              f"{med['segments']:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
