"""``python -m labkit profile MODEL``: profile any torchvision model (or a Hugging Face type, ``--hf bert``) node by node.

Why a command: an instructor trying a workshop machine, or a learner who
wants numbers for another architecture, should not need a notebook. The model
gets random weights (``weights=None``, no download) and a random input of its
kind (a list of images for a detection model, a 5-D clip for a video model, two
images for RAFT) at its default size (:mod:`labkit.fx.model_zoo`); the numbers
come from :func:`labkit.fx.profile.profile_model`, which falls back to timing
the model's layers when torch.fx cannot trace it, and says why. ``--hf TYPE``
profiles a Hugging Face transformers base model instead, built from a small
config with seeded random weights and given keyword inputs
(:mod:`labkit.fx.hf_zoo`; needs ``pip install 'torch-labkit[hf]'``).

Examples::

    python -m labkit profile --list
    python -m labkit profile resnet18 --batch 8 --runs 5 --mode fast --top 10 --csv out.csv --json out.json
    python -m labkit profile resnet18 --trace resnet18.trace.json
    python -m labkit profile fasterrcnn_mobilenet_v3_large_fpn --leaf-module transform
    python -m labkit profile --hf llama --top 15
"""
from __future__ import annotations

import argparse
import ast
import importlib
import sys
import warnings
from typing import Any

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import writable_target
from labkit.fx.profile import MODES
from labkit.i18n.messages import _


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help=_(
        "a torchvision model name, any case, e.g. resnet18, ViT_B_16, ssdlite320_mobilenet_v3_large"))
    parser.add_argument("--hf", metavar="TYPE", help=_(
        "a Hugging Face model type instead, e.g. bert, gpt2, llama, whisper: small config, random weights, no download "
        "(pip install 'torch-labkit[hf]')"))
    parser.add_argument("--list", action="store_true", help=_("list every model by kind, with its default input, and exit"))
    parser.add_argument("--batch", type=int, default=1, help=_("batch size (default {batch})").format(batch=1))
    parser.add_argument("--size", type=int, default=None, help=_("image height and width (default: the model's, see --list)"))
    parser.add_argument("--warmup", type=int, default=2, help=_("untimed warm-up runs (default {runs})").format(runs=2))
    parser.add_argument("--runs", type=int, default=5, help=_("timed runs (default {runs})").format(runs=5))
    parser.add_argument("--mode", choices=MODES, default="fast",
                        help=_("fast (instrumented graph), interpreter, or modules (hooks on layers, no tracing)"))
    parser.add_argument("--concrete-args", action="append", default=[], metavar="NAME=VALUE", help=_(
        "fix a forward argument while tracing, VALUE a Python literal (repeatable), e.g. flip=True"))
    parser.add_argument("--leaf-module", action="append", default=[], metavar="NAME", help=_(
        "keep a submodule as one node: a qualified name (backbone.body) or a class name (MultiScaleRoIAlign) (repeatable)"))
    parser.add_argument("--tracer", metavar="MODULE:CLASS",
                        help=_("trace with your own torch.fx.Tracer subclass, e.g. mytracers:LeafyTracer"))
    parser.add_argument("--top", type=int, default=10, help=_("show the TOP slowest nodes (default {top})").format(top=10))
    parser.add_argument("--device", default=None, help=_("cpu, cuda, mps (default: best available, or ${variable})").format(
        variable="LABKIT_DEVICE"))
    parser.add_argument("--seed", type=int, default=0, help=_("seed for weights and input (default {seed})").format(seed=0))
    parser.add_argument("--csv", metavar="PATH", help=_("write every node's timings as CSV"))
    parser.add_argument("--json", metavar="PATH", help=_("write every node's timings as JSON"))
    parser.add_argument("--trace", metavar="PATH", help=_(
        "write the timed runs as trace-event JSON (modules holding nodes), for Perfetto or speedscope"))


