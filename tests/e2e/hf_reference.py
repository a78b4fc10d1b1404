"""An independent reader of a Hugging Face model folder and a plain reference implementation of
GPT2LMHeadModel, LlamaForCausalLM and MixtralForCausalLM, written from Hugging Face's definitions,
not from our C++:
reads config.json and the safetensors files (the 8-byte header length, the JSON header, the raw
little-endian bytes), and prints the mean next-token loss over the validation windows of a text
file as vescale-train's eval takes them (bytes as tokens; the last val_fraction of the file; window
w is bytes [w T, w T + T + 1) of that split).

Mixtral's router is Hugging Face's (softmax over the experts in float32, the top-k weights
renormalised to sum to 1, every chosen expert run: dropless), with two choices Hugging Face leaves
open made explicit: a float64 model routes in float64 (Hugging Face's softmax(dtype=float) would
round a float64 model's router to float32), and among equal probabilities the lower expert index
wins (torch.topk leaves ties unordered).

usage: hf_reference.py TEXT_FILE SEQ_LEN WINDOWS VAL_FRACTION MODEL_DIR DTYPE [MODEL_DIR DTYPE ...]
(one loss a line, one per MODEL_DIR)"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin:base + end]
        if entry["dtype"] == "BF16":  # the high 16 bits of a float32
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=NUMPY[entry["dtype"]])
        out[name] = torch.from_numpy(array.copy()).reshape(entry["shape"])
    return out


def read_model(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(folder, name)))
    return config, weights


def attention(q, k, v):
    """Causal softmax attention of q, k, v [B, H, T, D]."""
    t = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, -1) @ v


def gpt2(config, w, idx):
    c, n_head = config["n_embd"], config["n_head"]
    eps = config["layer_norm_epsilon"]
    t = idx.shape[1]
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:t]
    for i in range(config["n_layer"]):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (c,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: [in, out]
        q, k, v = (z.reshape(1, t, n_head, c // n_head).transpose(1, 2) for z in qkv.split(c, -1))
        y = attention(q, k, v).transpose(1, 2).reshape(1, t, c)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (c,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        assert config["activation_function"] == "gelu"  # exact (erf) GELU
        x = x + F.gelu(h) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (c,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w["transformer.wte.weight"].T  # the tied head


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


def llama_mlp(config, w, p, h):
    gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
    return (F.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T


def mixtral_moe(config, w, p, h):
    """MixtralSparseMoeBlock: each token's top num_experts_per_tok experts, their SwiGLU outputs
    (w2(silu(w1 x) * w3 x)) weighted by the renormalised router probabilities and summed."""
    assert config["hidden_act"] == "silu"
    shape, c = h.shape, h.shape[-1]
    rows = h.reshape(-1, c)
    m = p + "block_sparse_moe."
    logits = rows @ w[m + "gate.weight"].T
    router = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.to(router), -1)
    # A stable sort keeps equal probabilities in index order: ties go to the lower expert.
    order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
    chosen = order[:, :config["num_experts_per_tok"]]
    weights = probs.gather(1, chosen)
    weights = (weights / weights.sum(-1, keepdim=True)).to(rows.dtype)
    out = torch.zeros_like(rows)
    for e in range(config["num_local_experts"]):
        token, slot = (chosen == e).nonzero(as_tuple=True)
        if len(token) == 0:
            continue
        x = rows[token]
        q = f"{m}experts.{e}."
        y = (F.silu(x @ w[q + "w1.weight"].T) * (x @ w[q + "w3.weight"].T)) @ w[q + "w2.weight"].T
        out.index_add_(0, token, y * weights[token, slot, None])
    return out.reshape(shape)


def llama(config, w, idx, mlp=llama_mlp):
    c, n_head, n_kv = config["hidden_size"], config["num_attention_heads"], config[
        "num_key_value_heads"]
    d, eps, t = c // n_head, config["rms_norm_eps"], idx.shape[1]
    inv_freq = 1.0 / (config["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).to(
        w["model.norm.weight"].dtype) / d))
    angles = torch.outer(torch.arange(t, dtype=inv_freq.dtype), inv_freq)
    emb = torch.cat((angles, angles), -1)
    cos, sin = emb.cos(), emb.sin()
    x = w["model.embed_tokens.weight"][idx]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def heads(name, n):
            return (h @ w[p + f"self_attn.{name}.weight"].T).reshape(1, t, n, d).transpose(1, 2)

        q, k, v = heads("q_proj", n_head), heads("k_proj", n_kv), heads("v_proj", n_kv)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = (z.repeat_interleave(n_head // n_kv, 1) for z in (k, v))
        y = attention(q, k, v).transpose(1, 2).reshape(1, t, c)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + mlp(config, w, p, h)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def mixtral(config, w, idx):
    """MixtralForCausalLM: LlamaForCausalLM's attention, norms and head (no sliding window), each
    MLP a sparse mixture of experts."""
    assert config.get("sliding_window") is None
    return llama(config, w, idx, mixtral_moe)


def validation_windows(data, seq_len, windows, val_fraction):
    """The windows eval takes of a text's bytes: the last val_fraction of them, window w bytes
    [w T, w T + T + 1) of that split (each its inputs and, shifted by one, its targets)."""
    n_val = int(len(data) * val_fraction)
    val = torch.tensor(list(data[len(data) - n_val:]), dtype=torch.long)
    return [val[w * seq_len:w * seq_len + seq_len + 1] for w in range(windows)]


def main():
    """hf_reference.py TEXT SEQ_LEN WINDOWS VAL_FRACTION FOLDER DTYPE [FOLDER DTYPE ...]: the mean
    validation loss of each exported FOLDER in DTYPE, one a line (one process for all: torch's
    import is most of its time)."""
    text, seq_len, windows, val_fraction, *pairs = sys.argv[1:]
    seq_len, windows, val_fraction = int(seq_len), int(windows), float(val_fraction)
    with open(text, "rb") as f:
        chunks = validation_windows(f.read(), seq_len, windows, val_fraction)
    for folder, dtype in zip(pairs[0::2], pairs[1::2]):
        dtype = {"float64": torch.float64, "float32": torch.float32}[dtype]
        config, weights = read_model(folder)
        weights = {k: v.to(dtype) for k, v in weights.items()}
        model = {"GPT2LMHeadModel": gpt2, "LlamaForCausalLM": llama,
                 "MixtralForCausalLM": mixtral}[config["architectures"][0]]
        losses = []
        with torch.no_grad():
            for chunk in chunks:
                logits = model(config, weights, chunk[:-1].unsqueeze(0))
                losses.append(F.cross_entropy(logits[0], chunk[1:]).item())
        print(repr(sum(losses) / len(losses)))


if __name__ == "__main__":
    main()
