"""``python -m labkit gpu-check``: every CUDA path the labs take, run once on a GPU, in one table.

Why: machines with a GPU are lent to this project now and then, for minutes. Everything that needs one is
this one prepared command, which finishes inside its budget and tells everything at once; its steps take a
device, so the tests run each of them on the CPU (tiny sizes) and the command cannot rot between loans.

- :mod:`~labkit.measurements.gpu_check.plan`: a step's budget, result and rows; the plan that fits the
  steps into ``--budget`` (shrinking or dropping them, and saying so).
- :mod:`~labkit.measurements.gpu_check.settings`: TF32 and cudnn.benchmark set for one block, then restored.
- :mod:`~labkit.measurements.gpu_check.profiler`: the profiler's synchronisation and its cross-check.
- :mod:`~labkit.measurements.gpu_check.formats`: the channels_last table (``torch.utils.benchmark``).
- :mod:`~labkit.measurements.gpu_check.forward_ad`: jvp, module_jvp and hvp against torch.func.
- :mod:`~labkit.measurements.gpu_check.memory`: memory per node, where this labkit has it.
- :mod:`~labkit.measurements.gpu_check.notebooks`: the labs' notebooks executed on the device.
- :mod:`~labkit.measurements.gpu_check.report` and :mod:`~labkit.measurements.gpu_check.cli`: the JSON, the
  Markdown table, the command.
"""
