"""Notebook 03's mistake catalogue: wrong answers to exercises 3.1 to 3.4, as learners write them, and the words
each hint must contain. The cheats named in issue 24 are here too: they must be refused."""
from __future__ import annotations

import warnings

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn

from labkit.core.checks import Status
from labkit.forward_ad.checks import (
    check_cheaper_jacobian,
    check_custom_sin,
    check_directional_derivative,
    check_weight_scaling_derivative,
)
from labkit.forward_ad.custom_function import Exp
from tests.mistakes import Mistake

MEASURED_ERROR = r"\d\.\de-\d+"

# --- 3.1: the directional derivative --------------------------------------------------------------------------


def central_differences(f, x, v, eps=1e-6):
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def returns_the_pair(f, x, v):
    return torch.func.jvp(f, (x,), (v,))


def gradient_times_v(f, x, v):
    x = x.requires_grad_()
    (gradient,) = torch.autograd.grad(f(x), x)
    return gradient * v


def gradient_dot_v(f, x, v):
    x = x.requires_grad_()
    (gradient,) = torch.autograd.grad(f(x), x)
    return (gradient * v).sum()


def autograd_functional_jvp(f, x, v):
    return torch.autograd.functional.jvp(f, x, v)[1]


def tangent_read_after_the_level(f, x, v):
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, v))
    return fwAD.unpack_dual(out).tangent


def forgets_to_return(f, x, v):
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, v))
        derivative = fwAD.unpack_dual(out).tangent  # noqa: F841 - the mistake: never returned


def leaves_the_level_open(f, x, v):
    fwAD.enter_dual_level()
    return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).tangent


def returns_the_primal(f, x, v):
    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(x, v))).primal


def swaps_point_and_direction(f, x, v):
    with fwAD.dual_level():
        return fwAD.unpack_dual(f(fwAD.make_dual(v, x))).tangent


def jacobian_times_v(f, x, v):
    jacobian = torch.func.jacfwd(f)(x)
    return torch.tensordot(jacobian, v, dims=v.dim())


def forward_and_reverse(f, x, v):
    _, derivative = torch.func.jvp(f, (x,), (v,))
    x = x.requires_grad_()
    (gradient,) = torch.autograd.grad(f(x), x)  # to compare with the gradient, inside the answer
    return derivative


def tangent_of_ones(f, x, v):
    return torch.func.jvp(f, (x,), (torch.ones_like(x),))[1]


# --- 3.2: the Jacobian, the cheaper way ---------------------------------------------------------------------------


def tangent_with_a_batch_dimension(f, x, v):
    return torch.func.jvp(f, (x,), (v[None],))[1]  # "a batch of one direction"


def rule_inverted(f, x):
    mode = "jacfwd" if x.numel() > f(x).numel() else "jacrev"
    return mode, (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x)


def pair_swapped(f, x):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    return (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x), mode


def mode_names(f, x):
    mode = "forward" if f(x).numel() > x.numel() else "reverse"
    return mode, (torch.func.jacfwd if mode == "forward" else torch.func.jacrev)(f)(x)


def transposed(f, x):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    return mode, (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x).T


def right_name_other_transform(f, x):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    return mode, torch.func.jacrev(f)(x)


def first_dimension_not_numel(f, x):
    mode = "jacfwd" if len(f(x)) > len(x) else "jacrev"
    return mode, (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x)


def autograd_functional_jacobian(f, x):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    return mode, torch.autograd.functional.jacobian(f, x)


def forgets_to_call_the_transform(f, x):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    return mode, (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)


def computes_both(f, x):
    forward, reverse = torch.func.jacfwd(f)(x), torch.func.jacrev(f)(x)
    return ("jacfwd", forward) if f(x).numel() > x.numel() else ("jacrev", reverse)


def finite_difference_jacobian(f, x, eps=1e-6):
    mode = "jacfwd" if f(x).numel() > x.numel() else "jacrev"
    columns = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in torch.eye(x.numel(), dtype=x.dtype)]
    return mode, torch.stack(columns, dim=-1)


def jacfwd_at_a_tie(f, x):
    mode = "jacrev" if x.numel() > f(x).numel() else "jacfwd"
    return mode, (torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev)(f)(x)


# --- 3.3: a custom Function with jvp --------------------------------------------------------------------------