def _validate_arguments(args: argparse.Namespace) -> None:
    """Every count and output path, before any model is built: a typo must not cost a whole profile."""
    if not args.model and not args.hf:
        raise LabkitValueError("Name a model to profile, e.g. `python -m labkit profile resnet18` (or `--hf bert` for a "
                               "Hugging Face type), or list them with --list.")
    if args.hf and "," in args.hf:
        raise LabkitValueError(f"profile takes one Hugging Face type (got --hf {args.hf}); "
                               f"`python -m labkit zoo --hf {args.hf}` tabulates several.")
    if args.model and args.hf:
        raise LabkitValueError(f"Profile one model at a time: {args.model} or --hf {args.hf}.")
    if args.hf and args.size is not None:
        raise LabkitValueError("--size sets a torchvision model's image side; a Hugging Face type's inputs come from its "
                               "small config (see --list). Leave --size out.")
    for option, minimum in (("batch", 1), ("size", 1), ("warmup", 0), ("runs", 1), ("top", 1)):
        value = getattr(args, option)
        if value is not None and value < minimum:
            requirement = "cannot be negative" if minimum == 0 else f"must be at least {minimum}"
            raise LabkitValueError(f"--{option} {requirement} (got {value}).")
    for path in (args.csv, args.json, args.trace):
        if path:
            writable_target(path)


def parse_concrete_args(pairs: list[str]) -> dict[str, Any]:
    """``["flip=True", "mode='a'"]`` -> ``{"flip": True, "mode": "a"}``; each VALUE is read with ``ast.literal_eval``."""
    values: dict[str, Any] = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        if not equals or not name.strip().isidentifier():
            raise LabkitValueError(f"--concrete-args takes NAME=VALUE, e.g. --concrete-args flip=True (got {pair!r}).")
        try:
            values[name.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError) as exc:
            raise LabkitValueError(
                f"--concrete-args {pair!r}: {text.strip()!r} is not a Python literal ({type(exc).__name__}); "
                "write True, 3, 0.5, None, 'text' or (1, 2)."
            ) from None
    return values


def load_tracer(spec: str | None) -> type | None:
    """The ``torch.fx.Tracer`` subclass named ``module.path:ClassName``, or None when no ``--tracer`` was given."""
    if spec is None:
        return None
    import torch.fx

    module_name, colon, class_name = spec.partition(":")
    if not colon or not module_name or not class_name:
        raise LabkitValueError(f"--tracer takes module.path:ClassName, e.g. mytracers:LeafyTracer (got {spec!r}).")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LabkitValueError(f"--tracer {spec}: cannot import {module_name!r} ({exc}). Is it on PYTHONPATH?") from None
    tracer = getattr(module, class_name, None)
    if not (isinstance(tracer, type) and issubclass(tracer, torch.fx.Tracer)):
        found = "nothing by that name" if tracer is None else f"a {type(tracer).__name__}"
        raise LabkitValueError(f"--tracer {spec}: expected a subclass of torch.fx.Tracer, found {found} in {module_name}.")
    return tracer


def catalog_text() -> str:
    """Every model :mod:`labkit.fx.model_zoo` knows, one table per kind, with the input ``--size`` defaults to."""
    from labkit.core.tables import Table
    from labkit.fx.model_zoo import KINDS, catalog

    sections = []
    for kind in KINDS:
        entries = [entry for entry in catalog().values() if entry.kind == kind]
        rows = [[entry.name, entry.size, entry.input_text()] for entry in entries]
        title = f"{kind} ({len(entries)} models)"
        sections.append(Table(["model", "default size", "input (batch 1)"], rows, title=title).to_text())
    sections.append(hf_catalog_text())
    return "\n\n".join(sections)


def hf_catalog_text() -> str:
    """Every Hugging Face type :mod:`labkit.fx.hf_zoo` builds, its small config and keyword inputs (transformers not imported)."""
    from labkit.core.tables import Table
    from labkit.fx.hf_zoo import ATTENTION, registry

    rows = [[entry.name, entry.kind, entry.model_class, entry.config_text(), entry.input_text()]
            for entry in registry().values()]
    title = (f"Hugging Face types, --hf TYPE ({len(rows)}; small configs, random weights, attn_implementation="
             f"{ATTENTION!r}; pip install 'torch-labkit[hf]')")
    return Table(["type", "kind", "model class", "small config", "keyword inputs (batch 1)"], rows, title=title).to_text()


def _print_fallback(report: Any) -> None:
    """Why the model was profiled layer by layer (or captured another way), and which parts of it do trace."""
    if report.mode != "modules":  # a graph tier after symbolic_trace captured it
        capture = getattr(report, "capture", None) or report.mode
        print(f"Captured by {capture}, not symbolic_trace. {_cause_and_site(report.fallback_reason)}")
        return
    print(f"Fell back to mode {report.mode!r} (forward hooks on each layer, no trace). {report.fallback_reason}")
    if report.traceable_children:
        parts = ", ".join(f"{name} ({nodes} nodes)" for name, nodes in report.traceable_children)
        print(f"For node-level detail, profile a part that traces: {parts}.")


