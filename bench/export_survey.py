"""`python -m bench.export_survey`: real architectures from `transformers` configs, exported by both
torch exporters, compiled by mlfuse and compared with onnxruntime on the same file.

    python -m bench.export_survey                              # every architecture, both exporters
    python -m bench.export_survey --models llama t5 --exporters dynamo
    python -m bench.export_survey --md bench/results/export_survey.md

Each architecture is built from its config at a tiny size (2 layers, hidden 64, 4 heads,
sequences of 16, 32x32 images: `tiny_config`), with random weights (nothing is downloaded),
in eval mode, with the attention implementation transformers picks by default. Each
(architecture, exporter) pair runs in its own process with a time limit, so a crash or a
hang in torch, onnxruntime or mlfuse is a row of the table, not the end of the survey.

A row's status is one of
  ok          mlfuse's outputs (poisoned first) within --tolerance of onnxruntime's
  mismatch    compiled, outputs differ: the largest relative error
  mlfuse      mlfuse.compile raised: its diagnostic (a gap in the importer's op coverage)
  export      torch's exporter failed (torch's problem, not mlfuse's)
  ort         onnxruntime refused the file (the export is broken)
  build       transformers could not build or run the tiny model
  timeout     the pair ran past --timeout seconds
This is a survey, not a test: tests/test_model_zoo.py holds the zoo's pairs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ARCHITECTURES = (
    # encoders
    "bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "xlm-roberta",
    "mpnet", "longformer", "mobilebert", "squeezebert", "convbert", "roformer", "big_bird",
    "camembert", "ernie", "rembert", "data2vec-text", "megatron-bert", "nystromformer", "canine",
    "layoutlm", "xlm", "esm", "modernbert",
    # decoders
    "gpt2", "gpt_neo", "gptj", "gpt_neox", "opt", "bloom", "llama", "mistral", "mixtral", "qwen2",
    "qwen2_moe", "qwen3", "phi", "phi3", "gemma", "gemma2", "falcon", "codegen", "starcoder2",
    "stablelm", "olmo", "olmo2", "cohere", "persimmon", "biogpt", "xglm", "mpt", "granite",
    "gpt_bigcode", "ctrl", "helium", "glm", "smollm3",
    # encoder-decoders
    "t5", "mt5", "bart", "mbart", "marian", "pegasus", "blenderbot", "m2m_100", "led", "umt5",
    "longt5", "switch_transformers", "prophetnet",
    # vision
    "vit", "deit", "beit", "swin", "swinv2", "convnext", "convnextv2", "resnet", "regnet",
    "mobilenet_v1", "mobilenet_v2", "mobilevit", "mobilevitv2", "efficientnet", "levit",
    "poolformer", "segformer", "dinov2", "yolos", "cvt", "pvt", "bit", "focalnet", "vit_mae",
    "data2vec-vision", "glpn", "dpt", "convnext", "van", "siglip_vision_model", "clip_vision_model",
    # video (3-D convolutions)
    "videomae", "vivit", "timesformer",
    # audio
    "wav2vec2", "hubert", "wavlm", "whisper", "sew", "unispeech", "speech_to_text",
    "audio-spectrogram-transformer", "data2vec-audio",
)
EXPORTERS = ("legacy", "dynamo")
SEQ, IMAGE, HIDDEN, HEADS = 16, 32, 64, 4

# config fields that set a model's size, whichever name an architecture gives them
SMALL = {
    ("hidden_size", "d_model", "n_embd", "embed_dim", "dim"): HIDDEN,
    ("num_hidden_layers", "num_layers", "n_layer", "encoder_layers", "decoder_layers", "num_decoder_layers"): 2,
    ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads", "num_heads"): HEADS,
    ("num_key_value_heads",): 2,
    ("intermediate_size", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "ffn_dim", "n_inner", "hidden_dim"): 2 * HIDDEN,
    ("head_dim", "d_kv", "attention_head_size"): HIDDEN // HEADS,
    ("vocab_size",): 512,
    ("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions"): 64,
    ("image_size",): IMAGE,
    ("num_experts", "num_local_experts"): 4,
}


# what an architecture's config needs beside SMALL to build at that size
ARCHITECTURE_FIXES: dict[str, dict] = {
    "gptj": {"rotary_dim": HIDDEN // HEADS},
    "codegen": {"rotary_dim": HIDDEN // HEADS},
    "swin": {"window_size": 4},
    "gpt_neo": {"attention_types": [[["global", "local"], 1]], "window_size": SEQ // 2},
    "squeezebert": {"embedding_size": HIDDEN},
    "esm": {"pad_token_id": 1, "mask_token_id": 2},
    "videomae": {"num_frames": 4, "tubelet_size": 2, "patch_size": 8},
    "vivit": {"num_frames": 4, "tubelet_size": [2, 8, 8]},
    "timesformer": {"num_frames": 4, "patch_size": 8},
}


def tiny_config(model_type: str):
    """The architecture's default config with the size fields of SMALL that it has."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    known = set(default.to_dict()) | set(getattr(default, "attribute_map", {}))
    values = default.to_dict()
    kwargs = {name: value for names, value in SMALL.items() for name in names
              if name in known and not isinstance(values.get(name, getattr(default, name, None)), list | tuple)}
    if isinstance(values.get("image_size"), list | tuple):  # (height, width)
        kwargs["image_size"] = [IMAGE, IMAGE]
    if isinstance(default.to_dict().get("hidden_size"), list) or "hidden_sizes" in known:
        kwargs.pop("hidden_size", None)  # convnets: per-stage widths stay the default
        kwargs.pop("num_hidden_layers", None)
    if "embed_dim" in kwargs and "depths" in known:  # Swin-like: embed_dim doubles per stage
        kwargs["embed_dim"] = 32
        kwargs.pop("hidden_size", None)
        kwargs["num_heads"] = [2, 2, 2, 2][: len(default.depths)]
        kwargs["depths"] = [1] * len(default.depths)
        for derived in ("num_attention_heads", "num_layers", "num_hidden_layers"):  # aliases of the lists
            kwargs.pop(derived, None)
    if "num_heads" in kwargs and isinstance(getattr(default, "num_heads", None), list):
        kwargs["num_heads"] = [2] * len(default.num_heads)
    if model_type == "efficientnet":
        kwargs.pop("hidden_dim", None)  # the head's width, tied to the last stage's
    if model_type == "whisper":
        kwargs["max_source_positions"] = SEQ
    kwargs.update(ARCHITECTURE_FIXES.get(model_type, {}))
    config = AutoConfig.for_model(model_type, **kwargs)
    vocab = getattr(config, "vocab_size", None)
    for i, name in enumerate(("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                              "mask_token_id", "sep_token_id", "cls_token_id")):
        token = getattr(config, name, None)
        if vocab and isinstance(token, int) and token >= vocab:  # the default vocabulary's ids
            setattr(config, name, i)
    return config


def example_inputs(model, config) -> dict:
    import torch

    torch.manual_seed(0)
    params = inspect.signature(model.forward).parameters
    name = model.main_input_name
    vocab = min(getattr(config, "vocab_size", 512), 512)
    if name == "input_ids":
        inputs = {"input_ids": torch.randint(0, vocab, (1, SEQ))}
    elif name == "pixel_values" and hasattr(config, "num_frames"):  # video: (batch, frames, channels, h, w)
        inputs = {"pixel_values": torch.randn(1, config.num_frames, config.num_channels, IMAGE, IMAGE)}
    elif name == "pixel_values":
        channels = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", IMAGE)
        height, width = (size, size) if isinstance(size, int) else size[:2]
        inputs = {"pixel_values": torch.randn(1, channels, height, width)}
    elif name == "input_values":
        if getattr(config, "model_type", "") == "audio-spectrogram-transformer":
            inputs = {"input_values": torch.randn(1, config.max_length, config.num_mel_bins)}
        else:
            inputs = {"input_values": torch.randn(1, 4000)}
    elif name == "input_features":
        if config.model_type == "whisper":
            inputs = {"input_features": torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)}
        else:
            inputs = {"input_features": torch.randn(1, 64, config.input_feat_per_channel * config.input_channels)}
    else:
        raise ValueError(f"no example input for main input {name!r}")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (1, SEQ // 2))
    return inputs


def build(model_type: str):
    import torch
    from transformers import AutoModel

    torch.manual_seed(1)
    config = tiny_config(model_type)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    model = AutoModel.from_config(config).eval()
    inputs = example_inputs(model, config)
    return first_output(model, tuple(inputs)), inputs


def first_output(model, names: tuple[str, ...]):
    """`model` called with its inputs by `names`, giving its first output as a plain tensor
    (exporters do not take ModelOutput dicts well). The class is defined here: this module
    imports torch only where it builds models."""
    import torch

    class FirstOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args)), return_dict=False)[0]

    return FirstOutput()


