"""make bench-scheduler (issue 38): the engine's scheduler against FIFO
(`engine.scheduler: fifo`, the arrival order it replaced), side by side in
one run on one checkpoint, threads and engine.batch_tokens, each contender
on a fresh daemon of the same build.

The load: two pipelines, tenants `pipe-a` and `pipe-b` of one tokens file
(made by the real CLI, role decide, class batch), keep --a-calls and
--b-calls Decide calls in flight (8 and 2: the issue's case), each from a
process of its own as real pipelines are (their clients' CPU time is not the
curator's), each call --span states of about --state-tokens tokens x one
choice question at L0, every state new (only the shared system prompt is
cached). Each round first runs every contender's daemon at once, one
engine thread each, each saturated by two pipelines of its own for
--at-once-window seconds: the same work at the same time, so a spell of the
host (another guest's load) hits them all and their shares (b) and
decisions/s (c) compare like for like (--at-once-only: nothing else). Then
the contenders in turn, each on a daemon of --threads threads: once its
pipelines are answered, two windows:

- the pipelines alone for --alone-window seconds: the same work again, in
  another spell of the host than the other contenders';
- then a curator, tenant `curator` (interactive), asks one question about
  one state, one call after another, for at least --window seconds (and at
  least --samples times): its latency (a), and what answering it costs the
  pipelines. A faster answer means more questions in the window (FIFO
  answers a handful), which the pipelines pay for: this window's figures
  do not compare the same work.

Before the pipelines start, the curator asks --samples times on the idle
daemon. Per contender: the curator's p50 and p99 idle and loaded; in each
window the pipelines' tokens computed (the daemon's own
mesa_anyjev_tenant_tokens_total), their Jain index and a:b ratio, their
decisions/s, and the passes' fill (new tokens a pass / engine.batch_tokens,
from mesa_anyjev_batch_tokens). Beside them the limits measured on the same
daemon: the prefill rate of full passes of fresh prompts of 128 tokens,
about a state's prompt (annotation_workload.prefill_rate; longer prompts
cost more attention a token), so a full pass's time and the p99 bound (idle
p99 + two full passes), and, with the rate measured again once the
pipelines have stopped (the faster of the two: a slow spell of the host
while one was measured does not lower it), the tokens/s no window can
pass. The weighted
contender gives pipe-a weight 3 and pipe-b 1; with --compare-short-after a
fourth, equal weights with engine.short_passes_after_interactive 0, shows
what the short passes after a curator's buy and cost.

Decisions/s counts the calls that ended in a window, and in brackets the
daemon's own count of decisions answered (less the curator's). A loaded full
pass is the mean time of the full passes of batch work alone in the
curator's window (past engine.interactive_pass_tokens: the passes right
after a curator's are short too), from the daemon's own records
(engine.pass_records); the same records say how many passes carried each
curator call, how full and how long they were, and the daemon's queue-wait
histogram how long the curator's jobs waited for one.

--rounds (3) runs the contenders in turn that many times; a summary
gives each figure's median and spread over the rounds.

Targets (issue 38, item 7): loaded p99 within idle p99 + two full passes;
equal weights: Jain >= 0.98; weights 3:1: a:b within 10% of 3; decisions/s
>= 0.95 of FIFO's with passes as full (the same work: at once, and alone)."""
import argparse
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import annotation_workload as aw  # noqa: E402
from conftest import Daemon, add_token, auth, dpb, metric, with_token  # noqa: E402
from conftest import decisions_pb2_grpc  # noqa: E402

TENANTS = ("pipe-a", "pipe-b", "curator")
PHASES = ("at_once", "alone", "shared")


class States:
    """New state texts on demand, none repeated (nothing but the system
    prompt is cached)."""

    def __init__(self, tokenizer, tokens, seed):
        self.tokenizer, self.tokens = tokenizer, tokens
        self.seeds = itertools.count(seed)
        self.lock = threading.Lock()

    def take(self, n):
        with self.lock:
            seed = next(self.seeds)
        return aw.states(n, self.tokens, self.tokenizer, seed=seed)


def decide(stub, token, texts, question):
    reply = stub.Decide(dpb.DecideRequest(
        states=[dpb.State(text=t) for t in texts], level="L0",
        questions=[dpb.Question(kind="choice", text=question[0], options=question[1])]),
        timeout=3600, metadata=auth(token))
    return len(reply.decisions)