def _cause_and_site(reason: str) -> str:
    """The first two lines of a trace failure (what failed, and where), without its advice on making it trace.

    Why: once another capture worked, advice on concrete_args or leaf modules answers a question nobody asked.
    """
    kept = [line.strip() for line in reason.splitlines()[:2] if "Options:" not in line]
    return " ".join(line if line.endswith((".", ":")) else line + "." for line in kept)


def _tracing_options(args: argparse.Namespace) -> dict[str, Any]:
    """``concrete_args``, ``leaf_modules`` and ``tracer`` for profile_model, read (and refused) before any model is built."""
    return {"concrete_args": parse_concrete_args(args.concrete_args) or None, "leaf_modules": args.leaf_module,
            "tracer": load_tracer(args.tracer)}


def _run_profile(args: argparse.Namespace, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any],
                 options: dict[str, Any]) -> Any:
    """profile_model with the command's options; the fallback warning is left to :func:`_print_fallback`."""
    from labkit.fx.profile import TraceFallbackWarning, profile_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceFallbackWarning)  # printed below, with the traceable parts
        return profile_model(model, *inputs, kwargs=kwargs, warmup=args.warmup, runs=args.runs, mode=args.mode, **options)


def _print_report(header: str, report: Any, args: argparse.Namespace) -> int:
    capture = getattr(report, "capture", None)
    implied = "hooks" if report.mode == "modules" else "symbolic_trace"  # named only when the mode does not say it
    print(f"{header}, mode {report.mode}{f', capture {capture}' if capture and capture != implied else ''}")
    if report.fallback_reason:
        _print_fallback(report)
    print(report.top(args.top).to_text())
    print()
    print(report.by_op_type().to_text())
    for path, write in ((args.csv, report.to_csv), (args.json, report.to_json), (args.trace, report.to_trace)):
        if path:
            print(f"wrote {write(path)}")
    if args.trace:
        print("open it at https://ui.perfetto.dev or https://www.speedscope.app (the file stays in your browser)")
    return 0


def _profile_hf(args: argparse.Namespace) -> int:
    """``--hf TYPE``: the type's base model from its small config, seeded by ``--seed``, on its keyword inputs."""
    from labkit.core.device import pick_device
    from labkit.fx import hf_zoo

    entry = hf_zoo.registry()[hf_zoo.resolve_name(args.hf)]
    options = _tracing_options(args)
    device = pick_device(args.device)
    model = hf_zoo.build_model(entry.name, seed=args.seed).to(device)
    kwargs = hf_zoo.example_inputs(entry.name, model, args.batch, device, seed=args.seed)
    report = _run_profile(args, model, (), kwargs, options)
    header = (f"{entry.name} ({entry.model_class}, small config: {entry.config_text()}), inputs "
              f"{entry.input_text(args.batch)}, device {device.type}")
    return _print_report(header, report, args)


def _profile(args: argparse.Namespace) -> int:
    from labkit.core.device import pick_device
    from labkit.core.notebook import seed_everything
    from labkit.fx import model_zoo
    from labkit.fx.profile import ModelRunError

    _validate_arguments(args)
    if args.hf:
        return _profile_hf(args)
    options = _tracing_options(args)
    device = pick_device(args.device)
    info = model_zoo.model_info(args.model)
    size = info.size if args.size is None else args.size
    model_zoo.validate_size(info.name, size)
    seed_everything(args.seed)
    model = model_zoo.build_model(info.name).to(device)
    inputs = model_zoo.example_inputs(info.name, args.batch, size, device)
    try:
        report = _run_profile(args, model, inputs, {}, options)
    except ModelRunError as exc:
        if size == info.size:
            raise
        raise LabkitValueError(f"{exc} Try --size {info.size} (the model's default).") from exc
    return _print_report(f"{info.name} ({info.kind}), input {info.input_text(args.batch, size)}, device {device.type}",
                         report, args)


def run(args: argparse.Namespace) -> int:
    try:
        if args.list:
            print(catalog_text())
            return 0
        return _profile(args)
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
