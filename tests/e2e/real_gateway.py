"""The real gateway chain on loopback (issue 17): vLLM's CPU build serving a
tiny random Qwen3 whose label tokens are lifted near the top of every
distribution (make_tiny_qwen3.lift), and the LiteLLM proxy in front of it,
each from its own virtual environment (scripts/install.sh). Started once per
test file; both are stopped when it ends."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

VLLM_PYTHON = Path(os.environ.get("MESA_ANYJEV_VLLM_VENV", "/opt/mesa-anyjev/vllm-venv")) / "bin" / "python"
LITELLM = Path(os.environ.get("MESA_ANYJEV_LITELLM_VENV", "/opt/mesa-anyjev/litellm-venv")) / "bin" / "litellm"
SERVED = "tiny-qwen3"
MASTER_KEY = "sk-mesa-anyjev-test-master-key"
HEAD_DIM = 32
MAX_LOGPROBS = 40  # above vLLM's default 20: backend.logprobs follows the cap

# Labels lifted into every top 20 (the top-k readout's tests); with
# logprob_token_ids every label is read exactly, lifted or not. vLLM's CPU
# attention takes head sizes of 32, 64, 80, 96, 112, 128, ...: HEAD_DIM.
LIFTED_LABELS = [chr(ord("A") + i) for i in range(8)] + ["Yes", "No"]


def lifted(tokenizer):
    """make_tiny_qwen3's `reachable`: Yes and No lifted most (most of the
    mass on a yes/no prompt, as doctor's answer mass check wants of a real
    model), A..H below them and still far above every other token."""
    return {tokenizer.token_to_id(label): 2.5 if label in ("Yes", "No") else 1.5
            for label in LIFTED_LABELS}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process with its log in a file; `ready` is a GET that must
    answer 200 before the server counts as started."""

    def __init__(self, name, cmd, env, ready, log_dir: Path, timeout):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._answers(ready):
            if self.proc.poll() is not None:
                raise AssertionError(f"{name} exited {self.proc.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{name} not ready in {timeout} s: {self.tail()}")
            time.sleep(0.5)

    @staticmethod
    def _answers(url):
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, OSError):
            return False

    def tail(self, n=4000):
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def start_vllm(checkpoint: Path, log_dir: Path, threads=2, kv_cache_gib=2, extra=()):
    """`extra`: more api_server flags (the benchmark's batch size)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESA_", "VLLM_"))}
    # Its "auto" binding keeps one core for the frontend and computes on
    # the rest (one thread on a 2-core host): bind `threads` cores, as our
    # model.threads does.
    env.update({"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
                "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
                "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
                "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(checkpoint), "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", SERVED, "--max-model-len", "4096", "--dtype", "float32",
           "--max-logprobs", str(MAX_LOGPROBS), "--seed", "0", *extra]
    server = Server("vllm", cmd, env, f"http://127.0.0.1:{port}/health", log_dir, timeout=900)
    server.url = f"http://127.0.0.1:{port}"
    # /health answers before the engine has run anything: one completion
    # proves it serves (and compiles what it compiles on first use).
    body = json.dumps({"model": SERVED, "prompt": "warm up", "max_tokens": 1,
                       "logprobs": 1}).encode()
    request = urllib.request.Request(f"{server.url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as r:
            assert r.status == 200
    except (urllib.error.URLError, AssertionError) as e:
        server.stop()
        raise AssertionError(f"vllm did not complete a warm-up: {e}: {server.tail()}")
    return server


def start_litellm(vllm_url: str, log_dir: Path):
    port = free_port()
    config = log_dir / "litellm.yaml"
    config.write_text(json.dumps({
        "model_list": [{"model_name": SERVED,
                        "litellm_params": {"model": f"hosted_vllm/{SERVED}",
                                           "api_base": f"{vllm_url}/v1"}}],
        "litellm_settings": {"drop_params": True},
        "general_settings": {"master_key": MASTER_KEY}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_")}
    # Without it LiteLLM fetches a price map from the network at start.
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    cmd = [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    server = Server("litellm", cmd, env, f"http://127.0.0.1:{port}/health/liveliness", log_dir,
                    timeout=300)
    server.url = f"http://127.0.0.1:{port}"
    return server