def pipeline_process(address, token, calls, span, state_tokens, seed, question,
                     tokenizer_path, events, stop):
    """One pipeline in a process of its own, as real pipelines run (its
    client's CPU time is not the curator's): `calls` Decide calls of `span`
    new states kept in flight until `stop`; each call's end goes on `events`
    as (time.monotonic(), decisions), then ("done", the first error or None)."""
    states = States(Tokenizer.from_file(tokenizer_path), state_tokens, seed)
    stub = decisions_pb2_grpc.DecisionsStub(grpc.insecure_channel(address))
    errors = []

    def run():
        while not stop.is_set():
            try:
                n = decide(stub, token, states.take(span), question)
            except grpc.RpcError as e:  # noqa: PERF203 - a refusal is a finding
                errors.append(f"{e.code()}: {e.details()}")
                return
            events.put((time.monotonic(), n))

    threads = [threading.Thread(target=run) for _ in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events.put(("done", errors[0] if errors else None))


class Pipeline:
    """A pipeline process (pipeline_process) and the calls it has ended."""

    def __init__(self, daemon, token, calls, span, args, seed, question, tokenizer_path):
        ctx = multiprocessing.get_context("spawn")  # no gRPC state forked
        self.events, self.stop = ctx.Queue(), ctx.Event()
        self.ended, self.error, self.done = [], None, False
        self.process = ctx.Process(target=pipeline_process, args=(
            daemon.address, token, calls, span, args.state_tokens, seed, question,
            tokenizer_path, self.events, self.stop))
        self.process.start()

    def _take(self, event):
        if event[0] == "done":
            self.done, self.error = True, event[1]
        else:
            self.ended.append(event)

    def first_answered(self):
        """Blocks until one of its calls has ended (or the process has)."""
        while not self.ended and not self.done:
            self._take(self.events.get())
        assert not self.done, self.error

    def decisions_between(self, start, end):
        return sum(n for t, n in self.ended if start <= t < end)

    def join(self):
        self.stop.set()
        while not self.done:
            self._take(self.events.get())
        self.process.join()
        assert self.error is None, self.error


def curator(daemon, token, samples, states, question, until=0.0):
    """Latencies of single decisions, one after another: `samples` of them,
    and more until time.monotonic() passes `until`."""
    seconds = []
    while len(seconds) < samples or time.monotonic() < until:
        text = states.take(1)
        start = time.monotonic()
        decide(daemon.decisions, token, text, question)
        seconds.append(time.monotonic() - start)
    return seconds


def quantile(values, q):
    """The nearest-rank quantile: of 100 samples, p99 is the 99th."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def snapshot(daemon):
    text = daemon.metrics()
    out = {t: sum(metric(text, "mesa_anyjev_tenant_tokens_total", tenant=t, **{"class": c})
                  for c in ("interactive", "batch")) for t in TENANTS}
    out["passes"] = metric(text, "mesa_anyjev_batch_tokens_count")
    for part in ("sum", "count"):  # interactive jobs' waits for their first pass
        out[f"wait_{part}"] = metric(text, f"mesa_anyjev_queue_wait_seconds_{part}",
                                     **{"class": "interactive"})
    out["tokens"] = metric(text, "mesa_anyjev_batch_tokens_sum")
    out["decisions"] = sum(float(v) for v in re.findall(
        r"^mesa_anyjev_decisions_total\{[^}]*\} (\S+)$", text, re.M))
    out["curator_calls"] = sum(float(v) for v in re.findall(  # one decision each
        r'^mesa_anyjev_tenant_requests_total\{[^}]*tenant="curator"[^}]*\} (\S+)$', text, re.M))
    return out


def read_passes(directory):
    """The daemon's pass records so far (engine.pass_records), one a line."""
    path = directory / "passes.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pipelines(before, after, begin, end, a, b, weights, args):
    """The pipelines' figures between two snapshots: their shares (b), and
    their decisions/s and the passes' fill (c)."""
    d = {k: after[k] - before[k] for k in after}
    x = [d["pipe-a"] / weights[0], d["pipe-b"] / weights[1]]  # tokens per unit of weight
    window = end - begin
    return {
        "jain": sum(x) ** 2 / (len(x) * sum(v * v for v in x)),
        "ratio": d["pipe-a"] / max(d["pipe-b"], 1),
        "a": d["pipe-a"], "b": d["pipe-b"],
        "per_s": (a.decisions_between(begin, end) + b.decisions_between(begin, end)) / window,
        # The daemon's own count, less the curator's (one decision a call).
        "answered_per_s": (d["decisions"] - d["curator_calls"]) / window,
        "tokens_per_s": d["tokens"] / window,
        "fill": d["tokens"] / max(d["passes"], 1) / args.batch_tokens, "window": window,
        "passes": d["passes"],
    }


def launch(tmp, policy, weights, short_after, threads, args, directory):
    """A fresh daemon of one contender and its tenants' tokens (made by the
    real CLI): the admin, pipe-a and pipe-b with `weights`, the curator."""
    tokens_file = tmp / "tokens.yaml"
    # The admin's calls (the prefill limit's) are batch: an interactive
    # call's pass is engine.interactive_pass_tokens, not a full one.
    token = {"admin": add_token(tokens_file, "admin", "--role", "admin", "--priority",
                                "batch")}
    for tenant, weight in zip(("pipe-a", "pipe-b"), weights):
        token[tenant] = add_token(tokens_file, tenant, "--role", "decide", "--priority",
                                  "batch", "--weight", str(weight))
    token["curator"] = add_token(tokens_file, "curator", "--role", "decide")
    daemon = Daemon(tmp, args=[
        "--model", str(directory), "--set", "model.name=bench",
        "--set", f"model.threads={threads}",
        "--set", f"engine.batch_tokens={args.batch_tokens}",
        "--set", f"engine.scheduler={policy}",
        "--set", f"engine.interactive_pass_tokens={args.interactive_pass_tokens}",
        "--set", f"engine.short_passes_after_interactive={short_after}",
        "--set", f"auth.tokens_file={tokens_file}",
        "--set", f"engine.pass_records={tmp / 'passes.jsonl'}",
        "--set", "server.default_deadline_s=3600", "--set", "server.max_deadline_s=3600"],
        start_timeout=900)
    return daemon, token


def at_once(contenders, args, directory, question):
    """The contenders' daemons at the same time, one engine thread each, each
    saturated by its own two pipelines (the same work): whatever the host does
    meanwhile (another guest's load, a slower spell) it does to all of them,
    so their decisions/s compare like for like where contenders in turn
    compare spells of the host. No curator."""
    tokenizer_path = str(directory / "tokenizer.json")
    with contextlib.ExitStack() as stack:
        daemons, pipes = [], []
        for _, policy, weights, short_after in contenders:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="mesa-anyjev-bench-scheduler-")))
            daemon, token = launch(tmp, policy, weights, short_after, 1, args, directory)
            stack.callback(daemon.stop)
            daemons.append(daemon)
            pipes.append([Pipeline(daemon, token[t], calls, args.span, args, seed, question,
                                   tokenizer_path)
                          for t, calls, seed in (("pipe-a", args.a_calls, 10**6),
                                                 ("pipe-b", args.b_calls, 2 * 10**6))])
        try:
            for pipe in itertools.chain(*pipes):
                pipe.first_answered()
            before, begin = [snapshot(d) for d in daemons], time.monotonic()
            time.sleep(args.at_once_window)
            after, end = [snapshot(d) for d in daemons], time.monotonic()
        finally:
            for pipe in itertools.chain(*pipes):
                pipe.join()
    return [pipelines(b0, a0, begin, end, *pipe, weights, args)
            for b0, a0, pipe, (_, _, weights, _) in zip(before, after, pipes, contenders)]


