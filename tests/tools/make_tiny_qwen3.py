"""Makes a tiny random Qwen3ForCausalLM checkpoint with transformers, saved as
Hugging Face publishes them (config.json, model.safetensors or shards with
model.safetensors.index.json, tokenizer files). Nothing is downloaded.

Weights get a larger scale than transformers' init and random norm gains, so
logits are far from uniform and top-k comparisons are meaningful."""
import argparse
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

HERE = Path(__file__).resolve().parent
TOKENIZER = HERE.parent / "data" / "qwen3-tokenizer"


def copy_tokenizer(out):
    """The real Qwen3 tokenizer files, which a checkpoint directory needs."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / name, Path(out) / name)


def lift(model, boosts):
    """Puts the tokens of `boosts` (id -> boost) near the top of every
    next-token distribution while their order still depends on the prompt:
    residual dimension 0 carries a constant (every embedding sets it, no
    layer writes to it), and only the lifted tokens' lm_head rows read it,
    each by its boost. A gateway that returns the top 20 then holds these
    labels, so decisions on a random model are not uniform; a larger boost
    for some (Yes and No) gives them most of the mass, as a doctor's answer
    mass check expects of a real model."""
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 30.0
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        model.lm_head.weight[:, 0] = 0.0
        for token_id, boost in boosts.items():
            model.lm_head.weight[token_id, 0] = boost


def make(out, layers=3, hidden=64, heads=4, kv_heads=2, head_dim=24, intermediate=96,
         vocab=151936, tied=False, shards=1, dtype="float32", seed=0, scale=0.3, tokenizer=True,
         reachable=()):
    """`reachable`: token ids lifted to the top of every distribution, a list
    (boost 1.5 each) or a dict id -> boost (lift)."""
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, head_dim=head_dim,
                         tie_word_embeddings=tied, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         max_position_embeddings=4096)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * scale / (p.shape[-1] ** 0.5) * 4)
    if reachable:
        assert not tied, "a lifted lm_head row would move its embedding too"
        lift(model, dict(reachable) if isinstance(reachable, dict)
             else {token_id: 1.5 for token_id in reachable})
    model = model.to(getattr(torch, dtype))
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    sizes = sorted(p.numel() * p.element_size() for p in model.parameters())
    # The embedding dwarfs everything else: it gets a shard of its own and the
    # rest is split evenly over the other shards.
    rest = sum(sizes) - sizes[-1]
    shard_size = rest // max(shards - 1, 1) + sizes[-2]
    model.save_pretrained(out, max_shard_size=shard_size if shards > 1 else "50GB")
    if tokenizer:
        copy_tokenizer(out)
    n = len(list(out.glob("model*.safetensors")))
    assert n == shards, f"asked for {shards} shards, transformers wrote {n}"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=24)
    ap.add_argument("--intermediate", type=int, default=96)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = make(args.out, args.layers, args.hidden, args.heads, args.kv_heads, args.head_dim,
               args.intermediate, args.vocab, args.tied, args.shards, args.dtype, args.seed)
    print(json.dumps({"out": str(out), "files": sorted(p.name for p in out.iterdir())}))


if __name__ == "__main__":
    main()
