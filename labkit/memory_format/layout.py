"""Describe and explain tensor memory layouts: strides, formats, offsets, conversions.

Why: ``torch.channels_last`` does not change a tensor's shape, only its strides,
so a learner cannot *see* it by printing the tensor. This module turns a
tensor's layout into a plain result object (:class:`LayoutDescription`) that
names the formats it satisfies, flags the ambiguous shapes (N1HW, NC11, N111)
where one set of strides fits two formats, and gives the memory order as
letters ("NHWC"). Which formats a tensor satisfies is torch's own answer
(``Tensor.is_contiguous(memory_format=...)``) and the order is
``Tensor.dim_order()``; the offset arithmetic in :func:`memory_offsets` is
written by hand on purpose, because it *is* what strides mean.

The other memory-format tools live in sibling modules of :mod:`labkit.memory_format`.
"""
from __future__ import annotations

import html
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.tables import Row, ShowsAsTable, Table
from labkit.i18n.messages import N_, _

#: The three memory formats a dense tensor can be asked for, by name.
FORMATS: dict[str, torch.memory_format] = {
    "contiguous_format": torch.contiguous_format,
    "channels_last": torch.channels_last,
    "channels_last_3d": torch.channels_last_3d,
}
_ALIASES = {"contiguous": "contiguous_format"}
#: The rank each format needs (``None``: any rank).
_REQUIRED_RANK = {"contiguous_format": None, "channels_last": 4, "channels_last_3d": 5}
#: Dimension order, outermost first, that each format stores.
_DIM_ORDER = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}
_DIM_LETTERS = {3: "NCL", 4: "NCHW", 5: "NCDHW"}

FormatLike = str | torch.memory_format


def format_name(memory_format: FormatLike) -> str:
    """The canonical name of a memory format given as a name or a ``torch.memory_format``.

    >>> format_name("torch.channels_last"), format_name(torch.contiguous_format)
    ('channels_last', 'contiguous_format')
    """
    if isinstance(memory_format, torch.memory_format):
        for name, value in FORMATS.items():
            if value is memory_format:
                return name
        raise LabkitValueError(
            f"{memory_format} is not a layout a tensor can be described by; "
            f"use one of {', '.join(FORMATS)}."
        )
    if not isinstance(memory_format, str):
        raise LabkitTypeError(
            f"Expected a memory format such as torch.channels_last or 'channels_last', "
            f"got {type(memory_format).__name__}."
        )
    name = memory_format.removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in FORMATS:
        raise LabkitValueError(
            f"Unknown memory format {memory_format!r}. Use one of: {', '.join(FORMATS)} "
            f"(or the torch objects torch.contiguous_format, torch.channels_last, torch.channels_last_3d)."
        )
    return name


def resolve_format(memory_format: FormatLike) -> torch.memory_format:
    """The ``torch.memory_format`` for a name such as ``"channels_last"`` (or the object itself)."""
    return FORMATS[format_name(memory_format)]


def dim_letters(rank: int) -> str:
    """Letters naming each dimension: ``"NCHW"`` for rank 4, ``"NCDHW"`` for rank 5."""
    return _DIM_LETTERS.get(rank, string.ascii_uppercase[:rank])


def _require_tensor(tensor: Any) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise LabkitTypeError(f"Expected a torch.Tensor, got {type(tensor).__name__}.")
    return tensor


def check_rank(tensor: torch.Tensor, memory_format: FormatLike) -> str:
    """Raise a clear error when ``memory_format`` does not fit ``tensor``'s rank; return its name."""
    name = format_name(memory_format)
    rank = _REQUIRED_RANK[name]
    if rank is None or tensor.dim() == rank:
        return name
    shape = tuple(tensor.shape)
    if name == "channels_last":
        hint = (
            _("For a 5-D (N, C, D, H, W) tensor use torch.channels_last_3d.")
            if tensor.dim() == 5
            else _("Reshape it to (N, C, H, W) first, or keep torch.contiguous_format.")
        )
        raise LabkitValueError(
            _("channels_last needs a rank-4 (N, C, H, W) tensor, but this one has rank {rank} (shape {shape}).").format(
                rank=tensor.dim(), shape=shape) + " " + hint
        )
    hint = " " + _("For a 4-D (N, C, H, W) tensor use torch.channels_last.") if tensor.dim() == 4 else ""
    raise LabkitValueError(
        _("channels_last_3d needs a rank-5 (N, C, D, H, W) tensor, but this one has rank {rank} (shape {shape}).").format(
            rank=tensor.dim(), shape=shape) + hint
    )


