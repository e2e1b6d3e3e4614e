"""The Python client package (clients/python) installed with pip into a fresh
virtual environment (no system site-packages) and run from that
environment's python against the real daemon on the fake model: questions by
id carry the CLI's keys, decide takes str and JSON states, a fit and a
promoted bundle show in questions(), failures raise exceptions naming the
status and the field, and the bearer token is sent.

pip installs offline from the wheel folder scripts/install.sh fills
(MESA_ANYJEV_WHEEL_DIR, /opt/mesa-anyjev/wheels): grpcio, grpcio-tools,
protobuf and setuptools at the versions of the pinned test venv
(scripts/requirements.txt).
"""
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import run_cli
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc
from conftest import dpb

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path(os.environ.get("MESA_ANYJEV_WHEEL_DIR", "/opt/mesa-anyjev/wheels"))
TOKEN = "python-client-token"
AUTH = [("authorization", f"Bearer {TOKEN}")]


def wheel_folder() -> Path:
    """The wheels scripts/install.sh fetched for this test, at the pinned
    venv's versions."""
    pins = [f"{name}=={importlib.metadata.version(name)}"
            for name in ("grpcio", "grpcio-tools", "protobuf", "setuptools")]
    marker = WHEELS / ".pins"
    assert marker.exists() and marker.read_text().split() == pins, (
        f"{WHEELS} lacks the wheels {pins}: run scripts/install.sh")
    return WHEELS


@pytest.fixture(scope="module")
def client_python(tmp_path_factory):
    """A fresh venv with the package installed from a copy of the checkout's
    clients/python and proto (pip builds in place; the checkout stays clean)."""
    wheels = wheel_folder()
    work = tmp_path_factory.mktemp("python-client")
    skip = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "clients" / "python", work / "src" / "clients" / "python", ignore=skip)
    shutil.copytree(ROOT / "proto", work / "src" / "proto")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=300)
    python = work / "venv" / "bin" / "python"
    made = time.monotonic()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
         "--find-links", str(wheels), str(work / "src" / "clients" / "python")],
        capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    print(f"venv {made - started:.1f} s, pip install {time.monotonic() - made:.1f} s")
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"],
                            capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    # grpcio-tools builds the package and is not installed with it.
    assert {"mesa-anyjev-client", "grpcio", "protobuf"} <= names and "grpcio-tools" not in names
    return python


def run_client(python, address, code):
    """Runs `code` in the venv's python (ADDRESS and TOKEN defined, the
    package imported); returns the JSON it prints last."""
    script = (f"import json\nfrom mesa_anyjev_client import *\n"
              f"ADDRESS = {address!r}\nTOKEN = {TOKEN!r}\n" + textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MESA_ANYJEV_"))}
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                          timeout=120, env=env, cwd=python.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def daemon(start_daemon, tmp_path):
    return start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN",
                        "--set", "limits.max_text_bytes=2048",
                        "--set", f"decisions.bundles_dir={tmp_path / 'bundles'}",
                        env={"MESA_TEST_TOKEN": TOKEN})


def test_questions_and_decisions_by_id_carry_the_cli_keys(client_python, daemon):
    got = run_client(client_python, daemon.address, """
        with Client(ADDRESS, token=TOKEN) as client:
            questions = client.questions()
            decisions = client.decide(["A column of species names", {"name": "depth", "unit": "m"}],
                                      questions=["term.fits", "column.aspect"])
            [yes] = client.logprobs("Is water wet? Answer:", [""], client.tokenize([" Yes"])[0])
            print(json.dumps({
                "questions": [[q.id, q.key, q.kind, q.scope, q.twin, q.level, len(q.options)]
                              for q in questions],
                "decisions": [[d.state_index, d.question_id, d.question_key, d.level, d.answer,
                               d.probs, d.confidence, d.p_true, d.diagnostics.shifts_read]
                              for d in decisions],
                "health": client.health(), "model": client.info().name,
                "label_logprob": yes.label_logprobs[0]}))
    """)
    cli = run_cli("questions", "--json")
    assert cli.returncode == 0, cli.stderr
    want = {q["id"]: q for q in json.loads(cli.stdout)["questions"]}
    assert [q[0] for q in got["questions"]] == list(want)
    for qid, key, kind, scope, twin, level, k in got["questions"]:
        assert (key, kind, scope, twin) == (want[qid]["key"], want[qid]["kind"],
                                            want[qid]["scope"], want[qid]["twin"])
        assert level == "L0" and k == (0 if kind == "noul" else want[qid]["k"])
    assert [(d[0], d[1]) for d in got["decisions"]] == [
        (0, "term.fits"), (0, "column.aspect"), (1, "term.fits"), (1, "column.aspect")]
    for _, qid, key, level, answer, probs, confidence, p_true, shifts in got["decisions"]:
        assert key == want[qid]["key"] and level == "L0" and shifts >= 2
        assert abs(sum(probs.values()) - 1) < 1e-9 and len(probs) == want[qid]["k"]
        assert answer == max(probs, key=probs.get) and confidence == probs[answer]
        assert (p_true == probs["Yes"]) if qid == "term.fits" else p_true is None
    assert (got["health"], got["model"]) == ("SERVING", "fake")
    assert got["label_logprob"] < 0


