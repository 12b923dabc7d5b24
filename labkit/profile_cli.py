"""``python -m labkit profile MODEL``: profile a torchvision model node by node.

Why a command: an instructor checking a workshop machine, or a learner who
wants numbers for another architecture, should not need a notebook. The model
gets random weights (``weights=None``, no download) and a random input batch;
the numbers come from :func:`labkit.fx_profile.profile_model`.

Example::

    python -m labkit profile resnet18 --batch 8 --runs 5 --mode fast --top 10 --csv out.csv --json out.json
"""
from __future__ import annotations

import argparse
import sys

from labkit.errors import LabkitError, LabkitValueError
from labkit.fx_profile import MODES


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


def _build_model(name: str):
    import torchvision

    available = torchvision.models.list_models(module=torchvision.models)
    if name not in available:
        raise LabkitValueError(f"Unknown torchvision model {name!r}. Try one of: {', '.join(sorted(available)[:12])}, ...")
    return torchvision.models.get_model(name, weights=None).eval()


def run(args: argparse.Namespace) -> int:
    import torch

    from labkit.device import pick_device
    from labkit.fx_profile import profile_model
    from labkit.notebook import seed_everything

    try:
        for option in ("batch", "size"):
            if getattr(args, option) < 1:
                raise LabkitValueError(f"--{option} must be at least 1 (got {getattr(args, option)}).")
        device = pick_device(args.device)
        seed_everything(args.seed)
        model = _build_model(args.model).to(device)
        example = torch.randn(args.batch, 3, args.size, args.size, device=device)
        report = profile_model(model, example, warmup=args.warmup, runs=args.runs, mode=args.mode)
        print(f"{args.model}, batch {args.batch}x3x{args.size}x{args.size}, device {device.type}")
        print(report.top(args.top).to_text())
        print()
        print(report.by_op_type().to_text())
        for path, write in ((args.csv, report.to_csv), (args.json, report.to_json)):
            if path:
                try:
                    print(f"wrote {write(path)}")
                except OSError as exc:
                    print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
                    return 2
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