def satisfied_formats(tensor: torch.Tensor) -> tuple[str, ...]:
    """Names of the formats whose stride pattern ``tensor`` fits, as torch itself judges it."""
    return tuple(
        name
        for name, fmt in FORMATS.items()
        if _REQUIRED_RANK[name] in (None, tensor.dim()) and tensor.is_contiguous(memory_format=fmt)
    )


def _offsets(shape: Sequence[int], strides: Sequence[int]) -> torch.Tensor:
    """Every element's offset: the sum over dimensions of index times stride (see :func:`memory_offsets`)."""
    offsets = torch.zeros(tuple(shape), dtype=torch.int64)
    for dim, (size, stride) in enumerate(zip(shape, strides, strict=True)):
        view_shape = [1] * len(shape)
        view_shape[dim] = size
        offsets = offsets + (torch.arange(size, dtype=torch.int64) * stride).reshape(view_shape)
    return offsets


def _memory_order(shape: tuple[int, ...], offsets: torch.Tensor) -> list[tuple[int, ...]]:
    """The logical index of each element, sorted by its offset (ties keep logical order)."""
    flat = offsets.flatten()
    indices = torch.stack(torch.unravel_index(torch.arange(flat.numel()), shape), dim=1)
    order = torch.sort(flat, stable=True).indices
    return [tuple(row) for row in indices[order].tolist()]  # one conversion, not a tensor per element (StrideExplorer)


@dataclass(frozen=True, repr=False)
class LayoutDescription:
    """What a tensor's strides say about where its elements live in memory.

    Everything here follows from shape and strides alone, so the pictures in
    :mod:`labkit.memory_format.widgets` draw from this object, not the tensor.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    formats: tuple[str, ...]
    dim_order: tuple[int, ...]
    dim_names: str

    @property
    def ambiguous(self) -> bool:
        """True when one set of strides fits more than one format (e.g. N1HW, NC11, N111)."""
        return len(self.formats) > 1

    @property
    def format(self) -> str:
        """One name for the layout: the format, ``"a or b"`` when ambiguous, or ``"none"``."""
        return " or ".join(self.formats) if self.formats else "none"

    @property
    def shown_format(self) -> str:
        """:attr:`format` in the learner's language, for tables (``format`` itself stays a name code can compare)."""
        if not self.formats:
            return _("none")
        return _(" or ").join(self.formats)

    @property
    def numel(self) -> int:
        """How many elements the tensor has."""
        return math.prod(self.shape)

    def memory_offsets(self) -> torch.Tensor:
        """Each element's offset in memory, as :func:`memory_offsets` of the tensor described (int64, this shape)."""
        return _offsets(self.shape, self.strides)

    def elements_in_memory_order(self) -> list[tuple[int, ...]]:
        """Each element's logical index, in the order the elements sit in memory."""
        return _memory_order(self.shape, self.memory_offsets())

    @property
    def memory_order(self) -> str:
        """The memory order as letters, outermost dimension first, e.g. ``"NHWC"``."""
        return "".join(self.dim_names[d] for d in self.dim_order)

    @property
    def warning(self) -> str:
        """A sentence explaining the ambiguity, or ``""``."""
        if not self.ambiguous:
            return ""
        return _("Ambiguous: these strides satisfy {formats} at once, because a size-1 dimension can have any stride. "
                 "torch may treat the tensor as either format.").format(formats=" and ".join(self.formats))

    def rows(self) -> list[Row]:
        return [
            [_("shape"), str(self.shape)],
            [_("strides"), str(self.strides)],
            [_("memory order"), _("{order} (outermost to innermost)").format(order=self.memory_order)],
            [_("formats"), self.shown_format],
        ]

    def to_text(self) -> str:
        text = Table([_("property"), _("value")], self.rows()).to_text()
        return f"{text}\n{self.warning}" if self.warning else text

    def to_html(self) -> str:
        body = Table([_("property"), _("value")], self.rows()).to_html()
        if self.warning:
            body += f'\n<p class="labkit-warning">⚠ {html.escape(self.warning)}</p>'
        return body

    def __str__(self) -> str:
        return self.to_text()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.to_html()


def describe(tensor: torch.Tensor) -> LayoutDescription:
    """Describe ``tensor``'s layout: shape, strides, formats satisfied, memory order.

    >>> describe(torch.empty(10, 3, 32, 32).to(memory_format=torch.channels_last)).memory_order
    'NHWC'
    """
    tensor = _require_tensor(tensor)
    return LayoutDescription(
        shape=tuple(tensor.shape),
        strides=tuple(tensor.stride()),
        formats=satisfied_formats(tensor),
        dim_order=tuple(tensor.dim_order()),
        dim_names=dim_letters(tensor.dim()),
    )