class OldStyle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return torch.sin(x)

    @staticmethod
    def jvp(ctx, x_tangent):
        return torch.cos(ctx.x) * x_tangent


class BothStyles(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(*inputs)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent


class _SinForward(torch.autograd.Function):
    """forward and setup_context as the solution has them; each mistake below writes its own jvp."""

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(*inputs)


class ForwardIsCos(_SinForward):
    """A slip in forward, not in jvp: the message must point at forward."""

    @staticmethod
    def forward(x):
        return torch.cos(x)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent


class ForgetsTheTangent(_SinForward):
    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x)


class WrongSign(_SinForward):
    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return -torch.cos(x) * x_tangent


class SavesForBackward(_SinForward):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent


class SavesTheOutput(_SinForward):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(output)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent


class Sin(_SinForward):
    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent


def passes_an_instance():
    with warnings.catch_warnings():  # torch warns that a Function should not be instantiated: the mistake itself
        warnings.simplefilter("ignore", DeprecationWarning)
        return check_custom_sin(Sin())


class ApplyIsSin(torch.autograd.Function):
    apply = staticmethod(torch.sin)


class NoJvp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass


class BorrowsExpsJvp(Exp):
    @staticmethod
    def forward(x):
        return torch.sin(x)


class _ApplyIsSin(type(torch.autograd.Function)):
    apply = property(lambda cls: torch.sin)


class MetaclassApply(_SinForward, metaclass=_ApplyIsSin):
    """Looks like the solution, but its metaclass hands out torch.sin as apply: torch never runs this jvp."""

    @staticmethod
    def jvp(ctx, x_tangent):
        return torch.zeros_like(x_tangent)


# --- 3.4: the derivative along the weights ------------------------------------------------------------------------


def _params(model):
    return {name: p.detach() for name, p in model.named_parameters()}


def _jvp_along(model, x, tangents):
    return torch.func.jvp(lambda p: torch.func.functional_call(model, p, (x,)), (_params(model),), (tangents,))


def returns_the_jvp_pair(model, x):
    params = _params(model)
    return _jvp_along(model, x, params)


def returns_the_output(model, x):
    return _jvp_along(model, x, _params(model))[0]


def random_direction(model, x):
    return _jvp_along(model, x, {name: torch.randn_like(p) for name, p in _params(model).items()})[1]


def three_times_the_output(model, x):
    """No JVP at all: d/dt of (1 + t) * model(x) read as if the model were linear in its parameters."""
    return 3 * model(x)


def direction_of_ones(model, x):
    return _jvp_along(model, x, {name: torch.ones_like(p) for name, p in _params(model).items()})[1]


def weights_only(model, x):
    tangents = {name: p if name.endswith("weight") else torch.zeros_like(p) for name, p in _params(model).items()}
    return _jvp_along(model, x, tangents)[1]


def state_dict_tangents(model, x):
    state = {name: t.detach() for name, t in model.state_dict().items()}

    def output_for(state):
        return torch.func.functional_call(model, state, (x,))

    return torch.func.jvp(output_for, (state,), (state,))[1]


def state_dict_tangents_but_the_counter(model, x):
    """The running statistics get a tangent; the integer num_batches_tracked is left out."""
    state = {name: t.detach() for name, t in model.state_dict().items() if not name.endswith("num_batches_tracked")}
    return torch.func.jvp(lambda s: torch.func.functional_call(model, s, (x,)), (state,), (state,))[1]


def train_mode_inside(model, x):
    model.train()  # "so that BatchNorm behaves": inside the transform, it updates its running statistics in place
    return _jvp_along(model, x, _params(model))[1]


def parameters_as_a_list(model, x):
    params = [p.detach() for p in model.parameters()]
    return torch.func.jvp(lambda p: torch.func.functional_call(model, p, (x,)), (params,), (params,))[1]


def scaled_by_finite_differences(model, x, eps=1e-6):
    params = _params(model)

    def scaled(t):
        return torch.func.functional_call(model, {name: p * (1 + t) for name, p in params.items()}, (x,))

    return (scaled(eps) - scaled(-eps)) / (2 * eps)


def leaves_a_forward_hook(model, x):
    outputs = []
    model.register_forward_hook(lambda module, args, output: outputs.append(output))
    return _jvp_along(model, x, _params(model))[1]


