"""Hugging Face transformers model types from small configs: random weights, no download, inputs as keywords.

Why: the models people bring today are mostly Hugging Face transformers, and
``python -m labkit zoo --hf bert`` / ``profile --hf bert`` should answer "will
labkit profile it?" without a download, a network or a GPU. Each type here is
its base model class (``BertModel``, not a task head) built from its config class
with a **small** config (hidden size 64, 2 layers, 4 heads, FFN 128, vocabulary
1000, images 32 px in 8 px patches, Whisper 80 mel bins x 64 frames): the same
modules and code paths as the full-size model, a fraction of its cost. The
default configs are full-size (Llama's is 7 B parameters, 27 GB in float32), so
labkit does not offer them.

- Weights are random (the model's own initialisation, no checkpoint), seeded
  (:data:`SEED`) on a forked RNG, so a build is the same every time and the
  caller's random numbers are left alone.
- Attention is ``attn_implementation="eager"``, set explicitly: every type
  supports it in every transformers release labkit takes, it is the same
  computation on every device (``"sdpa"`` dispatches to a flash, memory-efficient
  or math kernel by device, dtype and shape, so the profile would change by
  machine), and its matmuls, softmax and mask arithmetic show as their own
  operations, which is what a profile of attention should show.
- Inputs are keyword tensors (:func:`example_inputs`), as a user passes them:
  ``input_ids`` and ``attention_mask``; ``decoder_input_ids`` for the
  encoder-decoders; ``pixel_values`` at the config's image size; Whisper's
  ``input_features`` (``num_mel_bins`` x ``2 * max_source_positions`` frames);
  plus ``use_cache=False`` for every model whose ``forward`` takes it (a cache
  object is output a profile does not need).

transformers is an optional extra (``pip install 'torch-labkit[hf]'``); this module
imports it only to build, so the list (:func:`registry`) works without it.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any

import torch

from labkit.core.errors import LabkitError, LabkitValueError, require_count

MIN_TRANSFORMERS = (4, 45)  # pyproject's torch-labkit[hf] floor: every type below, attn_implementation= on the config
#: For a torch older than transformers 5 takes: 4.45's models all export on torch 2.4.1 (4.51's decoders slice their
#: layer list, 4.53+ build masks with vmap there, neither of which torch 2.4's export follows: they fall back to hooks).
OLD_TORCH_TRANSFORMERS = "'transformers>=4.45,<4.46'"
SEED = 0
SEQUENCE_LENGTH = 16
ATTENTION = "eager"  # see the module docstring
ALL = "all"
LIST_HINT = "Run `python -m labkit zoo --list` to see every type."


class TransformersUnavailableError(LabkitError, ImportError):
    """transformers is missing, too old, or cannot use the installed torch: the message says what to install."""


_VOCAB = 1000
_SMALL_TEXT = MappingProxyType({
    "vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "max_position_embeddings": 64,
})
_SMALL_DECODER = MappingProxyType({**_SMALL_TEXT, "num_key_value_heads": 2})  # grouped-query attention, as in Llama 3
_SMALL_SEQ2SEQ = MappingProxyType({
    "vocab_size": _VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
})
_SMALL_VISION = MappingProxyType({
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
    "image_size": 32, "patch_size": 8, "num_channels": 3,
})
_TEXT_INPUTS = ("input_ids", "attention_mask")
_SEQ2SEQ_INPUTS = (*_TEXT_INPUTS, "decoder_input_ids")


@dataclass(frozen=True)
class HFModelType:
    """One transformers model type: its base model class, its config class and small config, the inputs it gets."""

    name: str  # labkit's spelling: --hf bert
    kind: str  # text, text-to-text, vision, speech, text+vision
    model_class: str  # a name in the transformers package
    config_class: str
    config: Mapping[str, Any]  # the small config (see the module docstring)
    inputs: tuple[str, ...]  # keyword tensors, built by example_inputs

    def config_text(self) -> str:
        """The small config in a few words: ``hidden 64, 2 layers, 4 heads``."""
        values = dict(self.config.get("text_config", self.config))
        hidden = next(values[k] for k in ("hidden_size", "d_model", "dim", "n_embd") if k in values)
        layers = next(values[k] for k in ("num_hidden_layers", "num_layers", "encoder_layers", "n_layers", "n_layer")
                      if k in values)
        heads = next(values[k] for k in ("num_attention_heads", "num_heads", "encoder_attention_heads", "n_heads",
                                         "n_head") if k in values)
        stacks = {"text-to-text": f"{layers} encoder + {layers} decoder", "speech": f"{layers} encoder + {layers} decoder",
                  "text+vision": f"{layers} text + {layers} vision"}.get(self.kind, str(layers))
        return f"hidden {hidden}, {stacks} layers, {heads} heads"

    def shapes(self, batch: int = 1) -> dict[str, tuple[int, ...]]:
        """Each keyword tensor's shape, from the small config alone (no transformers needed)."""
        vision = self.config.get("vision_config", self.config)
        shapes: dict[str, tuple[int, ...]] = {}
        for name in self.inputs:
            if name == "pixel_values":
                shapes[name] = (batch, vision["num_channels"], vision["image_size"], vision["image_size"])
            elif name == "input_features":
                shapes[name] = (batch, self.config["num_mel_bins"], 2 * self.config["max_source_positions"])
            else:
                shapes[name] = (batch, SEQUENCE_LENGTH)
        return shapes

    def input_text(self, batch: int = 1) -> str:
        """``input_ids 1x16, attention_mask 1x16``: the keyword tensors :func:`example_inputs` makes."""
        return ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in self.shapes(batch).items())


