"""Server reflection on the real daemon: grpc.reflection.v1 (ours: proto/grpc/
reflection/v1, compiled here with grpc_tools) and v1alpha (gRPC's plugin,
asked through grpcio-reflection's own client) list the same services and
describe mesa.anyjev.v1.Decisions, both open without the bearer token;
absurd or broken requests get an ErrorResponse and the stream goes on."""
import importlib.util
import tempfile
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2 as v1alpha
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase)

from conftest import PROTO_DIR, dpb

TOKEN = "reflection-test-token"
V1_METHOD = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
SERVICES = ["mesa.anyjev.v1.Inference", "mesa.anyjev.v1.Decisions", "mesa.anyjev.v1.Bundles",
            "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
            "grpc.reflection.v1.ServerReflection"]


@pytest.fixture(scope="module")
def v1():
    """Our v1 proto as a Python module, loaded by path (its package,
    grpc.reflection.v1, would collide with the grpc package as an import)."""
    from grpc_tools import protoc
    import grpc_tools
    out = tempfile.mkdtemp(prefix="mesa-anyjev-reflection-")
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    assert protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{include}", f"--python_out={out}",
                        "grpc/reflection/v1/reflection.proto"]) == 0
    spec = importlib.util.spec_from_file_location(
        "mesa_anyjev_reflection_v1_pb2", f"{out}/grpc/reflection/v1/reflection_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def daemon(start_daemon):
    return start_daemon("--set", "auth.token_env=MESA_TEST_TOKEN", env={"MESA_TEST_TOKEN": TOKEN})


def ask(daemon, module, method, requests):
    """One stream: every request sent, every response read (no token)."""
    call = daemon.channel.stream_stream(
        method, request_serializer=lambda r: r if isinstance(r, bytes) else r.SerializeToString(),
        response_deserializer=module.ServerReflectionResponse.FromString)
    return list(call(iter(requests), timeout=10))


def files(response):
    return [descriptor_pb2.FileDescriptorProto.FromString(b)
            for b in response.file_descriptor_response.file_descriptor_proto]


def test_v1_lists_services_and_describes_decisions_without_a_token(daemon, v1):
    R = v1.ServerReflectionRequest
    listed, decisions, inference, missing = ask(daemon, v1, V1_METHOD, [
        R(host="h", list_services=""),
        R(file_containing_symbol="mesa.anyjev.v1.Decisions"),
        R(file_by_filename="mesa/anyjev/v1/inference.proto"),
        R(file_containing_symbol="mesa.anyjev.v1.Nothing")])
    assert [s.name for s in listed.list_services_response.service] == SERVICES
    assert listed.valid_host == "h" and listed.original_request.HasField("list_services")
    # The file is enough to build the service and call it by its schema.
    pool = descriptor_pool.DescriptorPool()
    for f in files(decisions):
        pool.Add(f)
    service = pool.FindServiceByName("mesa.anyjev.v1.Decisions")
    assert "ListQuestions" in [m.name for m in service.methods]
    text = pool.FindMessageTypeByName("mesa.anyjev.v1.State").fields_by_name["text"]
    assert text.type == text.TYPE_STRING
    assert [f.name for f in files(inference)] == ["mesa/anyjev/v1/inference.proto",
                                                  "mesa/anyjev/v1/tensor.proto"]
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert "mesa.anyjev.v1.Nothing" in missing.error_response.error_message
    # The token still guards the services themselves.
    with pytest.raises(grpc.RpcError) as err:
        daemon.decisions.ListQuestions(dpb.ListQuestionsRequest(), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_v1alpha_still_works_and_agrees(daemon, v1):
    R = v1alpha.ServerReflectionRequest
    listed, decisions = ask(daemon, v1alpha,
                            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                            [R(list_services=""),
                             R(file_containing_symbol="mesa.anyjev.v1.Decisions")])
    assert sorted(s.name for s in listed.list_services_response.service) == sorted(SERVICES)
    (ours,) = ask(daemon, v1, V1_METHOD, [
        v1.ServerReflectionRequest(file_containing_symbol="mesa.anyjev.v1.Decisions")])
    assert files(decisions) == files(ours)
    # grpcio-reflection's own client resolves the schema through v1alpha.
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(daemon.channel))
    assert pool.FindServiceByName("mesa.anyjev.v1.Decisions").methods_by_name["Decide"]


def test_v1_refuses_absurd_requests_and_the_stream_goes_on(daemon, v1):
    R = v1.ServerReflectionRequest
    good = R(file_containing_symbol="mesa.anyjev.v1.Decisions").SerializeToString()
    broken = R(file_containing_symbol="mesa.anyjev.v1.Dec").SerializeToString().replace(
        b"Dec", b"D\xffc")
    answers = ask(daemon, v1, V1_METHOD, [
        R(file_containing_symbol="x" * 2000),
        broken,
        b"\x0a\xff\xff\xff\xff\x0f",  # a length past the end
        R(host="h" * 70000, list_services=""),
        R(),
        good])
    codes = [a.error_response.error_code for a in answers[:5]]
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT.value[0]] * 4 + [
        grpc.StatusCode.UNIMPLEMENTED.value[0]]
    messages = [a.error_response.error_message for a in answers[:4]]
    assert messages[0] == "file_containing_symbol: 2000 bytes exceed 1024"
    assert messages[1] == ("file_containing_symbol: invalid UTF-8 at byte offset 16")
    assert "not a valid grpc.reflection.v1.ServerReflectionRequest" in messages[2]
    assert "bytes exceed 65536" in messages[3]
    assert files(answers[5])[0].name == "mesa/anyjev/v1/decisions.proto"
    assert daemon.proc.poll() is None
    assert daemon.health_status() == "SERVING"


def test_reflection_off_serves_neither(start_daemon, v1):
    # gRPC's library adds its v1alpha plugin to every server as it loads;
    # server.reflection: false must take it out too.
    daemon = start_daemon("--set", "server.reflection=false")
    for module, method in [(v1, V1_METHOD), (v1alpha, "/grpc.reflection.v1alpha."
                                                       "ServerReflection/ServerReflectionInfo")]:
        with pytest.raises(grpc.RpcError) as err:
            ask(daemon, module, method, [module.ServerReflectionRequest(list_services="")])
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
