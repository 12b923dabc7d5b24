from typing import Any

import torch
import torch.fx


class ShapeRecorder(torch.fx.Interpreter):
    """Exercise 1.2: an Interpreter that records the output shape of every node.

    Use it as ``recorder = ShapeRecorder(torch.fx.symbolic_trace(model))``;
    after ``recorder.run(x)``, ``recorder.shapes`` maps each node's name to
    ``tuple(output.shape)`` for every node whose output is a tensor.
    """

    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.shapes: dict[str, tuple[int, ...]] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.shapes[n.name] = tuple(result.shape)
        return result
