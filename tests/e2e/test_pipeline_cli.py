"""Issue 33: `mesa-anyjev decide --states-file - --out OUT` over thousands of
states on real processes while the daemon drains and is replaced, is killed
and restarted, refuses calls with a full queue, and while the CLI itself is
killed and run again with --resume: every state once in OUT, and OUT equal
to an uninterrupted run's, byte for byte on the fake model.

The CLI reads its states from a pipe this test writes, so the CLI cannot
finish before the test has done what it does mid-run: every kill and
restart happens after an event (OUT holding so many lines, a daemon holding
a call), never after a sleep."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import CLI, CLI_HOME, Daemon, metric, run_on_a_tty

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

N = 2000
QUESTIONS = ["--question", "term.fits", "--question", "column.aspect"]
TOPICS = ["genes", "proteins", "cells", "viruses", "rainfall", "soil"]


def state_lines(n):
    return [json.dumps({"id": f"s{i}", "text": f"Column {i}: counts of {TOPICS[i % 6]} "
                                                f"per plot, {i % 7} replicates"})
            for i in range(n)]


class Run:
    """One `decide --out` process; its states come from `feed` (a pipe)
    unless `states_file` is given."""

    def __init__(self, tmp, address, out, *extra, states_file=None, name="cli",
                 backend=("--backend", "hf"), level="L0"):
        self.writer = None
        self.err_path = tmp / f"{name}.err"
        self.err = open(self.err_path, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
        env["HOME"] = CLI_HOME
        address_args = ["--address", address] if address else []
        args = [str(Path(CLI).resolve()), "decide", *backend, *address_args, "--level", level,
                *QUESTIONS, "--states-file", str(states_file or "-"), "--out", str(out), *extra]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL if states_file
                                     else subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=self.err, env=env, text=True)

    def feed(self, lines, close=False):
        """Writes `lines` to the CLI's stdin from a thread of its own: the
        CLI reads no further ahead than its calls in flight, so a pipe
        written while the daemon is away stays full until it is back."""
        def write():
            try:
                self.proc.stdin.write("".join(line + "\n" for line in lines))
                self.proc.stdin.flush()
                if close:
                    self.proc.stdin.close()
            except BrokenPipeError:
                pass  # the CLI was killed; the test says what it expected
        if self.writer is not None:
            self.writer.join()
        self.writer = threading.Thread(target=write, daemon=True)
        self.writer.start()

    def wait(self, timeout=300):
        if self.writer is not None:
            self.writer.join(timeout=timeout)
        rc = self.proc.wait(timeout=timeout)
        self.err.close()
        return rc

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        return self.err_path.read_text()

    def retries(self):
        m = re.search(r"(\d+) retries", self.stderr())
        assert m, self.stderr()
        return int(m.group(1))


def complete_lines(path):
    text = path.read_text() if path.exists() else ""
    return text.split("\n")[:-1]


def wait_lines(path, n, run):
    """Waits until OUT holds `n` complete lines (the CLI flushes span by
    span); fails at once if the CLI exits first."""
    while len(complete_lines(path)) < n:
        assert run.proc.poll() is None, f"the run ended before {n} lines: {run.stderr()}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    lines = state_lines(N)
    path = tmp_path_factory.mktemp("states") / "states.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return lines, path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, states):
    """OUT of one uninterrupted run on a daemon nothing happens to."""
    tmp = tmp_path_factory.mktemp("reference")
    daemon = Daemon(tmp)
    try:
        out = tmp / "out.jsonl"
        run = Run(tmp, daemon.address, out, states_file=states[1])
        assert run.wait() == 0, run.stderr()
        assert run.retries() == 0
    finally:
        daemon.stop()
    lines = complete_lines(out)
    assert [json.loads(line)["index"] for line in lines] == list(range(N))
    return out.read_text()


def test_the_daemon_drains_and_a_new_one_takes_its_address(start_daemon, tmp_path, states,
                                                           reference):
    lines, _ = states
    old = start_daemon("--set", "model.fake_delay_s=0.02", name="old")
    out = tmp_path / "out.jsonl"
    run = Run(tmp_path, old.address, out)
    run.feed(lines[:1000])
    wait_lines(out, 300, run)
    old.signal(signal.SIGTERM)
    assert old.wait(timeout=60) == 0, old.output()  # the drain finished its calls
    run.feed(lines[1000:], close=True)
    start_daemon(name="new", listen=old.address)
    assert run.wait() == 0, run.stderr()
    assert out.read_text() == reference
    assert run.retries() > 0


def test_the_daemon_is_killed_and_restarted(start_daemon, tmp_path, states, reference):
    lines, _ = states
    # 0.3 s a model call: once the daemon holds a call, the kill cuts it.
    first = start_daemon("--set", "model.fake_delay_s=0.3", name="first")
    out = tmp_path / "out.jsonl"
    run = Run(tmp_path, first.address, out)
    run.feed(lines[:1000])
    wait_lines(out, 128, run)
    first.wait_metrics(lambda t: metric(t, "mesa_anyjev_inflight_requests") >= 1,
                       "a call in flight")
    first.proc.kill()
    first.proc.wait()
    run.feed(lines[1000:], close=True)
    start_daemon(name="second", listen=first.address)
    assert run.wait() == 0, run.stderr()
    assert out.read_text() == reference
    assert run.retries() > 0


def test_through_the_balancer_with_a_daemon_draining(start_daemon, tmp_path, states,
                                                     reference):
    """deploy/'s nginx over three daemons; the one that has answered most
    drains once OUT holds 800 lines: the calls it refuses or cuts go to the
    others, and OUT equals the run on one daemon."""
    from test_balancer import Nginx
    lines, _ = states
    daemons = [start_daemon("--set", "model.fake_delay_s=0.01", name=f"lb{i}")
               for i in range(3)]
    (tmp_path / "nginx").mkdir()
    lb = Nginx(tmp_path / "nginx", daemons)
    try:
        out = tmp_path / "out.jsonl"
        run = Run(tmp_path, lb.address, out)
        run.feed(lines[:1200])
        wait_lines(out, 800, run)
        victim = max(daemons, key=lambda d: metric(
            d.metrics(), "mesa_anyjev_requests_total", method="Decide", code="OK"))
        victim.signal(signal.SIGTERM)
        assert victim.wait(timeout=120) == 0, victim.output()
        run.feed(lines[1200:], close=True)
        assert run.wait() == 0, run.stderr()
        assert out.read_text() == reference
        after = [d for d in daemons if d is not victim]
        assert sum(metric(d.metrics(), "mesa_anyjev_requests_total", method="Decide",
                          code="OK") for d in after) > 0
    finally:
        lb.stop()


def test_a_full_queue_refuses_calls_and_they_are_sent_again(start_daemon, tmp_path, states,
                                                            reference):
    # One decision worker and room for one call waiting: two CLIs with 8
    # calls in flight each are refused (RESOURCE_EXHAUSTED with pushback)
    # most of the time they ask.
    daemon = start_daemon("--set", "decisions.workers=1", "--set", "server.queue_capacity=1",
                          "--set", "model.fake_delay_s=0.01")
    runs = [Run(tmp_path, daemon.address, tmp_path / f"out{i}.jsonl", "--concurrency", "8",
                states_file=states[1], name=f"cli{i}") for i in range(2)]
    for run in runs:
        assert run.wait() == 0, run.stderr()
    for i in range(2):
        assert (tmp_path / f"out{i}.jsonl").read_text() == reference
    metrics = daemon.metrics()
    refused = metric(metrics, "mesa_anyjev_requests_total", method="Decide",
                     code="RESOURCE_EXHAUSTED")
    assert refused > 0
    assert sum(run.retries() for run in runs) >= refused


def test_the_cli_is_killed_and_resumed(daemon, tmp_path, states, reference):
    lines, path = states
    out = tmp_path / "out.jsonl"
    run = Run(tmp_path, daemon.address, out, name="killed")
    run.feed(lines[:1200])
    wait_lines(out, 500, run)
    run.proc.kill()
    run.wait()
    kept = len(complete_lines(out))
    assert 500 <= kept < N
    with open(out, "a") as f:  # as if killed in the middle of a write
        f.write('{"index": %d, "backend": "hf", "mod' % kept)
    resumed = Run(tmp_path, daemon.address, out, "--resume", states_file=path, name="resumed")
    assert resumed.wait() == 0, resumed.stderr()
    assert "dropped the torn last line" in resumed.stderr()
    assert f"{N} states in {out}" in resumed.stderr()
    assert f"({N - kept} this run, {kept} kept)" in resumed.stderr()
    assert out.read_text() == reference

    # Resumed against another run's questions, level or input: exit 2, one
    # line, OUT untouched.
    def refused(*extra, states_file=path):
        r = Run(tmp_path, daemon.address, out, "--resume", *extra, states_file=states_file,
                name="mismatch")
        assert r.wait() == 2
        return r.stderr().strip()

    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join(lines[:7] + [json.dumps("another state")] + lines[8:]) + "\n")
    said = refused(states_file=changed)
    assert said == (f"mesa-anyjev decide: --resume: {out} line 8 answers another input than "
                    f"{changed} line 8 (state 7): was the input changed?")
    said = refused("--span", "32")
    assert "\n" not in said and "--span 64; this run has 32" in said
    r = Run(tmp_path, daemon.address, out, "--resume", "--question", "avu.keep",
            states_file=path, name="questions")
    assert r.wait() == 2 and r.stderr().strip() == (
        f"mesa-anyjev decide: --resume: {out} line 1 was written for questions "
        "[term.fits, column.aspect]; this run asks [term.fits, column.aspect, avu.keep]")
    r = Run(tmp_path, daemon.address, out, "--resume", states_file=path, name="level",
            level="auto")
    assert r.wait() == 2 and r.stderr().strip() == (
        f"mesa-anyjev decide: --resume: {out} line 1 was written at --level L0; this run "
        "asks auto")
    assert out.read_text() == reference


def test_refused_states_get_an_error_line_and_the_rest_is_decided(start_daemon, tmp_path):
    daemon = start_daemon("--set", "limits.max_text_bytes=400")
    lines = state_lines(300)
    for i in (5, 70, 71, 299):
        lines[i] = json.dumps({"id": f"long{i}", "text": "x" * 500})
    path = tmp_path / "states.jsonl"
    path.write_text("\n".join(lines) + "\n")
    outs = []
    for concurrency in ("1", "4"):
        out = tmp_path / f"out{concurrency}.jsonl"
        run = Run(tmp_path, daemon.address, out, "--concurrency", concurrency,
                  states_file=path, name=f"c{concurrency}")
        assert run.wait() == 0, run.stderr()
        assert "4 refused states" in run.stderr()
        outs.append(out.read_text())
    assert outs[0] == outs[1]  # the same calls whatever the concurrency
    got = [json.loads(line) for line in outs[0].splitlines()]
    assert [g["index"] for g in got] == list(range(300))
    for g in got:
        if g["index"] in (5, 70, 71, 299):
            assert "decisions" not in g and g["id"] == f"long{g['index']}"
            assert g["error"] == {"code": "INVALID_ARGUMENT", "message":
                                  f"states[{g['index']}].text: 500 bytes exceed "
                                  "limits.max_text_bytes=400"}
        else:
            assert len(g["decisions"]) == 2 and "error" not in g


def test_span_limits_and_flags(start_daemon, tmp_path, states):
    daemon = start_daemon("--set", "limits.max_decide_states=32", "--set",
                          "limits.max_decide_questions=1")
    out = tmp_path / "out.jsonl"
    run = Run(tmp_path, daemon.address, out, states_file=states[1], name="big")
    assert run.wait() == 2
    assert run.stderr().strip() == (
        "mesa-anyjev decide: --span: 64 states exceed the daemon's "
        "limits.max_decide_states=32 (one span is one call)")
    assert not out.exists() or out.read_text() == ""
    # Within the limits: two questions go in one call each per span.
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(state_lines(100)) + "\n")
    run = Run(tmp_path, daemon.address, out, "--span", "32", states_file=small, name="ok")
    assert run.wait() == 0, run.stderr()
    assert len(complete_lines(out)) == 100
    assert metric(daemon.metrics(), "mesa_anyjev_requests_total", method="Decide",
                  code="OK") == 4 * 2
    # Without --out: the flags of a pipeline run are refused.
    r = subprocess.run([str(Path(CLI).resolve()), "decide", "--backend", "fake", "--question",
                        "term.fits", "--states-file", str(small), "--resume"],
                       capture_output=True, text=True, env={**os.environ, "HOME": CLI_HOME})
    assert r.returncode == 2 and "go with --out OUT" in r.stderr
    out.unlink()
    out.write_text("")
    run = Run(tmp_path, daemon.address, out, "--span", "32", states_file=small, name="again")
    assert run.wait() == 0  # an empty OUT is a fresh one
    run = Run(tmp_path, daemon.address, out, "--span", "32", states_file=small, name="exists")
    assert run.wait() == 2 and "give --resume" in run.stderr()


def test_the_fake_backend_in_process_resumes_too(tmp_path):
    lines = state_lines(200)
    path = tmp_path / "states.jsonl"
    path.write_text("\n".join(lines) + "\n")
    fake = ("--backend", "fake")
    whole = tmp_path / "whole.jsonl"
    run = Run(tmp_path, None, whole, "--span", "50", states_file=path, backend=fake)
    assert run.wait() == 0, run.stderr()
    out = tmp_path / "out.jsonl"
    out.write_text("\n".join(whole.read_text().splitlines()[:77]) + "\n")
    run = Run(tmp_path, None, out, "--span", "50", "--resume", states_file=path, backend=fake,
              name="resumed")
    assert run.wait() == 0, run.stderr()
    assert "(123 this run, 77 kept)" in run.stderr()
    assert out.read_text() == whole.read_text()


def test_a_terminal_sees_progress_then_one_summary_line(tmp_path):
    path = tmp_path / "states.jsonl"
    path.write_text("\n".join(state_lines(300)) + "\n")
    out = tmp_path / "out.jsonl"
    code, stdout, screen = run_on_a_tty(
        ["decide", "--backend", "fake", "--level", "L0", *QUESTIONS, "--states-file", str(path),
         "--out", str(out), "--span", "50"], {})
    assert code == 0, screen
    assert stdout == ""  # the lines go to OUT
    frames = [f.strip() for f in screen.split("\r") if "/300 states" in f]
    counts = [int(re.search(r"\] (\d+)/300 states", f).group(1)) for f in frames]
    assert counts and counts == sorted(counts) and counts[-1] == 300
    assert all("retries 0" in f and "refused 0" in f for f in frames)
    assert any("/s" in f or "s each" in f for f in frames)  # a rate
    summary = screen.strip().splitlines()[-1].split("\r")[-1].strip()
    assert re.fullmatch(rf"mesa-anyjev decide: 300 states in {re.escape(str(out))} \(300 this "
                        r"run, 0 kept\), 600 decisions in [\d.]+ s \([\d.]+ decisions/s\), "
                        r"0 retries, 0 refused states", summary), summary
    assert len(complete_lines(out)) == 300


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from make_tiny_qwen3 import make
    return make(tmp_path_factory.mktemp("pipeline") / "tiny-qwen3", tied=False)


def probs(path):
    return [[d["probs"] for d in json.loads(line)["decisions"]]
            for line in complete_lines(path)]


def test_a_qwen3_daemon_killed_mid_run_gives_the_uninterrupted_decisions(
        start_daemon, tmp_path, checkpoint):
    lines = state_lines(240)
    path = tmp_path / "states.jsonl"
    path.write_text("\n".join(lines) + "\n")
    serve = ("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")
    hf = ("--backend", "hf", "--set", "backend.hf_model=tiny/qwen3")
    first = start_daemon(*serve, name="first")
    whole = tmp_path / "whole.jsonl"
    run = Run(tmp_path, first.address, whole, "--span", "16", states_file=path, backend=hf,
              name="whole")
    assert run.wait() == 0, run.stderr()

    out = tmp_path / "out.jsonl"
    run = Run(tmp_path, first.address, out, "--span", "16", backend=hf, name="killed")
    run.feed(lines[:120])
    wait_lines(out, 48, run)
    first.proc.kill()
    first.proc.wait()
    run.feed(lines[120:], close=True)
    start_daemon(*serve, name="second", listen=first.address)
    assert run.wait() == 0, run.stderr()
    got, want = probs(out), probs(whole)
    assert [json.loads(line)["index"] for line in complete_lines(out)] == list(range(240))
    assert len(got) == len(want) == 240
    worst = max(abs(a - b) for g, w in zip(got, want) for pg, pw in zip(g, w)
                for a, b in zip(pg, pw))
    assert worst <= 1e-6, worst
    assert run.retries() > 0


def cli_decide(address, states_path, out, questions, *extra):
    """`decide --states-file --out` at level auto, as decide_stream decides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
    env["HOME"] = CLI_HOME
    q = [a for qid in questions for a in ("--question", qid)]
    r = subprocess.run([str(Path(CLI).resolve()), "decide", "--backend", "hf", "--address",
                        address, "--level", "auto", *q, "--states-file", str(states_path),
                        "--out", str(out), *extra], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in complete_lines(out)]


