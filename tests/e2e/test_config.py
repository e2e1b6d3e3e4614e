"""Configuration at start: precedence flag > env > file > default, and every
unknown key or bad value refused with exit code 2 and the key named."""
import os
import subprocess

import pytest

from conftest import run_cli

DAEMON = os.environ.get("MESA_ANYJEVD", "build/server/mesa-anyjevd")


def daemon(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_ANYJEV_")}
    full_env.update(env or {})
    return subprocess.run([DAEMON, *args], capture_output=True, text=True, env=full_env, timeout=30)


def test_precedence_flag_over_env_over_file(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("server:\n  queue_capacity: 5\n  listen: 127.0.0.1:7001\nlimits:\n  max_top_k: 7\n")
    out = daemon("--config", str(config), "--print-config",
                 env={"MESA_ANYJEV_SERVER__QUEUE_CAPACITY": "9", "MESA_ANYJEV_SERVER__LISTEN": "127.0.0.1:7002"})
    assert out.returncode == 0, out.stderr
    assert "queue_capacity: 9" in out.stdout          # env over file
    assert "max_top_k: 7" in out.stdout               # file over default
    assert '"127.0.0.1:7002"' in out.stdout           # env over file
    out = daemon("--config", str(config), "--print-config", "--listen", "127.0.0.1:7003",
                 env={"MESA_ANYJEV_SERVER__LISTEN": "127.0.0.1:7002"})
    assert '"127.0.0.1:7003"' in out.stdout           # flag over env


@pytest.mark.parametrize("args,env,named", [
    (["--set", "server.lisen=1"], {}, "server.lisen"),
    (["--set", "server.queue_capacity=0"], {}, "server.queue_capacity"),
    (["--listen", "nohost"], {}, "server.listen"),
    ([], {"MESA_ANYJEV_SERVER__QUEUE_CAPACITY": "many"}, "MESA_ANYJEV_SERVER__QUEUE_CAPACITY"),
    ([], {"MESA_ANYJEV_NOPE__X": "1"}, "MESA_ANYJEV_NOPE__X"),
    (["--set", "model.dtype=float64"], {}, "model.dtype"),
    (["--set", "server.tls_cert=/x.pem"], {}, "tls_key"),
    (["--model", "/definitely/not/here"], {}, "model.path"),
    (["--bogus-flag"], {}, "bogus"),
])
def test_bad_config_exits_2_naming_the_key(args, env, named):
    base = [] if "--listen" in args else ["--listen", "127.0.0.1:0"]
    out = daemon(*base, "--metrics-listen", "", *args, env=env)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert named in out.stderr


def test_bad_config_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  listen: 127.0.0.1:0\n  unknown_field: 3\n")
    out = daemon("--config", str(bad))
    assert out.returncode == 2 and "server.unknown_field" in out.stderr
    out = daemon("--config", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "missing.yaml" in out.stderr
    bad.write_text("- a list\n")
    out = daemon("--config", str(bad))
    assert out.returncode == 2 and "mapping" in out.stderr


def test_cli_uses_the_same_loader():
    out = run_cli("health", "--set", "client.timeout_s=-1")
    assert out.returncode == 2 and "client.timeout_s" in out.stderr
    out = run_cli("nonsense")
    assert out.returncode == 2
    out = run_cli("--version")
    assert out.returncode == 0


def test_example_config_is_the_defaults():
    example = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "config",
                           "mesa-anyjevd.example.yaml")
    with_file = daemon("--config", example, "--print-config")
    defaults = daemon("--print-config")
    assert with_file.returncode == 0, with_file.stderr
    assert with_file.stdout == defaults.stdout
