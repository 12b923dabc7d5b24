import torch
from torch import nn


def fold_linear_bn(linear: nn.Linear, bn: nn.BatchNorm1d) -> nn.Linear:
    """Exercise 1.3: one new nn.Linear that computes ``bn(linear(x))`` for an eval-mode BatchNorm1d.

    The same arithmetic as the Conv-BN fold above, for a Linear whose weight has
    shape (out_features, in_features): output feature c is row c. ``linear``
    may have no bias (``linear.bias is None``). Leave ``linear`` and ``bn`` as
    they are.
    """
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    linear_bias = linear.bias if linear.bias is not None else torch.zeros_like(bn.running_mean)
    folded = nn.Linear(linear.in_features, linear.out_features, bias=True,
                       device=linear.weight.device, dtype=linear.weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(linear.weight * scale.unsqueeze(1))
        folded.bias.copy_((linear_bias - bn.running_mean) * scale + bn.bias)
    return folded
