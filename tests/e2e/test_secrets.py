"""Secrets stay secret (reliability plan, test 13): the daemon's bearer token
and the gateway's API key appear in no log, no output, and no process's
command line while calls that carry them are in flight."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import CLI, dpb, in_flight
from gateway_server import Gateway

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

TOKEN = "t0ken-secret-5be1d07a"
KEY = "sk-secret-key-c4f9e2"
TOKENIZER = Path(os.environ.get("MESA_ANYJEV_TEST_DATA", "tests/data")) / "qwen3-tokenizer"


def command_lines():
    """Every process's command line, as `ps` shows it."""
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace"))
            except OSError:
                pass  # ended meanwhile
    return lines + [subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True,
                                   check=True).stdout]


def cli(*args, env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MESA_ANYJEV_", "MESA_LLM_"))}
    full.update(env)
    return subprocess.Popen([str(Path(CLI).resolve()), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full)


def test_token_and_key_appear_nowhere(start_daemon, tmp_path):
    # A daemon with auth whose calls take 3 s, so the CLI is caught mid-call.
    daemon = start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN",
                          "--set", "model.fake_delay_s=3", env={"MESA_TEST_TOKEN": TOKEN})
    # A router holding the gateway key, in front of a tiny Qwen3 with auth
    # (the router's tokenizer must match its local daemon's).
    local = start_daemon("--model", str(make(tmp_path / "tiny-qwen3", layers=2)),
                         "--set", "model.name=tiny/qwen3", "--set", "auth.token_env=MESA_TEST_TOKEN",
                         env={"MESA_TEST_TOKEN": TOKEN}, name="local")
    gateway = Gateway()
    try:
        router = start_daemon("--backend", "composite", "--set", f"client.address={local.address}",
                              "--set", "client.token_env=MESA_TEST_TOKEN",
                              "--set", f"backend.gateway_base_url={gateway.url}",
                              "--set", f"backend.tokenizer={TOKENIZER}",
                              env={"MESA_TEST_TOKEN": TOKEN, "MESA_LLM_API_KEY": KEY},
                              name="router")
        reply = router.decisions.Decide(dpb.DecideRequest(
            states=[dpb.State(text=b"a state")], level="L0",
            questions=[dpb.Question(id="sky", kind="noul", text=b"Is the sky blue?")]),
            timeout=60, metadata=[("authorization", f"Bearer {TOKEN}")])
        assert reply.decisions[0].level == "L0"
        decide = cli("decide", "--backend", "hf", "--level", "L0", "--question", "term.fits",
                     "--state", "a state", "--set", f"client.address={daemon.address}",
                     "--set", "backend.hf_model=fake", "--set", "client.token_env=MY_TOKEN",
                     env={"MY_TOKEN": TOKEN})
        daemon.wait_metrics(in_flight(1), "the CLI's call in flight")
        during = command_lines()
        assert any("decide --backend hf" in line for line in during)  # caught mid-call
        out, err = decide.communicate(timeout=120)
        assert decide.returncode == 0, err
        gateway_cli = cli("decide", "--backend", "gateway", "--level", "L0",
                          "--question", "term.fits", "--state", "a state",
                          "--set", f"backend.gateway_base_url={gateway.url}",
                          "--set", f"backend.tokenizer={TOKENIZER}", env={"MESA_LLM_API_KEY": KEY})
        gout, gerr = gateway_cli.communicate(timeout=120)
        assert gateway_cli.returncode == 0, gerr
        # The key did go to the gateway (so the check below looks for a key
        # that was really used).
        assert any(r["authorization"] == f"Bearer {KEY}" for r in gateway.requests)
        texts = {"ps during the call": "\n".join(during), "CLI stdout": out, "CLI stderr": err,
                 "gateway CLI stdout": gout, "gateway CLI stderr": gerr,
                 "daemon log": daemon.output(), "router log": router.output(),
                 "local daemon log": local.output(),
                 "router command line": (Path(f"/proc/{router.proc.pid}/cmdline")
                                         .read_bytes().decode(errors="replace")),
                 "daemon metrics": daemon.metrics(), "router metrics": router.metrics()}
        for secret in (TOKEN, KEY):
            found = [where for where, text in texts.items() if secret in text]
            assert found == [], f"{secret} found in {found}"
    finally:
        gateway.close()
