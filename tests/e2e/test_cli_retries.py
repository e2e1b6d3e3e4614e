"""Issue 33: `annotate`, `bench run` and `learn fit` send their daemon calls
again by the rule `decide --out` uses (client/backends/retry_rule.h), so a
daemon killed mid-run and started again on its address delays the run
instead of ending it, and the run's result is the uninterrupted one's (the
fake model, the run's own batch priors carried in every call).

Each command runs against a daemon whose model calls take 0.3 s; once that
daemon has answered a Decide and holds another, it is killed (SIGKILL), and
a new one is started on the same address once the old one is gone: the
command's next attempts find no daemon, then the new one."""
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import CLI, CLI_HOME, metric, run_cli

CARD = sorted(p.stem for p in Path("data/cards").glob("*.md"))[0]
# What differs between two runs of the same work: times, ids, the address.
VOLATILE = {"seconds", "ms_per_decision", "run_id", "artifact_path", "environment"}


def stable(doc):
    if isinstance(doc, dict):
        return {k: stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable(v) for v in doc]
    return doc


COMMANDS = {
    "annotate": lambda tmp: (["annotate", "--card", f"data/cards/{CARD}.md", "--candidates",
                              f"data/candidates/{CARD}.json", "--json"], None),
    "bench run": lambda tmp: (["bench", "run", "--levels", "raw,L0", "--date", "2026-01-02",
                               "--out", str(tmp / "bench")],
                              tmp / "bench" / "2026-01-02" / "fake.hf.json"),
    "learn fit": lambda tmp: (["learn", "fit", "--json", "--question", "column.aspect",
                               "--level", "L1"], None),
}


@pytest.fixture(scope="module")
def labels(tmp_path_factory):
    store = tmp_path_factory.mktemp("labels")
    r = run_cli("learn", "ingest", "--labels", "data/bench/labels.jsonl",
                "--set", f"labels.dir={store}", "--set", f"artifacts.dir={store}/bundles")
    assert r.returncode == 0, r.stderr
    return store


def start(name, tmp, address, labels):
    """The command against `address`: (process, stderr path, result file)."""
    argv, result = COMMANDS[name](tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
    env["HOME"] = CLI_HOME
    err = tmp / "stderr"
    proc = subprocess.Popen(
        [str(Path(CLI).resolve()), *argv, "--backend", "hf", "--set",
         f"client.address={address}", "--set", "backend.hf_model=fake",
         "--set", f"labels.dir={labels}", "--set", f"artifacts.dir={labels}/bundles"],
        stdout=subprocess.PIPE, stderr=err.open("w"), env=env, text=True)
    return proc, err, result


def finish(proc, err, result):
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.read_text()
    return stable(json.loads(result.read_text() if result else out)), err.read_text()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_daemon_killed_mid_run_delays_the_run_and_changes_nothing(
        name, start_daemon, tmp_path, labels):
    (tmp_path / "ref").mkdir()
    (tmp_path / "run").mkdir()
    steady = start_daemon("--set", f"decisions.bundles_dir={tmp_path / 'ref-bundles'}",
                          name="steady")
    want, said = finish(*start(name, tmp_path / "ref", steady.address, labels))
    assert "again in" not in said

    slow = ("--set", "model.fake_delay_s=0.3",
            "--set", f"decisions.bundles_dir={tmp_path / 'bundles'}")
    first = start_daemon(*slow, name="first")
    proc, err, result = start(name, tmp_path / "run", first.address, labels)
    first.wait_metrics(lambda t: metric(t, "mesa_anyjev_requests_total", method="Decide",
                                        code="OK") >= 1
                       and metric(t, "mesa_anyjev_inflight_requests") >= 1,
                       "a Decide answered and another in flight")
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    start_daemon(*slow, name="second", listen=first.address)
    got, said = finish(proc, err, result)
    assert got == want
    # Each retry is said on stderr: the call, why, and the next attempt.
    assert f"mesa-anyjev {name}: " in said and "; try 2 again in " in said, said
