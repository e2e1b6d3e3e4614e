"""The first hour with the CLI (issue 15): the learning loop is visible on the
fake model and through the daemon's default store, an explicit level is
served or refused with what to run, connection trouble is said in the
user's terms, mistypes get "did you mean", --json is one convention,
decide streams JSON lines for pipelines, and progress bars move.
Everything runs the real CLI against the real daemon."""
import json
import re
from pathlib import Path

import pytest

from conftest import metric, run_cli, run_on_a_tty

LABELS = Path("data/bench/labels.jsonl").resolve()
STATE = "Column 'bet_count': number of ground beetles per trap, by species"


@pytest.fixture
def home(tmp_path):
    """A fresh HOME: the CLI's stores at their documented defaults."""
    h = tmp_path / "home"
    h.mkdir()
    return {"HOME": str(h)}


def decide_json(*args, env=None, input=None):
    r = run_cli("decide", "--json", *args, env=env, input=input)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["decisions"]


# --- the learning loop -------------------------------------------------------

def test_learning_loop_on_the_fake_model_in_process(home):
    assert run_cli("learn", "ingest", "--labels", str(LABELS), env=home).returncode == 0
    before = decide_json("--question", "term.fits", "--state", STATE, env=home)
    assert before[0]["level"] == "L0"
    fit = run_cli("learn", "fit", "--question", "term.fits", "--level", "L1", env=home,
                  timeout=300)
    assert fit.returncode == 0, fit.stderr
    # The summary for people ends with the exact command that promotes it.
    assert fit.stdout.splitlines()[-1].strip() == (
        "mesa-anyjev learn promote --version 1 --question term.fits")
    assert run_cli("learn", "promote", "--version", "1", "--question", "term.fits",
                   env=home).returncode == 0
    after = run_cli("decide", "--json", "--question", "term.fits", "--state", STATE, env=home)
    assert after.returncode == 0, after.stderr
    assert "loaded 1 artifact(s) from the promoted bundle" in after.stderr
    assert json.loads(after.stdout)["decisions"][0]["level"] == "L1"
    # The explicit level is served now too, and the doctor names the version.
    assert decide_json("--question", "term.fits", "--level", "L1", "--state", STATE,
                       env=home)[0]["level"] == "L1"
    doctor = run_cli("doctor", env=home)
    assert "[ok] artifacts: term.fits=v1" in doctor.stdout


def test_learning_loop_through_the_daemons_default_store(start_daemon, home):
    daemon = start_daemon()  # no --set decisions.bundles_dir: the default store
    hf = ["--backend", "hf", "--address", daemon.address]
    assert run_cli("learn", "ingest", "--labels", str(LABELS), env=home).returncode == 0
    fit = run_cli("learn", "fit", *hf, "--question", "column.aspect", "--level", "L2",
                  env=home, timeout=300)
    assert fit.returncode == 0, fit.stderr
    promote = fit.stdout.splitlines()[-1].strip().split()
    assert promote == ["mesa-anyjev", "learn", "promote", "--version", "1", "--question",
                       "column.aspect", "--backend", "hf", "--address", daemon.address]
    assert run_cli(*promote[1:], env=home).returncode == 0
    d = decide_json(*hf, "--question", "column.aspect", "--state", STATE, env=home)[0]
    assert d["level"] == "L2" and d["diagnostics"]["blocks_executed"] > 0
    listed = run_cli("bundles", "list", *hf, env=home)
    row = listed.stdout.splitlines()[2].split()
    assert row[:3] == ["v1", "column.aspect", "L2"] and row[-1] == "*"
    store = daemon.tmp / "state" / "mesa-anyjev" / "bundles" / "fake"
    assert store.is_dir() and listed.stdout.startswith(f"bundles of fake in {store}/")


def test_fit_refused_before_it_runs_when_nothing_could_store_it(start_daemon, home, tmp_path):
    assert run_cli("learn", "ingest", "--labels", str(LABELS), env=home).returncode == 0
    off = start_daemon("--set", "decisions.bundles_dir=off")
    r = run_cli("learn", "fit", "--backend", "hf", "--address", off.address,
                "--question", "term.fits", env=home)
    assert r.returncode == 1
    assert "keeps no bundle store" in r.stderr and "nothing was fitted" in r.stderr
    scrape = off.metrics()
    assert metric(scrape, "mesa_anyjev_requests_total", method="Decide", code="OK") == 0
    assert metric(scrape, "mesa_anyjev_requests_total", method="Fit", code="OK") == 0
    # A local store that cannot be created: a file stands where it would go.
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    r = run_cli("learn", "fit", "--question", "term.fits", "--set",
                f"artifacts.dir={blocker}", env=home)
    assert r.returncode == 1 and "nothing was fitted" in r.stderr


