"""The balancer's nginx.conf in deploy/kubernetes/balancer.yaml is the shipped
deploy/nginx/mesa-anyjev.conf with these substitutions only (the test
compares them, so the two cannot drift). Run as a script to print it."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "nginx" / "mesa-anyjev.conf"
PODS = [f"mesa-anyjevd-{i}.mesa-anyjevd.mesa-anyjev.svc.cluster.local:50151" for i in range(3)]


def render(shipped: str) -> str:
    servers = "".join(f"    server {pod} max_fails=1 fail_timeout=10s;\n" for pod in PODS)
    text = re.sub(r"(?:    server \S+ max_fails=1 fail_timeout=10s;\n)+", servers, shipped)
    for old, new in {"/run/mesa-anyjev-nginx.pid": "/tmp/nginx.pid",
                     "/var/log/mesa-anyjev/nginx-error.log": "/dev/stderr",
                     "/var/log/mesa-anyjev/nginx-access.log": "/dev/stdout"}.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


if __name__ == "__main__":
    print(render(SHIPPED.read_text()), end="")
