"""labkit.core.checks.run_check: solved / not yet / not solved / checker error, and what a learner's code leaves behind."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.fx

from labkit.core.checks import (
    CheckFailed,
    Status,
    call_learner,
    expect,
    int_tuple,
    learner_case,
    learner_code_line,
    run_check,
)

LABKIT = Path(__file__).resolve().parents[2] / "labkit"
# The checker framework (core/checks.py) and each lab's checkers.
CHECKER_FILES = sorted(LABKIT.glob("*/checks.py"))


def test_solved():
    result = run_check("1.1", lambda: "well done")
    assert result.solved and str(result) == "✅ Exercise 1.1: solved. well done"


def test_generated_stub_means_not_yet_solved():
    def stub():
        raise NotImplementedError(
            "Exercise 1.1: write stub(). See solutions/01_1_x.py, "
            "or run %load solutions/01_1_x.py in this cell."
        )

    result = run_check("1.1", lambda: call_learner(stub))
    assert result.status is Status.NOT_YET and "not yet solved" in str(result)
    assert run_check("1.1", stub).status is Status.NOT_YET  # a checker that calls the stub directly


def test_other_not_implemented_errors_are_the_learners_error():
    def own_error():
        raise NotImplementedError("TODO: handle 5-D")

    def other_exercise():
        raise NotImplementedError("Exercise 1.2: write ShapeRecorder.run_node")

    for learner in (own_error, other_exercise):
        result = run_check("1.1", lambda learner=learner: call_learner(learner))
        assert result.status is Status.WRONG, result
        assert "NotImplementedError" in result.message and f"of {learner.__name__})" in result.message
    assert run_check("1.10", lambda: call_learner(_raise_stub_1_1)).status is Status.WRONG
    assert run_check("1.1", lambda: call_learner(_raise_stub_1_1)).status is Status.NOT_YET


def _raise_stub_1_1():
    raise NotImplementedError("Exercise 1.1")


def test_wrong_answer_shows_the_hint():
    def wrong():
        expect(2 == 3, "expected 3 rows, got 2")
        return "never"

    result = run_check("2.1", wrong)
    assert result.status is Status.WRONG and "expected 3 rows, got 2" in str(result)
    with pytest.raises(CheckFailed, match="hint"):
        expect(False, "hint")
    expect(True, "never shown")


def test_crash_in_learner_code_is_reported_not_raised():
    def crashing():
        return {}["missing"]

    result = run_check("3.1", lambda: call_learner(crashing))
    assert result.status is Status.WRONG
    assert "KeyError" in result.message and "crashing" in result.message
    assert "<p>" in result._repr_html_()


def test_crash_inside_torch_points_at_the_learners_line():
    def learner_code():
        x = torch.ones(2, 3)
        return torch.softmax(x, dim=5)  # the mistake is here, not in torch

    result = run_check("1.2", lambda: call_learner(learner_code))
    assert result.status is Status.WRONG
    assert "of learner_code)" in result.message and "IndexError" in result.message


def test_a_bug_in_the_checker_is_never_blamed_on_the_learner():
    def learner(x):
        return x + 1

    def buggy_check():
        answer = call_learner(learner, 1)
        return len(answer)  # TypeError in the checker's own code, after the learner's code ran fine

    result = run_check("1.3", buggy_check)
    assert result.status is Status.CHECKER_ERROR and not result.solved
    assert "bug in labkit's checker" in result.message and "please report" in result.message
    assert "TypeError" in result.message and "Your code" not in result.message
    assert str(result).startswith("⚠ Exercise 1.3: checker error.")
    # An AssertionError is no protocol any more: it would vanish under -O.
    assert run_check("1.3", lambda: (_ for _ in ()).throw(AssertionError("x"))).status is Status.CHECKER_ERROR


def test_learner_system_exit_is_reported_not_raised():
    def exits():
        raise SystemExit(3)

    assert run_check("1.1", lambda: call_learner(exits)).status is Status.WRONG


def test_int_tuple_never_raises():
    assert int_tuple(torch.Size([2, 3])) == (2, 3) and int_tuple([1, 2]) == (1, 2)
    for bad in (None, 5, "12", (1.0, 2), (torch.tensor([1, 2]),), {1: 2}):
        assert int_tuple(bad) is None


# --- forward-AD dual levels left open by the learner -------------------------------------


@pytest.mark.parametrize("opener", ["context_manager", "enter_dual_level"])
def test_an_open_dual_level_is_closed_and_reported(opener):
    def leaky(x):
        if opener == "context_manager":
            fwAD.dual_level().__enter__()
        else:
            fwAD.enter_dual_level()
        return fwAD.unpack_dual(fwAD.make_dual(x, torch.ones_like(x))).tangent

    result = run_check("3.1", lambda: f"tangent {call_learner(leaky, torch.zeros(2)).tolist()}")
    assert fwAD._current_level == -1, "the checker left the learner's dual level open"
    assert result.solved and "dual level open" in result.message and "exit_dual_level" in result.message
    with fwAD.dual_level():  # later cells can enter a level again
        assert fwAD._current_level == 0


def test_an_open_dual_level_is_closed_when_the_learner_code_fails_too():
    def leaky_and_wrong():
        fwAD.enter_dual_level()
        raise ValueError("oops")

    result = run_check("3.1", lambda: call_learner(leaky_and_wrong))
    assert fwAD._current_level == -1
    assert result.status is Status.WRONG and "ValueError" in result.message and "dual level open" in result.message


def test_a_level_opened_before_the_checker_is_left_alone():
    with fwAD.dual_level():
        result = run_check("3.1", lambda: call_learner(lambda: "fine"))
        assert fwAD._current_level == 0
    assert result.solved and "dual level" not in result.message


# --- no assert in the checkers: -O must not turn wrong answers into "solved" --------------


def test_the_checkers_have_no_assert_statement():
    assert len(CHECKER_FILES) == 5, CHECKER_FILES
    found = [
        f"{path.relative_to(LABKIT)}:{node.lineno}"
        for path in CHECKER_FILES
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_no_line_is_named_when_the_error_has_no_learner_frame():
    # e.g. the learner passed a builtin or a class that fails to construct: no line of theirs to point at,
    # and certainly not a line of labkit's.
    result = run_check("1.2", lambda: call_learner(int, "not a number"))
    assert result.status is Status.WRONG and "ValueError" in result.message
    assert "line" not in result.message and "call_learner" not in result.message


def test_an_error_inside_an_installed_package_points_at_the_learners_line_not_the_package():
    import tabulate

    def answer():
        return tabulate.tabulate(5)  # raises TypeError inside tabulate's own code

    learners_line = answer.__code__.co_firstlineno + 1
    result = run_check("1.2", lambda: call_learner(answer))
    assert result.status is Status.WRONG and "TypeError" in result.message
    # before: "(line 1541 of _normalize_tabular_data)", a line of tabulate's called the learner's
    assert f"(line {learners_line} of answer)" in result.message and "_normalize_tabular_data" not in result.message


def test_a_subclass_that_skips_super_init_gets_that_hint_not_a_line_inside_torch():
    import torch.fx

    class ForgetsSuper(torch.fx.Interpreter):
        def __init__(self, module):
            self.shapes = {}

    class CallsSuper(torch.fx.Interpreter):
        def __init__(self, module):
            super().__init__(module)
            self.shapes = {}

    graph_module = torch.fx.symbolic_trace(torch.nn.ReLU())

    def run_it(cls):
        return run_check("9.1", lambda: str(call_learner(lambda: cls(graph_module).run(torch.ones(2)))))

    result = run_it(ForgetsSuper)
    assert result.status is Status.WRONG and "no attribute 'graph'" in result.message
    assert "ForgetsSuper.__init__ never calls super().__init__(...), so Interpreter could not set up" in result.message
    assert run_it(CallsSuper).status is Status.SOLVED


def test_a_method_that_forgets_to_return_gets_that_hint():
    def forgets_to_return(x):
        x.sin()  # computed, not returned

    result = run_check("9.2", lambda: str(call_learner(lambda: torch.cos(forgets_to_return(torch.ones(2))))))
    assert result.status is Status.WRONG and "does each method you wrote `return` its result?" in result.message


def test_a_learner_exception_names_the_case_the_checker_was_trying():
    def scales_the_bias(bias):
        return bias * 2  # the learner's line: None * 2 when there is no bias

    def check():
        with learner_case("a layer without bias"):
            call_learner(scales_the_bias, None)
        return "unreachable"

    message = run_check("9.3", check).message
    assert message.startswith("On a layer without bias, your code raised TypeError")
    assert "(line " in message and "of scales_the_bias)" in message and "bias=False has `.bias` None" in message
    assert run_check("9.3", lambda: str(call_learner(scales_the_bias, 1))).status is Status.SOLVED  # the case is over


def test_learner_code_line_points_at_the_learners_code_only():
    class Mine(torch.fx.Interpreter):
        def run_node(self, n):
            return super().run_node(n)

    where = learner_code_line(Mine, "run_node")
    assert where == f"Your run_node starts at line {Mine.run_node.__code__.co_firstlineno} of test_checks.py."
    assert learner_code_line(torch.fx.Interpreter, "run_node") == ""  # torch's own code: no pointer
    assert learner_code_line(object(), "missing") == ""
    cell = compile("def fold(a):\n    return a\n", "/tmp/ipykernel_42/123.py", "exec")
    namespace: dict = {}
    exec(cell, namespace)
    assert learner_code_line(namespace["fold"]) == "Your fold starts at line 1 of its cell."


def test_a_wrong_answer_ends_with_where_the_learners_code_starts():
    def answer():
        return 41

    def check():
        expect(answer() == 42, "Off by one.")
        return "right"

    result = run_check("9.4", check, answer)
    assert result.message == f"Off by one. Your answer starts at line {answer.__code__.co_firstlineno} of test_checks.py."
    assert run_check("9.4", check).message == "Off by one."


def test_code_python_generates_is_not_named_as_the_learners_line():
    import dataclasses

    from labkit.core.checks import call_learner, run_check

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        runs: int

    def answer():
        Frozen(1).runs = 3  # raises inside the dataclass's generated __setattr__ ("<string>")

    result = run_check("9.9", lambda: call_learner(answer))
    assert "FrozenInstanceError" in result.message and "(line" in result.message
    assert "__setattr__" not in result.message and "of answer)" in result.message
