import torch


class Sin(torch.autograd.Function):
    """Exercise 3.3: ``sin(x)`` as a custom Function with a forward-mode rule, in the modern style.

    ``forward(x)`` computes the result without ``ctx``; ``setup_context`` saves
    what the rule needs with ``ctx.save_for_forward``; ``jvp(ctx, x_tangent)``
    returns the output tangent, cos(x) * x_tangent. It must pass
    ``gradcheck(..., check_forward_ad=True)`` and work under both the dual API
    and ``torch.func.jvp``.
    """

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_forward(x)

    @staticmethod
    def jvp(ctx, x_tangent):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * x_tangent
