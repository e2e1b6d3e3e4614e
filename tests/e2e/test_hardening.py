"""Hostile input against the real daemon on the fake model (#14): each gets
its status naming the field and the limit, is counted in requests_total, and
the daemon keeps serving. Start-up refuses a port in use and a model path
that is not a checkpoint before binding."""
import base64
import json
import re
import socket
import struct
import subprocess

import grpc
import pytest

from conftest import DAEMON, Daemon, dpb, raw_call, with_bytes

TOPICS = ["genes", "proteins", "cells", "viruses"]


def choice(**kw):
    return dpb.Question(kind="choice", text="What is it about?", options=TOPICS, **kw)


def code_of(call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def decide_json(daemon, text, timeout=30):
    return daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(json=text)], questions=[choice()], level="L0"), timeout=timeout)


def still_serves(daemon):
    reply = daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text="About cells")], questions=[choice()], level="L0"), timeout=30)
    assert len(reply.decisions) == 1


def requests_total(daemon, method, code):
    pattern = (r'mesa_anyjev_requests_total\{[^}]*code="%s"[^}]*method="%s"[^}]*\} (\S+)'
               % (code, method))
    found = re.search(pattern, daemon.metrics())
    if found is None:  # label order is not promised
        pattern = (r'mesa_anyjev_requests_total\{[^}]*method="%s"[^}]*code="%s"[^}]*\} (\S+)'
                   % (method, code))
        found = re.search(pattern, daemon.metrics())
    return float(found.group(1)) if found else 0.0


def test_deeply_nested_state_json_is_refused_not_a_crash(daemon):
    # The reproducer: 50,000 '[' then 50,000 ']' (100 KB).
    code, details = code_of(lambda: decide_json(daemon, "[" * 50000 + "]" * 50000))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "states[0].json" in details and "nested deeper than 64 levels" in details
    code, details = code_of(lambda: decide_json(daemon, '{"a":' * 2500 + "1" + "}" * 2500))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "64 levels" in details
    code, details = code_of(lambda: decide_json(daemon, '{"a": 1, "a": 2}'))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "duplicate key 'a'" in details
    # State.json is a string: invalid UTF-8 in it is refused by the request
    # parse, naming the field.
    payload = with_bytes(dpb.DecideRequest(states=[dpb.State(json='{"a": "?"}')],
                                           questions=[choice()], level="L0"), b'"?"', b'"\xff"')
    code, details = code_of(lambda: raw_call(daemon, "/mesa.anyjev.v1.Decisions/Decide", payload))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("states[0].json: invalid UTF-8 at byte offset 7"), details
    assert daemon.proc.poll() is None
    still_serves(daemon)


def test_a_state_that_renders_past_the_text_limit_is_refused(start_daemon):
    daemon = start_daemon("--set", "limits.max_text_bytes=20000")
    # 2 KB of JSON, 60 levels deep: json.dumps(indent=2) makes ~130 KB of it.
    deep = "[" * 60 + ",".join(["0"] * 1000) + "]" * 60
    code, details = code_of(lambda: decide_json(daemon, deep))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "states[0].json" in details and "limits.max_text_bytes=20000" in details
    still_serves(daemon)


