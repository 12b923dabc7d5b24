import torch


def jacobian_the_cheaper_way(f, x):
    """Exercise 3.2: the Jacobian of f: R^in -> R^out at x, built with the mode that needs fewer passes.

    Return ``(mode, jacobian)``: ``mode`` is ``"jacfwd"`` or ``"jacrev"``, the
    one with fewer passes for this f (jacfwd: one per input dimension, jacrev:
    one per output dimension); ``jacobian`` is the (out, in) Jacobian computed
    with it.
    """
    in_features, out_features = x.numel(), f(x).numel()
    mode = "jacfwd" if out_features > in_features else "jacrev"
    transform = torch.func.jacfwd if mode == "jacfwd" else torch.func.jacrev
    return mode, transform(f)(x)
