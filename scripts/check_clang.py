"""Does what `make fuzz` builds still compile with clang?

`make test` runs this (docs/build.md, "What CI checks of the routes it does
not run"): the fuzz targets build with Debian's clang (14 on Debian 12), the
rest of the project with gcc, and the two accept different C++ (clang before
16 refuses a lambda's capture of a structured binding, which gcc takes). A
build of the fuzz targets takes the better part of ten minutes on two cores;
the check configures the same build (`make fuzz`'s options) in its own
folder, generates its sources (the protobuf code) and runs clang with
-fsyntax-only on every translation unit the fuzz targets are made of: the
same front end, the same errors, a third of the time and no linking.

usage: check_clang.py SOURCE_DIR BUILD_DIR [--extra FILE ...]
  --extra checks FILE instead, with the flags of common/'s units (the tests
  show the check failing on a clang-only error that way).
Exits 1 naming each unit clang refuses, with its first error.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

from compile_units import load_units, rerun_command

# `make fuzz`'s configuration (the Makefile's fuzz target).
FUZZ_OPTIONS = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DMESA_ANYJEV_FUZZ=ON",
                "-DMESA_ANYJEV_WITH_TORCH=OFF", "-DMESA_ANYJEV_WERROR=OFF"]


def configure(source, build):
    env = dict(os.environ, CC="clang", CXX="clang++")
    subprocess.run(["cmake", "-S", source, "-B", build, "-G", "Ninja"] + FUZZ_OPTIONS,
                   env=env, check=True, stdout=subprocess.DEVNULL)


def generate(build):
    """The generated sources and headers the units include (the protobuf
    code, build_info.h)."""
    targets = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"],
                             capture_output=True, text=True, check=True).stdout
    generated = [line.split(":")[0] for line in targets.splitlines()
                 if re.search(r"\.(h|hpp|inc|pb\.cc): ", line)]
    if generated:
        subprocess.run(["ninja", "-C", build] + generated, check=True,
                       stdout=subprocess.DEVNULL)


def fuzz_sources(build):
    inputs = subprocess.run(["ninja", "-C", build, "-t", "inputs", "mesa_anyjev_fuzz"],
                            capture_output=True, text=True, check=True).stdout
    return {os.path.normpath(os.path.join(build, p)) for p in inputs.split()
            if p.endswith(".cc")}


def syntax_check(unit, root):
    directory, source, args = unit
    run = subprocess.run(rerun_command(args, ["-fsyntax-only"]), cwd=directory,
                         capture_output=True, text=True)
    if run.returncode == 0:
        return None
    errors = [l for l in run.stderr.splitlines() if "error:" in l]
    return f"{os.path.relpath(source, root)}: {(errors or run.stderr.splitlines() or ['?'])[0]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("build")
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    o = parser.parse_args()
    source, build = os.path.abspath(o.source), os.path.abspath(o.build)
    configure(source, build)
    generate(build)
    wanted = fuzz_sources(build)
    units = [(d, s, a) for d, s, a, _ in load_units(build)
             if os.path.normpath(os.path.join(d, s)) in wanted]
    if o.extra:
        template = next(u for u in units if "/common/" in u[1])
        units = [(template[0], os.path.abspath(extra),
                  [os.path.abspath(extra) if a == template[1] else a for a in template[2]])
                 for extra in o.extra]
    with concurrent.futures.ThreadPoolExecutor(max_workers=o.jobs) as pool:
        failures = [f for f in pool.map(lambda u: syntax_check(u, source), units) if f]
    for f in failures:
        print(f"[clang] FAILED {f}")
    clang = subprocess.run(["clang++", "--version"], capture_output=True,
                           text=True).stdout.splitlines()[0]
    if failures:
        print(f"[clang] {len(failures)} of {len(units)} units of the fuzz targets do not "
              f"compile with {clang}")
        return 1
    print(f"[clang] all {len(units)} units of the fuzz targets compile with {clang}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
