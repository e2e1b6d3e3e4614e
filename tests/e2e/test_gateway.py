"""The CLI's gateway backend (client/backends/gateway_backend) against a real
local HTTP server that answers as vLLM's /v1/completions does (top_logprobs
dicts of token text -> logprob), driven through tests/tools/gateway_tool.
docs/gateway.md (status mapping, transport rules) and test 14 of the
reliability plan (docs/reliability.md)."""
import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from gateway_server import CANDIDATES, Gateway, expected_logprobs  # noqa: F401

TOOL = os.environ.get("MESA_ANYJEV_GATEWAY_TOOL", "build/tests/gateway_tool")
DATA = Path(os.environ.get("MESA_ANYJEV_TEST_DATA", "tests/data"))
TOKENIZER = str(DATA / "qwen3-tokenizer")
KEY = "sk-test-Zq8vW3kP0xLm"  # the secret the server must see, nobody else


@pytest.fixture
def gateway():
    servers = []

    def make(script=(), **kwargs):
        server = Gateway(script, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def run_tool(options, calls, env_extra=None, liveness=False):
    opts = {"served_model": "Qwen/Qwen3-8B-served", "canonical_model": "Qwen/Qwen3-8B",
            "tokenizer": TOKENIZER, "backoff_base_s": 0.05, "timeout_s": 10.0}
    opts.update(options)
    env = {k: v for k, v in os.environ.items() if k != "MESA_GW_KEY"}
    env.update(env_extra or {})
    proc = subprocess.run([TOOL], input=json.dumps({"options": opts, "calls": calls,
                                            "liveness": liveness}),
                          capture_output=True, text=True, env=env, timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc, lines


PROMPTS = ["Question: is the sky blue?\nAnswer:", "Pick one.\nA) red\nB) blue\nAnswer:"]
LABELS = ["A", "B", " Yes"]


def test_logprobs_body_and_capabilities(gateway):
    server = gateway()
    proc, lines = run_tool({"base_url": server.url},
                           [{"prompts": PROMPTS, "labels": LABELS, "top_k": 5}])
    assert proc.returncode == 0, proc.stderr
    info, result = lines
    assert info == {"name": "Qwen/Qwen3-8B", "max_choice_k": 8, "logprob_top_k": 20,
                    "hidden_states": False, "hidden_states_code": "FAILED_PRECONDITION"}
    assert result["code"] == "OK", result
    for prompt, values in zip(PROMPTS, result["label_logprobs"]):
        want = expected_logprobs(prompt)
        assert values == pytest.approx([want[label] for label in LABELS], abs=1e-12)
    assert len(result["top"][0]) == 5
    assert result["missing_label_events"] == 0
    assert result["requests"] == 2
    assert sorted(r["body"]["prompt"] for r in server.requests) == sorted(PROMPTS)
    for request in server.requests:
        assert request["path"] == "/v1/completions"
        body = request["body"]
        assert body["model"] == "Qwen/Qwen3-8B-served"
        assert body["max_tokens"] == 1 and body["temperature"] == 0
        assert body["logprobs"] == 20
        assert "allowed_token_ids" not in body and "extra_body" not in body
        assert request["authorization"] is None  # no key configured, none sent


def test_raw_token_keys(gateway):
    server = gateway(["raw"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    want = expected_logprobs(PROMPTS[0])
    assert lines[1]["label_logprobs"][0] == pytest.approx([want[x] for x in LABELS])
    assert lines[1]["missing_label_events"] == 0


def test_missing_label_gets_minus_30_and_is_counted(gateway):
    server = gateway(["omit:B"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    result = lines[1]
    assert result["code"] == "OK"
    want = expected_logprobs(PROMPTS[0])
    assert result["label_logprobs"][0] == pytest.approx([want["A"], -30.0, want[" Yes"]])
    assert result["missing_label_events"] == 1


def test_429_then_200_is_retried_after_retry_after(gateway):
    server = gateway(["status:429"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "OK"
    assert lines[1]["elapsed_ms"] >= 1000  # the server's Retry-After: 1
    assert len(server.requests) == 2


def test_429_retry_after_past_the_deadline_is_not_waited_for(gateway):
    server = gateway(["status:429"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS, "deadline_ms": 500}])
    assert lines[1]["code"] == "DEADLINE_EXCEEDED"
    assert "HTTP 429" in lines[1]["message"]
    assert "leaves no time to retry" in lines[1]["message"]  # decided, not slept
    assert len(server.requests) == 1


def test_429_three_times_is_resource_exhausted(gateway):
    server = gateway()
    server.default = "status:429"
    _, lines = run_tool({"base_url": server.url, "breaker_failures": 10},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "RESOURCE_EXHAUSTED"
    assert len(server.requests) == 3


def test_reset_then_200_is_retried(gateway):
    server = gateway(["reset"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "OK", lines[1]
    assert len(server.requests) == 2


@pytest.mark.parametrize("status,code", [(400, "INVALID_ARGUMENT"), (401, "UNAUTHENTICATED"),
                                         (403, "PERMISSION_DENIED"), (404, "NOT_FOUND"),
                                         (422, "INVALID_ARGUMENT")])
def test_client_errors_are_not_retried(gateway, status, code):
    server = gateway([f"status:{status}"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == code
    if status == 400:
        assert "rejected" in lines[1]["message"]
    assert len(server.requests) == 1


def test_garbage_json_is_internal(gateway):
    server = gateway(["garbage"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "INTERNAL"
    assert len(server.requests) == 1


def test_503_three_times_opens_the_breaker(gateway):
    server = gateway()
    server.default = "status:503"
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS},
                         {"prompts": PROMPTS[:1], "labels": LABELS}])
    first, second = lines[1], lines[2]
    assert first["code"] == "UNAVAILABLE"
    assert "after 3 attempts" in first["message"]
    assert second["code"] == "UNAVAILABLE"
    assert "circuit breaker" in second["message"]
    assert len(server.requests) == 3  # the open breaker sent nothing


def test_slow_answer_stops_at_the_deadline(gateway):
    server = gateway(["slow:20"])
    _, lines = run_tool({"base_url": server.url},
                        [{"prompts": PROMPTS[:1], "labels": LABELS, "deadline_ms": 300}])
    assert lines[1]["code"] == "DEADLINE_EXCEEDED"
    # Not before the deadline; and not the 20 s the answer takes.
    assert 250 <= lines[1]["elapsed_ms"] < 20000


def test_deadline_shorter_than_the_retries(gateway):
    server = gateway()
    server.default = "status:503"
    _, lines = run_tool({"base_url": server.url, "backoff_base_s": 1.0},
                        [{"prompts": PROMPTS[:1], "labels": LABELS, "deadline_ms": 500}])
    assert lines[1]["code"] == "DEADLINE_EXCEEDED"
    # The backoff (at least 0.75 s) would pass the deadline: never slept.
    assert "leaves no time to retry" in lines[1]["message"]
    assert len(server.requests) == 1


def test_api_key_from_env_reaches_the_server_only(gateway):
    server = gateway(["ok", "status:401"])
    proc, lines = run_tool({"base_url": server.url, "api_key_env": "MESA_GW_KEY"},
                           [{"prompts": PROMPTS[:1], "labels": LABELS},
                            {"prompts": PROMPTS[:1], "labels": LABELS}],
                           env_extra={"MESA_GW_KEY": KEY})
    assert lines[1]["code"] == "OK" and lines[2]["code"] == "UNAUTHENTICATED"
    assert [r["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 2
    assert KEY not in proc.stdout and KEY not in proc.stderr


def test_api_key_file_modes(gateway, tmp_path):
    server = gateway()
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    proc, lines = run_tool({"base_url": server.url, "api_key_file": str(key_file)},
                           [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert proc.returncode == 2
    assert lines[0]["create_code"] == "INVALID_ARGUMENT"
    assert str(key_file) in lines[0]["message"]
    assert KEY not in proc.stdout and KEY not in proc.stderr
    assert server.requests == []
    key_file.chmod(0o600)
    proc, lines = run_tool({"base_url": server.url, "api_key_file": str(key_file)},
                           [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "OK"
    assert server.requests[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in proc.stdout and KEY not in proc.stderr


@pytest.mark.parametrize("url,needle", [
    ("http://example.com:8000", "loopback"),
    ("http://10.0.0.5", "loopback"),
    ("ftp://127.0.0.1", "https"),
    ("http://127.0.0.1:8000/v1", "/v1"),
    ("http://127.0.0.1:8000/v1/", "/v1"),
])
def test_bad_base_urls_are_refused(url, needle):
    proc, lines = run_tool({"base_url": url}, [])
    assert proc.returncode == 2
    assert lines[0]["create_code"] == "INVALID_ARGUMENT"
    assert needle in lines[0]["message"]


def test_workers_run_prompts_concurrently(gateway):
    server = gateway()
    # The server answers none until all eight are open at once: serial
    # workers would leave the first waiting until its 30 s gather timeout.
    server.default = "gather:8"
    prompts = [f"prompt {i}\nAnswer:" for i in range(8)]
    _, lines = run_tool({"base_url": server.url, "workers": 8},
                        [{"prompts": prompts, "labels": LABELS}])
    assert lines[1]["code"] == "OK", lines[1]
    assert server.gathered == 8
    for prompt, values in zip(prompts, lines[1]["label_logprobs"]):
        want = expected_logprobs(prompt)
        assert values == pytest.approx([want[x] for x in LABELS])


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA, a server certificate it signed for 127.0.0.1 and localhost,
    and an unrelated CA that must not verify it."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN=mesa-anyjev test {ca}", "-keyout", str(d / f"{ca}.key"),
                "-out", str(d / f"{ca}.pem"))
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
    openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"),
            "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
            "-extfile", str(d / "san.cnf"), "-out", str(d / "server.pem"))
    return d


def test_https_with_the_test_ca(gateway, pki):
    server = gateway(tls=(str(pki / "server.pem"), str(pki / "server.key")))
    assert server.url.startswith("https://")
    proc, lines = run_tool({"base_url": server.url, "ca_file": str(pki / "ca.pem"),
                            "api_key_env": "MESA_GW_KEY"},
                           [{"prompts": PROMPTS[:1], "labels": LABELS}],
                           env_extra={"MESA_GW_KEY": KEY})
    assert lines[1]["code"] == "OK", lines[1]
    want = expected_logprobs(PROMPTS[0])
    assert lines[1]["label_logprobs"][0] == pytest.approx([want[x] for x in LABELS])
    assert server.requests[0]["authorization"] == f"Bearer {KEY}"
    assert KEY not in proc.stdout and KEY not in proc.stderr


def test_https_wrong_certificate_fails_closed(gateway, pki):
    server = gateway(tls=(str(pki / "server.pem"), str(pki / "server.key")))
    _, lines = run_tool({"base_url": server.url, "ca_file": str(pki / "other-ca.pem"),
                         "api_key_env": "MESA_GW_KEY"},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}],
                        env_extra={"MESA_GW_KEY": KEY})
    assert lines[1]["code"] == "UNAVAILABLE"
    assert "TLS verification failed" in lines[1]["message"]
    assert server.requests == []  # nothing, the key least of all, was sent


def test_the_key_never_follows_a_redirect(gateway):
    elsewhere = gateway()
    server = gateway(redirect_to=elsewhere.url.replace("127.0.0.1", "localhost"))
    proc, lines = run_tool({"base_url": server.url, "api_key_env": "MESA_GW_KEY"},
                           [{"prompts": PROMPTS[:1], "labels": LABELS}],
                           env_extra={"MESA_GW_KEY": KEY})
    assert lines[1]["code"] != "OK"
    assert "307" in lines[1]["message"]
    assert len(server.requests) == 1
    assert elsewhere.requests == []


def spki_pin(pem):
    """curl's sha256//<base64> pin of a certificate's public key."""
    pub = subprocess.run(["openssl", "x509", "-in", str(pem), "-pubkey", "-noout"],
                         check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub,
                         check=True, capture_output=True).stdout
    return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()


def test_https_public_key_pin(gateway, pki):
    server = gateway(tls=(str(pki / "server.pem"), str(pki / "server.key")))
    right, wrong = spki_pin(pki / "server.pem"), spki_pin(pki / "other-ca.pem")
    _, lines = run_tool({"base_url": server.url, "ca_file": str(pki / "ca.pem"),
                         "pinned_public_key": f"{wrong};{right}"},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "OK", lines[1]  # the backup pin matches
    _, lines = run_tool({"base_url": server.url, "ca_file": str(pki / "ca.pem"),
                         "pinned_public_key": wrong},
                        [{"prompts": PROMPTS[:1], "labels": LABELS}])
    assert lines[1]["code"] == "UNAVAILABLE"
    assert "pin" in lines[1]["message"]
    assert len(server.requests) == 1  # the mismatch sent nothing


def test_liveness(gateway):
    server = gateway()
    proc, lines = run_tool({"base_url": server.url, "api_key_env": "MESA_GW_KEY"}, [],
                           env_extra={"MESA_GW_KEY": KEY}, liveness=True)
    assert lines[1] == {"liveness": "OK", "message": ""}
    assert server.gets == [{"path": "/health/liveliness", "authorization": f"Bearer {KEY}"}]
    assert KEY not in proc.stdout and KEY not in proc.stderr
    server.default = "status:503"
    _, lines = run_tool({"base_url": server.url}, [], liveness=True)
    assert lines[1]["liveness"] == "UNAVAILABLE"
    server.close()
    _, lines = run_tool({"base_url": server.url}, [], liveness=True)
    assert lines[1]["liveness"] == "UNAVAILABLE"
    assert "liveness" in lines[1]["message"]


def test_refused_requests_do_not_open_the_breaker(gateway):
    # Three 400s in a row are the caller's problem, not the gateway's.
    server = gateway(["status:400"] * 3)
    one = {"prompts": PROMPTS[:1], "labels": LABELS}
    _, lines = run_tool({"base_url": server.url, "breaker_failures": 3}, [one] * 4)
    assert [line["code"] for line in lines[1:]] == ["INVALID_ARGUMENT"] * 3 + ["OK"]
    assert len(server.requests) == 4


def test_after_the_open_period_one_probe_decides(gateway):
    # Three 503s open it; after 0.2 s one failed probe opens it again at
    # once (a closed breaker would need three); the next probe closes it.
    server = gateway(["status:503"] * 4)
    one = {"prompts": PROMPTS[:1], "labels": LABELS}
    wait = dict(one, sleep_ms=400)
    _, lines = run_tool({"base_url": server.url, "attempts": 1, "breaker_failures": 3,
                         "breaker_open_s": 0.2},
                        [one, one, one, wait, one, wait, one])
    codes = [line["code"] for line in lines[1:]]
    assert codes == ["UNAVAILABLE"] * 5 + ["OK", "OK"], lines
    assert "circuit breaker is open" in lines[5]["message"]
    assert len(server.requests) == 6  # the fifth call, refused, sent nothing


def test_a_cancel_wakes_the_backoff(gateway):
    # A 20 s backoff after the first 503; the caller cancels as soon as that
    # attempt has its outcome, so the cancel lands in the backoff.
    server = gateway()
    server.default = "status:503"
    _, lines = run_tool({"base_url": server.url, "backoff_base_s": 20.0},
                        [{"prompts": PROMPTS[:1], "labels": LABELS,
                          "cancel_after_attempt": True}])
    assert lines[1]["code"] == "CANCELLED", lines[1]
    assert "backoff" in lines[1]["message"]
    assert lines[1]["elapsed_ms"] < 15000  # at least 15 s had the sleep ignored it
    assert len(server.requests) == 1


def test_connections_are_kept_alive_across_prompts_and_attempts(gateway):
    server = gateway(["status:503"])
    _, lines = run_tool({"base_url": server.url, "workers": 1},
                        [{"prompts": PROMPTS, "labels": LABELS},
                         {"prompts": PROMPTS, "labels": LABELS}])
    assert [line["code"] for line in lines[1:]] == ["OK", "OK"]
    # A retry and four prompts: five requests over one connection.
    assert len(server.requests) == 5
    assert len({r["peer"] for r in server.requests}) == 1
