"""The model zoo: real architectures in plain torch or from `transformers` configs, random weights.

    from bench.models import ZOO, export
    m = ZOO["resnet18"]
    module, inputs = m.build("small")            # torch.nn.Module in eval mode, example inputs
    path = export(m, "small", "legacy", tmp_dir)  # ONNX through torch.onnx.export (dynamo=False)

Nothing is downloaded: weights are random (seeded), `transformers` models come from
configs. "small" sizes keep `make test` fast; "full" are the usual inference shapes
(batch 1) that `mlfuse-bench --models` times. Needs the `models` extra (torch,
transformers, onnxscript for the dynamo exporter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.models import convnets, transformers_zoo


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[str], tuple]  # size -> (module, example inputs as a tuple of tensors)
    input_names: tuple[str, ...] = ("input",)


ZOO: dict[str, ZooModel] = {
    "resnet18": ZooModel("resnet18", convnets.resnet18),
    "mobilenet_v2": ZooModel("mobilenet_v2", convnets.mobilenet_v2),
    "mobilenet_v3_small": ZooModel("mobilenet_v3_small", convnets.mobilenet_v3_small),
    "unet": ZooModel("unet", convnets.unet),
    "textcnn": ZooModel("textcnn", convnets.textcnn, ("tokens",)),
    "mlp_mixer": ZooModel("mlp_mixer", transformers_zoo.mlp_mixer),
    "vit": ZooModel("vit", transformers_zoo.vit),
    "encoder_layer": ZooModel("encoder_layer", transformers_zoo.encoder_layer),
    "bert": ZooModel("bert", transformers_zoo.bert, ("input_ids", "attention_mask")),
    "gpt2": ZooModel("gpt2", transformers_zoo.gpt2, ("input_ids",)),
}

EXPORTERS = ("legacy", "dynamo")


def export(model: ZooModel, size: str, exporter: str, folder: str | Path, opset: int | None = None) -> Path:
    """Export with torch's legacy (TorchScript) or dynamo exporter; the .onnx path.
    Weights are stored inside the file."""
    import torch

    module, inputs = model.build(size)
    path = Path(folder) / f"{model.name}-{size}-{exporter}.onnx"
    # the fused fast path of nn.TransformerEncoderLayer has no ONNX export: the layer as written
    with torch.no_grad(), _without_mha_fastpath():
        if exporter == "legacy":
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=opset or 17,
                              input_names=list(model.input_names), do_constant_folding=True)
        else:
            program = torch.onnx.export(module, inputs, dynamo=True, opset_version=opset or 20,
                                        input_names=list(model.input_names), external_data=False)
            program.save(str(path), external_data=False)
    return path


class _without_mha_fastpath:
    def __enter__(self):
        import torch

        self.was = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)

    def __exit__(self, *exc):
        import torch

        torch.backends.mha.set_fastpath_enabled(self.was)