def contender(name, policy, weights, short_after, args, directory, tokenizer, question):
    with tempfile.TemporaryDirectory(prefix="mesa-anyjev-bench-scheduler-") as tmp:
        tmp = Path(tmp)
        daemon, token = launch(tmp, policy, weights, short_after, args.threads, args, directory)
        try:
            with_token(daemon, token["admin"])
            states = States(tokenizer, args.state_tokens, seed=1000)
            curator(daemon, token["curator"], 3, states, question)  # a fresh process's first calls
            idle = curator(daemon, token["curator"], args.samples, states, question)
            rate = aw.prefill_rate(daemon, args.batch_tokens, prompt=128)
            tokenizer_path = str(directory / "tokenizer.json")
            a = Pipeline(daemon, token["pipe-a"], args.a_calls, args.span, args, 10**6,
                         question, tokenizer_path)
            b = Pipeline(daemon, token["pipe-b"], args.b_calls, args.span, args, 2 * 10**6,
                         question, tokenizer_path)
            try:
                # Saturated once each pipeline has had a call answered.
                a.first_answered()
                b.first_answered()
                # The pipelines alone: FIFO and the scheduler given the same
                # work, which is what (b) and (c) compare.
                alone_before, alone_start = snapshot(daemon), time.monotonic()
                time.sleep(args.alone_window)
                before, start = snapshot(daemon), time.monotonic()
                alone_after, alone_end = before, start
                first_pass = len(read_passes(tmp))
                samples = args.fifo_samples if policy == "fifo" else args.samples
                # Then the curator asks throughout the pipelines' window (at
                # least --window seconds): (a), and what it costs them.
                loaded = curator(daemon, token["curator"], samples, states, question,
                                 until=start + args.window)
                after, end = snapshot(daemon), time.monotonic()
                passes = read_passes(tmp)[first_pass:]
            finally:
                a.join()
                b.join()
            # The limit again, idle once more: a spell of the host while it
            # was first measured must not put it under what the windows ran.
            rate_after = aw.prefill_rate(daemon, args.batch_tokens, prompt=128)
        finally:
            daemon.stop()
    alone = pipelines(alone_before, alone_after, alone_start, alone_end, a, b, weights, args)
    shared = pipelines(before, after, start, end, a, b, weights, args)
    waits = {k: after[k] - before[k] for k in ("wait_sum", "wait_count")}
    full_pass = args.batch_tokens / rate
    # The passes the engine ran meanwhile, planning and answering included:
    # on two cores the clients and decision workers share the CPU with it.
    loaded_pass = shared["window"] / max(shared["passes"], 1)
    carrying = [p for p in passes if any(s["tenant"] == "curator" for s in p["shares"])]
    batch_only = [p for p in passes if p not in carrying]
    # Full: past a short pass's budget (the passes after a curator's pass
    # are short too, engine.short_passes_after_interactive).
    full = [p for p in batch_only if p["tokens"] > args.interactive_pass_tokens]
    short = [p for p in batch_only if p not in full]
    loaded_full = statistics.mean(p["seconds"] for p in full) if full else loaded_pass
    return {
        # The passes that carried the curator's calls: how many a call, how
        # long and how full, beside the passes of batch work alone.
        "curator_passes": len(carrying) / max(len(loaded), 1),
        "curator_jobs": waits["wait_count"] / max(len(loaded), 1),
        "curator_wait_s": waits["wait_sum"] / max(waits["wait_count"], 1),
        "curator_pass_s": statistics.mean(p["seconds"] for p in carrying) if carrying else 0,
        "curator_pass_tokens": statistics.mean(p["tokens"] for p in carrying) if carrying else 0,
        "full_passes": len(full), "short_after": len(short),
        "short_after_s": statistics.mean(p["seconds"] for p in short) if short else 0,
        "name": name, "asked": len(loaded),
        "idle_p50": quantile(idle, 0.5), "idle_p99": quantile(idle, 0.99),
        "p50": quantile(loaded, 0.5), "p99": quantile(loaded, 0.99),
        "bound": quantile(idle, 0.99) + 2 * full_pass, "full_pass": full_pass,
        # A full pass under the load: the daemon's own records of the passes
        # of batch work alone (every one full) in the window.
        "loaded_bound": quantile(idle, 0.99) + 2 * loaded_full,
        "loaded_pass": loaded_pass, "loaded_full": loaded_full,
        "rate": max(rate, rate_after), "rates": (rate, rate_after),
        "alone": alone, "shared": shared,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/mesa-anyjev-bench-engine")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-tokens", type=int, default=8192, help="engine.batch_tokens")
    ap.add_argument("--span", type=int, default=64, help="states a pipeline call")
    ap.add_argument("--state-tokens", type=int, default=100)
    ap.add_argument("--a-calls", type=int, default=8)
    ap.add_argument("--b-calls", type=int, default=2)
    ap.add_argument("--samples", type=int, default=100, help="curator decisions per reading")
    ap.add_argument("--fifo-samples", type=int, default=10,
                    help="loaded readings under FIFO, whose every answer waits out the queue")
    ap.add_argument("--at-once-window", type=float, default=60,
                    help="seconds the contenders' daemons run at once, each saturated by "
                         "its own pipelines, measured")
    ap.add_argument("--at-once-only", action="store_true",
                    help="only the contenders' daemons at once: no contenders in turn, no "
                         "curator")
    ap.add_argument("--alone-window", type=float, default=90,
                    help="seconds the pipelines run alone, measured, before the curator asks")
    ap.add_argument("--window", type=float, default=120,
                    help="seconds, at least, the curator asks while the pipelines run")
    ap.add_argument("--interactive-pass-tokens", type=int, default=4096,
                    help="engine.interactive_pass_tokens (the daemon's default: 4096)")
    ap.add_argument("--short-passes-after-interactive", dest="short_after", type=int, default=1,
                    help="engine.short_passes_after_interactive (the daemon's default: 1)")
    ap.add_argument("--compare-short-after", action="store_true",
                    help="a fourth contender: equal weights with "
                         "engine.short_passes_after_interactive 0")
    ap.add_argument("--rounds", type=int, default=3,
                    help="the contenders in turn, this many times: medians and spread")
    args = ap.parse_args()

    directory = aw.checkpoint(args.work, args.layers, args.hidden)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    question = aw.questions(2)[1]  # K = 3
    contenders = [("FIFO (engine.scheduler: fifo)", "fifo", (1, 1), args.short_after),
                  ("fair, equal weights", "fair", (1, 1), args.short_after),
                  ("fair, weights 3:1", "fair", (3, 1), args.short_after)]
    if args.compare_short_after:  # what the short passes after a curator's buy
        contenders.append(("fair, equal weights, no short pass after", "fair", (1, 1), 0))
    print(f"\nQwen3 {args.layers} blocks x hidden {args.hidden}, float32, {args.threads} "
          f"threads, engine.batch_tokens {args.batch_tokens}; pipelines of {args.a_calls} and "
          f"{args.b_calls} calls in flight, each a process of its own, {args.span} states of "
          f"~{args.state_tokens} tokens a call x 1 question (K = 3) at L0; the contenders' "
          f"daemons at once for {args.at_once_window:.0f} s, then in turn: the pipelines alone for "
          f"{args.alone_window:.0f} s, then with the curator for {args.window:.0f} s; the "
          f"curator: {args.samples} single decisions a reading ({args.fifo_samples} loaded "
          f"under FIFO); {args.rounds} round(s), the contenders in turn each round\n")
    rounds = []
    for n in range(args.rounds):
        together = at_once(contenders, args, directory, question)
        rows = [{"name": name} if args.at_once_only else
                contender(name, policy, weights, short_after, args, directory, tokenizer,
                          question)
                for name, policy, weights, short_after in contenders]
        for r, t in zip(rows, together):
            r["at_once"] = t
        for r in rows:
            for phase in (p for p in PHASES if p in r):
                fifo = rows[0][phase]
                r[phase]["vs_fifo"] = r[phase]["per_s"] / fifo["per_s"]
                r[phase]["tokens_vs_fifo"] = r[phase]["tokens_per_s"] / fifo["tokens_per_s"]
        print(f"Round {n + 1}:\n")
        table(rows)
        rounds.append(rows)
    if args.rounds > 1:
        summary(contenders, rounds)


