"""Makes the GPU check's environment on the GPU test host out of the bundle
(issue 28): prints the GPU, driver, torch and CUDA versions; unpacks the
bundle (make gpu-bundle); stops with one line, exit 3, if this host's torch
is not the one the bundle was built against or its C runtime is older than
the bundle needs; installs the bundle's wheels into a folder of its own;
checks that the loader finds every library the binaries need; and prints the
shell exports tests/gpu/run.sh evaluates.

    python3 tests/gpu/host_env.py BUNDLE.tar.xz WORK_DIR

Only the standard library and torch: it runs with the host's python3 before
anything of ours is installed."""
import glob
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path


def say(line):
    print(line, file=sys.stderr, flush=True)


def stop(line):
    say(f"gpu check: {line}")
    sys.exit(3)


def version_tuple(text):
    return tuple(int(x) for x in text.split("_")[-1].split("."))


def report_versions(torch, smoke):
    facts = {"python": platform.python_version(), "glibc": platform.libc_ver()[1],
             "torch": torch.__version__, "torch_cuda": torch.version.cuda,
             "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    if not smoke:
        if not torch.cuda.is_available():
            stop(f"torch {torch.__version__} sees no CUDA device here")
        props = torch.cuda.get_device_properties(0)
        facts.update(device=props.name, capability=f"{props.major}.{props.minor}",
                     memory_gib=round(props.total_memory / 2 ** 30, 1))
        smi = shutil.which("nvidia-smi")
        if smi:
            facts["nvidia_smi"] = subprocess.run(
                [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                capture_output=True, text=True).stdout.strip()
    say("gpu check: " + json.dumps(facts))
    return facts


def unpack(bundle, work):
    target = work / "bundle"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tarfile.open(bundle) as tar:  # xz through the standard library's lzma
        # The "data" filter (Python 3.12, 3.11.4) refuses links out and
        # device files; an older Python extracts as it always did.
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(target, **safe)
    for f in (target / "bin").iterdir():
        f.chmod(0o755)
    return target, json.loads((target / "manifest.json").read_text())


def check_c_runtime(manifest):
    have = platform.libc_ver()[1]
    if version_tuple(have) < version_tuple(manifest["needs_glibc"]):
        stop(f"glibc {have} here, the bundle needs {manifest['needs_glibc']}: build it on an "
             "older system or carry the loader")
    needed = manifest["needs_glibcxx"]
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    paths = [line.split("=>")[-1].strip() for line in listed.splitlines()
             if line.strip().startswith("libstdc++.so.6 ") and "x86-64" in line]
    if not paths:
        stop(f"the loader knows no libstdc++.so.6 here; the bundle needs one with {needed}")
    if needed.encode() + b"\0" not in Path(paths[0]).read_bytes():
        stop(f"{paths[0]} lacks {needed}, which the bundle needs")


def torch_library_path(torch):
    """The folders the host's own torch loads its libraries from."""
    site = Path(torch.__file__).parent.parent
    dirs = [str(Path(torch.__file__).parent / "lib")]
    dirs += sorted({str(Path(p).parent) for p in glob.glob(str(site / "nvidia" / "**" / "*.so*"),
                                                           recursive=True)})
    return dirs


def install_wheels(bundle, work):
    site = work / "site"
    shutil.rmtree(site, ignore_errors=True)
    wheels = sorted(str(w) for w in (bundle / "wheels").glob("*.whl"))
    if not wheels:
        return site
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--no-compile", "--disable-pip-version-check", "--target", str(site),
                    *wheels], check=True)
    return site


C_RUNTIME = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux",
             "libstdc++.so", "libgcc_s.so", "libresolv.so", "libutil.so", "linux-vdso")


def check_loader(bundle, library_path, strict):
    """Every library the binaries need is found; with `strict` (the
    rehearsal), found in the bundle, the torch environment or the C runtime
    and nowhere else."""
    env = {**os.environ, "LD_LIBRARY_PATH": library_path}
    allowed = tuple(library_path.split(":"))
    for binary in (bundle / "bin").iterdir():
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env).stdout
        missing = [line.split()[0] for line in out.splitlines() if "not found" in line]
        if missing:
            stop(f"{binary.name}: the loader finds no {', '.join(missing)}")
        stray = [line.split()[2] for line in out.splitlines()
                 if "=>" in line and len(line.split()) > 2 and line.split()[2].startswith("/")
                 and not line.split()[2].startswith(allowed)
                 and not Path(line.split()[0]).name.startswith(C_RUNTIME)]
        if strict and stray:
            stop(f"{binary.name} loads from outside the bundle and torch: {', '.join(stray)}")


def main():
    bundle_file, work = Path(sys.argv[1]), Path(sys.argv[2])
    smoke = os.environ.get("GPU_SMOKE") == "1"
    import torch
    facts = report_versions(torch, smoke)
    if not bundle_file.exists():
        stop(f"no bundle at {bundle_file}: run make gpu-bundle where it is built, and send it")
    bundle, manifest = unpack(bundle_file, work)
    if torch.__version__ != manifest["torch"]:
        stop(f"torch {torch.__version__} here, the bundle was built against {manifest['torch']}: "
             "build it against this host's torch (scripts/gpu-host-requirements.txt)")
    check_c_runtime(manifest)
    site = install_wheels(bundle, work)
    library_path = ":".join([str(bundle / "lib"), *torch_library_path(torch),
                             *filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":"))])
    check_loader(bundle, library_path, strict=os.environ.get("GPU_REHEARSAL") == "1")
    (work / "host.json").write_text(json.dumps({**facts, "bundle": manifest["commit"]}))
    exports = {"LD_LIBRARY_PATH": library_path,
               "PYTHONPATH": ":".join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
               "MESA_ANYJEV_QWEN3_DUMP": str(bundle / "bin" / "qwen3_dump"),
               "MESA_ANYJEVD": str(bundle / "bin" / "mesa-anyjevd")}
    for name, value in exports.items():
        print(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    main()