# --- explicit levels -----------------------------------------------------------

def test_an_explicit_level_is_served_or_refused_with_what_to_run(start_daemon, home):
    r = run_cli("decide", "--question", "term.fits", "--level", "L1", "--state", STATE,
                env=home)
    assert r.returncode == 1 and r.stdout == ""
    assert "no L1" not in r.stdout
    assert "mesa-anyjev learn fit --question term.fits --level L1" in r.stderr
    assert "mesa-anyjev learn promote --question term.fits" in r.stderr
    daemon = start_daemon()
    r = run_cli("decide", "--backend", "hf", "--address", daemon.address, "--question",
                "term.fits", "--level", "L2", "--state", STATE, env=home)
    assert r.returncode == 1
    assert ("mesa-anyjev learn fit --question term.fits --level L2 --backend hf "
            f"--address {daemon.address}") in r.stderr
    # annotate: the same rule, the same advice.
    r = run_cli("annotate", "--card", "data/cards/DP1.10022.001.bet_sorting.md", "--level",
                "L1", env=home)
    assert r.returncode == 1 and "mesa-anyjev learn fit --question" in r.stderr


def test_cli_and_daemon_share_their_decider_defaults():
    cli = json.loads(run_cli("config", "show", "--json").stdout)
    assert cli["decider"]["adaptive_shifts"] is False
    assert cli["decider"]["adaptive_shifts"] == cli["decisions"]["adaptive_shifts"]
    assert cli["decider"]["prior"] == cli["decisions"]["prior"]
    assert cli["decisions"]["bundles_dir"] == "auto" and cli["backend"]["hf_model"] == ""


# --- connections ---------------------------------------------------------------

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_trouble_in_the_users_terms(start_daemon, tmp_path):
    from test_auth_tls import make_cert
    args = ["decide", "--backend", "hf", "--question", "term.fits", "--state", "x"]
    gone = f"127.0.0.1:{free_port()}"
    r = run_cli(*args, "--address", gone)
    assert r.returncode == 1 and f"no mesa-anyjevd answers at {gone}" in r.stderr
    assert "failed to connect" not in r.stderr  # no transport jargon
    daemon = start_daemon()
    metrics = f"127.0.0.1:{daemon.metrics_port}"
    r = run_cli(*args, "--address", metrics)
    assert r.returncode == 1 and "not mesa-anyjevd's gRPC port" in r.stderr
    key, cert = make_cert(tmp_path)
    r = run_cli(*args, "--address", daemon.address, "--tls-ca", str(cert))
    assert r.returncode == 1 and "does not serve TLS" in r.stderr
    tls = start_daemon("--set", f"server.tls_cert={cert}", "--set", f"server.tls_key={key}",
                       wait_serving=False)
    r = run_cli("health", "--address", f"localhost:{tls.port}", "--set", "client.timeout_s=5")
    assert r.returncode == 1 and "pass --tls-ca" in r.stderr
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    token.chmod(0o600)
    locked = start_daemon("--set", f"auth.token_file={token}")
    r = run_cli(*args, "--address", locked.address)
    assert r.returncode == 1 and "needs a bearer token: pass --token-file" in r.stderr
    r = run_cli(*args, "--address", locked.address, "--token-file", str(token))
    assert r.returncode == 0, r.stderr
    loading = start_daemon("--set", "model.fake_load_s=600", wait_serving=False)
    loading.wait_log("loading model")
    r = run_cli(*args, "--address", loading.address)
    assert r.returncode == 1 and "is still loading its model" in r.stderr


# --- mistypes ------------------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["decid"], "unknown command 'decid' (did you mean 'decide'?)"),
    (["decide", "--questoin", "term.fits"], "unknown flag '--questoin' (did you mean "
                                            "'--question'?); see 'mesa-anyjev decide --help'"),
    (["learn", "fti"], "unknown argument 'fti' (did you mean 'fit'?)"),
    (["decide", "--question", "term.fit", "--state", "x"],
     "no question with id 'term.fit' (did you mean 'term.fits'?)"),
    (["questions", "show", "colum.aspect"], "(did you mean 'column.aspect'?)"),
])
def test_did_you_mean(argv, says):
    r = run_cli(*argv)
    assert r.returncode == 2 and says in r.stderr, r.stderr


