"""The C++ safetensors reader against files the Python safetensors package
and transformers' save_pretrained write: every tensor's name, dtype, shape
and byte SHA-256 as the C++ side sees them (tests/tools/safetensors_dump)
must equal what Python wrote. Also: the checkpoint fingerprint equals the
formula documented in server/model/checkpoint.h, and damaged files and
directories are refused with the file and the rule named."""
import hashlib
import json
import os
import shutil
import struct
import subprocess

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

DUMP = os.environ.get("MESA_ANYJEV_SAFETENSORS_DUMP", "build/tests/safetensors_dump")

DTYPE_NAMES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
    torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}


def tensor_bytes(t: torch.Tensor) -> bytes:
    # Flatten first so scalars and empty tensors work; x86 is little endian,
    # as the format.
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def expected_line(name: str, t: torch.Tensor) -> dict:
    return {"name": name, "dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
            "sha256": hashlib.sha256(tensor_bytes(t)).hexdigest()}


def dump(path, *flags):
    proc = subprocess.run([DUMP, *flags, str(path)], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def read_header(path) -> bytes:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n)


def sample_tensors(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "f32.matrix": torch.randn(3, 5, generator=g),
        "bf16.vector": torch.randn(7, generator=g).to(torch.bfloat16),
        "f16.cube": torch.randn(2, 2, 2, generator=g).to(torch.float16),
        "i64.ids": torch.randint(-2**40, 2**40, (4,), generator=g),
        "i64.scalar": torch.tensor(-5, dtype=torch.int64),
        "f32.empty": torch.zeros(0, 3),
        "f64": torch.randn(2, generator=g, dtype=torch.float64),
        "i32": torch.randint(-100, 100, (3,), generator=g, dtype=torch.int32),
        "i16": torch.randint(-100, 100, (3,), generator=g, dtype=torch.int16),
        "i8": torch.randint(-100, 100, (5,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (9,), generator=g, dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
    }


def test_single_file_every_dtype(tmp_path):
    tensors = sample_tensors(0)
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    rc, lines, err = dump(path)
    assert rc == 0, err
    assert sorted(lines, key=lambda x: x["name"]) == sorted(
        (expected_line(k, v) for k, v in tensors.items()), key=lambda x: x["name"])
    # File order: ascending data offsets, as the header (read here, not by
    # the code under test) says.
    header = json.loads(read_header(path))
    header.pop("__metadata__")
    by_offset = sorted(header, key=lambda k: tuple(header[k]["data_offsets"]))
    assert [line["name"] for line in lines] == by_offset


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_three_shards_with_index(tmp_path, dtype):
    # Sharded as transformers writes it: model-0000i-of-00003 + an index.
    g = torch.Generator().manual_seed(1)
    shards = [
        {"model.embed_tokens.weight": torch.randn(16, 8, generator=g).to(dtype)},
        {f"model.layers.0.{n}.weight": torch.randn(8, 8, generator=g).to(dtype)
         for n in ("q_proj", "k_proj")},
        {"model.norm.weight": torch.ones(8, dtype=dtype),
         "lm_head.weight": torch.randn(16, 8, generator=g).to(dtype)},
    ]
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, start=1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(tmp_path / name), metadata={"format": "pt"})
        for key, t in shard.items():
            weight_map[key] = name
            total += t.numel() * t.element_size()
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))

    rc, lines, err = dump(tmp_path, "--fingerprint")
    assert rc == 0, err
    summary = lines.pop()
    every = {k: v for shard in shards for k, v in shard.items()}
    assert lines == [expected_line(k, every[k]) for k in sorted(every)]
    assert summary["total_bytes"] == total


