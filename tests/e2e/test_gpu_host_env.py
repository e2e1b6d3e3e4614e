"""tests/gpu/host_env.py, which prepares the GPU check on the GPU test host
from the bundle (issue 28), on bundles made here: it stops with one line and
exit 3 before any GPU time is spent when the host's torch is not the one the
bundle was built against, when the host's glibc is older than the bundle
needs, or (in the rehearsal's strict mode) when a binary would load a
library from outside the bundle and torch; otherwise it prints the exports
run.sh evaluates. GPU_SMOKE=1: no GPU here."""
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
HOST_ENV = ROOT / "tests" / "gpu" / "host_env.py"


def bundle(tmp, manifest, binaries=()):
    """A bundle as make gpu-bundle packs it (tar.xz: bin/, lib/, wheels/,
    manifest.json)."""
    path = tmp / "bundle.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        for folder in ("bin", "lib", "wheels"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for binary in binaries:
            tar.add(binary, arcname=f"bin/{Path(binary).name}")
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def manifest(**changes):
    glibc = platform.libc_ver()[1]
    return {"torch": torch.__version__, "needs_glibc": f"GLIBC_{glibc}",
            "needs_glibcxx": "GLIBCXX_3.4.30", "commit": "test", **changes}


def host_env(tmp, path, **env):
    return subprocess.run([sys.executable, str(HOST_ENV), str(path), str(tmp / "work")],
                          capture_output=True, text=True,
                          env={**os.environ, "GPU_SMOKE": "1", **env})


def last_line(out):
    return out.stderr.strip().splitlines()[-1]


def test_a_matching_bundle_gives_the_exports(tmp_path):
    out = host_env(tmp_path, bundle(tmp_path, manifest()))
    assert out.returncode == 0, out.stderr
    assert "export LD_LIBRARY_PATH=" in out.stdout
    assert str(tmp_path / "work" / "bundle" / "bin" / "mesa-anyjevd") in out.stdout
    host = json.loads((tmp_path / "work" / "host.json").read_text())
    assert host["torch"] == torch.__version__ and host["bundle"] == "test"


def test_another_torch_stops_with_one_line(tmp_path):
    out = host_env(tmp_path, bundle(tmp_path, manifest(torch="2.11.0+cu130")))
    assert out.returncode == 3
    assert last_line(out) == (f"gpu check: torch {torch.__version__} here, the bundle was built "
                              "against 2.11.0+cu130: build it against this host's torch "
                              "(scripts/gpu-host-requirements.txt)")


def test_an_older_glibc_stops_with_one_line(tmp_path):
    out = host_env(tmp_path, bundle(tmp_path, manifest(needs_glibc="GLIBC_9.99")))
    assert out.returncode == 3
    assert f"glibc {platform.libc_ver()[1]} here, the bundle needs GLIBC_9.99" in last_line(out)


def test_a_libstdcxx_without_the_symbols_stops(tmp_path):
    out = host_env(tmp_path, bundle(tmp_path, manifest(needs_glibcxx="GLIBCXX_9.9.99")))
    assert out.returncode == 3
    assert "lacks GLIBCXX_9.9.99, which the bundle needs" in last_line(out)


def test_no_bundle_stops_with_one_line(tmp_path):
    out = host_env(tmp_path, tmp_path / "missing.tar.xz")
    assert out.returncode == 3
    assert "no bundle at" in last_line(out) and "make gpu-bundle" in last_line(out)


def test_the_rehearsal_refuses_libraries_from_outside_the_bundle(tmp_path):
    """The project's own daemon loads Debian's gRPC from /usr/lib: fine on a
    host that has it, refused where the bundle must carry everything."""
    daemon = tmp_path / "mesa-anyjevd"
    shutil.copy(os.environ.get("MESA_ANYJEVD", "build/server/mesa-anyjevd"), daemon)
    path = bundle(tmp_path, manifest(), binaries=[daemon])
    assert host_env(tmp_path, path).returncode == 0
    out = host_env(tmp_path, path, GPU_REHEARSAL="1")
    assert out.returncode == 3
    assert "mesa-anyjevd loads from outside the bundle and torch:" in last_line(out)
    assert "libgrpc" in last_line(out)
