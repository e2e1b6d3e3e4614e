"""Build hooks of mesa-anyjev-client (the metadata is in pyproject.toml).

Nothing generated is checked in: build_py runs grpcio-tools' protoc over
proto/mesa/anyjev/v1 (the repository's ../../proto, or the copy an sdist
carries) into mesa_anyjev_client/_proto, with the generated imports
rewritten to live inside the package (no top-level `mesa` module). The
runtime requirements are the grpcio and protobuf versions that code checks
for at import, read off the code this grpcio-tools generates.
"""
import re
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PACKAGE = "mesa_anyjev_client"
GENERATED = "_proto"  # mesa_anyjev_client/_proto/mesa/anyjev/v1/*_pb2*.py


def proto_root() -> Path:
    for root in (HERE / "proto", HERE.parent.parent / "proto"):
        if (root / "mesa" / "anyjev" / "v1").is_dir():
            return root
    raise SystemExit("mesa-anyjev-client: no proto/mesa/anyjev/v1 next to setup.py "
                     "or at ../../proto (build from the repository or its sdist)")


def generate(out: Path) -> None:
    """Python, type stub and gRPC modules of our protos into `out`."""
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root()
    protos = sorted(str(p.relative_to(root)) for p in (root / "mesa/anyjev/v1").glob("*.proto"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out.mkdir(parents=True, exist_ok=True)
    if protoc.main(["protoc", f"-I{root}", f"-I{well_known}", f"--python_out={out}",
                    f"--pyi_out={out}", f"--grpc_python_out={out}", *protos]) != 0:
        raise SystemExit(f"mesa-anyjev-client: protoc failed on {root}")
    inside = f"from {PACKAGE}.{GENERATED}.mesa.anyjev.v1 import"
    for path in (out / "mesa").rglob("*.py*"):
        path.write_text(re.sub(r"^from mesa\.anyjev\.v1 import", inside,
                               path.read_text(), flags=re.M))
    for folder in (out, out / "mesa", out / "mesa/anyjev", out / "mesa/anyjev/v1"):
        (folder / "__init__.py").touch()


def runtime_requirements() -> list:
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        v1 = Path(tmp) / "mesa/anyjev/v1"
        pb2 = (v1 / "decisions_pb2.py").read_text()
        grpc_pb2 = (v1 / "decisions_pb2_grpc.py").read_text()
    protobuf = re.search(r"^# Protobuf Python Version: (\S+)$", pb2, re.M)
    grpcio = re.search(r"^GRPC_GENERATED_VERSION = '([^']+)'$", grpc_pb2, re.M)
    return [f"grpcio>={grpcio.group(1)}" if grpcio else "grpcio",
            f"protobuf>={protobuf.group(1)}" if protobuf else "protobuf"]


class BuildPyWithProtos(build_py):
    def run(self):
        super().run()
        generate(Path(self.build_lib) / PACKAGE / GENERATED)


class SdistWithProtos(sdist):
    """An sdist carries the protos, so a wheel builds from it alone."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        shutil.copytree(proto_root() / "mesa", Path(base_dir) / "proto" / "mesa",
                        dirs_exist_ok=True)


setup(install_requires=runtime_requirements(),
      cmdclass={"build_py": BuildPyWithProtos, "sdist": SdistWithProtos})
