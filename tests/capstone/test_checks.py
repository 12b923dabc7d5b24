"""labkit.capstone.checks: the whole path from the plain input is timed, on fresh inputs, so shortcuts fail."""
import copy
import importlib.util
import math
import time
from pathlib import Path

import pytest
import torch
from torch.fx.experimental.optimization import fuse

from labkit.capstone import checks as capstone_checks
from labkit.capstone.checks import check_make_faster
from labkit.capstone.variants import challenge_input
from labkit.core.checks import Status
from labkit.core.errors import LabkitValueError
from labkit.core.timing import RunStats

_SET_NUM_THREADS = torch.set_num_threads
SOLUTION = Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "04_1_make_faster.py"


def _solution():
    spec = importlib.util.spec_from_file_location("solution_04_1", SOLUTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_faster


def _on_this_threads_cpu_clock(candidates, *, rounds, warmup, device):
    """The checker's compare(), each call timed by the CPU time of this thread (time.thread_time), not the wall clock:
    with torch on one thread all of a call's work runs on this thread, and other programs' load does not add to its
    CPU time, so the verdict on the solution does not depend on how busy the machine is (three wall-clock attempts
    were all "not judged" at a load of 10 to 15). Same interleaving: each candidate once per round, in order."""
    assert (warmup, device) == (0, "cpu")
    samples = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.thread_time()
            fn()
            samples[name].append(time.thread_time() - start)
    return {name: RunStats.from_samples(values) for name, values in samples.items()}


@pytest.mark.slow  # times the challenge model against the solution
def test_the_solution_solves_it(monkeypatch):
    monkeypatch.setattr(capstone_checks, "compare", _on_this_threads_cpu_clock)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the checker pins the count it starts with: one thread, whose CPU time is the call's
    try:
        result = check_make_faster(_solution())
    finally:
        torch.set_num_threads(threads)
    assert result.status is Status.SOLVED, result
    assert torch.set_num_threads is _SET_NUM_THREADS


def test_a_stub_is_not_yet_solved():
    def make_faster(model):
        raise NotImplementedError("Exercise 4.1: write make_faster(). See solutions/04_1_make_faster.py, or run %load ...")

    assert check_make_faster(make_faster).status is Status.NOT_YET


@pytest.fixture
def small_input(monkeypatch):
    """A 1 x 3 x 8 x 8 challenge input (the model takes any size): the tests that need the checker's logic, not the
    real model's cost, stay fast on a loaded machine."""
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    monkeypatch.setattr(capstone_checks, "challenge_input", lambda: x.clone())


def _fake_timing(monkeypatch, seconds):
    """Replace the checker's timing: each version still runs as often as the real one runs it, and
    ``seconds(name, round)`` is the time of each of its calls in that round (rounds counted from 0, the warm-up's
    included), or a list of them. Returns the list of each round's order. Use it with the small_input fixture."""
    orders = []

    def timed(candidates, *, rounds, warmup, device):
        assert (rounds, warmup, device) == (capstone_checks.CALLS_PER_ROUND, 0, "cpu")  # one checker round per call
        orders.append([*candidates])
        for _ in range(rounds):
            for fn in candidates.values():
                fn()
        times = {name: seconds(name, len(orders) - 1) for name in candidates}
        return {name: RunStats.from_samples(t if isinstance(t, list) else [t] * rounds) for name, t in times.items()}

    monkeypatch.setattr(capstone_checks, "compare", timed)
    return orders


def _wrapped(model):
    return lambda x: model(x)  # the unchanged model, not recognisable as such


@pytest.mark.usefixtures("small_input")
def test_an_unchanged_model_at_the_same_speed_is_too_slow(monkeypatch):
    """The verdict logic, without the noise of real timing: equal times are 1.0x in every round, none reaches the goal."""
    _fake_timing(monkeypatch, lambda name, index: 0.01)
    result = check_make_faster(_wrapped, rounds=7)
    assert result.status is Status.WRONG, result
    assert "in only 0 of 7 interleaved rounds (median speedup 1.00x); at least 7 are needed" in result.message
    assert "time per op type" in result.message


@pytest.mark.usefixtures("small_input")
@pytest.mark.parametrize(("yours_s", "solved", "shown"), [(0.005, True, "2.00x"), (0.02, False, "0.50x")])
def test_the_speedup_is_the_original_time_over_yours(monkeypatch, yours_s, solved, shown):
    """Twice as fast is 2x (solved); twice as slow is 0.50x, not 2x (the direction a swapped ratio would get wrong)."""
    _fake_timing(monkeypatch, lambda name, index: 0.01 if name == "original" else yours_s)
    result = check_make_faster(_wrapped, rounds=7)
    assert (result.status is Status.SOLVED) is solved, result
    assert f"median speedup {shown}" in result.message


@pytest.mark.usefixtures("small_input")
@pytest.mark.parametrize(("fast_rounds", "solved"), [(16, True), (15, False)])
def test_the_goal_must_hold_in_enough_rounds_not_just_the_median(monkeypatch, fast_rounds, solved):
    """15 of 20 rounds at 2x has a median of 2x, but 15 is a count that noise alone reaches too often (2%). The original
    ran at its usual speed in every round, so the machine was not busy: a fail, not "too busy"."""
    warm_up = capstone_checks.WARMUP_ROUNDS
    _fake_timing(monkeypatch, lambda name, index: 0.005 if name == "yours" and index - warm_up < fast_rounds else 0.01)
    result = check_make_faster(_wrapped, rounds=20)
    assert (result.status is Status.SOLVED) is solved, result
    if not solved:
        assert "in only 15 of 20" in result.message and "not steadily" in result.message


def _busy_rounds(yours_fast_s, busy_rounds=8):
    """Per round: the original at 10 ms, but in the first ``busy_rounds`` counted rounds one of its calls took 20 ms (the
    machine was busy) and yours missed the goal (9 ms); in the other rounds yours took ``yours_fast_s``."""
    def seconds(name, index):
        busy = 0 <= index - capstone_checks.WARMUP_ROUNDS < busy_rounds
        if name == "original":
            return [0.01, 0.02, 0.01] if busy else 0.01
        return 0.009 if busy else yours_fast_s
    return seconds


@pytest.mark.usefixtures("small_input")
def test_misses_while_the_original_itself_ran_slow_are_too_busy_to_judge_not_a_fail(monkeypatch):
    """12 of 20 rounds at 2x: too few to pass, but the 8 that missed are rounds in which the checker's own model ran slow."""
    _fake_timing(monkeypatch, _busy_rounds(0.005))
    result = check_make_faster(_wrapped, rounds=20)
    assert result.status is Status.NOT_JUDGED and result.mistake == "", result
    assert result.message.startswith(capstone_checks.TOO_BUSY + ". Outputs match")
    assert "in 12 of 20 interleaved rounds" in result.message and "in 8 of the rounds that missed" in result.message
    assert "says nothing against your answer" in result.message


@pytest.mark.usefixtures("small_input")
def test_a_busy_machine_does_not_excuse_an_answer_that_is_too_slow_even_at_its_best(monkeypatch):
    """Yours at its fastest over the original at its fastest is 1.11x: not fast enough, however busy the machine was."""
    _fake_timing(monkeypatch, _busy_rounds(0.009))
    result = check_make_faster(_wrapped, rounds=20)
    assert result.status is Status.WRONG and result.mistake == "4.1/still-nchw", result  # the unchanged model: NCHW


@pytest.mark.usefixtures("small_input")
def test_a_version_too_slow_in_which_nothing_became_channels_last_is_told_so(monkeypatch):
    """Fusion alone keeps every convolution NCHW: the hint says so. A channels_last version that is too slow is not
    told that nothing became channels_last."""
    _fake_timing(monkeypatch, lambda name, index: 0.01)
    fused = check_make_faster(lambda model: fuse(model, inplace=False), rounds=7)
    assert fused.mistake == "4.1/still-nchw" and "nothing became channels_last" in fused.message, fused

    def channels_last(model):
        mine = copy.deepcopy(model).to(memory_format=torch.channels_last)
        return lambda x: mine(x.contiguous(memory_format=torch.channels_last))

    converted = check_make_faster(channels_last, rounds=7)
    assert converted.mistake == "4.1/not-fast-enough" and "nothing became" not in converted.message, converted


@pytest.mark.usefixtures("small_input")
def test_too_few_busy_misses_to_have_decided_it_is_a_fail(monkeypatch):
    """13 rounds reach 2x; 2 missed while the original ran slow, 5 while it ran at its usual speed: 13 + 2 < 16."""
    quiet_miss = {3, 4, 5, 6, 7}

    def seconds(name, index):
        counted = index - capstone_checks.WARMUP_ROUNDS
        if name == "original":
            return [0.01, 0.02, 0.01] if counted in (0, 1) else 0.01
        return 0.009 if counted in (0, 1) or counted in quiet_miss else 0.005

    _fake_timing(monkeypatch, seconds)
    result = check_make_faster(_wrapped, rounds=20)
    assert result.status is Status.WRONG and result.mistake == "4.1/not-steadily-faster", result


@pytest.mark.usefixtures("small_input")
def test_a_burst_that_slows_one_call_of_a_round_does_not_decide_it(monkeypatch):
    """Each round compares the versions' fastest calls: load only adds time."""
    _fake_timing(monkeypatch, lambda name, index: [0.01, 0.01, 0.01] if name == "original" else [0.005, 0.05, 0.005])
    result = check_make_faster(_wrapped, rounds=7)
    assert result.status is Status.SOLVED and "7 of 7 interleaved rounds (median speedup 2.00x)" in result.message


@pytest.mark.usefixtures("small_input")
def test_rounds_alternate_which_version_goes_first(monkeypatch):
    orders = _fake_timing(monkeypatch, lambda name, index: 0.01)
    check_make_faster(_wrapped, rounds=7)
    assert len(orders) == capstone_checks.WARMUP_ROUNDS + 7 == 8
    assert orders[1:5] == [["original", "yours"], ["yours", "original"], ["original", "yours"], ["yours", "original"]]


@pytest.mark.parametrize("rounds", [1, 6, 20, 30])
def test_wins_needed_is_the_smallest_count_noise_reaches_at_most_one_time_in_a_hundred(rounds):
    def tail(wins):
        return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2**rounds

    needed = capstone_checks.wins_needed(rounds)
    assert tail(needed) <= capstone_checks.FALSE_PASS_BOUND < tail(needed - 1)
    assert (needed <= rounds) is (rounds >= capstone_checks.MIN_ROUNDS)
    assert capstone_checks.wins_needed(20) == 16 and capstone_checks.MIN_ROUNDS == 7


@pytest.mark.usefixtures("small_input")
def test_the_thread_count_is_pinned_before_every_call_of_either_version(monkeypatch):
    """Whatever ran before (here: a timing that leaves another count before each call), each version runs on the count
    the check started with."""
    start = torch.get_num_threads()
    seen = {"original": [], "yours": []}
    original_forward = torch.nn.Sequential.forward

    def timed(candidates, *, rounds, warmup, device):
        for _ in range(rounds):
            for name, fn in candidates.items():
                _SET_NUM_THREADS(start + 1)
                seen["now"] = name
                fn()
                del seen["now"]
        return {name: RunStats.from_samples([0.01] * rounds) for name in candidates}

    def spy(self, x):  # the checker's original and the learner's given model are both Sequentials
        if "now" in seen:
            seen[seen["now"]].append(torch.get_num_threads())
        return original_forward(self, x)

    monkeypatch.setattr(capstone_checks, "compare", timed)
    monkeypatch.setattr(torch.nn.Sequential, "forward", spy)
    check_make_faster(_wrapped, rounds=7)
    calls = (capstone_checks.WARMUP_ROUNDS + 7) * capstone_checks.CALLS_PER_ROUND
    assert seen["original"] == seen["yours"] == [start] * calls
    assert torch.get_num_threads() == start


@pytest.mark.usefixtures("small_input")
@pytest.mark.parametrize("who", ["make_faster", "the callable", "the callable, set back"])
def test_changing_the_thread_count_is_refused_and_put_back(who):
    start = torch.get_num_threads()
    other = start + 1

    def make_faster(model):
        if who == "make_faster":
            torch.set_num_threads(other)

        def faster(x):
            if who != "make_faster":
                torch.set_num_threads(other)
            y = model(x)
            if who == "the callable, set back":
                torch._C.set_num_threads(start)
            return y

        return faster

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG, result
    subject = "make_faster" if who == "make_faster" else "Your callable"
    assert f"{subject} changed torch's thread count (torch.set_num_threads: {start} -> {other})" in result.message
    assert torch.get_num_threads() == start
    assert torch.set_num_threads is _SET_NUM_THREADS and torch._C.set_num_threads is _SET_NUM_THREADS


@pytest.mark.usefixtures("small_input")
def test_a_thread_count_changed_and_set_back_inside_make_faster_is_harmless():
    """make_faster runs before anything is timed: only the count it leaves behind matters."""
    start = torch.get_num_threads()

    def make_faster(model):
        torch.set_num_threads(start + 1)
        torch.set_num_threads(start)
        return model

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "returned the model you were given, unchanged" in result.message


@pytest.mark.usefixtures("small_input")
def test_changing_the_original_in_place_is_caught():
    def in_place(model):
        model.to(memory_format=torch.channels_last)
        model[0].weight.data.mul_(2)
        return model

    result = check_make_faster(in_place)
    assert result.status is Status.WRONG, result
    assert "The model you were given changed (its 0.weight is channels_last now" in result.message


@pytest.mark.usefixtures("small_input")
def test_wrong_return_value_is_explained():
    result = check_make_faster(lambda model: 42)
    assert result.status is Status.WRONG and "must return a callable" in result.message
    result = check_make_faster(lambda model: lambda x: model(x).tolist())
    assert result.status is Status.WRONG and "returned a list" in result.message
    result = check_make_faster(lambda model: lambda x: model(x)[:, :3])
    assert result.status is Status.WRONG and "output shape" in result.message
    result = check_make_faster(lambda model: lambda x: model(x).to(torch.int64))
    assert result.status is Status.WRONG and "floating-point" in result.message


def test_converting_the_input_outside_the_timed_path_is_refused():
    # The old loophole: hand back a pre-converted input with the model, so its conversion is never timed.
    x_cl = challenge_input().contiguous(memory_format=torch.channels_last)
    result = check_make_faster(lambda model: (fuse(model, inplace=False).to(memory_format=torch.channels_last), x_cl))
    assert result.status is Status.WRONG and "not a pair" in result.message


@pytest.mark.usefixtures("small_input")
def test_a_cached_output_is_caught():
    def make_faster(model):
        cache = {}

        def faster(x):
            if "y" not in cache:
                cache["y"] = model(x)
            return cache["y"]

        return faster

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "fresh input" in result.message and "stored result" in result.message


def test_an_answer_precomputed_for_the_challenge_input_is_caught():
    def make_faster(model):
        with torch.inference_mode():
            answer = model(challenge_input())
        return lambda x: answer

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "fresh input" in result.message


@pytest.mark.usefixtures("small_input")
def test_every_timed_output_is_checked():
    # Right for the calls before timing, then fast and wrong: the checker compares the timed calls' outputs too.
    def make_faster(model):
        calls = []

        def faster(x):
            calls.append(1)
            return model(x) if len(calls) <= 4 else torch.zeros(x.shape[0], 10)  # the challenge input, 3 warm-up calls

        return faster

    result = check_make_faster(make_faster, rounds=7)
    assert result.status is Status.WRONG and "fresh input batch 4 of 24" in result.message


@pytest.mark.usefixtures("small_input")
def test_an_unchanged_copy_is_refused_but_a_copy_with_a_hook_is_timed(monkeypatch):
    result = check_make_faster(copy.deepcopy)
    assert result.status is Status.WRONG and "returned a copy of the model, unchanged" in result.message

    def with_a_hook(model):
        faster = copy.deepcopy(model)
        faster.register_forward_pre_hook(lambda module, args: (args[0].contiguous(memory_format=torch.channels_last),))
        return faster

    _fake_timing(monkeypatch, lambda name, index: 0.01)
    assert "interleaved rounds" in check_make_faster(with_a_hook, rounds=7).message


@pytest.mark.usefixtures("small_input")
def test_a_lower_precision_is_named_as_such():
    def in_bfloat16(model):
        faster = copy.deepcopy(model).to(torch.bfloat16)
        return lambda x: faster(x.to(torch.bfloat16))

    def in_float16_cast_back(model):
        faster = copy.deepcopy(model).half()
        return lambda x: faster(x.half()).float()

    result = check_make_faster(in_bfloat16)
    assert result.status is Status.WRONG and "your output is torch.bfloat16" in result.message
    result = check_make_faster(in_float16_cast_back)
    assert result.status is Status.WRONG and "about what bfloat16 or float16 gives" in result.message
    assert "stored result" not in result.message


@pytest.mark.usefixtures("small_input")
def test_training_mode_is_named():
    def make_faster(model):
        faster = copy.deepcopy(model).train()
        return lambda x: faster(x)

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "training mode" in result.message


@pytest.mark.usefixtures("small_input")
def test_a_patched_torch_function_is_refused_and_put_back(monkeypatch):
    """The guard in run_check refuses it; here: also when the answer would otherwise be solved, and torch is restored."""
    _fake_timing(monkeypatch, lambda name, index: 0.01 if name == "original" else 0.005)
    max_pool = torch.nn.MaxPool2d.forward

    def make_faster(model):
        torch.nn.MaxPool2d.forward = lambda self, x: max_pool(self, x)
        return _wrapped(model)

    result = check_make_faster(make_faster, rounds=7)
    assert result.status is Status.WRONG and "MaxPool2d.forward (restored)" in result.message
    assert torch.nn.MaxPool2d.forward is max_pool


@pytest.mark.usefixtures("small_input")
def test_an_error_in_the_learners_callable_points_at_their_line():
    def make_faster(model):
        def faster(x):
            return model(x.view(8, -1))  # the learner's mistake

        return faster

    result = check_make_faster(make_faster)
    assert result.status is Status.WRONG and "RuntimeError" in result.message and "of faster)" in result.message


@pytest.mark.parametrize("rounds", [0, -1, 2.5, "5", True, 6])
def test_bad_rounds_is_a_clear_error(rounds):
    with pytest.raises(LabkitValueError, match="rounds must be a whole number of at least 7"):
        check_make_faster(lambda model: model, rounds=rounds)


@pytest.mark.usefixtures("small_input")
def test_checkers_leave_the_learners_random_stream_alone():
    from labkit.fx.checks import check_shape_flop_recorder
    from labkit.memory_format.checks import check_find_format_dropper

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_make_faster(lambda model: (lambda x: model(x)[:, :3]))  # fresh inputs and a first check, then fails fast
    check_shape_flop_recorder(object)
    check_find_format_dropper(lambda model, x: None)
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------------------------- cheats found in the issue-24 audit


def test_the_original_runs_without_the_global_hooks_modes_and_profile_functions_an_answer_installs():
    from torch.overrides import TorchFunctionMode

    seen = []

    class Watching(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append("mode")
            return func(*args, **(kwargs or {}))

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: seen.append("hook"))
    profile = capstone_checks.sys.getprofile()
    try:
        capstone_checks.sys.setprofile(lambda frame, event, arg: None)
        learners_profile = capstone_checks.sys.getprofile()
        with Watching():
            with capstone_checks._as_torch_runs_it():
                model(torch.randn(1, 3, 5, 5))
                assert capstone_checks.sys.getprofile() is None
            assert seen == []
            model(torch.randn(1, 3, 5, 5))  # afterwards all three are back, the same ones
        assert "hook" in seen and "mode" in seen and capstone_checks.sys.getprofile() is learners_profile
    finally:
        capstone_checks.sys.setprofile(profile)
        handle.remove()


@pytest.mark.usefixtures("small_input")
def test_a_thread_left_running_the_learners_code_is_refused(monkeypatch):
    import threading

    _fake_timing(monkeypatch, lambda name, index: 0.01 if name == "original" else 0.005)  # would be solved
    stop = threading.Event()

    def make_faster(model):
        def burn():  # would take CPU from the original's calls whenever the answer's own callable is not running
            while not stop.wait(0.001):
                pass

        threading.Thread(target=burn, name="burner", daemon=True).start()
        faster = copy.deepcopy(model)
        faster.register_forward_hook(lambda module, args, output: output)
        return faster

    try:
        result = check_make_faster(make_faster, rounds=7)
    finally:
        stop.set()
    assert result.status is Status.WRONG and result.mistake == "4.1/started-a-thread", result.message
    assert "burner" in result.message


@pytest.mark.usefixtures("small_input")
def test_a_change_to_the_checkers_own_model_through_gc_is_refused(monkeypatch):
    import gc

    _fake_timing(monkeypatch, lambda name, index: 0.01 if name == "original" else 0.005)  # would be solved

    def make_faster(model):
        faster = copy.deepcopy(model)
        faster.register_forward_hook(lambda module, args, output: output)
        changed = []

        def call(x):
            if not changed:  # every model like the one it was given, the checker's own too: a slower layout, same values
                for other in gc.get_objects():
                    if type(other) is torch.nn.Sequential and other is not faster and len(other) == len(faster):
                        for layer in other.modules():
                            if isinstance(layer, torch.nn.Conv2d):
                                layer.weight.data = layer.weight.detach().permute(2, 3, 0, 1).contiguous().permute(2, 3, 0, 1)
                changed.append(True)
            return faster(x)

        return call

    result = check_make_faster(make_faster, rounds=7)
    assert result.status is Status.WRONG and result.mistake == "4.1/changed-the-checkers-model", result.message


def test_a_solved_verdict_claims_no_input_conversion_the_answer_may_not_have_done():
    rounds = [capstone_checks._Round(RunStats.from_samples([2e-3] * 3), RunStats.from_samples([1e-3] * 3))] * 20
    verdict = capstone_checks._verdict(rounds)
    assert "input conversion included" not in verdict and "whatever your function does to each input" in verdict