def pipelines_row(r, phase):
    p = r[phase]
    return (f"{p['a']:.0f} : {p['b']:.0f} ({p['ratio']:.2f}) | {p['jain']:.3f} | "
            f"{p['per_s']:.1f} ({p['answered_per_s']:.1f}) | {p['vs_fifo']:.2f} | "
            f"{p['fill']:.2f} | {p['tokens_per_s']:.0f} | {p['tokens_vs_fifo']:.2f}")


def table(rows):
    pipes = ("pipe-a : pipe-b tokens | Jain (per weight) | decisions/s (answered) | vs FIFO | "
             "fill | tokens/s | vs FIFO")
    print("The contenders' daemons at once, one engine thread each, each with its own "
          "pipelines (the same work at the same time: (b) and (c)):\n")
    print(f"| contender | {pipes} |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {pipelines_row(r, 'at_once')} |")
    if "alone" not in rows[0]:
        print()
        return
    print("\nIn turn, the pipelines alone (the same work, in another spell of the host):\n")
    print(f"| contender | {pipes} | limit: full-pass tokens/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {pipelines_row(r, 'alone')} | {r['rate']:.0f} |")
    print("\nWith the curator asking, one call after another ((a), and what answering it "
          "costs the pipelines):\n")
    print(f"| contender | curator idle p50 / p99 (s) | loaded p50 / p99 (s) | bound: idle p99 + "
          f"2 full passes, idle / loaded (s) | curator calls | {pipes} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['idle_p50']:.3f} / {r['idle_p99']:.3f} | "
              f"{r['p50']:.3f} / {r['p99']:.3f} | {r['bound']:.3f} / {r['loaded_bound']:.3f} | "
              f"{r['asked']} | {pipelines_row(r, 'shared')} |")
    print()
    for r in rows:
        # A figure past its limit is a measurement's bug, not a result.
        for phase in ("alone", "shared"):  # at once: one thread of the limit's two
            if r[phase]["tokens_per_s"] > 1.05 * r["rate"]:
                print(f"WARNING {r['name']} ({phase}): {r[phase]['tokens_per_s']:.0f} tokens/s "
                      f"passes the limit measured beside it ({r['rate']:.0f})")
        print(f"{r['name']}: windows {r['at_once']['window']:.1f} s at once, "
              f"{r['alone']['window']:.1f} s alone and "
              f"{r['shared']['window']:.1f} s with the curator, the limit "
              f"{r['rates'][0]:.0f} tokens/s before them and {r['rates'][1]:.0f} after, "
              f"a full pass "
              f"{r['full_pass']:.3f} s idle, {r['loaded_pass']:.3f} s with the curator on "
              f"average ({r['loaded_full']:.3f} s for a full one); the curator's calls made "
              f"{r['curator_jobs']:.2f} engine jobs each, waiting {r['curator_wait_s']:.3f} s "
              f"on average for a pass, and rode "
              f"{r['curator_passes']:.2f} passes each, of {r['curator_pass_tokens']:.0f} tokens "
              f"and {r['curator_pass_s']:.3f} s on average; passes of batch work alone: "
              f"{r['full_passes']} full, {r['loaded_full']:.3f} s on average, and "
              f"{r['short_after']} short, {r['short_after_s']:.3f} s)")
    print()


