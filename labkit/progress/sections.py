"""The sections a hint points at, named by anchor and shown with the heading of the learner's edition.

Why anchors: a hint that quoted an English heading ("see *Shape and strides*") sent a Chinese learner to a heading
her notebook does not have (形状与步幅). A hint's text writes ``{shape_and_strides}`` instead; :data:`ANCHORS` maps
that name to the heading cell's id in its lab's notebook (the cell id, which is also the ``msgctxt`` of the cell's
entry in ``notebooks/i18n/<lang>/*.po``, stays when the heading is reworded), and the hint shows the heading as that
language's edition has it (:data:`labkit.progress.section_headings.HEADINGS`, written by
``python -m labkit i18n build`` from the notebooks and their catalogues, checked by ``i18n check``).
"""
from __future__ import annotations

import string

from labkit.core.errors import LabkitValueError
from labkit.labs import lab_of_exercise
from labkit.progress.section_headings import HEADINGS

#: notebook stem -> anchor -> the id of the markdown cell whose first line is that section's heading.
ANCHORS: dict[str, dict[str, str]] = {
    "01_fx_profiling": {
        "statistics": "00e41b6a",
        "conv_bn_fusion": "997f412f",
    },
    "02_memory_format": {
        "shape_and_strides": "f5a90453",
        "channels_last_strides": "756bcea8",
        "format_gets_lost": "58d00f8c",
        "torch_function_mode": "8ad87865",
        "convert_weight_versus_to": "4c4ccfbc",
        "channels_last_3d": "7e316251",
    },
    "03_forward_ad": {
        "dual_tensors": "1b5c9230",
        "modules_jvp": "9d49fe4d",
        "custom_function": "a5b080c2",
        "functional_api": "71ee800a",
        "jacfwd_versus_jacrev": "ed3711cf",
    },
    "04_capstone": {
        "read_the_profile": "61f1bedb",
        "channels_last": "1ea254b5",
        "fuse_conv_bn": "5d323a91",
    },
}


def notebook_of(exercise: str) -> str:
    """The stem of the notebook that holds ``exercise`` ("2.1" -> "02_memory_format")."""
    lab = lab_of_exercise(exercise)
    if lab is None:
        raise LabkitValueError(f"No lab holds exercise {exercise!r}.")
    return lab.stem


def anchors_in(text: str) -> list[str]:
    """The anchors ``text`` names, ``{name}`` placeholders, in order."""
    return [name for _text, name, _spec, _conversion in string.Formatter().parse(text) if name]


def heading(stem: str, anchor: str, lang: str) -> str:
    """The heading ``anchor`` names in notebook ``stem``, as the ``lang`` edition has it (English if it has none)."""
    try:
        cell = ANCHORS[stem][anchor]
    except KeyError:
        raise LabkitValueError(f"{stem} has no section anchor {anchor!r}; add it to labkit.progress.sections.ANCHORS "
                               "with its heading cell's id.") from None
    texts = HEADINGS.get(stem, {}).get(cell, {})
    return texts.get(lang) or texts.get("en") or anchor


def render(text: str, stem: str, lang: str) -> str:
    """``text`` with each ``{anchor}`` replaced by that section's heading, in italics, as the ``lang`` edition reads."""
    return text.format_map({name: f"*{heading(stem, name, lang)}*" for name in anchors_in(text)})