# --- output ----------------------------------------------------------------------

def test_json_is_one_convention(daemon, home):
    assert run_cli("learn", "ingest", "--labels", str(LABELS), env=home).returncode == 0
    for argv in (["health", "--address", daemon.address],
                 ["info", "--address", daemon.address],
                 ["doctor"], ["questions"], ["questions", "show", "term.fits"],
                 ["config", "show"], ["decide", "--question", "term.fits", "--state", "x"],
                 ["learn", "ingest", "--labels", str(LABELS)],
                 ["bundles", "list"]):
        r = run_cli(*argv, "--json", env=home)
        assert r.returncode == 0, (argv, r.stderr)
        json.loads(r.stdout)
        assert r.stdout.startswith("{\n  \"") or r.stdout.startswith("[\n  "), argv


def test_decide_for_people_fits_100_columns_most_probable_first(home):
    r = run_cli("decide", "--question", "column.aspect", "--question", "column.ontology",
                "--question", "term.fits", "--state", STATE, env=home)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    probs = [float(p) for p in re.findall(r" (\d\.\d{3})", lines[1])]
    assert len(probs) >= 2 and probs == sorted(probs, reverse=True)


def test_a_state_from_stdin_loses_its_final_newline(home):
    piped = decide_json("--question", "term.fits", input=STATE + "\n", env=home)
    given = decide_json("--question", "term.fits", "--state", STATE, env=home)
    assert piped[0]["state_sha256"] == given[0]["state_sha256"]
    assert piped[0]["probs"] == given[0]["probs"]


def test_decide_streams_json_lines_for_pipelines(start_daemon, tmp_path, home):
    daemon = start_daemon()
    lines = [json.dumps({"id": f"s{i}", "text": f"{STATE} (row {i})"}) for i in range(70)]
    lines.insert(3, "")  # blank lines are skipped
    lines.append(json.dumps("a bare string state"))
    lines.append(json.dumps({"json": {"column": "bet_count", "unit": "count"}}))
    states = tmp_path / "states.jsonl"
    states.write_text("\n".join(lines) + "\n")
    r = run_cli("decide", "--backend", "hf", "--address", daemon.address, "--question",
                "term.fits", "--question", "column.aspect", "--states-file", str(states),
                env=home)
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["index"] for o in out] == list(range(72))
    assert [o.get("id") for o in out[:70]] == [f"s{i}" for i in range(70)]
    assert all(len(o["decisions"]) == 2 for o in out)
    assert out[71]["decisions"][0]["state"] == {"column": "bet_count", "unit": "count"}
    # Many states per Decide: 72 states in chunks of 64, one call per
    # question per chunk.
    assert metric(daemon.metrics(), "mesa_anyjev_requests_total", method="Decide",
                  code="OK") == 4
    # The same from stdin; a bad line stops with its line number.
    r = run_cli("decide", "--question", "term.fits", "--states-file", "-",
                input=json.dumps({"text": "x"}) + "\n{\"txt\": 1}\n", env=home)
    assert r.returncode == 2 and "stdin line 2" in r.stderr
    r = run_cli("decide", "--question", "term.fits", "--states-file", "-", "--state", "x")
    assert r.returncode == 2 and "--states-file" in r.stderr


def test_progress_bars_move_per_fold_with_rate_and_eta(home):
    assert run_cli("learn", "ingest", "--labels", str(LABELS), env=home).returncode == 0
    code, _, screen = run_on_a_tty(["learn", "fit", "--question", "column.aspect", "--level",
                                    "L2"], home)
    assert code == 0, screen
    frames = [f for f in screen.split("\r") if f.startswith("[")]
    counts = [int(m.group(1)) for f in frames for m in [re.search(r"\] (\d+)/8 folds", f)] if m]
    assert counts[0] == 0 and counts[-1] >= 7 and counts == sorted(counts)
    assert len(set(counts)) >= 7  # it moved fold by fold
    assert any("ETA" in f for f in frames) and any("each" in f or "/s" in f for f in frames)
    code, _, screen = run_on_a_tty(
        ["annotate", "--card", "data/cards", "--candidates",
         "data/candidates/DP1.10022.001.bet_sorting.json"], home)
    assert code == 0, screen
    assert re.search(r"\] 1/3 cards .* ETA", screen) and "term.fits" in screen
