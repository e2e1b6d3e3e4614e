"""The CLI's backends end to end (issue 6): `doctor`, `decide` and
`config show` over fake (in process), hf (the real daemon), gateway (our
imitation server: what we put on the wire, a server without
logprob_token_ids, faults) and composite (its tokenizer agreement), with the
reference's check lines and exit codes (docs/cli.md, doctor). The
gateway and composite against the real LiteLLM and vLLM, and the
composite's routing (L0 through the chain, L2 through the daemon's head),
are in test_real_gateway.py."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from gateway_server import Gateway

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

DATA = Path(os.environ.get("MESA_ANYJEV_TEST_DATA", "tests/data"))
TOKENIZER = DATA / "qwen3-tokenizer"
KEY = "sk-test-doctor-Hq2"
NOUL = "Is the sky blue?"


@pytest.fixture
def gateway():
    servers = []

    def start(script=()):
        server = Gateway(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("cli") / "tiny-qwen3", tied=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gateway_args(server, tokenizer=TOKENIZER):
    return ["--set", f"backend.gateway_base_url={server.url}",
            "--set", f"backend.tokenizer={tokenizer}"]


def daemon_args(daemon, model="fake"):
    return ["--set", f"client.address={daemon.address}",
            "--set", f"backend.hf_model={model}"]


def lines_of(out):
    return [line for line in out.splitlines() if line.strip()]


def line_of(out, name):
    """The doctor's line for check `name`."""
    found = [line for line in lines_of(out) if line.split("] ", 1)[1].startswith(f"{name}:")]
    assert len(found) == 1, (name, out)
    return found[0]


def check_names(out):
    return [line.split("]", 1)[1].split(":", 1)[0].strip() for line in lines_of(out)]


# --- doctor -----------------------------------------------------------------

def test_doctor_fake_passes_with_the_lock_and_backend_lines():
    r = run_cli("doctor", "--backend", "fake")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = lines_of(r.stdout)
    assert lines[0].startswith("[ok] questions lock: 9f9370e0029e")
    assert lines[1] == "[ok] backend: kind=fake planner=static profile=prod"
    assert lines[2].startswith("[ok] artifacts: no promoted bundle for fake under ")
    assert lines[2].endswith("(serving at L0)")
    assert lines[3] == ("[ok] agreements: none for fake (`mesa-anyjev bench compare` "
                        "measures one)")
    assert len(lines) == 4
    doc = json.loads(run_cli("doctor", "--backend", "fake", "--json").stdout)
    assert doc["ok"] is True and doc["backend"] == "fake"
    assert [c["name"] for c in doc["checks"]] == ["questions lock", "backend", "artifacts",
                                                  "agreements"]


