from typing import Any

import torch
import torch.fx


class ShapeFlopRecorder(torch.fx.Interpreter):
    """Exercise 1.2: an Interpreter that records every node's output shape, and the FLOPs of each Conv2d and Linear.

    Use it as ``recorder = ShapeFlopRecorder(torch.fx.symbolic_trace(model))``.
    After ``recorder.run(x)``:

    - ``recorder.shapes`` maps each node's name to ``tuple(output.shape)``, for
      every node whose output is a tensor;
    - ``recorder.flops`` maps the name of each node that calls an ``nn.Conv2d``
      or an ``nn.Linear`` to its FLOPs as an int, counted the way
      ``torch.utils.flop_counter`` counts them: 2 per multiply-add, bias not
      counted.
    """

    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.flops: dict[str, int] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n.name] = tuple(result.shape)
        if n.op == "call_module":
            layer = self.fetch_attr(n.target)
            if isinstance(layer, torch.nn.Conv2d):
                kernel_height, kernel_width = layer.kernel_size
                per_output = layer.in_channels // layer.groups * kernel_height * kernel_width
                self.flops[n.name] = 2 * result.numel() * per_output
            elif isinstance(layer, torch.nn.Linear):
                self.flops[n.name] = 2 * result.numel() * layer.in_features
        return result
