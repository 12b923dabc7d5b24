"""Forward-mode AD on the device: labkit's jvp, module_jvp and hvp against torch.func, both on the device.

Why: lab 03 runs wherever ``labkit.device`` points, and dual tensors take other kernels on a GPU (their
own forward formulas, cuBLAS with TF32 off by default). Each labkit result is compared with an
independent torch.func computation of the same quantity on the same device: ``torch.func.jvp`` for the
JVPs (``torch.func.functional_call`` along the parameters for module_jvp), reverse-over-reverse
(``torch.func.vjp`` of ``torch.func.grad``) for the Hessian-vector product, which labkit computes
forward-over-reverse.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from labkit.measurements.gpu_check.plan import DISAGREES, OK, Budget, Row, StepResult

#: float32 on a GPU: the two computations take different kernels, so they agree to rounding, not bit for bit.
RTOL, ATOL = 1e-4, 1e-5


def _difference(ours: torch.Tensor, theirs: torch.Tensor) -> tuple[bool, float]:
    close = bool(torch.allclose(ours, theirs, rtol=RTOL, atol=ATOL))
    scale = theirs.abs().max().item() or 1.0
    return close, (ours - theirs).abs().max().item() / scale


def _row(what: str, ours: torch.Tensor, theirs: torch.Tensor, device: torch.device) -> Row:
    close, difference = _difference(ours, theirs)
    devices = {ours.device.type, theirs.device.type}
    on_device = devices == {device.type}
    verdict = "agree" if close and on_device else "DISAGREE" if not close else f"ran on {sorted(devices)}, not {device.type}"
    return Row(what, f"max difference {difference:.2g} of the scale", f"rtol {RTOL:g}, atol {ATOL:g}", verdict,
               {"relative_difference": difference, "allclose": close, "devices": sorted(devices)})


def check_forward_ad(device: torch.device, budget: Budget) -> StepResult:
    """jvp, module_jvp (both methods) and hvp, each against torch.func on ``device``."""
    from labkit.forward_ad import hvp, jvp, module_jvp

    width, batch = budget.pick((512, 256), (256, 64), (16, 4))
    with torch.random.fork_rng(devices=[]):  # drawn on the CPU, then moved: the same numbers on every device
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 10)).to(device)
        x, v = torch.randn(batch, width).to(device), torch.randn(batch, width).to(device)
        tangents = {name: torch.randn(p.shape).to(device) for name, p in model.named_parameters()}

    def fn(inputs: torch.Tensor) -> torch.Tensor:
        return torch.sin(inputs) * inputs.exp().clamp(max=10)

    rows = [_row("jvp of sin(x) * exp(x)", jvp(fn, (x,), (v,))[1], torch.func.jvp(fn, (x,), (v,))[1], device),
            _row("jvp of an MLP along its input", jvp(model, (x,), (v,))[1], torch.func.jvp(model, (x,), (v,))[1], device)]
    params = dict(model.named_parameters())

    def along_parameters(values: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.func.functional_call(model, values, (x,))

    reference = torch.func.jvp(along_parameters, (params,), (tangents,))[1]
    for method in ("swap", "functional_call"):
        rows.append(_row(f"module_jvp (method {method}) along the MLP's parameters",
                         module_jvp(model, (x,), tangents, method=method)[1], reference, device))

    def loss(inputs: torch.Tensor) -> torch.Tensor:
        return (model(inputs) ** 2).sum()

    gradient: Callable[[torch.Tensor], torch.Tensor] = torch.func.grad(loss)
    reverse_over_reverse = torch.func.vjp(gradient, x)[1](v)[0]
    rows.append(_row("hvp of the MLP's squared output (labkit: forward-over-reverse; torch.func: reverse-over-reverse)",
                     hvp(loss, x, v), reverse_over_reverse, device))
    return StepResult(OK if all(row.verdict == "agree" for row in rows) else DISAGREES, tuple(rows))