def same_outcomes(cli_lines, results):
    """The CLI's OUT lines against decide_stream's StateResults, state for
    state: index, id, and each decision (question, key, level, options,
    probabilities, answer) or the refusal (code and message)."""
    assert [line["index"] for line in cli_lines] == [r.index for r in results]
    for line, r in zip(cli_lines, results):
        assert line.get("id") == r.id
        if r.error is not None:
            assert "decisions" not in line
            assert line["error"] == {"code": r.error.code, "message": r.error.details}
            continue
        assert "error" not in line, (line, r)
        assert [(d["question_id"], d["question_key"], d["level"], d["options"], d["probs"],
                 d["answer"]) for d in line["decisions"]] == \
            [(d.question_id, d.question_key, d.level, list(d.probs), list(d.probs.values()),
              d.answer) for d in r.decisions], r.index


def test_the_cli_and_the_python_client_decide_alike(start_daemon, tmp_path):
    """The two halves of issue 33 cut, refuse and carry priors by one rule:
    on the same daemon, input and span, the CLI's OUT equals decide_stream's
    results, decision for decision. Once with test_pipeline's dataset (JSON
    states, ids, three states too long for every question), once with one
    question a call and a state too long for one of the two questions only:
    that state is that one refusal, and the other question's call decided
    it with the rest (its batch prior counts it)."""
    import test_pipeline as tp
    from mesa_anyjev_client import StateItem
    mac = tp.mac

    def write(items, path):
        path.write_text("".join(json.dumps(
            {"id": it.id, "text": it.state} if isinstance(it.state, str)
            else {"id": it.id, "json": it.state}) + "\n" for it in items))
        return path

    daemon = start_daemon()
    items = list(tp.dataset())
    with mac.Client(daemon.address) as client:
        results = list(client.decide_stream(items, tp.QUESTIONS, span=tp.SPAN))
    assert sum(not r.ok for r in results) == len(tp.TOO_LONG)
    lines = cli_decide(daemon.address, write(items, tmp_path / "states.jsonl"),
                       tmp_path / "out.jsonl", tp.QUESTIONS, "--span", str(tp.SPAN))
    same_outcomes(lines, results)

    one = start_daemon("--set", "limits.max_decide_questions=1", "--set",
                       "limits.max_prompt_tokens=1500", name="one")
    with mac.Client(one.address) as client:
        def longest(question):
            # The longest run of "x" this question's prompts still take.
            lo, hi = 1, 1500
            while lo < hi:
                mid = (lo + hi + 1) // 2
                try:
                    client.decide(["x" * mid], [question])
                    lo = mid
                except mac.InvalidArgument:
                    hi = mid - 1
            return lo
        fits = {q: longest(q) for q in tp.QUESTIONS}
        assert len(set(fits.values())) == 2, fits
        short = min(fits, key=fits.get)  # its prompts are the longer ones
        items = [StateItem(f"Column {i}: soil depth at plot {i % 9}", id=i) for i in range(150)]
        items[70] = StateItem("x" * (fits[short] + 1), id="one question too long")
        results = list(client.decide_stream(items, tp.QUESTIONS, span=32))
    refused = [r for r in results if not r.ok]
    assert [r.index for r in refused] == [70]
    assert refused[0].error.details.startswith("states[70]")
    def calls():
        text = one.metrics()
        return [metric(text, "mesa_anyjev_requests_total", method="Decide", code=code)
                for code in ("OK", "INVALID_ARGUMENT")]
    before = calls()
    lines = cli_decide(one.address, write(items, tmp_path / "one.jsonl"),
                       tmp_path / "one-out.jsonl", tp.QUESTIONS, "--span", "32")
    same_outcomes(lines, results)
    # 5 spans x 2 questions answered, one of them after its refusal (sent
    # again without state 70); the other question's call of that span went
    # once, state 70 in it.
    assert [a - b for a, b in zip(calls(), before)] == [10, 1]