def _type(name: str, kind: str, prefix: str, config: Mapping[str, Any], inputs: tuple[str, ...]) -> HFModelType:
    return HFModelType(name, kind, f"{prefix}Model", f"{prefix}Config", MappingProxyType(dict(config)), inputs)


_TYPES = (
    _type("bert", "text", "Bert", _SMALL_TEXT, _TEXT_INPUTS),
    _type("distilbert", "text", "DistilBert", {"vocab_size": _VOCAB, "dim": 64, "n_layers": 2, "n_heads": 4,
                                               "hidden_dim": 128, "max_position_embeddings": 64}, _TEXT_INPUTS),
    # RoBERTa numbers positions from padding_idx + 1, so it needs two positions more than the sequence
    _type("roberta", "text", "Roberta", {**_SMALL_TEXT, "max_position_embeddings": 66}, _TEXT_INPUTS),
    # GPT-2's (and Whisper's) default special tokens (50256...) lie outside a 1000-token vocabulary
    _type("gpt2", "text", "GPT2", {"vocab_size": _VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": 128,
                                   "n_positions": 64, "bos_token_id": 0, "eos_token_id": 0}, _TEXT_INPUTS),
    _type("llama", "text", "Llama", _SMALL_DECODER, _TEXT_INPUTS),
    _type("mistral", "text", "Mistral", _SMALL_DECODER, _TEXT_INPUTS),
    _type("qwen2", "text", "Qwen2", _SMALL_DECODER, _TEXT_INPUTS),
    _type("t5", "text-to-text", "T5", {"vocab_size": _VOCAB, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2,
                                       "num_heads": 4, "decoder_start_token_id": 0}, _SEQ2SEQ_INPUTS),
    _type("bart", "text-to-text", "Bart", {**_SMALL_SEQ2SEQ, "max_position_embeddings": 64}, _SEQ2SEQ_INPUTS),
    _type("vit", "vision", "ViT", _SMALL_VISION, ("pixel_values",)),
    _type("whisper", "speech", "Whisper", {**_SMALL_SEQ2SEQ, "num_mel_bins": 80, "max_source_positions": 32,
                                           "max_target_positions": 64, "pad_token_id": 0, "bos_token_id": 1,
                                           "eos_token_id": 2, "decoder_start_token_id": 1},
          ("input_features", "decoder_input_ids")),
    _type("clip", "text+vision", "CLIP", {
        "text_config": {**_SMALL_TEXT, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1},
        "vision_config": dict(_SMALL_VISION), "projection_dim": 64,
    }, (*_TEXT_INPUTS, "pixel_values")),
)
_REGISTRY: Mapping[str, HFModelType] = MappingProxyType({entry.name: entry for entry in _TYPES})


def registry() -> Mapping[str, HFModelType]:
    """Every type labkit can build, by name, text models first."""
    return _REGISTRY


def _spelling(name: str) -> str:
    """``BERT``, ``gpt-2``, ``Qwen2Model`` and ``distil_bert`` all read as the registry's names."""
    lowered = "".join(ch for ch in name.strip().lower() if ch not in "-_ ")
    return lowered.removesuffix("model") if lowered.removesuffix("model") in _REGISTRY else lowered


def resolve_name(name: str) -> str:
    """The registry's spelling of ``name``; an unknown one is an error listing the close matches."""
    if not isinstance(name, str):
        raise LabkitValueError(f"A Hugging Face model type is a string such as 'bert', got {type(name).__name__}.")
    spelled = _spelling(name)
    if spelled in _REGISTRY:
        return spelled
    close = difflib.get_close_matches(spelled, list(_REGISTRY), n=3, cutoff=0.6)
    suggestion = f" Did you mean {', '.join(close)}?" if close else ""
    raise LabkitValueError(f"Unknown Hugging Face model type {name!r}.{suggestion} {LIST_HINT}")


