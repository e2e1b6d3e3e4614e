"""Do the translation units that include a CUDA header compile with the
include folders the container image's build stage has, and nothing else?

`make test` runs this on the build it tests (docs/build.md, "What CI checks
of the routes it does not run"). The image's build stage has no CUDA toolkit:
its CUDA headers are the compiler wheels' (scripts/install.sh puts them in
/opt/mesa-anyjev/cuda-13.0 on every host) and torch's own nvidia wheels'. A
build host may carry more (a full toolkit in /usr/local/cuda-*, headers
linked into /usr/local/include), and a file that compiles only because of
them compiles here and fails in the image, 44 minutes into `make image` or
on the GB10. So each such unit is compiled again, with its own command line
(compile_commands.json), in a mount namespace where those host folders are
empty, and the headers it then reads are checked: every CUDA header from
the compiler wheels or torch's nvidia wheels.

Which units: those whose recorded dependencies (ninja's deps log) hold a
header of ATen/cuda or c10/cuda, or one from a folder with
cuda_runtime_api.h in it, and every .cu file.

usage: check_cuda_includes.py BUILD_DIR [--drop-include TEXT]
  --drop-include leaves out the include folders whose path holds TEXT (the
  tests show the check failing on the break it guards that way).
Exits 1 naming each unit that fails, with the compiler's first error.
"""

import argparse
import glob
import os
import shlex
import subprocess
import sys
import tempfile

from compile_units import load_units, rerun_command

# What a build host may have and the image's build stage has not.
HOST_ONLY = ["/usr/local/include", "/usr/local/cuda"] + sorted(
    glob.glob("/usr/local/cuda-*"))

_cuda_dirs = {}


def in_cuda_folder(path):
    """Whether `path` lies in a folder of CUDA headers (one of its parents
    holds cuda_runtime_api.h)."""
    d = os.path.dirname(path)
    seen = []
    while d not in ("", "/") and d not in _cuda_dirs:
        seen.append(d)
        d = os.path.dirname(d)
    found = _cuda_dirs.get(d, False)
    for s in reversed(seen):
        found = found or os.path.exists(os.path.join(s, "cuda_runtime_api.h"))
        _cuda_dirs[s] = found
    return found


def is_cuda_header(path):
    return "/ATen/cuda/" in path or "/c10/cuda/" in path or in_cuda_folder(path)


def ninja_deps(build):
    """{object file: [headers]} from ninja's deps log."""
    out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True,
                         text=True, check=True).stdout
    deps, current = {}, None
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":")[0]
            deps[current] = []
        elif line.strip() and current is not None:
            deps[current].append(line.strip())
    return deps


def cuda_units(build):
    deps = ninja_deps(build)
    return [(directory, source, args) for directory, source, args, out in load_units(build)
            if source.endswith(".cu") or any(is_cuda_header(h) for h in deps.get(out, []))]


def read_depfile(path):
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    return text.split(":", 1)[1].split() if ":" in text else []


def allowed(header, roots):
    return any(os.path.realpath(header).startswith(r) for r in roots)


def compile_all(units, drop, cuda_roots, source_root):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (directory, source, args) in enumerate(units):
            obj = os.path.join(tmp, f"{n}.o")
            depfile = os.path.join(tmp, f"{n}.d")
            command = rerun_command(args, ["-o", obj, "-MD", "-MF", depfile], drop)
            run = subprocess.run(command, cwd=directory,
                                 capture_output=True, text=True)
            name = os.path.relpath(source, source_root)
            if run.returncode != 0:
                errors = [l for l in run.stderr.splitlines() if "error" in l]
                failures.append(f"{name}: {(errors or run.stderr.splitlines() or ['?'])[0]}")
                continue
            stray = [h for h in read_depfile(depfile)
                     if is_cuda_header(h) and not allowed(h, cuda_roots)]
            if stray:
                failures.append(f"{name}: reads {stray[0]}, outside the compiler "
                                "wheels and torch's nvidia wheels")
                continue
            print(f"[cuda includes] {name}: compiles with the image's folders")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--drop-include", default="")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    o = parser.parse_args()
    build = os.path.abspath(o.build)
    cache = dict(l.strip().split("=", 1) for l in open(os.path.join(build, "CMakeCache.txt"))
                 if "=" in l and not l.startswith(("#", "//")))
    cuda_root = cache.get("MESA_ANYJEV_CUDA_ROOT:PATH", "/opt/mesa-anyjev/cuda-13.0")
    site = cache.get("MESA_ANYJEV_SITE_PACKAGES:INTERNAL", "")
    if not o.inside:
        hidden = [p for p in HOST_ONLY if os.path.isdir(p)]
        mounts = " && ".join(f"mount -t tmpfs none {shlex.quote(os.path.realpath(p))}"
                             for p in hidden) or "true"
        inner = shlex.join([sys.executable, os.path.abspath(__file__), build,
                            "--inside", "--drop-include", o.drop_include])
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare.insert(1, "--map-root-user")
        print(f"[cuda includes] hidden as the image lacks them: {', '.join(hidden) or 'none here'}")
        return subprocess.run(unshare + ["sh", "-c", f"{mounts} && exec {inner}"]).returncode
    units = cuda_units(build)
    if not units:
        print("[cuda includes] no unit of this build includes a CUDA header")
        return 0
    # The compiler wheels, torch's nvidia wheels, and torch's own headers
    # (ATen/cuda, c10/cuda).
    roots = [os.path.realpath(cuda_root), os.path.realpath(os.path.join(site, "torch"))]
    roots += [os.path.realpath(d) for d in glob.glob(os.path.join(site, "nvidia", "*"))]
    failures = compile_all(units, o.drop_include, roots,
                           cache.get("CMAKE_HOME_DIRECTORY:INTERNAL", os.getcwd()))
    for f in failures:
        print(f"[cuda includes] FAILED {f}")
    if failures:
        print(f"[cuda includes] {len(failures)} of {len(units)} units do not compile with "
              "the image's include folders (docs/build.md)")
        return 1
    print(f"[cuda includes] all {len(units)} units compile with the image's include folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
