"""Convert whole models to channels_last, and report what each way converts per layer.

Why: there are two official ways to convert a model, and they convert different
things. ``model.to(memory_format=torch.channels_last)`` restrides every 4-D
parameter and buffer, and fails outright as soon as the model holds a 5-D one,
such as a Conv3d weight (pytorch/pytorch#77821).
``torch.nn.utils.convert_conv2d_weight_memory_format`` touches Conv2d and
ConvTranspose2d weights only. :func:`conversion_report` shows both side by side,
and :func:`convert_model_per_layer` is the fix for mixed 2-D/3-D models: 4-D
tensors go to channels_last, 5-D ones to channels_last_3d, the rest stays.
"""
from __future__ import annotations

import copy
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from labkit.core.copies import refuse_unrun_lazy_modules
from labkit.core.errors import LabkitTypeError
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.untouched import left_as_found
from labkit.i18n.messages import N_, _
from labkit.memory_format.layout import describe

_FORMAT_FOR_RANK = {4: torch.channels_last, 5: torch.channels_last_3d}


def _require_module(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(f"Expected a torch.nn.Module, got {type(model).__name__}.")
    return model


def convert_model_per_layer(model: nn.Module) -> nn.Module:
    """Convert ``model`` in place, layer by layer: 4-D to channels_last, 5-D to channels_last_3d.

    Like ``model.to(memory_format=...)`` it converts parameters and buffers and
    returns the model, but it picks the format from each tensor's rank, so a
    model with a Conv3d converts instead of failing.
    """
    model = _require_module(model)
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if param.dim() in _FORMAT_FOR_RANK:
                param.data = param.data.to(memory_format=_FORMAT_FOR_RANK[param.dim()])
        for name, buffer in module.named_buffers(recurse=False):
            if buffer.dim() in _FORMAT_FOR_RANK:
                setattr(module, name, buffer.to(memory_format=_FORMAT_FOR_RANK[buffer.dim()]))
    return model


def _model_to(model: nn.Module) -> nn.Module:
    return model.to(memory_format=torch.channels_last)


def _convert_conv2d(model: nn.Module) -> nn.Module:
    return nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)


#: Column name -> a function converting a model in place (applied to a deep copy).
CONVERSIONS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "model.to(channels_last)": _model_to,
    "convert_conv2d_weight_memory_format": _convert_conv2d,
    "convert_model_per_layer": convert_model_per_layer,
}


@dataclass(repr=False)
class ConversionReport(ShowsAsTable):
    """Per weighted layer: the weight's memory order after each conversion method."""

    headers: list[str]
    rows: list[list[str]]
    errors: dict[str, str] = field(default_factory=dict)

    def table(self) -> Table:
        """The report in the learner's language (its ``headers`` and ``rows`` stay English, for :meth:`column`)."""
        return Table(
            [_(header) for header in self.headers],
            [[_shown_cell(cell) for cell in row] for row in self.rows],
            title=_("Weight memory order after each conversion"),
        )

    def column(self, header: str) -> list[str]:
        """One column's English values, by its English header (the same in every language)."""
        index = self.headers.index(header)
        return [row[index] for row in self.rows]

    def _error_lines(self) -> list[str]:
        return [_("{method} failed: {message}").format(method=method, message=message)
                for method, message in self.errors.items()]

    def to_text(self) -> str:
        return "\n".join([self.table().to_text(), *self._error_lines()])

    def _repr_html_(self) -> str:
        lines = "".join(f"<p>⚠ {html.escape(line)}</p>" for line in self._error_lines())
        return self.table().to_html() + lines


_HEADERS = (N_("layer"), N_("type"), N_("weight shape"), N_("before"))
_UNCHANGED = re.compile(r"(\d+)-D, unchanged")


def _shown_cell(cell: str) -> str:
    """A report cell in the learner's language: the words ``failed`` and ``N-D, unchanged``; names stay."""
    if cell == "failed":
        return _("failed")
    unchanged = _UNCHANGED.fullmatch(cell)
    return _("{rank}-D, unchanged").format(rank=unchanged.group(1)) if unchanged else cell


def _weight_label(weight: torch.Tensor) -> str:
    if weight.dim() not in _FORMAT_FOR_RANK:
        return f"{weight.dim()}-D, unchanged"
    layout = describe(weight)
    return f"{layout.memory_order} ({layout.format})"


def conversion_report(model: nn.Module) -> ConversionReport:
    """Compare :data:`CONVERSIONS` on copies of ``model`` (which is left untouched).

    One row per layer that has a ``weight``; each method's column shows the
    weight's memory order after that method, or ``failed`` if the method raised.
    """
    with left_as_found():
        model = _require_module(model)
        refuse_unrun_lazy_modules(model)  # its weights have no shape, so no memory order to report
        layers = [
            (name, module) for name, module in model.named_modules() if isinstance(getattr(module, "weight", None), torch.Tensor)
        ]
        headers = [*_HEADERS, *CONVERSIONS]
        columns: dict[str, list[str]] = {}
        errors: dict[str, str] = {}
        for method, conversion in CONVERSIONS.items():
            converted = copy.deepcopy(model)
            try:
                conversion(converted)
            except RuntimeError as exc:
                errors[method] = str(exc).splitlines()[0]
                columns[method] = ["failed"] * len(layers)
                continue
            modules = dict(converted.named_modules())
            columns[method] = [_weight_label(modules[name].weight) for name, _ in layers]
        rows = [
            [name, type(module).__name__, str(tuple(module.weight.shape)), _weight_label(module.weight)]
            + [columns[method][i] for method in CONVERSIONS]
            for i, (name, module) in enumerate(layers)
        ]
        return ConversionReport(headers, rows, errors)