def export(module, inputs: dict, exporter: str, path: Path) -> None:
    import torch

    args = tuple(inputs.values())
    with torch.no_grad():
        if exporter == "legacy":
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17,
                              input_names=list(inputs), do_constant_folding=True)
        else:
            program = torch.onnx.export(module, args, dynamo=True, opset_version=20,
                                        input_names=list(inputs), external_data=False)
            program.save(str(path), external_data=False)


def survey_one(model_type: str, exporter: str, folder: Path, tolerance: float) -> dict:
    """One pair, in this process: the row as a dict."""
    import numpy as np
    import onnxruntime as ort

    import mlfuse
    from mlfuse.diagnostics import Diagnostic

    row: dict = {"model": model_type, "exporter": exporter}
    stage = "build"
    try:
        module, inputs = build(model_type)
        stage = "export"
        path = folder / f"{model_type}-{exporter}.onnx"
        export(module, inputs, exporter, path)
        stage = "ort"
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), inputs.values())}
        want = session.run(None, feeds)
        stage = "mlfuse"
        start = time.perf_counter()
        f = mlfuse.compile(str(path))
        row["compile_s"] = round(time.perf_counter() - start, 2)
        outs = [np.full(s.shape, np.nan, s.dtype) for s in f.outputs]
        f(*(feeds[name] for name in feeds), out=outs)
    except Exception as e:  # noqa: BLE001 - a survey records every failure as a row
        lines = [line for line in f"{type(e).__name__}: {e}".splitlines() if line.strip()]
        row.update(status=stage, detail=" ".join(lines)[:300])
        if stage == "mlfuse" and not isinstance(e, Diagnostic):
            row["detail"] = "internal: " + traceback.format_exc(limit=-3).replace("\n", " | ")[-300:]
        return row
    errors = [float(np.abs(g.astype(np.float64) - w).max() / max(np.abs(w).max(), 1e-30)) if g.size else 0.0
              for g, w in zip(outs, want)]
    shapes_match = len(outs) == len(want) and all(g.shape == w.shape for g, w in zip(outs, want))
    error = max(errors) if errors else 0.0
    ok = shapes_match and error < tolerance
    row.update(status="ok" if ok else "mismatch", detail=f"{error:.1e}" if shapes_match else "shapes differ")
    return row


