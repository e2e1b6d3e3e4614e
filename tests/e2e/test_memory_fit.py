"""The load's memory check (issue 25): a daemon whose weights, KV pool, block
cache and reserve would not fit in MemAvailable refuses to start before it
reads a weight, with exit 2 and one line naming the four figures and the
setting to change, instead of driving the host out of memory (on the GB10
that livelocks the machine). The weights figure is checked against
transformers' parameter count. A daemon that fits reports the device and
the host's MemAvailable in GetModelInfo, `mesa-anyjev info` and the metrics."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import Qwen3ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

from conftest import DAEMON, metric, pb, run_cli  # noqa: E402

TIB = 1 << 40


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make(tmp_path_factory.mktemp("fit") / "tiny-qwen3", heads=4, kv_heads=2)


def mem_available():
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"^MemAvailable:\s+(\d+) kB$", text, re.M).group(1)) * 1024


def gb(n):
    return f"{n / 1e9:.2f} GB"


def pass_bytes(checkpoint, tokens=8192, chunk_rows=512, element=4):
    """What a full pass allocates beyond the weights and the pool, from
    config.json (docs/operations.md): a layer's activations for
    engine.batch_tokens tokens, and the float32 logits and log-probabilities
    of one chunk of output rows."""
    c = json.loads((checkpoint / "config.json").read_text())
    h, i, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    per_token = (4 * h + (heads + 2 * kv) * d + heads * d + 3 * i) * element
    return tokens * per_token + 2 * chunk_rows * c["vocab_size"] * 4


def test_a_pool_that_does_not_fit_fails_fast_with_one_line(start_daemon, checkpoint):
    daemon = start_daemon("--model", str(checkpoint), "--set", f"engine.kv_pool_bytes={TIB}",
                          wait_serving=False)
    assert daemon.wait(timeout=300) == 2  # exit 2, not a kill by the kernel (-9)
    weights = Qwen3ForCausalLM.from_pretrained(checkpoint).num_parameters() * 4  # float32
    host_cache, reserve = 2 << 30, 2 << 30
    lines = [line for line in daemon.output().splitlines() if "does not fit" in line]
    assert len(lines) == 1, daemon.output()
    a_pass = pass_bytes(checkpoint)
    want = (f"the model does not fit: weights {gb(weights)} + engine.kv_pool_bytes {gb(TIB)} + "
            f"engine.host_cache_bytes {gb(host_cache)} + engine.memory_reserve_bytes "
            f"{gb(reserve)} + a pass of engine.batch_tokens {gb(a_pass)} = "
            f"{gb(weights + TIB + host_cache + reserve + a_pass)} > MemAvailable ")
    assert want in lines[0]
    assert lines[0].endswith("; lower engine.kv_pool_bytes, engine.host_cache_bytes or "
                             "engine.batch_tokens, or free memory")
    # Refused before the weights were read: the load never logged its model.
    assert "Qwen3 on cpu" not in daemon.output()


def test_the_reserve_counts(start_daemon, checkpoint):
    reserve = 4 * mem_available()
    daemon = start_daemon("--model", str(checkpoint), "--set", "engine.host_cache_bytes=0",
                          "--set", f"engine.memory_reserve_bytes={reserve}", wait_serving=False)
    assert daemon.wait(timeout=300) == 2
    assert f"engine.memory_reserve_bytes {gb(reserve)}" in daemon.output()
    assert "lower engine.kv_pool_bytes or engine.batch_tokens, or free memory" in daemon.output()


def test_a_model_that_fits_reports_device_and_memory(start_daemon, checkpoint):
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3",
                          start_timeout=300)
    assert "device cpu (memory: the system's, MemAvailable)" in daemon.output()
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    assert info.HasField("device_info")
    assert (info.device_info.name, info.device_info.shared_memory) == ("cpu", True)
    assert info.device_info.driver_cuda == "" and info.device_info.compute_capability == ""
    # MemAvailable moves with the rest of the machine: the same order of
    # magnitude as this process reads, not the same bytes.
    assert 0.5 < info.system_memory_available_bytes / mem_available() < 2

    scrape = daemon.metrics()
    available = metric(scrape, "mesa_anyjev_system_memory_available_bytes")
    assert 0.5 < available / mem_available() < 2
    assert metric(scrape, "mesa_anyjev_device_info", device_name="cpu", compute_capability="",
                  integrated="true", driver_cuda="", runtime_cuda="") == 1

    out = run_cli("info", "--json", "--set", f"client.address={daemon.address}")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["device_info"]["name"] == "cpu" and shown["device_info"]["shared_memory"]
    assert shown["system_memory_available_bytes"] > 0
    table = run_cli("info", "--set", f"client.address={daemon.address}")
    assert "memory available" in table.stdout and "(the host's MemAvailable)" in table.stdout


def test_the_fake_model_reports_no_device(daemon):
    info = daemon.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
    assert not info.HasField("device_info")
    assert info.system_memory_available_bytes > 0
    assert "mesa_anyjev_device_info{" not in daemon.metrics()


@pytest.mark.parametrize("value", ["-1", str(TIB + 1)])
def test_a_reserve_out_of_range_is_a_config_error(value):
    out = subprocess.run([DAEMON, "--listen", "127.0.0.1:0", "--metrics-listen", "",
                          "--set", f"engine.memory_reserve_bytes={value}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "engine.memory_reserve_bytes" in out.stderr
