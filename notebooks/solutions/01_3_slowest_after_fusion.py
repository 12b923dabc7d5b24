import torch

import labkit


def slowest_type_after_fusion(model: torch.nn.Module, x: torch.Tensor) -> tuple[str, labkit.ProfileReport]:
    """Exercise 1.3: which op type costs the most once Conv+BN are fused?

    Fuse ``model`` (in eval mode) with torch.fx's Conv+BN fusion pass, profile the fused model on ``x`` with ``labkit.profile_model``, and return
    the name of the op type with the largest total time and the report.
    """
    from torch.fx.experimental.optimization import fuse

    fused = fuse(model)
    report = labkit.profile_model(fused, x, warmup=1, runs=3)
    slowest = report.by_op_type().rows[0][0]
    return slowest, report
