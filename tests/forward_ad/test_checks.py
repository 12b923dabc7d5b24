"""labkit.forward_ad.checks: solutions pass, stubs are "not yet", wrong answers get a hint."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch
from torch import nn

from labkit.core.checks import Status
from labkit.forward_ad.checks import (
    check_cheaper_jacobian,
    check_custom_sin,
    check_directional_derivative,
    check_weight_scaling_derivative,
)
from tests.cheats import LyingTensor

SOLUTIONS = Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def _solution(file, name):
    return runpy.run_path(str(SOLUTIONS / file))[name]


def _stub_for(exercise):
    def stub(*_args):
        raise NotImplementedError(
            f"Exercise {exercise}: write stub(). See solutions/x.py, "
            "or run %load solutions/x.py in this cell."
        )

    return stub


def test_solutions_are_solved():
    assert check_directional_derivative(_solution("03_1_directional_derivative.py", "directional_derivative")).solved
    assert check_cheaper_jacobian(_solution("03_2_cheaper_jacobian.py", "jacobian_the_cheaper_way")).solved
    assert check_custom_sin(_solution("03_3_custom_sin.py", "Sin")).solved
    assert check_weight_scaling_derivative(_solution("03_4_weight_scaling_derivative.py", "weight_scaling_derivative")).solved


@pytest.mark.parametrize(("checker", "exercise"), [(check_directional_derivative, "3.1"), (check_cheaper_jacobian, "3.2"),
                                                           (check_weight_scaling_derivative, "3.4")])
def test_function_stubs_are_not_yet_solved(checker, exercise):
    assert checker(_stub_for(exercise)).status is Status.NOT_YET
    # Another exercise's stub, or a NotImplementedError of the learner's own, is the learner's error.
    assert checker(_stub_for("3.3")).status is Status.WRONG


def test_class_stub_is_not_yet_solved():
    class Sin(torch.autograd.Function):
        @staticmethod
        def forward(x):
            raise NotImplementedError("Exercise 3.3: write Sin.forward")

        @staticmethod
        def setup_context(ctx, inputs, output):
            raise NotImplementedError("Exercise 3.3")

        @staticmethod
        def jvp(ctx, x_tangent):
            raise NotImplementedError("Exercise 3.3")

    assert check_custom_sin(Sin).status is Status.NOT_YET


def test_finite_differences_are_not_a_jvp():
    def finite(f, x, v, eps=1e-6):
        return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)

    result = check_directional_derivative(finite)
    assert result.status is Status.WRONG and "finite differences" in result.message


def test_wrong_shape_is_explained():
    result = check_directional_derivative(lambda f, x, v: torch.zeros(7))
    assert result.status is Status.WRONG and "shaped like the output" in result.message
    result = check_directional_derivative(lambda f, x, v: torch.zeros_like(f(x)))
    assert result.status is Status.WRONG and "never pushed a tangent through f" in result.message

    def wrong_tangent(f, x, v):
        return torch.func.jvp(f, (x,), (torch.sin(v),))[1]

    result = check_directional_derivative(wrong_tangent)
    assert result.status is Status.WRONG and "not the derivative along v" in result.message


def test_the_wrong_mode_names_the_pass_counts_and_a_wrong_jacobian_is_refused():
    result = check_cheaper_jacobian(lambda f, x: ("jacrev", torch.func.jacrev(f)(x)))
    assert result.status is Status.WRONG and "one per input dimension (4)" in result.message
    assert check_cheaper_jacobian(lambda f, x: ("forward", None)).status is Status.WRONG
    transposed = check_cheaper_jacobian(
        lambda f, x: ("jacfwd" if f(x).numel() > x.numel() else "jacrev", torch.func.jacrev(f)(x).T)
    )
    assert transposed.status is Status.WRONG and "(out, in)" in transposed.message


def test_wrong_jvp_and_old_style_are_explained():
    Sin = _solution("03_3_custom_sin.py", "Sin")

    class WrongJvp(Sin):
        @staticmethod
        def jvp(ctx, x_tangent):
            return x_tangent

    assert "x_tangent unchanged" in check_custom_sin(WrongJvp).message

    class OtherJvp(Sin):
        @staticmethod
        def jvp(ctx, x_tangent):
            return 2 * x_tangent

    assert "does not return cos(x) * x_tangent" in check_custom_sin(OtherJvp).message

    class OldStyle(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return torch.sin(x)

        @staticmethod
        def jvp(ctx, x_tangent):
            return torch.cos(ctx.x) * x_tangent

    result = check_custom_sin(OldStyle)
    assert result.status is Status.WRONG and "setup_context" in result.message
    assert check_custom_sin(42).status is Status.WRONG


def test_cheaper_jacobian_odd_answers_are_not_solved():
    # The reproduction of the -O bug: a wrong answer was "solved" under PYTHONOPTIMIZE=1.
    assert check_cheaper_jacobian(lambda f, x: ("jacfwd", torch.func.jacfwd(f)(x))).status is Status.WRONG
    for odd in (None, 1, ["jacfwd"], b"jacrev", torch.tensor(1.0)):
        result = check_cheaper_jacobian(lambda f, x, odd=odd: (odd, torch.func.jacrev(f)(x)))
        assert result.status is Status.WRONG and "Return the string" in result.message, result


@pytest.mark.parametrize(
    "answer",
    [
        lambda f, x, v: None,
        lambda f, x, v: 0.0,
        lambda f, x, v: torch.zeros_like(f(x), dtype=torch.bool),
        lambda f, x, v: torch.zeros_like(f(x), dtype=torch.int64),
        lambda f, x, v: torch.zeros_like(f(x), device="meta"),
        lambda f, x, v: torch.zeros_like(f(x)).to_sparse() if f(x).dim() else torch.zeros_like(f(x), device="meta"),
        lambda f, x, v: torch.full_like(f(x), float("nan")),
    ],
)
def test_directional_derivative_odd_answers_are_wrong_not_a_crash(answer):
    result = check_directional_derivative(answer)
    assert result.status is Status.WRONG, result


def test_custom_sin_odd_answers_are_wrong_not_a_crash():
    Sin = _solution("03_3_custom_sin.py", "Sin")

    class ReturnsAList(Sin):
        @staticmethod
        def forward(x):
            return [torch.sin(x)]

    class WrongShapeJvp(Sin):
        @staticmethod
        def jvp(ctx, x_tangent):
            return x_tangent[:2]

    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.sin(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    for wrong in (ReturnsAList, WrongShapeJvp, NoJvp, Sin.apply, "Sin"):
        result = check_custom_sin(wrong)
        assert result.status is Status.WRONG, (wrong, result)


def test_a_learner_jvp_that_leaves_a_dual_level_open_does_not_poison_later_cells():
    import torch.autograd.forward_ad as fwAD

    from labkit.forward_ad.derivatives import jvp

    def leaky(f, x, v):
        fwAD.enter_dual_level()
        return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).tangent

    result = check_directional_derivative(leaky)
    assert result.solved and "dual level open" in result.message
    assert fwAD._current_level == -1
    x, v = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    assert torch.allclose(jvp(torch.sin, x, v)[1], torch.cos(x) * v)  # a later cell still works


def _parameters_jvp(model, x, tangent_of):
    """torch.func.jvp along ``tangent_of(name, parameter)`` for each parameter: right or wrong answers to 3.4."""
    params = {name: p.detach() for name, p in model.named_parameters()}
    tangents = {name: tangent_of(name, p) for name, p in params.items()}
    return torch.func.jvp(lambda p: torch.func.functional_call(model, p, (x,)), (params,), (tangents,))


def _scaled_by_finite_differences(model, x, eps=1e-6):
    params = {name: p.detach() for name, p in model.named_parameters()}

    def scaled(t):
        return torch.func.functional_call(model, {name: p * (1 + t) for name, p in params.items()}, (x,))

    return (scaled(eps) - scaled(-eps)) / (2 * eps)  # central: in float64 accurate to about 1e-10


def _scaled_then_left_in_train_mode(model, x):
    derivative = _parameters_jvp(model, x, lambda name, p: p)[1]
    model.train()
    return derivative


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda model, x: model(x), "That is model(x) itself"),
        (lambda model, x: _parameters_jvp(model, x, lambda name, p: p), "return the derivative only"),
        (lambda model, x: _parameters_jvp(model, x, lambda name, p: torch.zeros_like(p))[1], "all zeros"),
        (lambda model, x: _parameters_jvp(model, x, lambda name, p: torch.ones_like(p))[1], "tangent of each parameter p is p"),
        (_scaled_by_finite_differences, "ran the model 2 times"),
        (lambda model, x: _parameters_jvp(model, x, lambda name, p: p)[1][:1], "shaped like model(x)"),
        (_scaled_then_left_in_train_mode, "changed the model"),
    ],
)
def test_weight_scaling_wrong_answers_get_their_hint(answer, hint):
    result = check_weight_scaling_derivative(answer)
    assert result.status is Status.WRONG and hint in result.message, result
    assert " starts at line " in result.message  # points at the learner's code


def test_weight_scaling_of_a_bias_free_relu_mlp_is_depth_times_output():
    # The fact the notebook asks about: f(x; (1+t)W) = (1+t)^L f(x; W), so the derivative is L * f(x).
    from labkit.forward_ad.checks import _scaling_cases

    solution = _solution("03_4_weight_scaling_derivative.py", "weight_scaling_derivative")
    (_, relu_mlp), = [case for case in _scaling_cases() if "ReLU" in case[0]]
    x = torch.randn(4, 4, dtype=torch.float64)
    torch.testing.assert_close(solution(relu_mlp, x), 3 * relu_mlp(x).detach())


def _dual_api(f, x, v):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).tangent


def _labkit_jvp(f, x, v):
    from labkit.forward_ad.derivatives import jvp

    return jvp(f, x, v)[1]


@pytest.mark.parametrize("answer", [_dual_api, _labkit_jvp])
def test_every_forward_mode_way_is_a_directional_derivative(answer):
    assert check_directional_derivative(answer).solved


def test_the_mode_probe_records_only_inside_a_check():
    from labkit.forward_ad.checks import _ModesSeen, _watched, _watching

    f = _watched(torch.sin)
    x = torch.randn(3, dtype=torch.float64)
    torch.func.jacrev(f)(x)  # outside a check: recorded nowhere, and no error
    with _watching() as seen:
        torch.func.jvp(f, (x,), (x,))
    assert (seen.calls, seen.jvps, seen.backwards, seen.mode) == (1, 1, 0, "forward")
    assert _ModesSeen(jvps=1, backwards=1).mode == "both" and _ModesSeen().mode is None


def test_returns_a_value_reads_the_learners_own_body():
    from labkit.forward_ad.checks import _returns_a_value

    def no_return(f, x, v):
        def inner():
            return 1

        inner()

    def returns_none_explicitly(f, x, v):
        return None

    def returns(f, x, v):
        if x is None:
            return
        return x

    assert _returns_a_value(no_return) is False and _returns_a_value(returns_none_explicitly) is False
    assert _returns_a_value(returns) is True and _returns_a_value(lambda f, x, v: None) is True
    assert _returns_a_value(print) is None  # no Python source: unknown


def _cheaper_mode(f, x):
    return "jacfwd" if f(x).numel() > x.numel() else "jacrev"


def _flat_jacobian(f, x):
    mode = _cheaper_mode(f, x)
    jacobian = (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x)
    return mode, jacobian.reshape(f(x).numel(), x.numel())


def _autograd_functional_with_the_strategy(f, x):
    mode = _cheaper_mode(f, x)
    strategy = "forward-mode" if mode == "jacfwd" else "reverse-mode"
    return mode, torch.autograd.functional.jacobian(f, x, vectorize=True, strategy=strategy)


@pytest.mark.parametrize("answer", [_flat_jacobian, _autograd_functional_with_the_strategy])
def test_a_jacobian_computed_by_the_named_mode_is_accepted(answer):
    assert check_cheaper_jacobian(answer).solved


def test_custom_sin_variants_that_torch_accepts_are_solved():
    Sin = _solution("03_3_custom_sin.py", "Sin")

    class WithBackward(Sin):
        generate_vmap_rule = True

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs)
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return torch.cos(x) * grad_output

    class WithoutStaticmethod(torch.autograd.Function):  # torch calls them on the class: plain functions work too
        def forward(x):
            return torch.sin(x)

        def setup_context(ctx, inputs, output):
            ctx.x = inputs[0]

        def jvp(ctx, x_tangent):
            return torch.cos(ctx.x) * x_tangent

    for variant in (WithBackward, WithoutStaticmethod):
        assert check_custom_sin(variant).solved, variant
    assert vars(Sin)["jvp"].__func__.__name__ == "jvp"  # the checker watched a subclass; the class is as it was


def test_weight_scaling_puts_the_copy_it_gave_back_as_it_was():
    solution = _solution("03_4_weight_scaling_derivative.py", "weight_scaling_derivative")
    given = []

    def hooks_and_freezes(model, x):
        given.append(model)
        model.register_forward_pre_hook(lambda module, args: None)
        model[0].weight.requires_grad_(False)
        return solution(model, x)

    result = check_weight_scaling_derivative(hooks_and_freezes)
    assert result.status is Status.WRONG and "forward pre hooks left on: the model" in result.message, result
    assert "requires_grad turned off: 0.weight" in result.message
    (model,) = given
    assert not model._forward_pre_hooks and model[0].weight.requires_grad


# --- cheats found in the issue-24 audit ------------------------------------------------------------------------


def _one_forward_pass(f, x, v):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).tangent


def test_a_tensor_subclass_whose_comparisons_lie_is_refused():
    def directional(f, x, v):
        return torch.zeros_like(_one_forward_pass(f, x, v)).as_subclass(LyingTensor)

    def jacobian(f, x):
        name = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
        return name, torch.zeros_like(getattr(torch.func, name)(f)(x)).as_subclass(LyingTensor)

    for result, exercise in ((check_directional_derivative(directional), "3.1"), (check_cheaper_jacobian(jacobian), "3.2")):
        assert result.status is Status.WRONG and result.mistake == f"{exercise}/tensor-subclass", result.message


def test_directional_derivative_finds_no_reference_value_while_the_answer_runs():
    import gc

    def directional(f, x, v):
        tangent = _one_forward_pass(f, x, v)  # the forward pass the checker watches for
        found = [o for o in gc.get_objects() if type(o) is torch.Tensor and o.dtype == torch.float64
                 and o.shape == tangent.shape and o is not tangent]
        return found[-1].clone() if found else torch.zeros_like(tangent)

    assert check_directional_derivative(directional).status is Status.WRONG


def _by_double_backward(model, x):
    params = dict(model.named_parameters())
    names = list(params)

    def f(*values):
        return torch.func.functional_call(model, dict(zip(names, values)), (x,))

    return torch.autograd.functional.jvp(f, tuple(params.values()), tuple(p.detach() for p in params.values()))[1]


def _by_vjp_rows(model, x):
    params = {name: p.detach() for name, p in model.named_parameters()}
    out, vjp = torch.func.vjp(lambda p: torch.func.functional_call(model, p, (x,)), params)
    rows = torch.func.vmap(vjp)(torch.eye(out.numel(), dtype=out.dtype).reshape(-1, *out.shape))[0]
    return sum(rows[name].reshape(out.numel(), -1) @ params[name].reshape(-1) for name in params).reshape(out.shape)


@pytest.mark.parametrize("answer", [_by_double_backward, _by_vjp_rows], ids=["double-backward", "vjp-rows"])
def test_weight_scaling_in_reverse_mode_is_refused_though_it_runs_the_model_once(answer):
    result = check_weight_scaling_derivative(answer)
    assert result.status is Status.WRONG and result.mistake == "3.4/reverse-mode", result.message


def test_buffer_tangents_blame_only_the_buffers_torch_refused():
    def all_buffers_but_the_counter(model, x):
        state = {n: t.detach() for n, t in model.state_dict().items() if not n.endswith("num_batches_tracked")}
        return torch.func.jvp(lambda s: torch.func.functional_call(model, s, (x,)), (state,), (state,))[1]

    result = check_weight_scaling_derivative(all_buffers_but_the_counter)
    assert result.mistake == "3.4/buffer-tangents" and "running statistics" in result.message
    assert "num_batches_tracked" not in result.message  # the answer left it out: it is not to blame


def test_a_refusal_of_torch_is_quoted_whole_or_cut_between_words():
    """3.4 once quoted torch's refusal cut mid-word ("they cannot have forwar"); each quoted word is one of torch's."""
    from tests.mistakes.catalogue_03 import state_dict_tangents_but_the_counter

    result = check_weight_scaling_derivative(state_dict_tangents_but_the_counter)
    quoted = result.message.partition("torch refused a tangent (")[2].partition("): your code")[0]
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6)).double().eval()
    with pytest.raises(RuntimeError) as torchs:
        state_dict_tangents_but_the_counter(model, torch.randn(5, 4, dtype=torch.float64))
    words = str(torchs.value).split()
    shown = quoted.removesuffix(" …").split()
    assert shown and shown == words[:len(shown)], (quoted, str(torchs.value))


def test_a_slip_outside_jvp_is_not_pointed_at_jvp():
    """3.3 once said "Your jvp starts at line N" for slips elsewhere: save_for_backward in setup_context, and an
    instance passed where the class belongs (the call is the slip: no line of the class is to blame)."""
    from tests.mistakes.catalogue_03 import SavesForBackward, passes_an_instance

    saved = check_custom_sin(SavesForBackward)
    assert saved.mistake == "3.3/save-for-backward" and "Your setup_context starts at line" in saved.message, saved
    instance = passes_an_instance()
    assert instance.mistake == "3.3/not-a-function-class" and "starts at line" not in instance.message, instance


def test_a_long_value_is_quoted_cut_between_words():
    """A value the learner returned is shown cut at a word boundary, like torch's refusals, never mid-word."""
    mode = "the cheaper one of the two transforms, forward mode for this wide function"
    result = check_cheaper_jacobian(lambda f, x: (mode, torch.func.jacfwd(f)(x)))
    quoted = result.message.partition("not ")[2].partition(" …")[0]
    assert result.mistake == "3.2/not-a-transform-name", result
    assert quoted and repr(mode).startswith(quoted) and repr(mode)[len(quoted)] == " ", (quoted, result.message)