def test_doctor_reports_lock_drift(tmp_path):
    lock = json.loads(Path("questions.lock.json").read_text())
    lock["questions"]["avu.keep"]["key"] = "0" * 16
    (tmp_path / "questions.lock.json").write_text(json.dumps(lock, indent=1))
    r = run_cli("doctor", "--backend", "fake", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.startswith("[FAIL] questions lock: avu.keep: key 0000000000000000 -> ")


def test_doctor_hf_on_the_fake_daemon(daemon):
    r = run_cli("doctor", "--backend", "hf", *daemon_args(daemon))
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_names(r.stdout) == ["questions lock", "backend", "daemon", "hf model",
                                     "label tokens", "answer mass", "early stop", "attention",
                                     "artifacts", "agreements"]
    out = r.stdout
    assert f"[ok] daemon: {daemon.address} -> SERVING" in out
    assert "[ok] hf model: fake n_layers=4 hidden_size=64" in out
    assert ("[ok] label tokens: A..Z, Yes/No and 1..9 are single tokens "
            "(score falls back to letters above 9)") in out
    assert "[ok] answer mass: min answer_mass " in out
    assert "[ok] early stop: block loop available for L2 heads" in out
    # The daemon's default store (decisions.bundles_dir: auto), still empty.
    store = daemon.tmp / "state" / "mesa-anyjev" / "bundles" / "fake"
    assert f"[ok] artifacts: no promoted bundle for fake under {store}/" in out


def test_doctor_hf_on_a_tiny_qwen3(start_daemon, checkpoint):
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")
    r = run_cli("doctor", "--backend", "hf", *daemon_args(daemon, "tiny/qwen3"))
    out = r.stdout
    assert "[ok] hf model: tiny/qwen3 n_layers=3 hidden_size=64 dtype=float32 device=cpu" in out
    assert "[ok] label tokens: A..Z" in out  # the real Qwen3 tokenizer
    # Random weights spread mass over 151k tokens: the probe must say so.
    assert "[FAIL] answer mass: min answer_mass 0.0" in out
    assert "do not carry" in out
    assert r.returncode == 1
    assert "early stop" not in out  # the group stops at its first failure


def test_doctor_hf_failures_name_the_cause(daemon):
    r = run_cli("doctor", "--backend", "hf", *daemon_args(daemon, "Qwen/Qwen3-8B"))
    assert r.returncode == 1
    assert (f"[FAIL] hf model: mesa-anyjevd at {daemon.address} serves 'fake' but "
            "backend.hf_model is 'Qwen/Qwen3-8B' (bundles are keyed by it): set "
            "backend.hf_model to 'fake', or leave it empty") in r.stdout
    address = f"127.0.0.1:{free_port()}"
    r = run_cli("doctor", "--backend", "hf", "--set", f"client.address={address}",
                "--set", "client.timeout_s=2")
    assert r.returncode == 1
    last = line_of(r.stdout, "daemon")
    assert last == (f"[FAIL] daemon: no mesa-anyjevd answers at {address} (connection "
                    "refused): start it (`mesa-anyjevd --model fake`) or give its address "
                    "with --address host:port")


def test_doctor_gateway_passes_against_a_vllm_like_server(gateway):
    server = gateway()
    r = run_cli("doctor", "--backend", "gateway", *gateway_args(server),
                env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_names(r.stdout) == ["questions lock", "backend", "gateway liveness",
                                     "tokenizer", "label tokens", "label readout",
                                     "gateway logprobs", "logprobs cap", "artifacts",
                                     "agreements"]
    assert f"[ok] gateway liveness: {server.url}/health/liveliness -> 200" in r.stdout
    assert "[ok] label readout: top_k (the server refuses logprob_token_ids)" in r.stdout
    assert "[ok] gateway logprobs: top_k=20 labels_present=true " in r.stdout
    assert "[ok] logprobs cap: logprobs=20 accepted" in r.stdout
    assert KEY not in r.stdout + r.stderr
    assert "(serving at L0)" in line_of(r.stdout, "artifacts")
    # The key went to the server, as a bearer header, on every POST.
    assert {req["authorization"] for req in server.requests} == {f"Bearer {KEY}"}
    probe = server.requests[0]["body"]
    assert probe["logprobs"] == 20 and probe["max_tokens"] == 1
    assert "Is the sky blue?" in probe["prompt"]
    assert server.requests[-1]["body"]["logprobs"] == 20
    # The start-up probe named two label ids, and was refused.
    assert [sorted(p["logprob_token_ids"]) for p in server.probes] == [[2753, 9454]]


def test_doctor_gateway_failures(gateway):
    server = gateway()
    r = run_cli("doctor", "--backend", "gateway", *gateway_args(server))
    assert r.returncode == 1
    assert line_of(r.stdout, "gateway key") == (
        "[FAIL] gateway key: MESA_ANYJEV_BACKEND__GATEWAY_API_KEY or MESA_LLM_API_KEY is unset")
    # The probe's label missing from the top 20 fails it.
    server = gateway()
    server.default = "omit:Yes"  # every answer lacks the bare "Yes"
    r = run_cli("doctor", "--backend", "gateway", *gateway_args(server),
                env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 1
    assert "[FAIL] gateway logprobs: top_k=20 labels_present=false" in r.stdout
    url = f"http://127.0.0.1:{free_port()}"
    r = run_cli("doctor", "--backend", "gateway", "--set", f"backend.gateway_base_url={url}",
                env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 1
    last = line_of(r.stdout, "gateway liveness")
    assert last.startswith(f"[FAIL] gateway liveness: {url}: ") and "(is the tunnel up?)" in last
    r = run_cli("doctor", "--backend", "gateway",
                "--set", "backend.gateway_base_url=http://gateway.example.org:8000",
                env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 1
    assert line_of(r.stdout, "gateway url").startswith("[FAIL] gateway url: ")
    assert "loopback" in r.stdout


# --- decide -----------------------------------------------------------------

def test_decide_fake_json_records():
    r = run_cli("decide", "--backend", "fake", "--level", "L0", "--json",
                "--question", "column.annotate", "--question", "column.aspect",
                "--state-json", "--state",
                json.dumps({"card": {"dataset": "DP1.x"},
                            "column": {"name": "taxonID", "description": "species code"}}))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["backend"] == "fake" and doc["model"] == "fake"
    records = doc["decisions"]
    assert [d["question_id"] for d in records] == ["column.annotate", "column.aspect"]
    for d in records:
        assert d["level"] == "L0" and d["calibration"] == "anyjev"
        assert abs(sum(d["probs"]) - 1) < 1e-9
        assert d["state"]["column"]["name"] == "taxonID"
    assert records[0]["p_true"] == records[0]["probs"][0]
    assert len(records[1]["probs"]) == 8


def test_decide_bad_input_exits_2():
    r = run_cli("decide", "--backend", "fake", "--question", "no.such", "--state", "x")
    assert r.returncode == 2 and "no.such" in r.stderr
    r = run_cli("decide", "--backend", "fake", "--state", "x")
    assert r.returncode == 2 and "no question" in r.stderr
    r = run_cli("decide", "--backend", "fake", "--question", "avu.keep", "--state-json",
                "--state", "{not json")
    assert r.returncode == 2 and "--state-json" in r.stderr


def test_decide_questions_file_and_stdin(tmp_path):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"id": "topic", "kind": "choice", "text": "Topic?",
                                      "options": ["birds", "beetles", "mammals"]}]))
    r = run_cli("decide", "--backend", "fake", "--level", "raw", "--questions-file",
                str(questions), "--json", input="counts of birds at points")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["decisions"][0]
    assert d["question_id"] == "topic" and d["answer"] == "birds" and d["level"] == "raw"


def test_decide_plain_lines_cut_long_options_on_code_points(tmp_path):
    questions = tmp_path / "q.json"
    option = "é" * 40  # 80 bytes: a byte cut would split a character
    questions.write_text(json.dumps([{"id": "accents", "kind": "choice", "text": "Which?",
                                      "options": [option, "plain"]}]), encoding="utf-8")
    r = subprocess.run([str(Path(os.environ.get("MESA_ANYJEV_CLI",
                                                "build/client/mesa-anyjev")).resolve()),
                        "decide", "--backend", "fake", "--level", "raw", "--questions-file",
                        str(questions), "--state", "plain words"], capture_output=True)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")  # raises on a split UTF-8 sequence
    assert "é" * 19 + "..." in text and option not in text


def test_decide_hf_through_the_daemon(daemon):
    r = run_cli("decide", "--backend", "hf", "--level", "L0", "--json",
                "--question", "term.fits", "--state", "a state", *daemon_args(daemon))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["decisions"][0]
    assert d["level"] == "L0" and d["model"] == "fake"
    r = run_cli("decide", "--backend", "hf", "--level", "L2",
                "--question", "term.fits", "--state", "a state", *daemon_args(daemon))
    assert r.returncode == 1
    assert "term.fits" in r.stderr and "L2" in r.stderr


def test_decide_gateway_caps_and_levels(gateway):
    server = gateway()
    env = {"MESA_LLM_API_KEY": KEY}
    r = run_cli("decide", "--backend", "gateway", "--level", "L0", "--json",
                "--question", "avu.keep", "--state", "s", *gateway_args(server), env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["decisions"][0]
    assert d["level"] == "L0" and d["model"] == "RedHatAI/Qwen3-8B-NVFP4"
    assert d["served_model"] == "carc-fast"
    assert len(server.requests) == 2  # a noul reads its two phrasings
    r = run_cli("decide", "--backend", "gateway", "--level", "L0",
                "--question", "column.ontology", "--state", "s", *gateway_args(server), env=env)
    assert r.returncode == 1
    assert "column.ontology: K=12 exceeds max_choice_k=8; ask the twin" in r.stderr
    r = run_cli("decide", "--backend", "gateway", "--level", "L2",
                "--question", "avu.keep", "--state", "s", *gateway_args(server), env=env)
    assert r.returncode == 1 and "hidden states" in r.stderr


# --- composite --------------------------------------------------------------

def test_composite_refuses_a_tokenizer_that_differs_on_one_label(
        gateway, start_daemon, checkpoint, tmp_path):
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3")
    # The served tokenizer with the ids of "Q" and "~" swapped: every other
    # label keeps its id.
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    tok = json.loads((TOKENIZER / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    vocab["Q"], vocab["~"] = vocab["~"], vocab["Q"]
    (swapped / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    (swapped / "tokenizer_config.json").write_text(
        (TOKENIZER / "tokenizer_config.json").read_text())
    server = gateway()
    r = run_cli("decide", "--backend", "composite", "--question", "avu.keep", "--state", "s",
                *gateway_args(server, swapped), *daemon_args(daemon, "tiny/qwen3"),
                env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 1
    assert ("the two tokenizers disagree on label tokens [Q]; a composite backend needs "
            "identical label ids") in r.stderr
    r = run_cli("doctor", "--backend", "composite", *gateway_args(server, swapped),
                *daemon_args(daemon, "tiny/qwen3"), env={"MESA_LLM_API_KEY": KEY})
    assert r.returncode == 1
    assert "[FAIL] tokenizer agreement: the two tokenizers disagree on label tokens [Q]" \
        in r.stdout


# --- config show ------------------------------------------------------------

def test_config_show_masks_the_key_and_shows_the_precedence(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("backend:\n  kind: gateway\n  served_model: from-file\n")
    r = run_cli("--config", str(cfg), "config", "show", "--set", "backend.workers=3",
                env={"MESA_LLM_API_KEY": KEY, "MESA_ANYJEV_BACKEND__SERVED_MODEL": "from-env"})
    assert r.returncode == 0, r.stderr
    assert 'kind: "gateway"' in r.stdout or "kind: gateway" in r.stdout
    assert "from-env" in r.stdout and "from-file" not in r.stdout
    assert "workers: 3" in r.stdout
    assert "# gateway API key: from $MESA_LLM_API_KEY (the value is never printed)" in r.stdout
    assert KEY not in r.stdout


# --- promoted bundles -------------------------------------------------------

LOCK_SHA = "9f9370e0029e956afbeb0a5bbaa7ee8111c3b7de99a812672556bdad9785f742"
BENCH_LABELS = Path(__file__).resolve().parents[2] / "data" / "bench" / "labels.jsonl"
WRITER = os.environ.get("MESA_ANYJEV_BUNDLE_WRITER", "build/tests/bundle_writer")


def test_a_promoted_bundle_is_loaded_by_the_gateway_and_listed_by_doctor(gateway, tmp_path):
    """An L1 artifact fit on labels, stored for the gateway's model and
    promoted: decide loads it (the reference's message) and serves L1, and
    the doctor's artifacts check names the version."""
    labels = ["--set", f"labels.dir={tmp_path / 'labels'}"]
    fake_store = ["--set", f"artifacts.dir={tmp_path / 'fake-store'}"]
    assert run_cli("learn", "ingest", "--labels", str(BENCH_LABELS), *labels).returncode == 0
    out = tmp_path / "fit"
    r = run_cli("learn", "fit", "--backend", "fake", "--question", "term.fits", "--level", "L1",
                "--out", str(out), "--json", *labels, *fake_store, timeout=300)
    assert r.returncode == 0, r.stderr
    version = json.loads(r.stdout)["version"]
    # The fake's own store: promoted, then listed by the doctor.
    r = run_cli("learn", "promote", "--backend", "fake", "--version", str(version),
                "--question", "term.fits", *fake_store)
    assert r.returncode == 0 and r.stdout.strip() == f"CURRENT -> v{version}", r.stderr
    r = run_cli("doctor", "--backend", "fake", *fake_store)
    assert r.returncode == 0, r.stdout
    assert f"[ok] artifacts: term.fits=v{version} fitted_on=" in r.stdout
    assert '"backend_kind":"fake"' in r.stdout

    # The same artifact, as the gateway's model would have it fit.
    artifacts = json.loads((out / "artifacts.json").read_text())
    artifacts["model"] = "RedHatAI/Qwen3-8B-NVFP4"
    manifest = json.loads((out / "manifest.json").read_text())
    extra = {k: manifest[k] for k in ("per_question", "validation")}
    extra["fitted_on"] = {"backend_kind": "gateway", "served_model": "carc-fast"}
    (tmp_path / "a.json").write_text(json.dumps(artifacts))
    (tmp_path / "m.json").write_text(json.dumps(extra))
    gw_store = tmp_path / "gateway-store"
    put = subprocess.run([WRITER, "put", "--root", str(gw_store), "--model",
                          "RedHatAI/Qwen3-8B-NVFP4", "--identity", "", "--lock", LOCK_SHA,
                          "--artifacts-file", str(tmp_path / "a.json"),
                          "--manifest-file", str(tmp_path / "m.json")],
                         capture_output=True, text=True)
    assert put.returncode == 0, put.stderr
    store_args = ["--set", f"artifacts.dir={gw_store}"]
    assert run_cli("learn", "promote", "--backend", "gateway", "--version", put.stdout.strip(),
                   "--question", "term.fits", *store_args).returncode == 0
    server = gateway()
    env = {"MESA_LLM_API_KEY": KEY}
    r = run_cli("decide", "--backend", "gateway", "--level", "auto", "--json",
                "--question", "term.fits", "--state", "s", *gateway_args(server),
                *store_args, env=env)
    assert r.returncode == 0, r.stderr
    assert "loaded 1 artifact(s) from the promoted bundle" in r.stderr
    d = json.loads(r.stdout)["decisions"][0]
    assert d["level"] == "L1" and d["diagnostics"]["temperature"] > 0
    r = run_cli("doctor", "--backend", "gateway", *gateway_args(server), *store_args, env=env)
    assert r.returncode == 0, r.stdout
    assert line_of(r.stdout, "artifacts").startswith("[ok] artifacts: term.fits=v1 fitted_on=")
    # Strict: a bundle fit on another backend kind is refused by the doctor.
    extra["fitted_on"]["backend_kind"] = "hf"
    (tmp_path / "m.json").write_text(json.dumps(extra))
    put = subprocess.run([WRITER, "put", "--root", str(gw_store), "--model",
                          "RedHatAI/Qwen3-8B-NVFP4", "--identity", "", "--lock", LOCK_SHA,
                          "--artifacts-file", str(tmp_path / "a.json"),
                          "--manifest-file", str(tmp_path / "m.json")],
                         capture_output=True, text=True)
    assert run_cli("learn", "promote", "--backend", "gateway", "--version", put.stdout.strip(),
                   "--question", "term.fits", "--force", *store_args).returncode == 0
    r = run_cli("doctor", "--backend", "gateway", *gateway_args(server), *store_args, env=env)
    assert r.returncode == 1
    assert line_of(r.stdout, "artifacts").startswith("[FAIL] artifacts: term.fits=v2")
