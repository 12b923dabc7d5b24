"""Exercise checkers: one module per lab (``labkit.fx.checks``, ...).

Why a shared result type: a checker must never crash the learner's notebook.
It says "solved", "not yet solved" (the generated stub still raises
``NotImplementedError("Exercise N.M: ...")``, as in a student copy), "not
solved" with the reason, or "checker error" when the checker itself broke, and
shows itself as one readable line in text and HTML.

Why ``expect`` and ``call_learner`` instead of ``assert`` and plain calls:
``assert`` disappears under ``python -O``, which would report every wrong
answer as solved; and only an exception that really came out of the learner's
code may be blamed on the learner. A checker calls learner code through
:func:`call_learner`, which marks what it raises; anything unmarked is a bug in
the checker and is reported as one.
"""
from __future__ import annotations

import html
import numbers
import os
import random
import re
import secrets
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.autograd import forward_ad as _fwad  # not "forward_ad": that name is the submodule labkit.forward_ad.checks

from labkit.core.context import bound
from labkit.core.guard import StateReport, guarded_state, library_folders, remember_original_code
from labkit.i18n.messages import N_, _
from labkit.progress.help import help_pointer
from labkit.progress.hints import hint_pointer
from labkit.progress.record import record_verdict

remember_original_code()

T = TypeVar("T")


class Status(str, Enum):
    SOLVED = N_("solved")  # the value is recorded as is (the board counts it); the verdict line translates it
    NOT_YET = N_("not yet solved")
    WRONG = N_("not solved")
    CHECKER_ERROR = N_("checker error")
    NOT_JUDGED = N_("not judged")  # a timing check on a machine too busy to tell: neither right nor wrong, run it again


# Each icon only decorates the verdict words beside it: where the machine has no emoji font it shows as an empty box and
# the line still reads. ⚠ without U+FE0F: the text glyph ordinary fonts carry.
ICONS = {Status.SOLVED: "✅", Status.NOT_YET: "⏳", Status.WRONG: "❌", Status.CHECKER_ERROR: "⚠", Status.NOT_JUDGED: "🔁"}


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one exercise checker."""

    exercise: str
    status: Status
    message: str
    mistake: str = ""  # the mistake's stable id, e.g. "1.2/groups" (labkit.progress.mistakes); "" when solved or not yet

    @property
    def solved(self) -> bool:
        return self.status is Status.SOLVED

    def __str__(self) -> str:
        verdict = _("Exercise {exercise}: {status}.").format(exercise=self.exercise, status=_(self.status.value))
        return f"{ICONS[self.status]} {verdict} {self.message}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(str(self))}</p>"


class CheckFailed(Exception):
    """The learner's answer is wrong; the message is the hint shown to them.

    ``mistake`` names the mistake with a stable slug (``"groups"``), which the room's board counts and
    :mod:`labkit.progress.mistakes` describes; never the hint's text, which changes as hints improve.
    ``method``: the learner's method the wrong value came from, when not the one ``run_check`` was told (a
    wrong ``forward`` of a Function whose ``jvp`` is the exercise).
    """

    def __init__(self, hint: str = "", mistake: str = "", method: str | None = None) -> None:
        super().__init__(hint)
        self.mistake = mistake
        self.method = method


class CheckNotJudged(Exception):
    """The check cannot tell right from wrong now (a speed-up timed on a machine busy with other work); the message
    says why and to run it again. Never a pass: it only withholds a verdict that the load, not the answer, decided."""


class LearnerError(Exception):
    """An exception raised inside the learner's code, carried out of the checker by :func:`call_learner`.

    ``case`` says what the checker was trying when it happened (see :func:`learner_case`).
    """

    def __init__(self, original: BaseException, case: str | None = None) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original
        self.case = case


def expect(condition: object, hint: str, mistake: str = "") -> None:
    """Fail the check with ``hint`` unless ``condition`` holds (an ``assert`` that ``-O`` cannot remove).

    ``mistake`` is the slug that names this mistake on the room's board (see :class:`CheckFailed`).
    """
    if not condition:
        raise CheckFailed(hint, mistake)


def expect_instance(value: object, kind: type[T], hint: str, mistake: str = "") -> T:
    """``value`` as a ``kind``, so the checker can use it as one; fail the check with ``hint`` when it is not."""
    if not isinstance(value, kind):
        raise CheckFailed(hint, mistake)
    return value


def int_tuple(value: object) -> tuple[int, ...] | None:
    """A learner's shape or strides as a tuple of ints, or None when it is not one (so comparing cannot raise)."""
    if isinstance(value, (tuple, list, torch.Size)) and all(isinstance(item, numbers.Integral) for item in value):
        return tuple(int(item) for item in value)
    return None