def test_decision_prompts_are_bounded(start_daemon):
    daemon = start_daemon("--set", "limits.max_decide_tokens=3000")
    # ~100 KB of words: Logprobs refuses it by max_prompt_tokens, so does Decide.
    big = "word " * 20000
    code, details = code_of(lambda: daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text=big)], questions=[choice()], level="L0"), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "limits.max_prompt_tokens=8192" in details
    # Each prompt fits, the call's total does not.
    many = [dpb.State(text=f"About cells, note {i}: " + "x " * 100) for i in range(20)]
    code, details = code_of(lambda: daemon.decisions.Decide(dpb.DecideRequest(
        states=many, questions=[choice()], level="L0"), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "limits.max_decide_tokens=3000" in details
    still_serves(daemon)


@pytest.mark.parametrize("lo,hi", [(0.0, float("inf")), (float("-inf"), 1.0),
                                   (float("nan"), 1.0), (-1.7e308, 1.7e308),
                                   (1.0, 1.0 + 1e-12)])
def test_score_scales_must_be_finite_and_printable(daemon, lo, hi):
    q = dpb.Question(kind="score", text="How much?", bins=5, scale_lo=lo, scale_hi=hi)
    code, details = code_of(lambda: daemon.decisions.Decide(dpb.DecideRequest(
        states=[dpb.State(text="x")], questions=[q], level="L0"), timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert "questions[0].bins" in details


def test_invalid_utf8_in_any_string_field_names_the_field_and_is_counted(daemon):
    good = dpb.DecideRequest(states=[dpb.State(text="a state")],
                             questions=[choice(id="topic.q")], level="L0")
    before = requests_total(daemon, "Decide", "INVALID_ARGUMENT")
    cases = [(b"L0", b"L\xff", "level: invalid UTF-8 at byte offset 1"),
             (b"choice", b"choic\xe9", "questions[0].kind: invalid UTF-8"),
             (b"topic.q", b"topic\xc0q", "questions[0].id: invalid UTF-8"),
             # Text fields are strings too (docs/rpc.md): the same path.
             (b"a state", b"a st\xe1te", "states[0].text: invalid UTF-8 at byte offset 4"),
             (b"proteins", b"prot\xffins",
              "questions[0].options[1]: invalid UTF-8 at byte offset 4")]
    for plain, broken, needle in cases:
        payload = with_bytes(good, plain, broken)
        code, details = code_of(lambda: raw_call(daemon, "/mesa.anyjev.v1.Decisions/Decide",
                                                 payload))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert needle in details, details
    code, details = code_of(lambda: raw_call(daemon, "/mesa.anyjev.v1.Inference/Tokenize",
                                             b"\x0a\xff\xff\xff\xff\x0f"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid" in details, details
    assert requests_total(daemon, "Decide", "INVALID_ARGUMENT") == before + len(cases)
    assert requests_total(daemon, "Tokenize", "INVALID_ARGUMENT") >= 1
    # The status says it; protobuf's own log line per bad string does not
    # reach the daemon's log (a client could fill it).
    assert "libprotobuf" not in daemon.output()
    still_serves(daemon)


def fitted_head(daemon):
    texts = [f"About {TOPICS[i % 4]}, item {i}" for i in range(24)]
    daemon.decisions.Fit(dpb.FitRequest(question=choice(), states=[dpb.State(text=t)
                                                                   for t in texts],
                                        labels=[i % 4 for i in range(24)], level="L2"),
                         timeout=60)
    file = json.loads(daemon.decisions.ExportArtifacts(
        dpb.ExportArtifactsRequest(), timeout=10).artifacts_json)
    assert len(file["heads"]) == 1
    return file


def f32(values, shape):
    return {"dtype": "float32", "shape": shape,
            "b64": base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()}


def test_heads_are_checked_against_the_served_model(start_daemon):
    helper = start_daemon(name="helper")
    file = fitted_head(helper)
    (key, head), = file["heads"].items()
    d = len(head["mean"]["shape"]) and head["mean"]["shape"][0]
    daemon = start_daemon()
    load = lambda f: daemon.decisions.LoadArtifacts(  # noqa: E731
        dpb.LoadArtifactsRequest(artifacts_json=json.dumps(f)), timeout=10)

    def refused(mutate, *needles):
        bad = json.loads(json.dumps(file))
        mutate(bad["heads"][key])
        code, details = code_of(lambda: load(bad))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        for needle in needles:
            assert needle in details, details

    refused(lambda h: h.update(layer_abs=99), "layer_abs", "99", "n_layers=4")
    refused(lambda h: h.update(layer_abs=-1), "layer_abs")
    refused(lambda h: h.update(layer_abs=1.5), "layer_abs")
    refused(lambda h: h.update(W=f32([0.0] * (8 * 4), [8, 4]),
                               mean=f32([0.0] * 8, [8]), scale=f32([1.0] * 8, [8])),
            "hidden_size=64")
    refused(lambda h: h.update(W=f32([0.0] * (d * 3), [d, 3]), b=[0, 0, 0]), "K=4")
    refused(lambda h: h.update(W=f32([float("nan")] * (d * 4), [d, 4])), "finite")
    refused(lambda h: h.update(scale=f32([0.0] * d, [d])), "scale")
    refused(lambda h: h["W"].update(shape=[-d, -4]), "non-negative")
    refused(lambda h: h["W"].update(shape=[2**40, 2**40]), "more values")
    # Nothing was loaded by the refusals; the good file still loads.
    assert load(file).loaded == 1
    still_serves(daemon)


def test_a_port_in_use_stops_a_second_daemon(start_daemon):
    first = start_daemon()
    cases = [(f"127.0.0.1:{first.port}", "127.0.0.1:0",
              f"cannot listen on 127.0.0.1:{first.port}"),
             ("127.0.0.1:0", f"127.0.0.1:{first.metrics_port}",
              f"cannot bind 127.0.0.1:{first.metrics_port}")]
    for listen, metrics, needle in cases:
        second = subprocess.run([DAEMON, "--model", "fake", "--listen", listen,
                                 "--metrics-listen", metrics],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        assert needle in second.stdout + second.stderr
    still_serves(first)


def test_a_model_path_that_is_not_a_checkpoint_is_refused_before_binding(tmp_path):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(AssertionError, match=r"daemon exited 2") as err:
        Daemon(run, args=["--model", str(empty)], wait_serving=False)
    assert "is not a checkpoint" in str(err.value) and "model.safetensors" in str(err.value)
    assert not (run / "port").exists()  # it never bound


def test_auth_comes_before_the_request_bytes_are_read(start_daemon):
    daemon = start_daemon("--set", "auth.token_env=HARDEN_TOKEN", env={"HARDEN_TOKEN": "s3cret"})
    for method in ("/mesa.anyjev.v1.Decisions/Decide", "/mesa.anyjev.v1.Inference/Tokenize"):
        code, _ = code_of(lambda: raw_call(daemon, method, b"\x0a\xff\xff\xff\xff\x0f"))
        assert code == grpc.StatusCode.UNAUTHENTICATED, method
