"""A build's translation units as compile_commands.json records them, and
each one's command made fit to run again beside the build: the build checks
of check_cuda_includes.py and check_clang.py share this."""

import json
import os
import shlex


def load_units(build):
    """[(directory, source, arguments, output)] of every unit of `build`."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    units = []
    for entry in commands:
        args = entry.get("arguments") or shlex.split(entry["command"])
        out = entry.get("output") or (args[args.index("-o") + 1] if "-o" in args else "")
        units.append((entry["directory"], entry["file"], args, out))
    return units


def rerun_command(args, tail, drop_include=""):
    """The unit's compiler command without its launcher (ccache would answer
    from its cache), output or dependency file, and without the include
    folders whose path holds `drop_include`; `tail` is appended (the new
    output, or -fsyntax-only)."""
    args = list(args)
    while args and os.path.basename(args[0]) == "ccache":
        args.pop(0)
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MF", "-MT", "-MQ") and i + 1 < len(args):
            i += 2
            continue
        if a in ("-MD", "-MMD"):
            i += 1
            continue
        if drop_include and a in ("-I", "-isystem") and i + 1 < len(args) \
                and drop_include in args[i + 1]:
            i += 2
            continue
        if drop_include and a.startswith(("-I", "-isystem")) and drop_include in a:
            i += 1
            continue
        out.append(a)
        i += 1
    return out + list(tail)