def memory_offsets(tensor: torch.Tensor) -> torch.Tensor:
    """For every element, its offset in memory (in elements) from the tensor's first element.

    Written out on purpose: the offset of element ``(n, c, h, w)`` is
    ``n*stride[0] + c*stride[1] + h*stride[2] + w*stride[3]``. That sum is the
    whole meaning of strides. Returns an int64 tensor with ``tensor``'s shape.
    """
    tensor = _require_tensor(tensor)
    return _offsets(tuple(tensor.shape), tensor.stride())


def elements_in_memory_order(tensor: torch.Tensor) -> list[tuple[int, ...]]:
    """The logical index of each element, listed in the order they sit in memory."""
    return _memory_order(tuple(tensor.shape), memory_offsets(tensor))


def permute_to_format(tensor: torch.Tensor, memory_format: FormatLike) -> torch.Tensor:
    """Convert by hand: permute to the format's dimension order, copy densely, permute back."""
    name = check_rank(tensor, memory_format)
    order = _DIM_ORDER.get(name, tuple(range(tensor.dim())))
    inverse = tuple(order.index(d) for d in range(len(order)))
    return tensor.permute(order).contiguous().permute(inverse)


#: The three ways to ask for a layout that :func:`explain_conversion` compares.
CONVERSION_METHODS: dict[str, tuple[str, Callable[[torch.Tensor, torch.memory_format], torch.Tensor]]] = {
    "to": ("x.to(memory_format=fmt)", lambda x, fmt: x.to(memory_format=fmt)),
    "contiguous": ("x.contiguous(memory_format=fmt)", lambda x, fmt: x.contiguous(memory_format=fmt)),
    "permute": (N_("permute, .contiguous(), permute back"), permute_to_format),
}


def convert(tensor: torch.Tensor, memory_format: FormatLike, method: str = "to") -> torch.Tensor:
    """Convert ``tensor`` to ``memory_format`` with one of :data:`CONVERSION_METHODS`."""
    tensor = _require_tensor(tensor)
    name = check_rank(tensor, memory_format)
    if not isinstance(method, str) or method not in CONVERSION_METHODS:
        error = LabkitValueError if isinstance(method, str) else LabkitTypeError
        raise error(f"Unknown conversion method {method!r}; use one of {', '.join(CONVERSION_METHODS)}.")
    return CONVERSION_METHODS[method][1](tensor, FORMATS[name])


@dataclass(frozen=True)
class ConversionRow:
    """One conversion method's result: its code, the layout it produced, whether it copied."""

    method: str
    code: str
    layout: LayoutDescription
    copied: bool


@dataclass(frozen=True, repr=False)
class ConversionComparison(ShowsAsTable):
    """``.to``, ``.contiguous`` and a permute round trip, side by side, for one tensor."""

    source: LayoutDescription
    target: str
    rows: tuple[ConversionRow, ...]

    @property
    def differ(self) -> bool:
        """True when the three methods do not all give the same strides."""
        return len({row.layout.strides for row in self.rows}) > 1

    def row(self, method: str) -> ConversionRow:
        return next(row for row in self.rows if row.method == method)

    def table(self) -> Table:
        return Table(
            [_("method"), _("code"), _("strides"), _("formats"), _("new copy")],
            [[r.method, _(r.code), str(r.layout.strides), r.layout.shown_format, _("yes") if r.copied else _("no")]
             for r in self.rows],
            title=_("{shape} with strides {strides} -> {target}").format(
                shape=self.source.shape, strides=self.source.strides, target=self.target),
        )

    @property
    def verdict(self) -> str:
        if not self.differ:
            return _("All three methods give the same strides.")
        if self.source.ambiguous:
            return _(
                "The methods disagree: with a size-1 dimension the source already satisfies the "
                "target format, so some methods return it unchanged while others re-stride it."
            )
        return _("The methods disagree; compare their strides above.")

    def to_text(self) -> str:
        return f"{self.table().to_text()}\n{self.verdict}"

    def _repr_html_(self) -> str:
        return f"{self.table().to_html()}\n<p>{html.escape(self.verdict)}</p>"


def explain_conversion(tensor: torch.Tensor, memory_format: FormatLike) -> ConversionComparison:
    """Put ``.to(memory_format=)``, ``.contiguous(memory_format=)`` and a permute side by side."""
    tensor = _require_tensor(tensor)
    name = check_rank(tensor, memory_format)
    rows = []
    for method, (code, _convert) in CONVERSION_METHODS.items():
        result = convert(tensor, name, method)
        rows.append(ConversionRow(method, code, describe(result), result.data_ptr() != tensor.data_ptr()))
    return ConversionComparison(describe(tensor), name, tuple(rows))
