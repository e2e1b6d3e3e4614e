"""Bearer-token auth (env variable or 0600 file) and TLS, with the real CLI
and a Python client; the token never appears in the daemon's log."""
import os
import subprocess

import grpc
import pytest

from conftest import Daemon, health_pb2, health_pb2_grpc, inference_pb2_grpc, pb, run_cli

TOKEN = "t0ken-for-tests-9f3a1c"


def info(stub, metadata=None):
    return stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10, metadata=metadata)


def test_token_from_env(start_daemon):
    daemon = start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN", env={"MESA_TEST_TOKEN": TOKEN})
    for metadata, why in [(None, "missing"), ([("authorization", "Bearer wrong")], "invalid"),
                          ([("authorization", TOKEN)], "Bearer scheme")]:
        with pytest.raises(grpc.RpcError) as error:
            info(daemon.stub, metadata)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert why in error.value.details() and TOKEN not in error.value.details()
    assert info(daemon.stub, [("authorization", f"Bearer {TOKEN}")]).name == "fake"
    # Health stays open for probes.
    assert daemon.health_status() == "SERVING"
    # The CLI reads its token from the environment too.
    ok = run_cli("info", "--address", daemon.address, "--set", "client.token_env=MY_TOKEN",
                 env={"MY_TOKEN": TOKEN})
    assert ok.returncode == 0, ok.stderr
    refused = run_cli("info", "--address", daemon.address)
    assert refused.returncode == 1 and "UNAUTHENTICATED" not in refused.stdout
    assert TOKEN not in daemon.output()
    assert 'mesa_anyjev_rejected_total{reason="unauthenticated",tenant=""} 4' in daemon.metrics()


def test_token_file_must_be_0600(start_daemon, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    loose = subprocess.run([os.environ.get("MESA_ANYJEVD", "build/server/mesa-anyjevd"),
                            "--model", "fake", "--listen", "127.0.0.1:0", "--metrics-listen", "",
                            "--set", f"auth.token_file={token_file}"],
                           capture_output=True, text=True, timeout=30)
    assert loose.returncode == 2
    assert "0644" in loose.stderr and TOKEN not in loose.stderr
    token_file.chmod(0o600)
    daemon = start_daemon("--set", f"auth.token_file={token_file}")
    assert info(daemon.stub, [("authorization", f"Bearer {TOKEN}")]).name == "fake"
    cli = run_cli("info", "--address", daemon.address, "--set", f"client.token_file={token_file}")
    assert cli.returncode == 0, cli.stderr
    token_file.chmod(0o640)
    cli = run_cli("info", "--address", daemon.address, "--set", f"client.token_file={token_file}")
    assert cli.returncode == 2 and "chmod 600" in cli.stderr


def make_cert(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


def test_tls(start_daemon, tmp_path):
    key, cert = make_cert(tmp_path)
    daemon = start_daemon("--set", f"server.tls_cert={cert}", "--set", f"server.tls_key={key}",
                          wait_serving=False)
    creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with grpc.secure_channel(daemon.address, creds) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = inference_pb2_grpc.InferenceStub(channel)
        for _ in range(100):
            if health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == 1:
                break
        assert info(stub).name == "fake"
    # Plaintext against a TLS port fails.
    with pytest.raises(grpc.RpcError):
        info(daemon.stub)
    cli = run_cli("info", "--address", f"localhost:{daemon.port}", "--set", f"client.tls_ca={cert}")
    assert cli.returncode == 0, cli.stderr
    _, other = make_cert(tmp_path / "..")  # a certificate from another CA
    cli = run_cli("info", "--address", f"localhost:{daemon.port}", "--set", f"client.tls_ca={other}",
                  "--set", "client.timeout_s=3")
    assert cli.returncode == 1
