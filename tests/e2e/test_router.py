"""Issue 8, router mode (`mesa-anyjevd --backend composite`) against our
imitation gateway, for what the real chain cannot be made to do: the key on
the wire, a 503 retried and a missing label counted in the router's metrics.
Serving raw/L0/L1 through LiteLLM and vLLM and L2 from the local daemon is
in test_real_gateway.py. A daemon whose tokenizer differs on a label is
refused at start."""
import os
import re
import sys
from pathlib import Path

from conftest import dpb, pb
from gateway_server import Gateway

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

DATA = Path(os.environ.get("MESA_ANYJEV_TEST_DATA", "tests/data"))
TOKENIZER = DATA / "qwen3-tokenizer"
KEY = "sk-router-7Yt"
NOUL = dpb.Question(id="sky", kind="noul", text=b"Is the sky blue?")
STATES = ["Report 0: the sky was blue at site 0"]


def metric(text, name, labels=""):
    """The sample of `name` whose labels include every `k="v"` in `labels`."""
    wanted = [part for part in labels.split(",") if part]
    for line in text.splitlines():
        m = re.match(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$", line)
        if m and all(w in (m.group(1) or "").split(",") for w in wanted):
            return float(m.group(2))
    return None


def router(start_daemon, local, server, tokenizer=TOKENIZER, wait_serving=True):
    return start_daemon(
        "--backend", "composite", "--set", f"client.address={local.address}",
        "--set", f"backend.gateway_base_url={server.url}",
        "--set", f"backend.tokenizer={tokenizer}",
        env={"MESA_LLM_API_KEY": KEY}, wait_serving=wait_serving, name="router")


def test_router_sends_the_key_and_counts_gateway_faults(start_daemon, tmp_path):
    checkpoint = make(tmp_path / "tiny-qwen3", layers=2)
    local = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3",
                         name="local")
    server = Gateway()
    try:
        r = router(start_daemon, local, server)
        info = r.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
        assert info.name == "tiny/qwen3"  # bundles are keyed by the local model
        assert info.hidden_states and info.max_choice_k == 8

        before = len(server.requests)
        reply = r.decisions.Decide(dpb.DecideRequest(
            states=[dpb.State(text=STATES[0].encode())], questions=[NOUL], level="L0"),
            timeout=60)
        assert reply.decisions[0].level == "L0"
        assert len(server.requests) - before == 2  # both phrasings through the gateway
        assert all(req["authorization"] == f"Bearer {KEY}" for req in server.requests)

        # The gateway's calls are visible in the router's metrics.
        text = r.metrics()
        assert metric(text, "mesa_anyjev_gateway_requests_total", 'outcome="ok"') >= 2
        assert metric(text, "mesa_anyjev_gateway_breaker_open") == 0
        assert metric(text, "mesa_anyjev_gateway_missing_labels_total") is not None
        assert metric(text, "mesa_anyjev_gateway_request_duration_seconds_count") >= 2

        # A 503 is retried, a missing label counted.
        server.script = ["status:503", "ok", "omit:Yes", "omit:Yes"]
        r.decisions.Decide(dpb.DecideRequest(
            states=[dpb.State(text=b"one more")], questions=[NOUL], level="L0"),
            timeout=60)
        text = r.metrics()
        assert metric(text, "mesa_anyjev_gateway_requests_total",
                      'outcome="server_error"') >= 1
        assert metric(text, "mesa_anyjev_gateway_retries_total") >= 1
        assert metric(text, "mesa_anyjev_gateway_missing_labels_total") >= 1
    finally:
        server.close()


def test_router_refuses_a_local_daemon_with_other_label_ids(start_daemon, tmp_path):
    local = start_daemon(name="local")  # the fake model's tokenizer
    server = Gateway()
    try:
        r = router(start_daemon, local, server, wait_serving=False)
        assert r.wait(timeout=60) != 0
        assert "the two tokenizers disagree on label tokens [A, B" in r.output()
    finally:
        server.close()


def test_router_refuses_a_ca_file_without_a_certificate(start_daemon, tmp_path):
    # The router opens its channel to the local daemon as the CLI does: a CA
    # file that holds no PEM certificate is refused by name at start (gRPC
    # would only log it and then fail every call as "empty address list").
    local = start_daemon(name="local")
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    server = Gateway()
    try:
        r = start_daemon(
            "--backend", "composite", "--set", f"client.address={local.address}",
            "--set", f"client.tls_ca={ca}", "--set", "client.timeout_s=5",
            "--set", f"backend.gateway_base_url={server.url}",
            "--set", f"backend.tokenizer={TOKENIZER}",
            env={"MESA_LLM_API_KEY": KEY}, wait_serving=False, name="router")
        assert r.wait(timeout=60) != 0
        assert f"client.tls_ca: {ca} holds no PEM certificate" in r.output(), r.output()
    finally:
        server.close()
