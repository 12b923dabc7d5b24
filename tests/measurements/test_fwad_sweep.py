"""The fwad-sweep report: its classifier on hand-made functions, and a small run over real OpInfos.

Importing PyTorch's op_db freezes the torch.backends flags for the whole process, so the
run over real OpInfos happens in a subprocess; everything else stays in this process.
"""
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch

from labkit.__main__ import main
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.forward_ad import derivatives as forward_ad
from labkit.measurements import fwad_sweep as sweep


class SlightlyWrongSquare(torch.autograd.Function):
    """x**2 whose forward-mode derivative is 1% too large (the miss of issue 16, item 6)."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return 2.02 * x * tangent


def _tangents(*values):
    return sweep._Tangents([torch.tensor(v, dtype=torch.float64) for v in values])


def _fd(values, reliable=True):
    value = torch.tensor(values, dtype=torch.float64)
    return sweep._FiniteDifferences([value], [torch.ones_like(value)], [torch.full(value.shape, reliable)])


def test_sin_agrees_with_every_method():
    result = sweep.sweep_function(torch.sin, torch.linspace(-2, 2, 7, dtype=torch.float64), op="sin")
    assert (result.jvp, result.verify_jvp) == (sweep.AGREE, sweep.AGREE), result.detail
    assert result.warnings == ()


def test_integer_output_is_not_differentiable_or_a_clear_error():
    result = sweep.sweep_function(lambda x: x.argmax(), torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64))
    assert result.jvp in (sweep.NOT_DIFFERENTIABLE, sweep.LABKIT_ERROR)


def test_an_op_that_fails_without_ad_is_not_labkits_raw_error():
    def cuda_only(x):
        raise RuntimeError("only on CUDA")

    result = sweep.sweep_function(cuda_only, torch.ones(2, dtype=torch.float64))
    assert (result.jvp, result.verify_jvp) == (sweep.OP_FAILS, sweep.OP_FAILS)


def test_a_zero_tangent_where_finite_differences_see_a_slope_is_silent_wrong_unless_labkit_warned():
    zero = _tangents([0.0, 0.0])
    classify = sweep._classify_jvp
    assert classify(zero, None, zero, _fd([0.9, -0.3]), False, True)[0] == sweep.SILENT_WRONG
    assert classify(zero, None, zero, _fd([0.9, -0.3]), True, True)[0] == sweep.LABKIT_WARNING
    assert classify(zero, None, zero, _fd([0.9, -0.3], reliable=False), False, True)[0] == sweep.AGREE  # a jump
    assert classify(zero, None, zero, _fd([0.0, 0.0]), False, True)[0] == sweep.AGREE  # round(), sign()


def test_jvp_classes_from_errors_and_disagreement():
    one = _tangents([1.0])
    classify = sweep._classify_jvp
    assert classify(one, LabkitValueError("bad"), one, None, False, True)[0] == sweep.LABKIT_ERROR
    assert classify(one, RuntimeError("deep"), one, None, False, True)[0] == sweep.RAW_ERROR
    assert classify(one, None, _tangents([1.5]), None, False, True)[0] == sweep.SILENT_WRONG
    assert classify(one, None, sweep._Tangents(None, "failed"), None, False, True)[0] == sweep.UNVERIFIED
    assert classify(one, None, sweep._Tangents(None, "failed"), _fd([1.0]), False, True)[0] == sweep.AGREE
    assert classify(_tangents([]), None, _tangents([]), None, False, True)[0] == sweep.EMPTY


def test_methods_agree_ignores_positions_that_are_not_finite():
    with_nan = _tangents([1.0, float("nan")])
    assert sweep._methods_agree(with_nan, with_nan, _fd([1.0, 0.0])) is True
    assert sweep._methods_agree(with_nan, with_nan, _fd([1.2, 0.0])) is False
    assert sweep._methods_agree(_tangents([1.0]), _tangents([1.1]), None) is False
    assert sweep._methods_agree(_tangents([1.0]), sweep._Tangents(None), None) is None
    nothing_finite = _tangents([float("nan"), float("inf")])
    assert sweep._methods_agree(nothing_finite, nothing_finite, _fd([0.0, 0.0], reliable=False)) is None  # not "agree"
    assert sweep._methods_agree(_tangents([]), _tangents([]), None) is True  # empty outputs agree trivially
    assert sweep._methods_agree(_tangents([1.0]), _tangents([1.0]), _fd([1.0 + 1e-4])) is False  # a 1e-4 error is found


@pytest.mark.parametrize(
    ("ok", "agree", "expected"),
    [(True, True, sweep.AGREE), (False, False, sweep.AGREE), (False, True, sweep.FALSE_ALARM),
     (True, False, sweep.MISS), (True, None, sweep.UNVERIFIED)],
)
def test_check_jvp_verdict_is_judged_against_the_methods(ok, agree, expected):
    report = SimpleNamespace(ok=ok, to_text=lambda: "method  error\nfd  0.1")
    assert sweep._classify_verification(report, None, agree)[0] == expected


def test_check_jvp_errors_are_clear_or_raw():
    assert sweep._classify_verification(None, LabkitValueError("x"), True)[0] == sweep.LABKIT_ERROR
    assert sweep._classify_verification(None, RuntimeError("vjp(f, ...): All outputs"), True)[0] == sweep.RAW_ERROR


def test_a_one_percent_wrong_custom_jvp_is_a_miss_exactly_when_check_jvp_says_ok():
    x = torch.tensor([0.5, 1e4], dtype=torch.float64)
    result = sweep.sweep_function(SlightlyWrongSquare.apply, x, op="square")
    assert result.jvp == sweep.AGREE  # the dual API and torch.func.jvp both use the custom jvp
    t = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    said_ok = forward_ad.verify_jvp(SlightlyWrongSquare.apply, x, t).ok
    assert result.verify_jvp == (sweep.MISS if said_ok else sweep.AGREE)


def _fake_op(name, sample_inputs, supports_forward_ad=True, dtypes=(torch.float64,)):
    return SimpleNamespace(
        name=name, variant_test_name="", supports_forward_ad=supports_forward_ad, op=torch.sin,
        supported_dtypes=lambda device: set(dtypes), sample_inputs=sample_inputs,
    )


def _samples(*inputs):
    return lambda device, dtype, requires_grad=False: iter(SimpleNamespace(input=x, args=(), kwargs={}) for x in inputs)


def test_sweep_op_skips_complex_inputs_and_takes_at_most_n_samples():
    x = torch.linspace(0, 1, 4, dtype=torch.float64)
    op = _fake_op("sin", _samples(x.to(torch.complex128), x, x, x))
    results = sweep.sweep_op(op, samples=2, op_timeout=60)
    assert [r.jvp for r in results] == [sweep.SKIPPED_INPUT, sweep.AGREE]


def test_a_sparse_primal_is_only_checked_for_a_clear_error():
    x = torch.eye(3, dtype=torch.float64).to_sparse()
    result = sweep.sweep_function(torch.sin, x)
    try:
        forward_ad.jvp(torch.sin, x, torch.ones(3, 3, dtype=torch.float64))
        expected = sweep.SKIPPED_INPUT
    except LabkitError:
        expected = sweep.LABKIT_ERROR
    except Exception:
        expected = sweep.RAW_ERROR
    assert result.jvp == expected, result.detail


def test_an_op_without_float64_or_whose_samples_fail_is_one_counted_entry():
    def broken(device, dtype, requires_grad=False):
        raise RuntimeError("no samples for you")

    assert [r.jvp for r in sweep.sweep_op(_fake_op("i", _samples(), dtypes=(torch.int64,)), 2, 60)] == [sweep.NO_SAMPLES]
    results = sweep.sweep_op(_fake_op("b", broken), 2, 60)
    assert [(r.jvp, r.sample) for r in results] == [(sweep.NO_SAMPLES, -1)] and "no samples for you" in results[0].detail


def test_an_op_past_its_time_budget_is_stopped_and_counted_too_slow():
    def slow(device, dtype, requires_grad=False):
        yield SimpleNamespace(input=torch.ones(2, dtype=torch.float64), args=(), kwargs={})
        while True:
            time.sleep(0.01)

    results = sweep.sweep_op(_fake_op("slow", slow), samples=2, op_timeout=0.5)
    assert [r.jvp for r in results] == [sweep.AGREE, sweep.TOO_SLOW]


def test_counts_add_up_and_the_global_rng_is_untouched():
    x = torch.linspace(0, 1, 4, dtype=torch.float64)
    ops = [_fake_op("sin", _samples(x, x)), _fake_op("cos", _samples(x), supports_forward_ad=False)]
    state = torch.get_rng_state()
    report = sweep.run_sweep(ops, samples=2)
    assert torch.equal(state, torch.get_rng_state())
    for method in ("jvp", "verify_jvp"):
        counts = report.counts(method)
        assert sum(c[True] for c in counts.values()) == 2 and sum(c[False] for c in counts.values()) == 1
    assert report.table().rows[-1] == ["total", 2, 1, 2, 1]
    assert json.loads(report.to_json())["counts"]["jvp"]["agree"] == {"fwd_ad_ops": 2, "other_ops": 1}


def test_select_ops_by_name_variant_and_limit():
    ops = [SimpleNamespace(name="a", variant_test_name=""), SimpleNamespace(name="b", variant_test_name="v"),
           SimpleNamespace(name="b", variant_test_name="w")]
    assert [sweep._op_name(op) for op in sweep.select_ops(ops, ["b"], None)] == ["b.v", "b.w"]
    assert [sweep._op_name(op) for op in sweep.select_ops(ops, ["b.w", "a"], None)] == ["a", "b.w"]
    assert len(sweep.select_ops(ops, None, 2)) == 2
    with pytest.raises(LabkitValueError, match=r"no OpInfo named 'bb' \(did you mean b"):
        sweep.select_ops(ops, ["bb"], None)


@pytest.mark.parametrize("argv", [["--samples", "0"], ["--limit", "-1"], ["--op-timeout", "nan"]])
def test_cli_refuses_bad_numbers(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fwad-sweep", *argv])
    assert exit_info.value.code == 2 and "must be a positive" in capsys.readouterr().err


def test_cli_refuses_a_folder_as_json_before_the_sweep(tmp_path, capsys):
    assert main(["fwad-sweep", "--json", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert "torch.testing._internal.common_methods_invocations" not in sys.modules


@pytest.mark.slow  # imports op_db in a fresh interpreter: half a minute on a loaded 2-core machine
def test_cli_sweeps_real_opinfos_and_writes_json(tmp_path):
    target = tmp_path / "sweep.json"
    ops = ["sin", "mul", "floor_divide", "special.bessel_j0", "argmax"]
    argv = ["fwad-sweep", "--ops", *ops, "--json", str(target)]
    code = f"import sys; from labkit.__main__ import main; sys.exit(main({argv!r}))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "fwad-sweep: 5 OpInfo ops" in run.stdout and "JSON written to" in run.stdout
    payload = json.loads(target.read_text())
    results = payload["results"]
    for method in ("jvp", "verify_jvp"):
        assert sum(sum(c.values()) for c in payload["counts"][method].values()) == len(results)
    by_op = {}
    for result in results:
        by_op.setdefault(result["op"], []).append(result["jvp"])
    assert set(by_op) == set(ops)
    assert by_op["sin"] == [sweep.AGREE] * len(by_op["sin"])
    assert set(by_op["argmax"]) <= {sweep.NOT_DIFFERENTIABLE, sweep.LABKIT_ERROR}
    assert set(by_op["floor_divide"]) <= sweep.GOOD_CLASSES
    # sample 0 of bessel_j0 has a nonzero derivative: never a silent "agree" with a zero tangent
    assert by_op["special.bessel_j0"][0] in {sweep.SILENT_WRONG, sweep.LABKIT_WARNING, sweep.LABKIT_ERROR}
