"""Do the pinned wheel sets still resolve for the platforms they are for?

`make test` runs this (docs/build.md, "What CI checks of the routes it does
not run"): the container image's build stage installs
scripts/requirements.txt and scripts/cuda-compiler-requirements.txt on
x86_64 and on aarch64 (the GB10 builds the image itself), with the Python of
Debian 12 (3.11) or 13 (3.13); `make check-arm64` unpacks the aarch64 torch
wheel of the same pin with two wheels of its CUDA toolkit pin. A pin that
has no wheel for one of them breaks that route, and nothing else here would
notice before someone built on the GB10.

pip's own resolver decides, with the target's platform tags and Python
version, from metadata only (`pip install --dry-run --report`: PEP 658
metadata files, never the wheels). pip evaluates environment markers
against the interpreter it runs in, whatever --platform says, so each
resolve runs pip in a child whose marker environment is the target's
(`platform_machine == "x86_64"` is false for aarch64, as it is on the GB10).

usage: check_wheel_sets.py [--only NAME] [--requirements FILE ...]
  --requirements replaces the image's files (the tests give a broken set).
Exits 1 naming each set that does not resolve, and why in pip's words.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pip_for_target  # noqa: E402  (the target's tags and markers)


def resolve(machine, python, requirements, pip_python, deps=True,
            binary_only=True):
    """(ok, detail): pip's dry run for one target; `deps` False resolves the
    pins alone (pip --no-deps), as install.sh installs the compiler wheels."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        args = ["--dry-run", "--ignore-installed", "--quiet",
                "--disable-pip-version-check", "--report", report]
        args += [] if deps else ["--no-deps"]
        for item in requirements:
            args += ["-r", item] if os.path.isfile(item) else [item]
        argv = pip_for_target.command(machine, python, "install", args, pip_python,
                                      binary_only=binary_only)
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode != 0:
            lines = [l for l in (run.stderr + run.stdout).splitlines()
                     if l.strip()]
            return False, "\n    ".join(lines[-6:])
        with open(report) as f:
            installed = json.load(f)["install"]
        return True, installed


def source_only(pin):
    """Whether PyPI carries `name==version` as source alone, no wheel for any
    platform (grpcurl's wrapper): pip builds it where it installs, so it has
    no platform to check. A pin with wheels for some platforms and not this
    one is no such thing: that is the break this check is for."""
    name, _, version = pin.partition("==")
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(
        f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = [f["filename"] for f in json.load(response)["files"]]
    stem = name.replace("-", "_").lower()
    release = [f for f in files if f.lower().replace("-", "_").startswith(f"{stem}_{version}")
               or f.lower().startswith(f"{name.lower()}-{version}")]
    return bool(release) and not any(f.endswith(".whl") for f in release)


def resolve_with_sources(machine, python, requirements, pip_python):
    """resolve(), where a pin PyPI carries as source alone leaves the
    wheels' resolve and is checked alone (the platform flags allow a source
    only without its dependencies). (ok, detail, pins taken as source)."""
    sources = []
    with tempfile.TemporaryDirectory() as tmp:
        while True:
            lines = [line.strip() for path in requirements for line in open(path)]
            kept = os.path.join(tmp, "wheels.txt")
            with open(kept, "w") as f:
                f.write("\n".join(l for l in lines
                                  if l.split(";")[0].strip() not in sources))
            ok, detail = resolve(machine, python, [kept], pip_python)
            missing = None if ok else re.search(
                r"No matching distribution found for (\S+)", detail)
            if ok or missing is None or not source_only(missing.group(1)):
                return ok, detail, sources
            alone, why = resolve(machine, python, [missing.group(1)], pip_python,
                                 deps=False, binary_only=False)
            if not alone:
                return False, why, sources
            sources.append(missing.group(1))


def toolkit_pin(installed):
    """The cuda-toolkit requirement torch names, with the two extras the
    aarch64 build unpacks (scripts/install_arm64.sh)."""
    for item in installed:
        if item["metadata"]["name"].lower() != "torch":
            continue
        for req in item["metadata"].get("requires_dist", []):
            if req.startswith("cuda-toolkit"):
                spec = req.split(";")[0].split("]")[-1].strip()
                return f"cuda-toolkit[cudart,cupti]{spec}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--requirements", action="append", default=[])
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose pip resolves")
    o = parser.parse_args()
    image = o.requirements or [os.path.join(HERE, "requirements.txt")]
    # install.sh adds them to no environment: pip --no-deps into a folder.
    compiler = [] if o.requirements else [
        os.path.join(HERE, "cuda-compiler-requirements.txt")]
    torch_pin = next(line.strip() for line in open(os.path.join(HERE, "requirements.txt"))
                     if line.startswith("torch=="))
    targets = [
        ("image x86_64 (Debian 12, Python 3.11)", "x86_64", "3.11", image),
        ("image aarch64 (Debian 12, Python 3.11: the GB10)", "aarch64", "3.11", image),
        ("image x86_64 (Debian 13, Python 3.13)", "x86_64", "3.13", image),
        ("image aarch64 (Debian 13, Python 3.13)", "aarch64", "3.13", image),
    ]
    failed = []
    for name, machine, python, reqs in targets:
        if o.only and not any(word in name for word in o.only):
            continue
        began = time.monotonic()
        ok, detail, sources = resolve_with_sources(machine, python, reqs, o.python)
        if ok and compiler:
            ok, alone = resolve(machine, python, compiler, o.python, deps=False)
            detail = detail + alone if ok else alone
        took = time.monotonic() - began
        if not ok:
            failed.append(name)
            print(f"[wheel sets] {name}: does not resolve ({took:.0f} s)\n    {detail}")
            continue
        built = f"; from source: {', '.join(sources)}" if sources else ""
        print(f"[wheel sets] {name}: {len(detail)} wheels resolve{built} ({took:.0f} s)")
        if machine == "aarch64" and python == "3.11" and not o.requirements:
            # make check-arm64's set: the torch pin's wheel and its toolkit's
            # cudart and cupti, as install_arm64.sh fetches them.
            pin = toolkit_pin(detail)
            arm_name = "make check-arm64 (aarch64 torch and its cudart, cupti)"
            if pin is None:
                failed.append(arm_name)
                print(f"[wheel sets] {arm_name}: {torch_pin} names no cuda-toolkit")
                continue
            ok, arm = resolve("aarch64", "3.11", [torch_pin, pin], o.python)
            if not ok:
                failed.append(arm_name)
                print(f"[wheel sets] {arm_name}: does not resolve\n    {arm}")
            else:
                print(f"[wheel sets] {arm_name}: {len(arm)} wheels resolve ({pin})")
    if failed:
        print(f"[wheel sets] {len(failed)} set(s) do not resolve: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