def is_plain_tensor(value: object) -> bool:
    """Whether ``value`` is torch's own tensor (or ``nn.Parameter``), not a subclass: a subclass's
    ``__torch_function__`` can answer ``torch.allclose`` with True whatever its values are."""
    return type(value) in (torch.Tensor, torch.nn.Parameter)


def tensor_subclass_hint(what: str, value: object) -> str:
    """The hint for a learner's tensor of a subclass of torch.Tensor where a plain tensor belongs."""
    return (_("{what} is a {type}, a subclass of torch.Tensor, whose own __torch_function__ can change "
              "what torch's comparisons say; return plain torch tensors (torch.Tensor or nn.Parameter).").format(
                what=what, type=type(value).__name__))


# What the checker is trying right now, named in the message when the learner's code raises there.
_case: ContextVar[str | None] = ContextVar("labkit_check_case", default=None)


@contextmanager
def learner_case(case: str) -> Iterator[None]:
    """Name the input the next learner calls get, e.g. ``"a Linear without bias"``.

    A learner who sees only "TypeError ... NoneType" cannot tell which of the
    checker's inputs broke their code; the message then starts with
    "On a Linear without bias, your code raised ...".
    """
    with bound(_case, case):
        yield


# The seed of the cases a checker draws; None (always, outside the tests): a fresh one on every attempt.
_draw_seed: ContextVar[int | None] = ContextVar("labkit_check_draw_seed", default=None)


def case_draws() -> random.Random:
    """The generator a checker draws one attempt's cases from (sizes, channels, shapes, input batches).

    Fresh on every attempt, so an answer must compute, not recall what the checker asked last time. Its own
    ``random.Random``: the learner's random state is left as it was."""
    seed = _draw_seed.get()
    return random.Random(secrets.randbits(64) if seed is None else seed)


@contextmanager
def fixed_draws(seed: int) -> Iterator[None]:
    """Checkers in this block draw the same cases every time: for the catalogues' tests and the instructors' guide,
    which quote what a checker says to a known wrong answer."""
    with bound(_draw_seed, seed):
        yield


# Notes that run_check appends to its message, e.g. that a dual level was closed.
_notes: ContextVar[list[str] | None] = ContextVar("labkit_check_notes", default=None)

DUAL_LEVEL_NOTE = N_(
    "Note: your code left a forward-AD dual level open (entered without exiting); the checker closed it "
    "with torch.autograd.forward_ad.exit_dual_level(). Write `with fwAD.dual_level():` so it always closes."
)


def _close_dual_levels(above: int) -> None:
    """Exit forward-AD levels that were entered above level ``above`` and left open, and note it.

    torch has no public query for the current level, so this reads
    ``_fwad._current_level`` and closes with the public ``exit_dual_level``.
    """
    if _fwad._current_level <= above:
        return
    while _fwad._current_level > above:
        _fwad.exit_dual_level()
    notes = _notes.get()
    if notes is not None and _(DUAL_LEVEL_NOTE) not in notes:
        notes.append(_(DUAL_LEVEL_NOTE))