def summary(contenders, rounds):
    """Each figure's median and spread (min-max) over the rounds, and how many
    rounds met each target."""
    def spread(values, digits):
        return (f"{statistics.median(values):.{digits}f} "
                f"({min(values):.{digits}f}-{max(values):.{digits}f})")

    def pipes(rs, phase):
        ps = [r[phase] for r in rs]
        return (f"{spread([p['ratio'] for p in ps], 2)} | {spread([p['jain'] for p in ps], 3)} | "
                f"{spread([p['vs_fifo'] for p in ps], 2)} | "
                f"{spread([p['tokens_vs_fifo'] for p in ps], 2)} | "
                f"{spread([p['fill'] for p in ps], 2)}")

    columns = "a : b | Jain | decisions/s vs FIFO | tokens/s vs FIFO | fill"
    print(f"Over {len(rounds)} rounds, median (min-max). The daemons at once:\n")
    print(f"| contender | {columns} |")
    print("|---|---|---|---|---|---|")
    for i, (name, *_) in enumerate(contenders):
        print(f"| {name} | {pipes([rows[i] for rows in rounds], 'at_once')} |")
    if "alone" not in rounds[0][0]:
        print()
        return
    print("\nIn turn, the pipelines alone:\n")
    print(f"| contender | {columns} |")
    print("|---|---|---|---|---|---|")
    for i, (name, *_) in enumerate(contenders):
        print(f"| {name} | {pipes([rows[i] for rows in rounds], 'alone')} |")
    print("\nWith the curator asking:\n")
    print("| contender | loaded p50 (s) | loaded p99 (s) | p99 - bound (idle) (s) | "
          f"p99 - bound (loaded) (s) | rounds within a bound | curator calls | {columns} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, (name, *_) in enumerate(contenders):
        rs = [rows[i] for rows in rounds]
        within = sum(r["p99"] <= max(r["bound"], r["loaded_bound"]) for r in rs)
        print(f"| {name} | {spread([r['p50'] for r in rs], 3)} | "
              f"{spread([r['p99'] for r in rs], 3)} | "
              f"{spread([r['p99'] - r['bound'] for r in rs], 3)} | "
              f"{spread([r['p99'] - r['loaded_bound'] for r in rs], 3)} | "
              f"{within} of {len(rs)} | {spread([r['asked'] for r in rs], 0)} | "
              f"{pipes(rs, 'shared')} |")
    print()


if __name__ == "__main__":
    main()