def test_errors_name_the_status_and_the_field(client_python, daemon):
    got = run_client(client_python, daemon.address, """
        client = Client(ADDRESS, token=TOKEN)
        out = {}
        def catch(name, call):
            try:
                call()
                out[name] = None
            except MesaAnyjevError as e:
                out[name] = [type(e).__name__, e.code, e.field, str(e)]
        catch("unknown id", lambda: client.decide(["x"], questions=["avu.keep", "term.fit"]))
        catch("listing an unknown id", lambda: client.questions(["avu.keep", "term.fit"]))
        catch("no states", lambda: client.decide([], questions=["term.fits"]))
        catch("text too long", lambda: client.decide(["ok", "x" * 3000], questions=["term.fits"]))
        catch("level not servable", lambda: client.decide(["x"], questions=["term.fits"], level="L1"))
        catch("bad level", lambda: client.decide(["x"], questions=["term.fits"], level="L3"))
        catch("no token", lambda: Client(ADDRESS).questions())
        catch("wrong token", lambda: Client(ADDRESS, token="nope").decide(["x"], questions=["avu.keep"]))
        catch("health needs no token", lambda: Client(ADDRESS).health())
        print(json.dumps(out))
    """)
    assert got["unknown id"][:3] == ["NotFound", "NOT_FOUND", "questions[1]"]
    assert got["unknown id"][3] == ("NOT_FOUND: questions[1]: no question with id 'term.fit' "
                                    "(did you mean 'term.fits'?)")
    assert got["listing an unknown id"][:3] == ["NotFound", "NOT_FOUND", "ids[1]"]
    assert got["no states"][:3] == ["InvalidArgument", "INVALID_ARGUMENT", "states"]
    assert got["text too long"][:3] == ["InvalidArgument", "INVALID_ARGUMENT", "states[1].text"]
    assert "3000 bytes exceed limits.max_text_bytes=2048" in got["text too long"][3]
    assert got["level not servable"][:2] == ["FailedPrecondition", "FAILED_PRECONDITION"]
    assert got["bad level"][:3] == ["InvalidArgument", "INVALID_ARGUMENT", "level"]
    assert got["no token"][:2] == ["Unauthenticated", "UNAUTHENTICATED"]
    assert got["wrong token"][:2] == ["Unauthenticated", "UNAUTHENTICATED"]
    assert got["health needs no token"] is None


def test_a_fit_and_a_promoted_bundle_show_in_questions(client_python, daemon, tmp_path):
    # The pipeline's view of what an operator did (here through the raw
    # stubs, as `mesa-anyjev learn` would): an L1 bundle promoted under the
    # set's lock, then an L2 head fit on the same key.
    listed = daemon.decisions.ListQuestions(dpb.ListQuestionsRequest(ids=["avu.keep"]),
                                            timeout=10, metadata=AUTH)
    (keep,) = listed.questions
    texts = [f"An annotation, {'new' if i % 2 else 'redundant'} item {i}" for i in range(16)]
    states = [dpb.State(text=t) for t in texts]
    labels = [i % 2 for i in range(16)]
    fit = daemon.decisions.Fit(dpb.FitRequest(question=keep.question, states=states, labels=labels,
                                              level="L1", dry_run=True), timeout=60, metadata=AUTH)
    manifest = {"per_question": {"avu.keep": {"key": keep.key, "level": "L1"}},
                "validation": {"avu.keep": {"loco": {"acc": 0.7, "ece": 0.1}}}}
    store = bundles_pb2_grpc.BundlesStub(daemon.channel)
    version = store.Put(bpb.PutBundleRequest(lock_sha=listed.lock_sha,
                                             artifacts_json=fit.artifacts_json,
                                             manifest_json=json.dumps(manifest)),
                        timeout=10, metadata=AUTH).version
    store.Promote(bpb.PromoteBundleRequest(lock_sha=listed.lock_sha, version=version,
                                           question_id="avu.keep"), timeout=10, metadata=AUTH)
    show = """
        client = Client(ADDRESS, token=TOKEN)
        [q] = client.questions(["avu.keep"])
        [d] = client.decide(["An annotation, new item"], questions=["avu.keep"])
        print(json.dumps([q.level, q.bundle_version, d.level, d.diagnostics.n_calib]))
    """
    assert run_client(client_python, daemon.address, show) == ["L1", version, "L1", 16]
    daemon.decisions.Fit(dpb.FitRequest(question=keep.question, states=states, labels=labels,
                                        level="L2"), timeout=60, metadata=AUTH)
    assert run_client(client_python, daemon.address, show)[:3] == ["L2", version, "L2"]
