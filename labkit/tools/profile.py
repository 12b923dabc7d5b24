"""``python -m labkit profile MODEL``: profile a torchvision model node by node.

Why a command: an instructor trying a workshop machine, or a learner who
wants numbers for another architecture, should not need a notebook. The model
gets random weights (``weights=None``, no download) and a random input batch;
the numbers come from :func:`labkit.fx.profile.profile_model`.

Example::

    python -m labkit profile resnet18 --batch 8 --runs 5 --mode fast --top 10 --csv out.csv --json out.json
"""
from __future__ import annotations

import argparse
import sys

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import writable_target
from labkit.fx.profile import MODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a torchvision classification model name, e.g. resnet18, mobilenet_v3_small")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    parser.add_argument("--size", type=int, default=224, help="image height and width (default 224)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up runs (default 2)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--mode", choices=MODES, default="fast", help="fast (instrumented graph) or interpreter")
    parser.add_argument("--top", type=int, default=10, help="show the K slowest nodes (default 10)")
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available, or $LABKIT_DEVICE)")
    parser.add_argument("--seed", type=int, default=0, help="seed for weights and input (default 0)")
    parser.add_argument("--csv", metavar="PATH", help="write every node's timings as CSV")
    parser.add_argument("--json", metavar="PATH", help="write every node's timings as JSON")


def _validate_arguments(args: argparse.Namespace) -> None:
    """Every count and output path, before any model is built: a typo must not cost a whole profile."""
    for option, minimum in (("batch", 1), ("size", 1), ("warmup", 0), ("runs", 1), ("top", 1)):
        value = getattr(args, option)
        if value < minimum:
            requirement = "cannot be negative" if minimum == 0 else f"must be at least {minimum}"
            raise LabkitValueError(f"--{option} {requirement} (got {value}).")
    for path in (args.csv, args.json):
        if path:
            writable_target(path)


def _validate_model_name(name: str) -> None:
    import torchvision

    available = torchvision.models.list_models(module=torchvision.models)
    if name not in available:
        raise LabkitValueError(f"Unknown torchvision model {name!r}. Try one of: {', '.join(sorted(available)[:12])}, ...")


def _input_sides(name: str) -> tuple[int, int]:
    """(smallest input side, side its weights were trained at), from torchvision's weight metadata (no download)."""
    import torchvision

    weights = torchvision.models.get_model_weights(name).DEFAULT
    return min(weights.meta["min_size"]), weights.transforms.keywords["crop_size"]


def _validate_size(name: str, size: int) -> None:
    minimum, trained = _input_sides(name)
    if size < minimum:
        raise LabkitValueError(
            f"{name} needs an input of at least {minimum}x{minimum} (got {size}x{size}); "
            f"try --size {trained}, the size its weights were trained at."
        )


def _build_model(name: str):
    import torchvision

    return torchvision.models.get_model(name, weights=None).eval()


def _first_run(model, example, name: str) -> None:
    """One untimed eager run, so a wrong input size is one clear line instead of a traceback from the profile.

    Some models accept only one size (ViT, Swin and MaxViT need 224), which the
    weight metadata's minimum does not tell; the eager run does.
    """
    import torch

    try:
        with torch.no_grad():
            model(example)
    except Exception as exc:  # noqa: BLE001 - any model error on a well-formed batch is reported the same way
        lines = str(exc).strip().splitlines()
        shape = "x".join(str(n) for n in example.shape)
        message = f"{name} cannot run on a {shape} input ({type(exc).__name__}: {lines[0] if lines else ''})."
        trained = _input_sides(name)[1]
        if example.shape[-1] != trained:
            message += f" It needs a different input size; try --size {trained}, the size its weights were trained at."
        raise LabkitValueError(message) from exc


def run(args: argparse.Namespace) -> int:
    import torch

    from labkit.core.device import pick_device
    from labkit.core.notebook import seed_everything
    from labkit.fx.profile import profile_model

    try:
        _validate_arguments(args)
        device = pick_device(args.device)
        _validate_model_name(args.model)
        _validate_size(args.model, args.size)
        seed_everything(args.seed)
        model = _build_model(args.model).to(device)
        example = torch.randn(args.batch, 3, args.size, args.size, device=device)
        _first_run(model, example, args.model)
        report = profile_model(model, example, warmup=args.warmup, runs=args.runs, mode=args.mode)
        print(f"{args.model}, batch {args.batch}x3x{args.size}x{args.size}, device {device.type}")
        print(report.top(args.top).to_text())
        print()
        print(report.by_op_type().to_text())
        for path, write in ((args.csv, report.to_csv), (args.json, report.to_json)):
            if path:
                print(f"wrote {write(path)}")
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
