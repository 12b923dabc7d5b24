import torch


def weight_scaling_derivative(model, x):
    """Exercise 3.4: how fast ``model(x)`` changes when every parameter grows in proportion to itself.

    That is d/dt model(x) with each parameter p replaced by (1 + t) * p, at
    t = 0: one JVP in parameter space whose direction is the parameters
    themselves. Buffers (a BatchNorm's running statistics) are not parameters:
    they stay as they are. Write it with ``torch.func.functional_call`` and
    ``torch.func.jvp``; return a tensor shaped like ``model(x)`` and leave
    ``model`` as it is.
    """
    params = {name: p.detach() for name, p in model.named_parameters()}

    def output_for(params):
        return torch.func.functional_call(model, params, (x,))

    _, derivative = torch.func.jvp(output_for, (params,), (params,))
    return derivative