def resolve_names(specs: Iterable[str]) -> list[str]:
    """``["bert,gpt2", "T5"]`` -> ``["bert", "gpt2", "t5"]``: comma lists and repeats, ``all`` for every type, no repeats."""
    names: list[str] = []
    for spec in specs:
        for part in str(spec).split(","):
            if not part.strip():
                continue
            names += list(_REGISTRY) if part.strip().lower() == ALL else [resolve_name(part)]
    return list(dict.fromkeys(names))


def _version(text: str) -> tuple[int, ...]:
    numbers = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit()) or "0"
        numbers.append(int(digits))
    return tuple(numbers)


def transformers_module() -> ModuleType:
    """The transformers package, or a labkit error saying what to install (it is missing, too old, or torch is)."""
    floor = ".".join(map(str, MIN_TRANSFORMERS))
    try:
        transformers = importlib.import_module("transformers")
    except ImportError as exc:
        raise TransformersUnavailableError(
            f"Hugging Face models need the transformers package, which cannot be imported ({exc}). "
            "Install labkit's extra for it: pip install 'torch-labkit[hf]'"
        ) from None
    found = str(getattr(transformers, "__version__", "0"))
    if _version(found) < MIN_TRANSFORMERS:
        raise TransformersUnavailableError(
            f"transformers {found} is older than {floor}, the oldest labkit builds models with. "
            "Upgrade it: pip install -U 'torch-labkit[hf]'"
        )
    if not transformers.utils.is_torch_available():
        raise TransformersUnavailableError(
            f"transformers {found} does not run on torch {torch.__version__}: it turns PyTorch off below the torch "
            f"release it needs (transformers 5 needs torch >= 2.6). Upgrade torch (pip install -U torch), or install "
            f"a transformers that supports torch {torch.__version__}: {floor}, whose models all export on the oldest "
            f"torch labkit supports (with later 4.x releases some fall back to module hooks there): "
            f"pip install {OLD_TORCH_TRANSFORMERS}"
        )
    return transformers


def _class(transformers: ModuleType, class_name: str) -> Any:
    found = getattr(transformers, class_name, None)
    if found is None:
        raise TransformersUnavailableError(
            f"transformers {transformers.__version__} has no {class_name}. Upgrade it: pip install -U 'torch-labkit[hf]'"
        )
    return found


def build_config(name: str) -> Any:
    """The small config of ``name`` as its transformers config class, attention set to :data:`ATTENTION`."""
    entry = _REGISTRY[resolve_name(name)]
    config_class = _class(transformers_module(), entry.config_class)
    return config_class(**entry.config, attn_implementation=ATTENTION)


def build_model(name: str, seed: int = SEED) -> torch.nn.Module:
    """``name``'s base model from its small config, random weights seeded by ``seed``, in eval mode; downloads nothing."""
    entry = _REGISTRY[resolve_name(name)]
    seed = require_count("seed", seed, 0, "e.g. seed=0")
    config = build_config(entry.name)
    model_class = _class(transformers_module(), entry.model_class)
    with torch.random.fork_rng(devices=[]):  # the caller's random numbers go on as if nothing was built
        torch.manual_seed(seed)
        model: torch.nn.Module = model_class(config)
    return model.eval()


def example_inputs(
    name: str, model: torch.nn.Module | None = None, batch: int = 1, device: str | torch.device = "cpu", seed: int = SEED
) -> dict[str, Any]:
    """Keyword inputs for ``name``'s forward (see the module docstring), random but seeded.

    Token ids lie in the small vocabulary, masks are all ones, images and audio
    features are standard normal. ``use_cache=False`` is added when ``model``'s
    forward takes it (without ``model``, when the type's model class does).
    """
    entry = _REGISTRY[resolve_name(name)]
    batch = require_count("batch", batch, 1, "e.g. batch=1")
    generator = torch.Generator().manual_seed(require_count("seed", seed, 0, "e.g. seed=0"))
    inputs: dict[str, Any] = {}
    for key, shape in entry.shapes(batch).items():
        if key == "attention_mask":
            value = torch.ones(shape, dtype=torch.long)
        elif key.endswith("input_ids"):
            vocabulary = dict(entry.config.get("text_config", entry.config))["vocab_size"]
            value = torch.randint(0, vocabulary, shape, generator=generator)
        else:
            value = torch.randn(shape, generator=generator)
        inputs[key] = value.to(device)
    forward = model.forward if model is not None else _class(transformers_module(), entry.model_class).forward
    if "use_cache" in inspect.signature(forward).parameters:
        inputs["use_cache"] = False
    return inputs


__all__ = [
    "ATTENTION",
    "HFModelType",
    "SEED",
    "SEQUENCE_LENGTH",
    "TransformersUnavailableError",
    "build_config",
    "build_model",
    "example_inputs",
    "registry",
    "resolve_name",
    "resolve_names",
    "transformers_module",
]
