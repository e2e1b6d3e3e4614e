"""mesa-anyjev bundles list / bundles rollback / learn promote: the local
store (fake backend, artifacts.dir) seeded by bundle_writer, and the same
commands against the daemon's store (--backend hf). Promote's lines and
the exit codes are the reference's; `bundles list` prints a table for
people (version, question, level, LOCO acc, ECE and n, created, current)."""
import json
import os
import subprocess
from pathlib import Path

from conftest import CLI
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc

WRITER = os.environ.get("MESA_ANYJEV_BUNDLE_WRITER", "build/tests/bundle_writer")
LOCK = json.loads(Path("questions.lock.json").read_text())["lock_sha"]


def cli(*args, store=None, address=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
    extra = []
    if store is not None:
        extra += ["--set", f"artifacts.dir={store}"]
    if address is not None:
        extra += ["--set", f"client.address={address}"]
    return subprocess.run([CLI, *args, *extra], capture_output=True, text=True, env=env,
                          timeout=60)


def seed(store, *args):
    out = subprocess.run([WRITER, "put", "--root", str(store), "--lock", LOCK,
                          "--question", "term.fits", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_local_list_promote_gate_force_identity_and_rollback(tmp_path):
    store = tmp_path / "artifacts"
    lock_dir = store / "fake" / LOCK[:8]
    empty = cli("bundles", "list", store=store)
    assert empty.returncode == 0 and empty.stdout == (
        f"bundles of fake in {lock_dir}\nno versions yet: `mesa-anyjev learn fit` writes one\n")

    assert seed(store, "--acc", "0.8", "--ece", "0.1") == 1
    assert seed(store, "--acc", "0.7", "--ece", "0.1") == 2
    assert seed(store, "--no-loco") == 3
    assert seed(store, "--identity", "e" * 64, "--acc", "0.99", "--ece", "0.01") == 4

    def promote(version, *flags):
        return cli("learn", "promote", "--version", str(version), "--question", "term.fits",
                   *flags, store=store)

    ok = promote(1)
    assert (ok.returncode, ok.stdout) == (0, "CURRENT -> v1\n")
    gate = promote(2)
    assert (gate.returncode, gate.stdout) == (
        1, "v2 regresses against v1: acc 0.700 vs 0.800, ece 0.100 vs 0.100\n")
    missing = promote(9)
    assert (missing.returncode, missing.stdout) == (1, "no version v9\n")
    no_loco = promote(3)
    assert no_loco.returncode == 1 and "v3 has no LOCO figures for term.fits" in no_loco.stdout
    foreign = promote(4, "--force")  # force skips the gate, never the binding
    assert foreign.returncode == 1
    assert "e" * 64 in foreign.stdout and "identity" in foreign.stdout
    assert (promote(3, "--force").returncode) == 0

    listed = cli("bundles", "list", "--question", "term.fits", store=store)
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert lines[0] == f"bundles of fake in {lock_dir}"
    assert lines[1].split() == ["version", "question", "level", "acc", "ECE", "n", "created",
                                "current"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == ["v1", "v2", "v3", "v4"]
    assert rows["v1"][:5] == ["v1", "term.fits", "L1", "0.800", "0.100"]
    assert rows["v2"][3] == "0.700" and rows["v2"][-1] != "*"
    assert rows["v3"][3:5] == ["-", "-"] and rows["v3"][-1] == "*"  # no LOCO, forced
    other = cli("bundles", "list", "--question", "column.aspect", store=store)
    assert other.stdout.splitlines()[1:] == ["no version holds column.aspect"]

    as_json = json.loads(cli("bundles", "list", "--json", store=store).stdout)
    assert as_json["current"] == {"term.fits": 3}
    assert [v["current_for"] for v in as_json["versions"]] == [[], [], ["term.fits"], []]
    assert as_json["versions"][0]["manifest"]["questions_lock_sha"] == LOCK

    back = cli("bundles", "rollback", "--question", "term.fits", store=store)
    assert (back.returncode, back.stdout) == (0, "CURRENT -> v1 (was v3)\n")
    again = cli("bundles", "rollback", "--question", "term.fits", store=store)
    assert again.returncode == 1 and "no earlier CURRENT" in again.stdout
    usage = cli("learn", "promote", "--question", "term.fits", store=store)
    assert usage.returncode == 2  # --version is required


def test_hf_goes_through_the_daemons_store(start_daemon, tmp_path):
    d = start_daemon("--set", f"decisions.bundles_dir={tmp_path / 'remote'}")
    stub = bundles_pb2_grpc.BundlesStub(d.channel)
    for acc in (0.8, 0.7):
        stub.Put(bpb.PutBundleRequest(
            lock_sha=LOCK,
            artifacts_json=json.dumps({"model": "fake", "artifacts": {
                "0123456789abcdef": {"method": "temperature", "temperature": 1.5}}}).encode(),
            manifest_json=json.dumps({
                "per_question": {"term.fits": {"key": "0123456789abcdef", "level": "L1"}},
                "validation": {"term.fits": {"loco": {"acc": acc, "ece": 0.1}}}}).encode()),
            timeout=10)
    local = tmp_path / "local-unused"
    promoted = cli("learn", "promote", "--backend", "hf", "--version", "1",
                   "--question", "term.fits", store=local, address=d.address)
    assert (promoted.returncode, promoted.stdout) == (0, "CURRENT -> v1\n"), promoted.stderr
    gate = cli("learn", "promote", "--backend", "hf", "--version", "2",
               "--question", "term.fits", store=local, address=d.address)
    assert gate.returncode == 1 and gate.stdout.startswith("v2 regresses against v1: acc 0.700")
    listed = cli("bundles", "list", "--backend", "hf", "--question", "term.fits",
                 store=local, address=d.address)
    assert listed.returncode == 0
    remote_dir = tmp_path / "remote" / "fake" / LOCK[:8]
    lines = listed.stdout.splitlines()
    assert lines[0] == f"bundles of fake in {remote_dir}"
    assert lines[2].split()[:3] == ["v1", "term.fits", "L1"] and lines[2].endswith("*")
    assert not local.exists()  # hf never touches the local store
    back = cli("bundles", "rollback", "--backend", "hf", "--question", "term.fits",
               store=local, address=d.address)
    assert back.returncode == 1 and "no earlier CURRENT" in back.stdout
