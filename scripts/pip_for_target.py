"""pip as it would run on another Linux machine: its platform tags, its
Python version and its environment markers.

pip's --platform names the wheels it may take, but pip evaluates environment
markers against the interpreter it runs in, whatever --platform says: an
x86_64 host would drop every `platform_machine == "aarch64"` requirement and
keep every `== "x86_64"` one. So pip runs in a child whose marker environment
is the target's. scripts/check_wheel_sets.py resolves with it (metadata
only); scripts/install_arm64.sh downloads the aarch64 wheels with it.

usage: pip_for_target.py MACHINE PYTHON SUBCOMMAND [PIP ARGS...]
  e.g. pip_for_target.py aarch64 3.11 download -d DIR torch==2.15.0
The target's flags (--platform for every tag, --python-version,
--implementation cp, --only-binary=:all:) follow SUBCOMMAND. Exits as pip does.
"""

import json
import subprocess
import sys

# pip's main with the target's marker environment; argv[1] is it as JSON.
CHILD = r"""
import json, sys
env = json.loads(sys.argv[1])
from pip._vendor.packaging import markers
markers.default_environment = lambda: dict(env)
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def manylinux_tags(machine):
    """Every manylinux tag from 2_17 to 2_39, manylinux2014 and plain linux
    (grpcurl's wrapper): pip fills no gaps between the --platform values it is
    given (the nvidia wheels are tagged 2_18, 2_25, 2_27, torch 2_28)."""
    tags = [f"manylinux2014_{machine}", f"linux_{machine}"]
    tags += [f"manylinux_2_{minor}_{machine}" for minor in range(17, 40)]
    return tags


def marker_environment(machine, python):
    return {
        "implementation_name": "cpython",
        "implementation_version": python + ".0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": python + ".0",
        "python_version": python,
        "sys_platform": "linux",
    }


def command(machine, python, subcommand, args, pip_python=sys.executable,
            binary_only=True):
    """The argv that runs `pip SUBCOMMAND` for the target, then `args`."""
    target = ["--python-version", python, "--implementation", "cp"]
    if binary_only:
        target.append("--only-binary=:all:")
    for tag in manylinux_tags(machine):
        target += ["--platform", tag]
    env = json.dumps(marker_environment(machine, python))
    return [pip_python, "-c", CHILD, env, subcommand] + target + list(args)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    machine, python, subcommand = sys.argv[1:4]
    sys.exit(subprocess.run(command(machine, python, subcommand, sys.argv[4:])).returncode)
