"""Every torchvision model, with the input it takes and a size it runs at: profile any of them without a download.

Why: after ResNet18 a learner tries another model, usually one of torchvision's.
Each kind takes another input (a detection model a list of images, a video model a
5-D clip, RAFT two images), and some run at one size only (a ViT at 224 px). This
module knows, per name, the kind, the input and a default size, so that
``python -m labkit profile NAME`` and ``python -m labkit zoo`` can build any model
with ``weights=None`` and feed it a valid random input.

Default sizes, and the smallest side allowed, come from each model's default
weights, whose metadata ships with torchvision (reading it downloads nothing),
except where the weights' minimum is stricter than the network (Swin, see
``_ARCHITECTURE_MIN_SIZE``):

- classification: the crop size the weights were evaluated at (224 for most, 299
  for inception_v3, 240-600 for EfficientNet B1-B7, 256 for Swin V2). One
  exception: vit_h_14's default weights are the 518 px SWAG ones, but with
  ``weights=None`` its builder makes a 224 px ViT, which runs at 224 only.
- segmentation: the size the weights' transform resizes to (520).
- video: the crop size (112, or 224 for MViT, S3D and Swin3D), 16 frames (MViT
  needs exactly 16 with ``weights=None``; no video model needs more).
- detection: 320, labkit's choice. Every torchvision detector resizes its images
  inside the model (800 px on the short side for the R-CNNs, RetinaNet and FCOS,
  300 for SSD, 320 for SSDlite and the 320 variant), so the input size changes
  little but that resize; 320 keeps the random images small.
- optical flow: RAFT's smallest size, 128 (its sides must be multiples of 8).

Left out: ``torchvision.models.quantization``. With ``weights=None`` a
``quantized_*`` name builds the float network plus quantize/dequantize stubs,
the same layers as its float namesake (``quantized_resnet18`` is resnet18); the
int8 version belongs to a quantization lesson, not to this one.
"""
from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

import torch
from torchvision import models

from labkit.core.errors import LabkitValueError

KINDS = ("classification", "detection", "segmentation", "video", "optical_flow")
_KIND_PACKAGES: Mapping[str, ModuleType] = MappingProxyType({
    "classification": models,
    "detection": models.detection,
    "segmentation": models.segmentation,
    "video": models.video,
    "optical_flow": models.optical_flow,
})
QUANTIZED_PREFIX = "quantized_"

DETECTION_SIZE = 320  # see the module docstring: detectors resize their images themselves
VIDEO_FRAMES = 16
FLOW_MULTIPLE = 8  # RAFT works on 1/8-resolution features

#: Models whose builder, given ``weights=None``, makes a network for another size than its default weights'.
_SIZE_WITHOUT_WEIGHTS: Mapping[str, int] = MappingProxyType({"vit_h_14": 224})

#: The smallest side a model really takes, where its weights' ``min_size`` is only the size they were trained at.
#: Swin (V1 and V2) embeds 4x4 patches with a stride-4 conv and pads every stage to its window, so it runs on any
#: side from 4 px; its weights say 224 (V2: 256). ``tests/fx/test_model_zoo.py`` runs each at its minimum and below.
_ARCHITECTURE_MIN_SIZE: Mapping[str, int] = MappingProxyType(
    dict.fromkeys(("swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"), 4)
)

#: Extra builder arguments: GoogLeNet and Inception v3 warn unless ``init_weights`` is given (True is what they
#: do by default), and their auxiliary classifiers run in training only, so leaving them out keeps the eval graph.
_BUILD_KWARGS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "googlenet": {"init_weights": True, "aux_logits": False},
    "inception_v3": {"init_weights": True, "aux_logits": False},
})

LIST_HINT = "Run `python -m labkit profile --list` to see every model."


@dataclass(frozen=True)
class ZooModel:
    """One torchvision model: its kind, its default input side (pixels), the smallest side it allows, its clip length."""

    name: str
    kind: str
    size: int
    min_size: int
    frames: int = 0  # video models only

    def input_text(self, batch: int = 1, size: int | None = None) -> str:
        """The input :func:`example_inputs` makes, in words: ``1x3x224x224``, ``list of 2 images 3x320x320``..."""
        side = self.size if size is None else size
        image = f"3x{side}x{side}"
        if self.kind == "detection":
            return f"list of {batch} image{'s' if batch != 1 else ''} {image}"
        if self.kind == "video":
            return f"{batch}x3x{self.frames}x{side}x{side}"
        if self.kind == "optical_flow":
            return f"two {batch}x{image}"
        return f"{batch}x{image}"


def _side(value: Any) -> int:
    """A side in pixels from a transform keyword or metadata entry: ``224``, ``(224, 224)`` or ``[520]``."""
    return int(value if isinstance(value, int) else value[0])


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _entry(name: str, kind: str) -> ZooModel:
    """Read ``name``'s sizes from its default weights' metadata (see the module docstring for each kind)."""
    weights = models.get_model_weights(name).DEFAULT
    keywords = getattr(weights.transforms, "keywords", {})
    min_size = _ARCHITECTURE_MIN_SIZE.get(name) or _side(weights.meta.get("min_size", 1))
    if name in _SIZE_WITHOUT_WEIGHTS:
        size = min_size = _SIZE_WITHOUT_WEIGHTS[name]
    elif kind == "detection":
        size = DETECTION_SIZE
    elif kind == "optical_flow":
        size = min_size = _round_up(min_size, FLOW_MULTIPLE)
    elif kind == "segmentation":
        size = _side(keywords["resize_size"])
    else:
        size = _side(keywords["crop_size"])
    frames = max(VIDEO_FRAMES, int(weights.meta.get("min_temporal_size", 1))) if kind == "video" else 0
    return ZooModel(name, kind, size, min_size, frames)