def turns_off_requires_grad(model, x):
    model.requires_grad_(False)
    return _jvp_along(model, x, _params(model))[1]


def scales_in_place(model, x, eps=1e-6):
    with torch.no_grad():
        before = model(x)
        for p in model.parameters():
            p.add_(eps * p)
        after = model(x)
        for p in model.parameters():
            p.sub_(eps * p)  # the mistake: p(1 + eps) - eps p(1 + eps) is not p
    return (after - before) / eps


def leaves_train_mode(model, x):
    derivative = _jvp_along(model, x, _params(model))[1]
    model.train()
    return derivative


def swaps_without_restoring(model, x):
    with fwAD.dual_level():
        for module in model.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                delattr(module, name)
                setattr(module, name, fwAD.make_dual(p.detach(), p.detach()))
        return fwAD.unpack_dual(model(x)).tangent


def wraps_duals_in_parameters(model, x):
    with fwAD.dual_level():
        originals = {}
        for module in model.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                originals[module, name] = p
                setattr(module, name, nn.Parameter(fwAD.make_dual(p.detach(), p.detach())))
        output = fwAD.unpack_dual(model(x))
        tangent = torch.zeros_like(output.primal) if output.tangent is None else output.tangent
        for (module, name), p in originals.items():
            setattr(module, name, p)
        return tangent


