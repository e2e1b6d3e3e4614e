"""Issue 8: a real Prometheus (Debian's package) scrapes two real
mesa-anyjevd processes under a short load: one serving a tiny Qwen3 with a
promoted bundle, and a router (--backend composite) in front of it and of a
vLLM-like gateway. It uses the shipped scrape configuration
(deploy/prometheus/prometheus.yml, only its targets and interval changed),
and every query of every panel of the shipped Grafana dashboard
(deploy/grafana/mesa-anyjevd.json) must return data through Prometheus's
HTTP API."""
import json
import math
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import pytest
import yaml

from conftest import add_token, dpb, pb, with_token
from gateway_server import Gateway
from mesa.anyjev.v1 import bundles_pb2 as bpb, bundles_pb2_grpc
from mesa.anyjev.v1 import decisions_pb2_grpc, inference_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tiny_qwen3 import make  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "mesa-anyjevd.json"
SCRAPE = ROOT / "deploy" / "prometheus" / "prometheus.yml"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def panel_queries():
    dashboard = json.loads(DASHBOARD.read_text())
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "instance"} <= names
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def test_shipped_scrape_config_is_valid():
    out = subprocess.run([PROMTOOL, "check", "config", str(SCRAPE)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def prometheus(tmp_path):
    servers = []

    def start(targets):
        config = yaml.safe_load(SCRAPE.read_text())
        config["global"]["scrape_interval"] = "1s"
        config["global"]["evaluation_interval"] = "1s"
        config["scrape_configs"][0]["scrape_timeout"] = "1s"
        config["scrape_configs"][0]["static_configs"][0]["targets"] = targets
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        servers.append((proc, log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return url
            except OSError:
                time.sleep(0.2)
        raise AssertionError((tmp_path / "prometheus.log").read_text())

    yield start
    for proc, log in servers:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def query(url, expr):
    with urllib.request.urlopen(
            f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def finite_values(result):
    return [float(s["value"][1]) for s in result if math.isfinite(float(s["value"][1]))]


LOCK = "9f9370e0" * 8


def promote_a_bundle(daemon, question, states, labels):
    """An L2 head fit on the daemon, put into its store and promoted."""
    fit = daemon.decisions.Fit(dpb.FitRequest(
        question=question, states=[dpb.State(text=s.encode()) for s in states],
        labels=labels, level="L2"), timeout=300)
    exported = json.loads(daemon.decisions.ExportArtifacts(
        dpb.ExportArtifactsRequest(), timeout=10).artifacts_json)
    stub = bundles_pb2_grpc.BundlesStub(daemon.calls)
    manifest = {"per_question": {question.id: {"key": fit.question_key, "level": "L2"}},
                "validation": {question.id: {"loco": {"acc": 0.9, "ece": 0.05}}}}
    put = stub.Put(bpb.PutBundleRequest(
        lock_sha=LOCK, artifacts_json=json.dumps(
            {"model": exported["model"], "artifacts": {}, "heads": exported["heads"]}).encode(),
        manifest_json=json.dumps(manifest).encode()), timeout=30)
    stub.Promote(bpb.PromoteBundleRequest(lock_sha=LOCK, version=put.version,
                                          question_id=question.id), timeout=30)


def load(daemon, router, stop, bulk):
    """Decisions at raw, L0 and L2 (after a Fit), prompt groups that share a
    prefix (prefix cache hits), hidden states and one bad request on the
    daemon; L0 decisions through the router's gateway; a batch-capped
    tenant asking for interactive (its work runs as batch), and trying an
    admin's method."""
    states = [f"Site {i}: a survey of {['birds', 'beetles', 'mammals'][i % 3]} in plot {i}"
              for i in range(24)]
    question = dpb.Question(id="taxon", kind="choice", text=b"Which taxon is surveyed?",
                            options=[b"birds", b"beetles", b"mammals"])
    promote_a_bundle(daemon, question, states, [i % 3 for i in range(24)])
    prefix = pb.Segment(text=b"A long shared state about birds counted at points. " * 8)
    while not stop.is_set():
        for level in ("raw", "L0", "L2", "auto"):
            daemon.decisions.Decide(dpb.DecideRequest(
                states=[dpb.State(text=s.encode()) for s in states[:4]],
                questions=[question], level=level), timeout=60)
        daemon.stub.Logprobs(pb.LogprobsRequest(groups=[pb.PromptGroup(
            prefix=prefix, suffixes=[pb.Segment(text=b" A"), pb.Segment(text=b" B")])],
            top_k=3), timeout=60)
        daemon.stub.HiddenStates(pb.HiddenStatesRequest(groups=[pb.PromptGroup(
            prefix=prefix, suffixes=[pb.Segment(text=b" C")])], layers=[1]), timeout=60)
        router.decisions.Decide(dpb.DecideRequest(
            states=[dpb.State(text=s.encode()) for s in states[:2]],
            questions=[question], level="L0"), timeout=60)
        try:
            daemon.decisions.Decide(dpb.DecideRequest(level="L9"), timeout=10)
        except Exception:  # noqa: BLE001 - the INVALID_ARGUMENT is the point
            pass
        bulk_auth = [("authorization", f"Bearer {bulk}")]
        inference_pb2_grpc.InferenceStub(daemon.channel).GetModelInfo(
            pb.GetModelInfoRequest(), timeout=10,
            metadata=[*bulk_auth, ("mesa-anyjev-priority", "interactive")])
        inference_pb2_grpc.InferenceStub(daemon.channel).Logprobs(pb.LogprobsRequest(
            groups=[pb.PromptGroup(prefix=prefix, suffixes=[pb.Segment(text=b" D")])],
            top_k=3), timeout=60, metadata=[*bulk_auth, ("mesa-anyjev-priority", "interactive")])
        try:
            decisions_pb2_grpc.DecisionsStub(daemon.channel).ResetPriors(
                dpb.ResetPriorsRequest(), timeout=10, metadata=bulk_auth)
        except grpc.RpcError:  # PERMISSION_DENIED is the point
            pass


def test_every_dashboard_panel_has_data(start_daemon, prometheus, tmp_path):
    checkpoint = make(tmp_path / "tiny-qwen3", layers=2)
    tokens = tmp_path / "tokens.yaml"
    ops = add_token(tokens, "ops", "--role", "admin")
    bulk = add_token(tokens, "bulk", "--role", "decide", "--max-priority", "batch")
    daemon = start_daemon("--model", str(checkpoint), "--set", "model.name=tiny/qwen3",
                          "--set", f"decisions.bundles_dir={tmp_path / 'bundles'}",
                          "--set", f"auth.tokens_file={tokens}")
    with_token(daemon, ops)
    daemon.signal(signal.SIGHUP)  # the reload panels have a reading
    daemon.wait_log("auth: reloaded 2 tenants")
    gateway = Gateway()
    router = start_daemon(
        "--backend", "composite", "--set", f"client.address={daemon.address}",
        "--set", f"backend.gateway_base_url={gateway.url}",
        "--set", f"backend.tokenizer={ROOT / 'tests' / 'data' / 'qwen3-tokenizer'}",
        "--set", "client.token_env=ROUTER_TOKEN",
        env={"MESA_LLM_API_KEY": "sk-dashboard", "ROUTER_TOKEN": ops}, name="router")
    url = prometheus([f"127.0.0.1:{daemon.metrics_port}", f"127.0.0.1:{router.metrics_port}"])
    stop = threading.Event()
    errors = []

    def run():
        try:
            load(daemon, router, stop, bulk)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        # rate() needs two scrapes of the load inside its window: wait until
        # every panel shows data (the deadline only bounds a failure).
        deadline = time.monotonic() + 120
        while True:
            missing = []
            for title, expr in panel_queries():
                concrete = expr.replace("$__rate_interval", "30s").replace("$instance", ".*")
                if not finite_values(query(url, concrete)):
                    missing.append(f"{title}: {concrete}")
            if not missing or errors or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert not errors, errors
        assert not missing, "panels without data:\n" + "\n".join(missing)
        capped = query(url, 'mesa_anyjev_priority_capped_total{tenant="bulk"}')
        assert capped and float(capped[0]["value"][1]) > 0
        # The engine ran bulk's work as batch, never interactive (its cap).
        def tokens(tenant, cls):
            got = query(url, f'mesa_anyjev_tenant_tokens_total{{tenant="{tenant}",class="{cls}"}}')
            return float(got[0]["value"][1]) if got else None
        assert tokens("bulk", "batch") > 0 and tokens("bulk", "interactive") == 0
        # Decisions carry their question id and served level as labels.
        l2 = query(url, 'mesa_anyjev_decisions_total{level="L2",question="taxon"}')
        assert l2 and float(l2[0]["value"][1]) > 0
        versions = query(url, 'mesa_anyjev_bundle_version{question="taxon"}')
        assert versions and float(versions[0]["value"][1]) == 1
    finally:
        stop.set()
        worker.join(timeout=120)
        gateway.close()