@pytest.mark.parametrize("dtype,tied", [(torch.bfloat16, False), (torch.float32, True)])
def test_transformers_save_pretrained(tmp_path, dtype, tied):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(2)
    config = Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16,
                         tie_word_embeddings=tied, max_position_embeddings=64)
    model = Qwen3ForCausalLM(config).to(dtype)
    model.save_pretrained(str(tmp_path), max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 3

    # What Python reads back from the files it wrote...
    written = {}
    for name in files:
        with safe_open(str(tmp_path / name), framework="pt") as f:
            for key in f.keys():
                written[key] = f.get_tensor(key)
    # ...is the model's own weights (tied lm_head saved once)...
    state = model.state_dict()
    for key, t in written.items():
        assert torch.equal(t, state[key]), key
    # ...and is what the C++ reader sees.
    rc, lines, err = dump(tmp_path)
    assert rc == 0, err
    assert lines == [expected_line(k, written[k]) for k in sorted(written)]


def fingerprint_formula(directory) -> str:
    """checkpoint.h: sha256(u64le(len(config)) config u64le(#shards)
    [u64le(N) header_bytes for shards sorted by file name])."""
    h = hashlib.sha256()
    config = (directory / "config.json").read_bytes()
    h.update(struct.pack("<Q", len(config)) + config)
    index = directory / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    h.update(struct.pack("<Q", len(files)))
    for name in files:
        header = read_header(directory / name)
        h.update(struct.pack("<Q", len(header)) + header)
    return h.hexdigest()


def test_fingerprint(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "qwen3"}')
    shards = {"model-00001-of-00002.safetensors": {"a": torch.arange(6.0)},
              "model-00002-of-00002.safetensors": {"b": torch.arange(4.0)}}
    for name, tensors in shards.items():
        save_file(tensors, str(d / name))
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors",
                        "b": "model-00002-of-00002.safetensors"}}))

    def fingerprint():
        rc, lines, err = dump(d, "--fingerprint")
        assert rc == 0, err
        return lines[-1]["fingerprint"]

    first = fingerprint()
    assert first == fingerprint_formula(d)
    assert fingerprint() == first
    # Only tensor bytes change: same header, same fingerprint (documented).
    save_file({"b": torch.arange(4.0) + 100}, str(d / "model-00002-of-00002.safetensors"))
    assert fingerprint() == first
    # A shape changes the header, hence the fingerprint.
    save_file({"b": torch.arange(4.0).reshape(2, 2)}, str(d / "model-00002-of-00002.safetensors"))
    reshaped = fingerprint()
    assert reshaped != first and reshaped == fingerprint_formula(d)
    # So does config.json.
    (d / "config.json").write_text('{"model_type": "qwen3", "x": 1}')
    assert fingerprint() not in (first, reshaped)


def test_damaged_files_are_refused(tmp_path):
    good = tmp_path / "good.safetensors"
    save_file(sample_tensors(3), str(good))
    blob = good.read_bytes()

    cases = {
        "truncated.safetensors": (blob[:-1], "run past the end of the data section"),
        "extra.safetensors": (blob + b"\0" * 4, "4 trailing bytes"),
        "huge-length.safetensors": (b"\xff" * 8 + blob[8:], "exceeds the cap of 100000000"),
        "short.safetensors": (blob[:5], "too short for the 8-byte header length"),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        rc, lines, err = dump(path)
        assert rc == 1 and lines == [], name
        assert str(path) in err and expected in err, (name, err)


def test_damaged_directories_are_refused(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    save_file({"a": torch.zeros(2)}, str(d / "model-00001-of-00002.safetensors"))
    save_file({"b": torch.zeros(2)}, str(d / "model-00002-of-00002.safetensors"))
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors",
                            "c": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))

    rc, _, err = dump(d)
    assert rc == 1 and "config.json is missing" in err, err
    (d / "config.json").write_text("{}")
    rc, _, err = dump(d)
    assert rc == 1 and "tensor 'c' is listed in model.safetensors.index.json" in err, err

    outside = tmp_path / "outside.safetensors"
    shutil.copy(d / "model-00002-of-00002.safetensors", outside)
    index["weight_map"] = {"a": "model-00001-of-00002.safetensors",
                           "b": "../outside.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    rc, _, err = dump(d)
    assert rc == 1 and "not a plain file name" in err, err
