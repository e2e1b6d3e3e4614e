"""Issue 16: deploy/kubernetes validated against the schemas of a named
Kubernetes version (kubernetes-validate, strict: unknown fields fail), and
held to what the daemon needs: native gRPC probes, a grace period longer than
the drain, one GPU per pod, the bundle store on a volume, a daemon
configuration the daemon accepts, and the balancer's nginx.conf equal to the
shipped one but for its upstreams and log paths. Issue 25: the StatefulSet
and deploy/compose.yaml name the image `make image` builds, compose reserves
the GPU as docker's NVIDIA toolkit expects and mounts what the image's own
configuration (which the daemon accepts) reads."""
import copy
import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from conftest import DAEMON
from k8s_nginx import SHIPPED, render

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
COMPOSE = ROOT / "deploy" / "compose.yaml"
IMAGE_CONFIG = ROOT / "deploy" / "container" / "mesa-anyjevd.yaml"
VERSION = "1.34.0"


def documents():
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def one(kind, name=None):
    found = [d for d in documents() if d["kind"] == kind
             and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


@pytest.mark.parametrize("doc", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_is_valid(doc):
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_validator_refuses_a_misspelt_field():
    # The check above can fail: a field the schema does not have is refused.
    bad = copy.deepcopy(one("StatefulSet"))
    spec = bad["spec"]["template"]["spec"]
    spec["terminationGracePeriodSecond"] = spec.pop("terminationGracePeriodSeconds")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def daemon_config():
    return one("ConfigMap", "mesa-anyjevd-config")["data"]["mesa-anyjevd.yaml"]


def test_the_daemon_accepts_its_configuration(tmp_path):
    path = tmp_path / "mesa-anyjevd.yaml"
    path.write_text(daemon_config())
    r = subprocess.run([DAEMON, "--config", str(path), "--print-config"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "bundles_dir: \"/var/lib/mesa-anyjev/bundles\"" in r.stdout


def test_the_statefulset_serves_what_the_daemon_needs():
    sts = one("StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config = yaml.safe_load(daemon_config())
    assert config["server"]["listen"].endswith(f":{ports['grpc']}")
    assert config["server"]["metrics_listen"].endswith(f":{ports['metrics']}")
    # Kubernetes' native gRPC probes on grpc.health.v1, on the daemon's port.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == ports["grpc"], probe
    # The grace period outlasts preStop + drain grace + drain deadline + the
    # daemon's 5 s slack, so Kubernetes never kills a drain.
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    drain = config["server"]["drain_grace_s"] + config["server"]["drain_deadline_s"] + 5
    assert pod["terminationGracePeriodSeconds"] > pre_stop + drain
    # A liveness failure cannot cut a drain either.
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= drain
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    # The bundle store is on the volume the claim template makes.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["bundles"] == config["decisions"]["bundles_dir"]
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["bundles"]
    assert container["env"][0]["name"] == config["auth"]["token_env"]
    headless = one("Service", "mesa-anyjevd")
    assert headless["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]


def test_the_balancer_runs_the_shipped_nginx_conf():
    conf = one("ConfigMap", "mesa-anyjev-balancer")["data"]["nginx.conf"]
    assert conf == render(SHIPPED.read_text())
    replicas = one("StatefulSet")["spec"]["replicas"]
    assert conf.count("server mesa-anyjevd-") == replicas
    port = one("Deployment", "mesa-anyjev-balancer")["spec"]["template"]["spec"][
        "containers"][0]["ports"][0]["containerPort"]
    assert f"listen {port} http2;" in conf


def make_image_name():
    """IMAGE as the Makefile sets it, its $(VERSION) read from CMakeLists.txt."""
    image = re.search(r"^IMAGE\s*\?=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    version = re.search(r"^project\(mesa_anyjev VERSION ([0-9.]+)",
                        (ROOT / "CMakeLists.txt").read_text(), re.M).group(1)
    return image.replace("$(VERSION)", version)


def test_kubernetes_and_compose_run_the_image_make_image_builds():
    (container,) = one("StatefulSet")["spec"]["template"]["spec"]["containers"]
    service = yaml.safe_load(COMPOSE.read_text())["services"]["mesa-anyjevd"]
    assert container["image"] == service["image"] == make_image_name() == "mesa-anyjevd:0.1.0"
    build = service["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()


def test_compose_reserves_the_gpu_and_mounts_what_the_image_reads(tmp_path):
    compose = yaml.safe_load(COMPOSE.read_text())
    service = compose["services"]["mesa-anyjevd"]
    (gpu,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert gpu["driver"] == "nvidia" and gpu["capabilities"] == ["gpu"]
    config = yaml.safe_load(IMAGE_CONFIG.read_text())
    mounts = {target: source for source, target, *_ in
              (v.split(":") for v in service["volumes"])}
    assert config["model"]["path"].startswith("/models/") and mounts["/models"]
    assert service["volumes"][0].endswith(":/models:ro")
    assert mounts[config["decisions"]["bundles_dir"]] in compose["volumes"]
    (secret,) = service["secrets"]
    assert config["auth"]["token_file"] == f"/run/secrets/{secret}"
    assert secret in compose["secrets"]
    grace = int(service["stop_grace_period"].rstrip("s"))
    assert grace > config["server"]["drain_deadline_s"] + 5
    published = {p.split(":")[-1] for p in service["ports"]}
    assert {config["server"]["listen"].rsplit(":", 1)[1],
            config["server"]["metrics_listen"].rsplit(":", 1)[1]} == published


def test_the_daemon_accepts_the_image_configuration_and_composes_overrides():
    env = {k: str(v) for k, v in yaml.safe_load(COMPOSE.read_text())["services"][
        "mesa-anyjevd"]["environment"].items()}
    r = subprocess.run([DAEMON, "--config", str(IMAGE_CONFIG), "--print-config"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert 'bundles_dir: "/var/lib/mesa-anyjev/bundles"' in r.stdout
    assert 'token_file: "/run/secrets/mesa-anyjevd-token"' in r.stdout