MISTAKES: list[Mistake] = [
    # 3.1
    Mistake("3.1", "central finite differences", lambda: check_directional_derivative(central_differences),
            ("finite differences", "evaluated f 2 times without a tangent"), measured=(MEASURED_ERROR,),
            mistake="finite-differences"),
    Mistake("3.1", "returns the `(output, jvp)` pair", lambda: check_directional_derivative(returns_the_pair),
            ("tuple", "derivative alone"), mistake="returned-pair"),
    Mistake("3.1", "the gradient times `v`, not summed", lambda: check_directional_derivative(gradient_times_v),
            ("shaped like the output",), mistake="wrong-shape"),
    Mistake("3.1", "reverse mode: the gradient dotted with `v`", lambda: check_directional_derivative(gradient_dot_v),
            ("this is reverse mode", "forward mode"), mistake="reverse-mode"),
    Mistake("3.1", "`torch.autograd.functional.jvp` (the double-backward trick)",
            lambda: check_directional_derivative(autograd_functional_jvp), ("this is reverse mode", "double-backward"),
            mistake="reverse-mode"),
    Mistake("3.1", "reads the tangent after the `dual_level` block",
            lambda: check_directional_derivative(tangent_read_after_the_level),
            ("after the `with fwAD.dual_level():` block closed", "gone"), mistake="tangent-read-after-level"),
    Mistake("3.1", "forgets to `return`", lambda: check_directional_derivative(forgets_to_return),
            ("no `return` with a value",), mistake="no-return"),
    Mistake("3.1", "returns the primal, not the tangent", lambda: check_directional_derivative(returns_the_primal),
            ("f(x) itself, the primal",), mistake="returned-primal"),
    Mistake("3.1", "`make_dual(v, x)`: point and direction swapped",
            lambda: check_directional_derivative(swaps_point_and_direction), ("swapped",), mistake="point-and-direction-swapped"),
    Mistake("3.1", "the whole Jacobian (`jacfwd`), then times `v`", lambda: check_directional_derivative(jacobian_times_v),
            ("whole Jacobian", "one JVP"), mistake="whole-jacobian"),
    Mistake("3.1", "runs reverse mode too, to compare", lambda: check_directional_derivative(forward_and_reverse),
            ("backward pass as well as a forward-mode pass",), mistake="forward-and-reverse"),
    Mistake("3.1", "a tangent of ones instead of `v`", lambda: check_directional_derivative(tangent_of_ones),
            ("vector of ones",), mistake="tangent-of-ones"),
    Mistake("3.1", "`enter_dual_level()` without an exit", lambda: check_directional_derivative(leaves_the_level_open),
            ("left a forward-AD dual level open",), status=Status.SOLVED),
    # 3.2
    Mistake("3.1", "a tangent of another shape (`v[None]`)", lambda: check_directional_derivative(tangent_with_a_batch_dimension),
            ("torch refused the tangent", "not shaped like x", "give v as it is"), mistake="tangent-shape"),
    Mistake("3.2", "the pair the wrong way round, `(jacobian, name)`", lambda: check_cheaper_jacobian(pair_swapped),
            ("wrong way round", "a tensor of shape (", "name first"), mistake="pair-swapped"),
    Mistake("3.2", "the rule inverted", lambda: check_cheaper_jacobian(rule_inverted), ("Count the passes", "(64)"),
            mistake="more-passes"),
    Mistake("3.2", "answers `\"forward\"` / `\"reverse\"`", lambda: check_cheaper_jacobian(mode_names),
            ("not 'reverse'", "name the transform"), mistake="named-the-mode"),
    Mistake("3.2", "returns the Jacobian transposed", lambda: check_cheaper_jacobian(transposed), ("it is transposed",),
            mistake="transposed"),
    Mistake("3.2", "the right name, the Jacobian from the other transform",
            lambda: check_cheaper_jacobian(right_name_other_transform), ("you named jacfwd", "computed in reverse mode"),
            mistake="other-transform"),
    Mistake("3.2", "sizes from `len()` (the first dimension), not `numel()`",
            lambda: check_cheaper_jacobian(first_dimension_not_numel), ("first dimension", "numel"),
            mistake="counted-first-dimension"),
    Mistake("3.2", "`torch.autograd.functional.jacobian` (reverse mode, a loop)",
            lambda: check_cheaper_jacobian(autograd_functional_jacobian),
            ("computed in reverse mode", "torch.autograd.functional.jacobian"), mistake="backward-loop"),
    Mistake("3.2", "returns `jacfwd(f)`, not called at `x`", lambda: check_cheaper_jacobian(forgets_to_call_the_transform),
            ("the transform itself", "called at x"), mistake="transform-not-called"),
    Mistake("3.2", "computes both Jacobians, returns one", lambda: check_cheaper_jacobian(computes_both),
            ("both forward and reverse mode",), mistake="both-transforms"),
    Mistake("3.2", "finite differences, column by column", lambda: check_cheaper_jacobian(finite_difference_jacobian),
            ("neither transform",), mistake="neither-transform"),
    Mistake("3.2", "`jacfwd` where in = out (the counts tie)", lambda: check_cheaper_jacobian(jacfwd_at_a_tie),
            ("either is right",), status=Status.SOLVED),
    # 3.3
    Mistake("3.3", "`forward` returns `cos(x)`", lambda: check_custom_sin(ForwardIsCos),
            ("forward(x) does not return sin(x)", "Your forward starts at line"), mistake="forward-not-sin"),
    Mistake("3.3", "old style, `forward(ctx, x)`", lambda: check_custom_sin(OldStyle),
            ("old style", "setup_context", "Your forward starts at line"), mistake="old-style"),
    Mistake("3.3", "`forward(ctx, x)` and a `setup_context` too", lambda: check_custom_sin(BothStyles),
            ("forward takes ctx although you wrote setup_context", "Your forward starts at line"),
            mistake="forward-takes-ctx"),
    Mistake("3.3", "`jvp` returns `cos(x)`, forgetting the tangent", lambda: check_custom_sin(ForgetsTheTangent),
            ("the derivative alone",), mistake="forgot-the-tangent"),
    Mistake("3.3", "a wrong derivative (`-cos(x) * x_tangent`)", lambda: check_custom_sin(WrongSign),
            ("the sign is wrong",), mistake="wrong-sign"),
    Mistake("3.3", "`save_for_backward` instead of `save_for_forward`", lambda: check_custom_sin(SavesForBackward),
            ("save_for_backward", "the one jvp can read", "Your setup_context starts at line"),
            mistake="save-for-backward"),
    Mistake("3.3", "saves the output, uses it as `x`", lambda: check_custom_sin(SavesTheOutput),
            ("uses the output",), mistake="used-the-output"),
    Mistake("3.3", "passes an instance, `Sin()`", passes_an_instance, ("Pass the class itself",), mistake="not-a-function-class"),
    Mistake("3.3", "`apply = staticmethod(torch.sin)`, no `jvp` at all", lambda: check_custom_sin(ApplyIsSin),
            ("replaces apply", "no forward, setup_context or jvp"), mistake="replaced-apply"),
    Mistake("3.3", "a metaclass whose `apply` is `torch.sin`", lambda: check_custom_sin(MetaclassApply),
            ("never called your jvp",), mistake="jvp-not-called"),
    Mistake("3.3", "no `jvp` (forward and setup_context only)", lambda: check_custom_sin(NoJvp), ("has no jvp of its own",),
            mistake="no-jvp"),
    Mistake("3.3", "inherits labkit's `Exp` and its `jvp`", lambda: check_custom_sin(BorrowsExpsJvp),
            ("has no jvp of its own", "inherits Exp's"), mistake="no-jvp"),
    # 3.4
    Mistake("3.4", "returns `torch.func.jvp(...)`, the (output, derivative) pair",
            lambda: check_weight_scaling_derivative(returns_the_jvp_pair), ("returned a tuple",), mistake="returned-pair"),
    Mistake("3.4", "returns the output, `[0]`", lambda: check_weight_scaling_derivative(returns_the_output),
            ("model(x) itself",), mistake="returned-output"),
    Mistake("3.4", "a random direction (`torch.randn_like(p)`)", lambda: check_weight_scaling_derivative(random_direction),
            ("the tangent of each parameter p is p",), mistake="wrong-direction"),
    Mistake("3.4", "no JVP, `3 * model(x)`", lambda: check_weight_scaling_derivative(three_times_the_output),
            ("no tangent went through",), mistake="no-jvp"),
    Mistake("3.4", "a direction of ones", lambda: check_weight_scaling_derivative(direction_of_ones),
            ("derivative along ones",), mistake="tangent-of-ones"),
    Mistake("3.4", "scales the weights, not the biases", lambda: check_weight_scaling_derivative(weights_only),
            ("biases are parameters too",), mistake="weights-only"),
    Mistake("3.4", "tangents from the `state_dict` (buffers included)",
            lambda: check_weight_scaling_derivative(state_dict_tangents), ("buffers are not parameters", "running statistics"),
            mistake="buffer-tangents"),
    Mistake("3.4", "tangents from the `state_dict` less `num_batches_tracked`",
            lambda: check_weight_scaling_derivative(state_dict_tangents_but_the_counter),
            ("buffers are not parameters", "its running statistics"), mistake="buffer-tangents"),
    Mistake("3.4", "`model.train()` inside the function", lambda: check_weight_scaling_derivative(train_mode_inside),
            ("switched the model to training mode", "mutate a captured tensor", "leave the model's mode"),
            mistake="train-mode-inside"),
    Mistake("3.4", "a list of parameters to `functional_call`", lambda: check_weight_scaling_derivative(parameters_as_a_list),
            ("functional_call refused your parameters", "a dict {name: tensor}", "not as a list"),
            mistake="parameters-as-a-list"),
    Mistake("3.4", "central finite differences", lambda: check_weight_scaling_derivative(scaled_by_finite_differences),
            ("ran the model 2 times",), mistake="not-one-pass"),
    Mistake("3.4", "leaves a forward hook on the model", lambda: check_weight_scaling_derivative(leaves_a_forward_hook),
            ("changed the model", "forward hooks left on"), mistake="changed-hooks"),
    Mistake("3.4", "turns off `requires_grad`", lambda: check_weight_scaling_derivative(turns_off_requires_grad),
            ("changed the model", "requires_grad turned off"), mistake="changed-requires-grad"),
    Mistake("3.4", "scales the parameters in place and back", lambda: check_weight_scaling_derivative(scales_in_place),
            ("changed the model", "values changed"), mistake="changed-values"),
    Mistake("3.4", "leaves the model in train mode", lambda: check_weight_scaling_derivative(leaves_train_mode),
            ("changed the model", "left in train mode"), mistake="changed-train-mode"),
    Mistake("3.4", "swaps in dual tensors, never puts the parameters back",
            lambda: check_weight_scaling_derivative(swaps_without_restoring), ("changed the model", "parameters replaced"),
            mistake="replaced-parameters"),
    Mistake("3.4", "wraps the dual tensors in `nn.Parameter`",
            lambda: check_weight_scaling_derivative(wraps_duals_in_parameters), ("all zeros", "nn.Parameter drops"),
            mistake="tangents-dropped"),
]
