"""run_check puts back what an answer changed in torch, names it, and never says "solved" on a patched torch."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit.core.checks as checks
from labkit.core.checks import Status, call_learner, expect, run_check


def check_running(answer):
    """A check that calls ``answer`` and would accept anything it does."""

    def check() -> str:
        call_learner(answer)
        return "all good."

    return run_check("9.9", check)


def test_a_thread_count_the_answer_changed_is_restored_and_named():
    threads = torch.get_num_threads()
    result = check_running(lambda: torch.set_num_threads(threads + 1))
    assert torch.get_num_threads() == threads
    assert result.solved and f"torch.set_num_threads: {threads} -> {threads + 1}" in result.message


def test_grad_mode_and_default_dtype_are_restored():
    def answer():
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)

    result = check_running(answer)
    assert torch.is_grad_enabled() and torch.get_default_dtype() is torch.float32
    assert "torch.set_grad_enabled" in result.message and "torch.set_default_dtype" in result.message


def test_a_module_method_patched_by_the_answer_voids_the_verdict_and_is_put_back():
    original = nn.MaxPool2d.forward

    def answer():
        nn.MaxPool2d.forward = lambda self, x: x

    result = check_running(answer)
    assert nn.MaxPool2d.forward is original
    assert result.status is Status.WRONG and "torch.nn.MaxPool2d.forward (restored)" in result.message


def test_a_torch_function_moved_to_another_name_counts_as_a_patch():
    def answer():
        F.max_pool2d = F.avg_pool2d

    original = F.max_pool2d
    result = check_running(answer)
    assert F.max_pool2d is original
    assert result.status is Status.WRONG and "torch.nn.functional.max_pool2d" in result.message


def test_replacing_the_checkers_own_code_is_refused():
    def answer():
        checks.expect = lambda condition, hint: None

    result = check_running(answer)
    assert checks.expect is expect
    assert result.status is Status.WRONG and "labkit.core.checks.expect" in result.message


def test_a_patch_made_before_the_check_is_named_and_left_as_it_is(monkeypatch):
    def faster_forward(self, x):
        return x

    monkeypatch.setattr(nn.MaxPool2d, "forward", faster_forward)
    result = check_running(lambda: None)
    assert nn.MaxPool2d.forward is faster_forward  # labkit never changes what it did not create
    assert result.status is Status.WRONG and "replaced before the check" in result.message


def test_torchs_own_set_up_during_a_check_is_not_a_patch(monkeypatch):
    # torch.compile wraps nn.Module.__init__ the first time it runs; a new function whose code is torch's
    # own is torch setting itself up. Stand in for it with a function compiled under a file name in torch.
    namespace: dict = {}
    source = "def wrapped_init(self, *args, **kwargs):\n    original(self, *args, **kwargs)\n"
    exec(compile(source, str(Path(torch.__file__).parent / "_dynamo" / "stand_in.py"), "exec"),
         {"original": nn.Module.__init__}, namespace)
    monkeypatch.setattr(nn.Module, "__init__", nn.Module.__init__)  # so the test puts it back afterwards

    result = check_running(lambda: setattr(nn.Module, "__init__", namespace["wrapped_init"]))
    assert result.solved, result.message
    assert nn.Module.__init__ is namespace["wrapped_init"]


def test_a_torch_function_mode_left_on_is_exited():
    mode = torch.overrides.TorchFunctionMode()
    result = check_running(mode.__enter__)
    assert list(torch.overrides._get_current_function_mode_stack()) == []
    assert "TorchFunctionMode left on" in result.message


def test_a_global_forward_hook_is_removed():
    from torch.nn.modules import module

    before = dict(module._global_forward_hooks)
    result = check_running(lambda: nn.modules.module.register_module_forward_hook(lambda *args: None))
    assert dict(module._global_forward_hooks) == before
    assert "global module hook" in result.message


def test_a_check_that_changes_nothing_says_nothing_more():
    result = check_running(lambda: torch.ones(2) + 1)
    assert result.solved and result.message == "all good."


@pytest.mark.parametrize("status", [Status.WRONG, Status.NOT_YET])
def test_a_verdict_that_was_not_solved_keeps_its_status(status):
    def check() -> str:
        torch.set_num_threads(torch.get_num_threads())
        if status is Status.NOT_YET:
            raise NotImplementedError("Exercise 9.9: write it")
        expect(False, "wrong.")
        return "unreachable"

    assert run_check("9.9", check).status is status


def test_a_method_set_on_a_torch_class_that_only_inherited_it_is_removed_and_voids_the_verdict():
    # torch.Tensor inherits is_contiguous from torch._C.TensorBase: the answer's new entry hides it
    def answer():
        torch.Tensor.is_contiguous = lambda self, memory_format=torch.contiguous_format: True

    result = check_running(answer)
    assert "is_contiguous" not in vars(torch.Tensor)
    assert not torch.empty(2, 3).t().is_contiguous()
    assert result.status is Status.WRONG and "torch.Tensor.is_contiguous (removed)" in result.message


def test_a_patch_of_a_torch_class_the_checkers_rely_on_outside_the_usual_namespaces_is_refused():
    from torch.utils.flop_counter import FlopCounterMode

    original = FlopCounterMode.get_total_flops

    def answer():
        FlopCounterMode.get_total_flops = lambda self: 0

    result = check_running(answer)
    assert FlopCounterMode.get_total_flops is original
    assert result.status is Status.WRONG and "FlopCounterMode.get_total_flops (restored)" in result.message


def test_a_torch_dispatch_mode_left_on_is_taken_off():
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

    class Slowing(TorchDispatchMode):  # could slow every kernel but the answer's own
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    result = check_running(lambda: Slowing().__enter__())
    assert _get_current_dispatch_mode_stack() == []
    assert "a TorchDispatchMode left on (Slowing) taken off" in result.message


def test_a_profile_function_the_answer_set_is_put_back():
    import sys

    before = sys.getprofile()
    result = check_running(lambda: sys.setprofile(lambda frame, event, arg: None))
    assert sys.getprofile() is before
    assert "sys.setprofile: None ->" in result.message


def test_code_an_installed_package_set_on_torch_is_not_the_learners():
    """transformers 5 adds nn.Module.smart_apply on import: a learner profiling a Hugging Face model is still judged."""
    import tabulate

    nn.Module.labkit_test_installed_helper = tabulate.tabulate  # as a library's import would
    try:
        result = check_running(lambda: None)
        assert result.solved and "replaced" not in result.message and "set before" not in result.message
    finally:
        del nn.Module.labkit_test_installed_helper


def test_a_hugging_face_model_built_before_the_check_voids_no_verdict(transformers):
    from labkit.fx.hf_zoo import build_model

    build_model("bert")  # transformers 5 sets nn.Module.smart_apply while it initializes the weights
    result = check_running(lambda: None)
    assert result.solved and "replaced" not in result.message and "set before" not in result.message