@functools.cache
def catalog() -> Mapping[str, ZooModel]:
    """Every model labkit can build, by name, grouped by kind in :data:`KINDS` order and A-Z within a kind."""
    entries = {
        name: _entry(name, kind)
        for kind, package in _KIND_PACKAGES.items()
        for name in sorted(models.list_models(module=package))
    }
    return MappingProxyType(entries)


def _quantized_namesake(name: str) -> str | None:
    """``resnet18`` for ``quantized_resnet18`` (one of torchvision's quantization models), else None."""
    if name.startswith(QUANTIZED_PREFIX) and name in models.list_models(module=models.quantization):
        return name.removeprefix(QUANTIZED_PREFIX)
    return None


def resolve_model_name(name: str) -> str:
    """torchvision's spelling of ``name``: any case, with or without ``-``; a typo is an error listing the nearest names."""
    if not isinstance(name, str):
        raise LabkitValueError(f"A model name is a string such as 'resnet18', got {type(name).__name__}.")
    lowered = name.strip().lower()
    names = catalog()
    for spelling in (lowered, lowered.replace("-", "_"), lowered.replace("-", "")):  # ResNet-18, mobilenet-v3-small
        if spelling in names:
            return spelling
    wanted = lowered.replace("-", "_")
    namesake = _quantized_namesake(wanted)
    if namesake is not None:
        raise LabkitValueError(
            f"{wanted} is one of torchvision's quantization models, which labkit leaves out: with weights=None it "
            f"is the float {namesake} plus quantize/dequantize stubs. Profile {namesake} instead."
        )
    close = difflib.get_close_matches(wanted, list(names), n=5, cutoff=0.6)
    suggestion = f" Did you mean {', '.join(close)}?" if close else ""
    raise LabkitValueError(f"Unknown torchvision model {name!r}.{suggestion} {LIST_HINT}")


def model_info(name: str) -> ZooModel:
    """The catalog entry of ``name`` (resolved as :func:`resolve_model_name` does)."""
    return catalog()[resolve_model_name(name)]


def validate_size(name: str, size: int) -> None:
    """Refuse, before any work, a side the model cannot take: below its weights' minimum, or not a multiple RAFT needs."""
    info = model_info(name)
    hint = f"try --size {info.size} (the model's default)"
    if size < info.min_size:
        raise LabkitValueError(f"{info.name} needs an input of at least {info.min_size}x{info.min_size} "
                               f"(got {size}x{size}); {hint}.")
    if info.kind == "optical_flow" and size % FLOW_MULTIPLE:
        raise LabkitValueError(f"{info.name} needs sides that are multiples of {FLOW_MULTIPLE} (got {size}); {hint}.")


def build_model(name: str) -> torch.nn.Module:
    """``name`` with random weights (``weights=None``, no download), in eval mode.

    Detection and segmentation builders also load an ImageNet backbone by default
    (``weights_backbone``), which would download; it is set to None too.
    """
    name = resolve_model_name(name)
    kwargs: dict[str, Any] = {"weights": None, **_BUILD_KWARGS.get(name, {})}
    if "weights_backbone" in inspect.signature(models.get_model_builder(name)).parameters:
        kwargs["weights_backbone"] = None
    model: torch.nn.Module = models.get_model(name, **kwargs)
    return model.eval()


def example_inputs(
    name: str, batch: int = 1, size: int | None = None, device: str | torch.device = "cpu"
) -> tuple[Any, ...]:
    """Random positional inputs for ``name``'s forward, by kind, at ``size`` (default: the model's).

    classification and segmentation: one ``(B, 3, H, W)`` tensor; detection: one
    list of ``B`` images ``(3, H, W)`` with values in [0, 1] (the model normalises
    them itself); video: one ``(B, 3, T, H, W)`` clip; optical flow: two
    ``(B, 3, H, W)`` images.
    """
    info = model_info(name)
    side = info.size if size is None else size
    if batch < 1 or side < 1:
        raise LabkitValueError(f"batch and size must be at least 1 (got batch={batch}, size={side}).")
    if info.kind == "detection":
        return ([torch.rand(3, side, side, device=device) for _ in range(batch)],)
    if info.kind == "video":
        return (torch.randn(batch, 3, info.frames, side, side, device=device),)
    if info.kind == "optical_flow":
        return tuple(torch.randn(batch, 3, side, side, device=device) for _ in range(2))
    return (torch.randn(batch, 3, side, side, device=device),)


__all__ = [
    "DETECTION_SIZE",
    "KINDS",
    "VIDEO_FRAMES",
    "ZooModel",
    "build_model",
    "catalog",
    "example_inputs",
    "model_info",
    "resolve_model_name",
    "validate_size",
]