def run_pair(model_type: str, exporter: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "bench.export_survey", "--worker", model_type, exporter,
               "--tolerance", str(args.tolerance), "--folder", str(args.folder)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": model_type, "exporter": exporter, "status": "timeout", "detail": f"> {args.timeout} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = " | ".join(done.stderr.strip().splitlines()[-3:])[-300:]
    return {"model": model_type, "exporter": exporter, "status": "crash", "detail": f"exit {done.returncode}: {tail}"}


def table(rows: list[dict]) -> str:
    lines = ["| architecture | exporter | status | compile s | detail |", "|---|---|---|---:|---|"]
    for r in rows:
        detail = r.get("detail", "").replace("|", "\\|")
        lines.append(f"| {r['model']} | {r['exporter']} | {r['status']} | {r.get('compile_s', '')} | {detail} |")
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{len(rows)} pairs: {summary}\n\n" + "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.export_survey", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(dict.fromkeys(ARCHITECTURES)))
    p.add_argument("--exporters", nargs="+", choices=EXPORTERS, default=list(EXPORTERS))
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest relative error that is ok (default 1e-4)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per pair (default 600)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--folder", type=Path, help="keep the exported files here")
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--md", type=Path, help="write the table here")
    p.add_argument("--worker", nargs=2, metavar=("MODEL", "EXPORTER"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        folder = args.folder or Path(tempfile.mkdtemp(prefix="survey-"))
        print(json.dumps(survey_one(*args.worker, folder, args.tolerance)), flush=True)
        return 0
    args.folder = args.folder or Path(tempfile.mkdtemp(prefix="survey-"))
    args.folder.mkdir(parents=True, exist_ok=True)
    pairs = [(m, e) for m in args.models for e in args.exporters]
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for row in pool.map(lambda pair: run_pair(*pair, args), pairs):
            print(f"{row['model']:32} {row['exporter']:7} {row['status']:9} {row.get('detail', '')[:150]}", flush=True)
            rows.append(row)
            if args.json:  # as the rows come: a survey stopped early keeps them
                args.json.write_text(json.dumps(rows, indent=1) + "\n")
    if args.md:
        args.md.write_text("# Real architectures from transformers configs, both exporters, against onnxruntime\n\n"
                           "`python -m bench.export_survey` (see its docstring).\n\n" + table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
