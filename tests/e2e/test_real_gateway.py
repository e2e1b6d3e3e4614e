"""Issue 17: the gateway backend, router mode and doctor against the real
chain, LiteLLM in front of vLLM 0.32 (CPU), and against vLLM directly, all
on loopback and on one tiny random Qwen3 that mesa-anyjevd also serves
(real_gateway.py starts them). Decisions through the gateway equal the
daemon's on the same weights: raw and L0 for K up to 26 (labels read by id,
vLLM's logprob_token_ids), L1 fitted and served by a router; the router
and the composite CLI backend send L2 to the daemon and never to the chain
(vLLM's own request counter); vLLM tokenizes every prompt as we do. The
top-k readout still works where labels are in the top list, and a label
that is not is never silent."""
import json
import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import real_gateway as rg  # noqa: E402
from conftest import Daemon, dpb, metric, pb, run_cli  # noqa: E402

TOL = 1e-5  # float32 in two engines
STATE = "A survey of forest birds at three sites"
KEY_ENV = {"MESA_LLM_API_KEY": rg.MASTER_KEY}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(checkpoint, daemon, vLLM, LiteLLM), started once for this file."""
    tmp = tmp_path_factory.mktemp("real-gateway")
    tok = Tokenizer.from_file(str(Path(__file__).resolve().parents[1] / "data" / "qwen3-tokenizer"
                                  / "tokenizer.json"))
    checkpoint = make(tmp / "tiny-qwen3", head_dim=rg.HEAD_DIM,
                      reachable=rg.lifted(tok))
    (tmp / "daemon").mkdir()
    daemon = Daemon(tmp / "daemon", args=("--model", str(checkpoint),
                                          "--set", "model.name=tiny/qwen3"))
    vllm = rg.start_vllm(checkpoint, tmp)
    litellm = None
    try:
        litellm = rg.start_litellm(vllm.url, tmp)
        yield checkpoint, daemon, vllm, litellm
    finally:
        if litellm is not None:
            litellm.stop()
        vllm.stop()
        daemon.stop()


def gateway_args(checkpoint, url, *extra, backend="gateway"):
    return ["--backend", backend, "--set", f"backend.gateway_base_url={url}",
            "--set", f"backend.served_model={rg.SERVED}", "--set", f"backend.tokenizer={checkpoint}",
            "--set", "backend.canonical_model=tiny/qwen3", *extra]


def questions_file(tmp_path, ks):
    questions = [{"id": f"k{k}", "kind": "choice", "text": "Which option fits?",
                  "options": [f"option {i}" for i in range(k)]} for k in ks]
    questions.append({"id": "yn", "kind": "noul", "text": "Is it about birds?"})
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(questions))
    return path


def decide(args, questions, level, *extra, env=None):
    r = run_cli("decide", *args, "--questions-file", str(questions), "--state", STATE,
                "--level", level, "--json", *extra, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def close(a, b):
    return all(abs(x - y) <= TOL for x, y in zip(a, b)) and len(a) == len(b)


def url_of(chain, via):
    return chain[3].url if via == "litellm" else chain[2].url


def vllm_completions(vllm):
    """Requests vLLM has finished, by its own counter."""
    with urllib.request.urlopen(f"{vllm.url}/metrics", timeout=60) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def fit_l2(served, question):
    states = [f"Item {i}: the sky is {'blue' if i % 2 == 0 else 'grey'} over site {i}"
              for i in range(40)]
    served.decisions.Fit(dpb.FitRequest(question=question, labels=[i % 2 for i in range(40)],
                                        states=[dpb.State(text=t.encode()) for t in states],
                                        level="L2"), timeout=300)


def test_vllm_tokenizes_every_prompt_as_we_do(chain):
    checkpoint, daemon, vllm, _ = chain
    questions = [dpb.Question(kind="choice", text=b"Which option fits?",
                              options=[f"option {i}".encode() for i in range(k)])
                 for k in (2, 8, 26)]
    questions += [dpb.Question(kind="noul", text="Is it about birds, ja oder nein?".encode()),
                  dpb.Question(kind="score", text=b"How sure is the record?")]
    states = [STATE, "Ünïcode — ✓ 東京の鳥\ttabs  and\n\nnew lines 🐦 ", " leading space"]
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=t.encode()) for t in states], questions=questions, level="L0",
        return_prompts=True), timeout=300)
    prompts = [p for d in reply.decisions for p in d.diagnostics.prompt_texts]
    assert len(prompts) > 100
    ours = daemon.stub.Tokenize(pb.TokenizeRequest(texts=[p.encode() for p in prompts]),
                                timeout=60)
    for prompt, ids in zip(prompts, ours.items):
        body = json.dumps({"model": rg.SERVED, "prompt": prompt}).encode()
        request = urllib.request.Request(f"{vllm.url}/tokenize", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            assert json.load(r)["tokens"] == list(ids.ids), prompt


@pytest.mark.parametrize("via", ["litellm", "vllm"])
def test_doctor_passes_and_names_the_server(chain, via):
    checkpoint, _, vllm, litellm = chain
    url = litellm.url if via == "litellm" else vllm.url
    r = run_cli("doctor", *gateway_args(checkpoint, url, "--set", "backend.logprobs=40"),
                env=KEY_ENV, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # The route that answered says what the server is.
    path = "/health/liveliness" if via == "litellm" else "/health"
    assert f"[ok] gateway liveness: {url}{path} -> 200" in r.stdout
    assert "[ok] label readout: token_ids (the server answers label ids)" in r.stdout
    assert "[ok] gateway logprobs: token_ids labels_present=true" in r.stdout
    # vLLM started with --max-logprobs 40 takes 40: the cap follows the server.
    assert "[ok] logprobs cap: logprobs=40 accepted" in r.stdout
    r = run_cli("doctor", *gateway_args(checkpoint, url, "--set", "backend.logprobs=41"),
                env=KEY_ENV, timeout=300)
    assert r.returncode == 1
    assert "logprobs=41 refused" in r.stdout or "top_k=41" in r.stdout


@pytest.mark.parametrize("via", ["litellm", "vllm"])
def test_raw_and_l0_equal_the_daemon_for_k_up_to_26(chain, via, tmp_path):
    checkpoint, daemon, vllm, litellm = chain
    url = litellm.url if via == "litellm" else vllm.url
    questions = questions_file(tmp_path, [3, 8, 12, 26])
    hf = ["--backend", "hf", "--set", f"client.address={daemon.address}",
          "--set", "backend.hf_model=tiny/qwen3"]
    for level in ("raw", "L0"):
        ours, _ = decide(hf, questions, level)
        theirs, err = decide(gateway_args(checkpoint, url), questions, level, "--strict",
                             env=KEY_ENV)
        assert theirs["missing_labels"] == 0 and "missing" not in err
        for a, b in zip(ours["decisions"], theirs["decisions"]):
            assert (a["question_id"], a["level"]) == (b["question_id"], b["level"])
            assert close(a["probs"], b["probs"]), (level, a["question_id"], a["probs"], b["probs"])
        if level == "raw":  # not uniform: the lifted labels carry the prompt's preference
            probs = ours["decisions"][0]["probs"]
            assert max(probs) - min(probs) > 1e-2, probs


def test_top_k_readout_and_a_missing_label_is_never_silent(chain, tmp_path):
    checkpoint, daemon, vllm, _ = chain
    top_k = gateway_args(checkpoint, vllm.url, "--set", "backend.label_readout=top_k",
                         "--set", "backend.max_choice_k=26")
    hf = ["--backend", "hf", "--set", f"client.address={daemon.address}",
          "--set", "backend.hf_model=tiny/qwen3"]
    # Labels A..H, Yes and No are in every top 20: exact through top-k too.
    lifted = questions_file(tmp_path, [4])
    ours, _ = decide(hf, lifted, "raw")
    theirs, err = decide(top_k, lifted, "raw", "--strict")
    assert theirs["missing_labels"] == 0, err
    for a, b in zip(ours["decisions"], theirs["decisions"]):
        assert close(a["probs"], b["probs"])
    # K=12: I..L are not lifted, so they fall outside the top 20.
    wide = questions_file(tmp_path, [12])
    r = run_cli("decide", *top_k, "--questions-file", str(wide), "--state", STATE,
                "--level", "raw", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["missing_labels"] > 0 and doc["decisions"][0]["missing_labels"] > 0
    assert "warning:" in r.stderr and "read as -30" in r.stderr
    r = run_cli("decide", *top_k, "--questions-file", str(wide), "--state", STATE,
                "--level", "raw", "--strict", timeout=300)
    assert r.returncode == 1 and "(--strict)" in r.stderr


@pytest.mark.parametrize("via", ["litellm", "vllm"])
def test_composite_cli_routes_l0_to_the_chain_and_l2_to_the_daemon(chain, via, tmp_path):
    checkpoint, daemon, vllm, _ = chain
    composite = gateway_args(checkpoint, url_of(chain, via), "--set",
                             f"client.address={daemon.address}", "--set",
                             "backend.hf_model=tiny/qwen3", backend="composite")
    r = run_cli("doctor", *composite, env=KEY_ENV, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[ok] tokenizer agreement" in r.stdout
    text = f"Is the sky blue in this record ({via})?"
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"id": "probe", "kind": "noul", "text": text}]))
    hf = ["--backend", "hf", "--set", f"client.address={daemon.address}",
          "--set", "backend.hf_model=tiny/qwen3"]
    ours, _ = decide(hf, questions, "L0")
    theirs, _ = decide(composite, questions, "auto", "--strict", env=KEY_ENV)
    d = theirs["decisions"][0]
    assert d["level"] == "L0"  # no head yet: the chain's L0
    assert d["served_model"] == rg.SERVED
    assert close(d["probs"], ours["decisions"][0]["probs"])

    # A head of a rewording (the other parametrisation's text, when it ran
    # first) never serves this key: still L0, with L0's numbers.
    fit_l2(daemon, dpb.Question(id="probe", kind="noul", text=f"{text} (reworded)".encode()))
    theirs, _ = decide(composite, questions, "auto", env=KEY_ENV)
    d = theirs["decisions"][0]
    assert d["level"] == "L0" and "routed_refused" not in d["diagnostics"]
    assert close(d["probs"], ours["decisions"][0]["probs"])

    fit_l2(daemon, dpb.Question(id="probe", kind="noul", text=text.encode()))
    # The readout named, so the CLI sends the chain no start-up probe.
    composite += ["--set", "backend.label_readout=token_ids"]
    before = vllm_completions(vllm)
    theirs, _ = decide(composite, questions, "auto", env=KEY_ENV)
    d = theirs["decisions"][0]
    assert d["level"] == "L2" and d["diagnostics"]["blocks_executed"] >= 1
    assert vllm_completions(vllm) == before  # L2 never reaches the chain


@pytest.mark.parametrize("via", ["litellm", "vllm"])
def test_router_serves_l0_l1_from_the_chain_and_l2_from_the_daemon(chain, via, tmp_path):
    checkpoint, daemon, vllm, _ = chain
    (tmp_path / "router").mkdir()
    router = Daemon(tmp_path / "router", env=KEY_ENV, args=(
        "--set", "model.backend=composite", "--set", f"client.address={daemon.address}",
        "--set", f"backend.gateway_base_url={url_of(chain, via)}",
        "--set", f"backend.served_model={rg.SERVED}", "--set", f"backend.tokenizer={checkpoint}",
        "--set", "backend.canonical_model=tiny/qwen3"), start_timeout=120)
    try:
        assert "gateway label readout: token_ids" in router.output()
        q = dpb.Question(kind="choice", id="topic", text=b"What is it about?",
                         options=[b"birds", b"beetles", b"mammals", b"plants", b"soil", b"water"])
        # K=26: every letter, most of them outside any top 20, read by id.
        wide = dpb.Question(kind="choice", id="wide", text=b"Which site is it?",
                            options=[f"site {i}".encode() for i in range(26)])
        texts = [f"Record {i}: counts of {['birds', 'beetles', 'mammals'][i % 3]} at site {i}"
                 for i in range(24)]
        states = [dpb.State(text=t.encode()) for t in texts]
        labels = [i % 3 for i in range(24)]
        for served in (router, daemon):
            for question in (q, wide):
                served.decisions.Fit(dpb.FitRequest(question=question, states=states,
                                                    labels=labels, level="L1"), timeout=300)
        probe = [dpb.State(text=f"New record {i} about birds".encode()) for i in range(3)]
        for level in ("raw", "L0", "L1"):
            got = [served.decisions.Decide(dpb.DecideRequest(
                states=probe, questions=[q, wide], level=level, carry_priors=True), timeout=300)
                for served in (router, daemon)]
            assert len(got[0].decisions) == len(got[1].decisions) == 2 * len(probe)
            for a, b in zip(got[0].decisions, got[1].decisions):
                assert a.level == b.level == level
                assert close(list(a.probs), list(b.probs)), (level, list(a.probs), list(b.probs))

        # L2 is read off the daemon's hidden states, early-stopped, and
        # never reaches the chain.
        sky = dpb.Question(id="sky", kind="noul", text=f"Is the sky blue ({via})?".encode())
        hidden_before = metric(daemon.metrics(), "mesa_anyjev_requests_total",
                               method="HiddenStates", code="OK")
        fit_l2(router, sky)
        before = vllm_completions(vllm)
        reply = router.decisions.Decide(dpb.DecideRequest(states=probe, questions=[sky],
                                                          level="auto"), timeout=300)
        assert [d.level for d in reply.decisions] == ["L2"] * 3
        assert reply.decisions[0].diagnostics.early_stop
        assert vllm_completions(vllm) == before
        assert metric(daemon.metrics(), "mesa_anyjev_requests_total", method="HiddenStates",
                      code="OK") > hidden_before
        # The chain's calls show in the router's metrics.
        text = router.metrics()
        assert metric(text, "mesa_anyjev_gateway_requests_total", outcome="ok") >= 2
        assert metric(text, "mesa_anyjev_gateway_missing_labels_total") == 0
        assert metric(text, "mesa_anyjev_gateway_breaker_open") == 0
    finally:
        router.stop()
