"""Lab 03's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

from labkit.i18n.messages import N_

HINTS: dict[str, tuple[str, str, str]] = {
    "3.1": (
        N_("What does a single forward-mode pass give you when x carries the direction v as its tangent? Check that you "
        "return that tangent alone, shaped like f(x): not the value f(x), not a pair, not a gradient."),
        N_("The section {functional_api}: `torch.func.jvp` takes tuples of primals and tangents and returns `(output, "
        "jvp)`; the section {dual_tensors} does the same with `fwAD.make_dual` and `fwAD.unpack_dual` inside "
        "`fwAD.dual_level()`."),
        N_("One forward-mode evaluation of f answers it: the point is what you differentiate at, the direction is the "
        "tangent that travels with it, and of what comes back you need only the derivative part. Nothing backward and "
        "nothing Jacobian-sized: the checker counts how often f runs."),
    ),
    "3.2": (
        N_("How many passes does each transform need: one per entry of the input, or one per entry of the output? Are "
        "you counting every entry of x and of f(x), or only their first dimension?"),
        N_("The section {jacfwd_versus_jacrev}: `torch.func.jacfwd` builds the Jacobian column by column, "
        "`torch.func.jacrev` row by row; `Tensor.numel` counts every entry of a tensor."),
        N_("Decide first, then build: compare the number of passes each mode would need (one per input entry, or one per "
        "output entry) and let the smaller count choose. The transform you named is the one that builds the Jacobian, "
        "and the answer carries both, the name first."),
    ),
    "3.3": (
        N_("Is your Function in the modern style, with a forward that takes no ctx? Does your jvp multiply the incoming "
        "tangent by the derivative of sin at the input, and did you save that input where jvp can read it?"),
        N_("The section {custom_function}, and `labkit.forward_ad.custom_function.Exp`, printed there, show the three "
        "staticmethods; what `ctx.save_for_forward` saves is what `jvp` finds in `ctx.saved_tensors`."),
        N_("Write three staticmethods: forward computes the sine of its input without ctx; setup_context takes the input "
        "out of inputs and saves it for forward; jvp reads it back from the saved tensors and returns its cosine times "
        "the input tangent. Pass the class itself to the checker, not an instance."),
    ),
    "3.4": (
        N_("If every parameter p becomes (1 + t) p, what is the tangent of each parameter? And do the buffers, a "
        "BatchNorm's running statistics, get a tangent at all?"),
        N_("The section {modules_jvp} runs a model with `torch.func.functional_call`; `torch.func.jvp` differentiates a "
        "function of a dict of tensors, and `nn.Module.named_parameters` lists exactly the parameters."),
        N_("Collect the model's parameters by name, detached, in a dict. Write a function of such a dict that runs the "
        "model on x with it through functional_call, and take one JVP of that function with the dict as the primal "
        "and the same dict as its tangent. Return only the tangent part, and leave the model as it was: no swapped "
        "parameters, hooks or mode changes."),
    ),
}