def call_learner(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the learner's ``fn``; whatever it raises comes out as :class:`LearnerError`.

    A forward-AD dual level the call leaves open is closed here, so it cannot
    break the checker's next step or the learner's later cells.
    """
    level = _fwad._current_level
    try:
        return fn(*args, **kwargs)
    except LearnerError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every learner failure is reported, never raised
        raise LearnerError(exc, _case.get()) from exc
    finally:
        _close_dual_levels(level)


@contextmanager
def watching_calls(is_watched: Callable[[types.CodeType], bool]) -> Iterator[list[str]]:
    """Note the first call, inside the block, of a Python function whose code ``is_watched`` (torch's own answer to an
    exercise: its FLOP counter, its stride helpers, its fold), by its name: a profile function sees the call whatever
    name the learner imported it under. The profile function found is put back after."""
    called: list[str] = []
    previous = sys.getprofile()

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and not called and is_watched(frame.f_code):
            called.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))  # Python 3.10: co_name

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(previous)


def in_module(module: types.ModuleType) -> Callable[[types.CodeType], bool]:
    """``is_watched`` for :func:`watching_calls`: code of ``module`` (a package: of any module in it). Compared with
    the file name the module was imported from, as its code objects carry it (a resolved path could differ)."""
    file = str(module.__file__)
    prefix = os.path.join(os.path.dirname(file), "") if os.path.basename(file) == "__init__.py" else file
    return lambda code: code.co_filename.startswith(prefix)


def _is_stub(exc: BaseException, exercise: str) -> bool:
    """True for the ``NotImplementedError("Exercise N.M: ...")`` that student_copy generates for this exercise."""
    return isinstance(exc, NotImplementedError) and re.match(rf"Exercise {re.escape(exercise)}(?!\d)", str(exc)) is not None


def is_learners_file(filename: str) -> bool:
    """Whether code from ``filename`` is the learner's: outside torch, labkit, the standard library and the installed
    packages (:func:`~labkit.core.guard.library_folders`), and not code Python generates (``<string>``)."""
    return not filename.startswith("<") and not str(Path(filename).resolve()).startswith(library_folders())


def _learner_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame outside torch, labkit, the standard library and the installed packages (an error raised
    inside transformers is not the learner's line): the learner's line, if any.

    Code Python generates (a dataclass's ``__setattr__``, file ``<string>``) is nobody's line: skipped.
    """
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if is_learners_file(frame.filename):
            return frame
    return None


def learner_code_line(owner: object, method: str | None = None) -> str:
    """Where the learner wrote ``owner`` (a function) or ``owner.method`` (a class's method), as a sentence
    for a hint about a wrong value: ``"Your run_node starts at line 14 of its cell."``; empty when the code
    is not theirs (torch's own ``run_node``, a lambda of the checker's).

    A wrong value has no traceback, so the best pointer is the start of the code that computed it. In a
    notebook the code lives in a cell (ipykernel names its file ``ipykernel_<pid>/<hash>.py``), whose
    line numbers JupyterLab shows with Shift-L.
    """
    function = getattr(owner, method, None) if method else owner
    code = getattr(function, "__code__", None)
    if code is None or str(Path(code.co_filename).resolve()).startswith(library_folders()):
        return ""
    name, line = method or code.co_name, code.co_firstlineno
    if "ipykernel_" in code.co_filename:
        return _("Your {name} starts at line {line} of its cell.").format(name=name, line=line)
    return _("Your {name} starts at line {line} of {file}.").format(name=name, line=line, file=Path(code.co_filename).name)


@contextmanager
def _collecting_notes() -> Iterator[list[str]]:
    notes: list[str] = []
    with bound(_notes, notes):
        yield notes


def run_check(exercise: str, check: Callable[[], str], learner: object = None, method: str | None = None) -> CheckResult:
    """Run ``check``; turn its outcome into a :class:`CheckResult`. Never raises.

    ``check`` returns a success message, or raises :class:`CheckFailed` (via
    :func:`expect`) with a hint when the answer is wrong. It calls learner
    code through :func:`call_learner`: there, this exercise's generated stub
    means "not yet solved" and any other exception is the learner's, reported
    with their line. An exception from the checker's own code is reported as
    a checker error, never blamed on the learner. ``learner`` (and ``method``,
    for a class) is what the learner wrote: a wrong answer's hint ends with
    where it starts (:func:`learner_code_line`).
    """
    level = _fwad._current_level
    with guarded_state() as state, _collecting_notes() as notes:
        try:
            result = CheckResult(exercise, Status.SOLVED, check())
        except CheckFailed as exc:
            pointer = learner_code_line(learner, exc.method or method)
            hint = " ".join(filter(None, [str(exc) or _("The answer does not match yet."), pointer]))
            result = CheckResult(exercise, Status.WRONG, hint, mistake_id(exercise, exc.mistake or OTHER_MISTAKE))
        except CheckNotJudged as exc:
            result = CheckResult(exercise, Status.NOT_JUDGED, str(exc))
        except LearnerError as exc:
            result = _learner_failure(exercise, exc.original, exc.case)
        except Exception as exc:  # noqa: BLE001 - a checker reports, it never crashes the notebook
            if _is_stub(exc, exercise):  # a checker that called the stub directly
                result = _learner_failure(exercise, exc)
            else:
                where = traceback.extract_tb(exc.__traceback__)[-1]
                result = CheckResult(
                    exercise,
                    Status.CHECKER_ERROR,
                    _(
                        "This is a bug in labkit's checker, not in your code; please report it: "
                        "{error}: {message} (line {line} of {file}, in {function})."
                    ).format(error=type(exc).__name__, message=exc, line=where.lineno,
                             file=Path(where.filename).name, function=where.name),
                    mistake_id(exercise, CHECKER_ERROR_MISTAKE),
                )
        finally:
            _close_dual_levels(level)
    result = _with_state(_with_notes(result, notes), state)
    if result.status is Status.WRONG:  # last, so that a stuck learner finds the hints where they read
        result = _with_notes(result, [line for line in (hint_pointer(exercise), help_pointer(exercise)) if line])
    record_check(result)
    return result


OTHER_MISTAKE = "other"  # a CheckFailed that names no mistake
CHECKER_ERROR_MISTAKE = "checker-error"
REPLACED_CODE_MISTAKE = "replaced-torch"
RAISED_MISTAKE = "raised-"  # + the exception's type, lowercase: "raised-typeerror"


def mistake_id(exercise: str, slug: str) -> str:
    """``"1.2/groups"``: the exercise and the slug, as the board counts it (:mod:`labkit.progress.events`)."""
    return f"{exercise}/{re.sub(r'[^a-z0-9-]+', '-', slug.lower()).strip('-')[:47] or OTHER_MISTAKE}"


def record_check(result: CheckResult) -> None:
    """Record the verdict in the learner's progress (:mod:`labkit.progress.record`); never raises, never waits."""
    record_verdict(result.exercise, result.status.value, result.mistake)


def _with_notes(result: CheckResult, notes: list[str]) -> CheckResult:
    return CheckResult(result.exercise, result.status, " ".join([result.message, *notes]), result.mistake) if notes else result


def _with_state(result: CheckResult, state: StateReport) -> CheckResult:
    """The verdict once the guard has put torch back: a check that ran on replaced code cannot say "solved"."""
    if state.replaced_code:
        replaced = ", ".join(state.replaced_code)
        message = _("Your code replaced torch's or labkit's own functions, so this check cannot count: {replaced}. "
                    "Answer with your own functions and modules and leave torch's as they are.").format(replaced=replaced)
        status = Status.WRONG if result.status in (Status.SOLVED, Status.WRONG, Status.NOT_JUDGED) else result.status
        mistake = mistake_id(result.exercise, REPLACED_CODE_MISTAKE) if status is Status.WRONG else result.mistake
        result = CheckResult(result.exercise, status, message if result.solved else f"{result.message} {message}", mistake)
    return _with_notes(result, [state.note] if state.note else [])


def _learner_failure(exercise: str, exc: BaseException, case: str | None = None) -> CheckResult:
    if _is_stub(exc, exercise):
        return CheckResult(
            exercise, Status.NOT_YET,
            _("Replace the stub that raises NotImplementedError with your code, then run this cell again."),
        )
    where = _learner_frame(exc)
    line = _(" (line {line} of {file})").format(line=where.lineno, file=where.name) if where is not None else ""
    no_super, returned_none = _missing_super_hint(exc), _returned_none_hint(exc)
    hint = no_super or returned_none
    subject = _("On {case}, your code").format(case=case) if case else _("Your code")
    text = _first_line(str(exc)) if hint else str(exc)
    slug = "no-super" if no_super else "none" if returned_none else type(exc).__name__
    raised = _("{subject} raised {error}: {message}{line}.").format(
        subject=subject, error=type(exc).__name__, message=text, line=line)
    return CheckResult(exercise, Status.WRONG, f"{raised}{hint}",
                       mistake_id(exercise, RAISED_MISTAKE + slug))


def _first_line(text: str) -> str:
    """Torch's message cut to its first line, so the hint after it is not buried (a wrong call's message lists
    every overload torch knows)."""
    first, _newline, rest = text.strip().partition("\n")
    return f"{first.rstrip(':')} …" if rest.strip() else first


def _returned_none_hint(exc: BaseException) -> str:
    """A hint for a None where a tensor belongs: a method that forgets to return (``run_node``,
    ``__torch_function__``), or arithmetic on an attribute that can be None (a layer's ``bias``)."""
    if not (isinstance(exc, (TypeError, AttributeError)) and "NoneType" in str(exc)):
        return ""
    if "unsupported operand" in str(exc):
        return " " + _("Hint: one operand is None: a layer built with bias=False has `.bias` None, and a function "
                       "that forgets to `return` gives None.")
    return " " + _("Hint: a None arrived where a tensor was expected; does each method you wrote `return` its result?")


def _missing_super_hint(exc: BaseException) -> str:
    """A hint for the classic slip: a subclass whose ``__init__`` never calls ``super().__init__``.

    Then the base class's attributes (an Interpreter's ``graph``, a Module's
    ``_modules``) do not exist, and the AttributeError is raised inside torch,
    far from the learner's line, which is the ``__init__`` that returned early.
    """
    owner = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    if owner is None:
        return ""
    cls = type(owner)
    init_code = getattr(cls.__dict__.get("__init__"), "__code__", None)
    bases = [base for base in cls.__mro__[1:] if base.__dict__.get("__init__") not in (None, object.__init__)]
    if init_code is None or not bases or "super" in init_code.co_names:
        return ""
    return " " + _(
        "Hint: {cls}.__init__ never calls super().__init__(...), so {base} could not set up "
        "its attributes (such as .{attribute}); call it first in your __init__."
    ).format(cls=cls.__name__, base=bases[0].__name__, attribute=getattr(exc, "name", "?"))
