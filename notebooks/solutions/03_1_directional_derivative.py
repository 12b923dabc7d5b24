import torch


def directional_derivative(f, x, v):
    """Exercise 3.1: the derivative of ``f`` at ``x`` in the direction ``v``.

    That is d/dt f(x + t*v) at t = 0, a tensor shaped like ``f(x)``. Compute it
    with one forward-mode pass: no gradients, no Jacobian, no finite differences.
    """
    _, derivative = torch.func.jvp(f, (x,), (v,))
    return derivative
