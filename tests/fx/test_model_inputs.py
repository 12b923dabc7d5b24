"""labkit.fx.model_inputs: a model's keyword inputs, ``helper(model, *args, kwargs={...})``, in every fx helper."""
import warnings

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitError
from labkit.fx.crosscheck import compare_with_torch_profiler
from labkit.fx.fusion import fuse_conv_bn_library, fusion_timings, verify_fusion
from labkit.fx.model_inputs import (
    InputsDoNotFitError,
    KeywordsIntoVarKeywordError,
    StrayKeywordError,
    UnknownKeywordInputError,
    graph_arguments,
)
from labkit.fx.module_hooks import ModuleProfiler
from labkit.fx.profile import (
    TraceFallbackWarning,
    make_profiler,
    profile_model,
    require_profilable,
    trace,
)

X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
MASK = torch.rand(2, 4, generator=torch.Generator().manual_seed(1))


class Masked(nn.Module):
    """A forward with an optional input and a keyword-only option, as many library models have."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, mask=None, *, scale=1.0):
        y = self.linear(x) * scale
        if mask is not None:
            y = y * mask
        return torch.relu(y)


class VarKeywords(nn.Module):
    """A Hugging Face-style forward: named input ids, everything else through ``**kwargs``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.linear = nn.Linear(4, 4)

    def forward(self, input_ids, **kwargs):
        hidden = self.embed(input_ids) * kwargs["attention_mask"].unsqueeze(-1)  # fails unless given as a keyword
        return self.linear(hidden)


class InPlace(nn.Module):
    """Changes its keyword input in place."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, mask=None):
        mask.mul_(2)
        return self.linear(x) * mask


IDS = torch.tensor([[1, 2, 3], [4, 5, 6]])
ATTENTION = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def _rows(report):
    return [(r.op, r.name, r.target, r.op_type) for r in report.rows]


@pytest.mark.parametrize("mode", ["fast", "interpreter", "modules"])
def test_keyword_inputs_profile_like_the_positional_call(mode):
    model = Masked().eval()
    by_keyword = profile_model(model, X, kwargs={"mask": MASK}, mode=mode, warmup=0, runs=2)
    by_position = profile_model(model, X, MASK, mode=mode, warmup=0, runs=2)
    assert by_keyword.mode == mode
    assert _rows(by_keyword) == _rows(by_position)


@pytest.mark.parametrize("mode", ["fast", "interpreter", "modules"])
def test_a_keyword_only_parameter_is_passed_in_every_mode(mode):
    report = profile_model(Masked().eval(), X, kwargs={"mask": MASK, "scale": 2.0}, mode=mode, warmup=0, runs=1)
    assert report.mode == mode and report.rows


def test_the_graph_gets_keyword_inputs_at_their_parameters_place():
    model = Masked().eval()
    kwargs = {"scale": 3.0, "mask": MASK}
    assert graph_arguments(model, (X,), kwargs) == (X, MASK, 3.0)
    with torch.no_grad():
        torch.testing.assert_close(trace(model)(*graph_arguments(model, (X,), kwargs)), model(X, **kwargs))


def test_var_keyword_inputs_reach_forward_as_keywords_in_modules_mode():
    report = profile_model(VarKeywords().eval(), IDS, kwargs={"attention_mask": ATTENTION}, mode="modules", runs=1)
    assert [r.name for r in report.rows] == ["embed", "linear", "(outside leaf modules)"]


def test_var_keyword_inputs_are_profiled_by_export_and_symbolic_trace_alone_falls_back():
    report = profile_model(VarKeywords().eval(), IDS, kwargs={"attention_mask": ATTENTION}, runs=1)
    assert report.capture == "export" and report.mode == "fast" and "**kwargs" in report.fallback_reason
    with pytest.warns(TraceFallbackWarning, match=r"\*\*kwargs"):
        report = profile_model(VarKeywords().eval(), IDS, kwargs={"attention_mask": ATTENTION}, runs=1,
                               capture="symbolic_trace")
    assert report.mode == "modules"
    with pytest.raises(KeywordsIntoVarKeywordError, match="mode='modules'"):
        profile_model(VarKeywords().eval(), IDS, kwargs={"attention_mask": ATTENTION}, runs=1, fallback=False,
                      capture="symbolic_trace")


def test_a_stray_model_keyword_is_refused_naming_kwargs():
    with pytest.raises(StrayKeywordError, match=r"mask=.*pass the model's keyword inputs as kwargs=\{'mask': \.\.\.\}"):
        profile_model(Masked(), X, mask=MASK)


def test_a_misspelled_option_is_pointed_at_the_option():
    with pytest.raises(StrayKeywordError, match="spelled warmup="):
        profile_model(Masked(), X, warmups=3)


@pytest.mark.parametrize(
    "helper",
    [
        lambda **stray: make_profiler(Masked(), X, **stray),
        lambda **stray: require_profilable(Masked(), X, **stray),
        lambda **stray: ModuleProfiler(Masked(), X, **stray),
        lambda **stray: compare_with_torch_profiler(Masked(), X, **stray),
        lambda **stray: verify_fusion(Masked(), Masked(), X, **stray),
        lambda **stray: fusion_timings(Masked(), X, **stray),
    ],
    ids=["make_profiler", "require_profilable", "ModuleProfiler", "compare_with_torch_profiler", "verify_fusion",
         "fusion_timings"],
)
def test_every_helper_refuses_a_stray_keyword(helper):
    with pytest.raises(StrayKeywordError, match=r"kwargs=\{'attention_mask': \.\.\.\}"):
        helper(attention_mask=MASK)


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_an_unknown_keyword_input_lists_forwards_parameters(mode):
    with pytest.raises(UnknownKeywordInputError, match=r"'maks'.*x, mask=None, \*, scale=1\.0.*Did you mean 'mask'"):
        profile_model(Masked(), X, kwargs={"maks": MASK}, mode=mode)
    with pytest.raises(UnknownKeywordInputError, match="'maks'"):
        require_profilable(Masked(), X, kwargs={"maks": MASK}, mode=mode)


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_an_input_given_by_position_and_by_name_is_refused(mode):
    with pytest.raises(InputsDoNotFitError, match="multiple values for argument 'mask'.*once"):
        profile_model(Masked(), X, MASK, kwargs={"mask": MASK}, mode=mode)


def test_kwargs_must_be_a_dict_of_names():
    with pytest.raises(LabkitError, match="kwargs must be a dict"):
        profile_model(Masked(), X, kwargs=[MASK])


def test_require_profilable_accepts_keyword_inputs():
    require_profilable(Masked(), X, kwargs={"mask": MASK, "scale": 2.0})
    require_profilable(VarKeywords(), IDS, kwargs={"attention_mask": ATTENTION})


@pytest.mark.parametrize("mode", ["fast", "interpreter", "modules"])
def test_the_callers_keyword_tensors_are_left_unchanged(mode):
    mask = MASK.clone()
    profile_model(InPlace().eval(), X, kwargs={"mask": mask}, mode=mode, warmup=1, runs=2)
    torch.testing.assert_close(mask, MASK, rtol=0, atol=0)


def test_compare_with_torch_profiler_takes_keyword_inputs():
    model = Masked().eval()
    by_keyword = compare_with_torch_profiler(model, X, kwargs={"mask": MASK, "scale": 2.0}, warmup=0, runs=2)
    by_position = compare_with_torch_profiler(model, X, MASK, warmup=0, runs=2)
    assert set(by_keyword.labkit_pct) == set(by_position.labkit_pct)


class ScaledConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x, *, scale=1.0):
        return self.bn(self.conv(x)) * scale


def test_verify_fusion_and_fusion_timings_take_keyword_inputs():
    model = ScaledConvBn().eval()
    images = torch.randn(1, 3, 8, 8)
    fused = fuse_conv_bn_library(model)
    verdict = verify_fusion(model, fused, images, kwargs={"scale": 2.0})
    assert verdict.allclose and verdict.batchnorms_left == 0
    with pytest.raises(UnknownKeywordInputError, match="scale"):
        verify_fusion(model, fused, images, kwargs={"scal": 2.0})
    timings = fusion_timings(model, images, kwargs={"scale": 2.0}, rounds=1, warmup=0)
    assert timings.baseline == "original"


def test_a_tiny_bert_profiles_with_keyword_inputs(transformers):
    BertConfig, BertModel = transformers.BertConfig, transformers.BertModel

    config = BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, vocab_size=99
    )
    model = BertModel(config).eval()
    ids = torch.randint(0, 99, (1, 8), generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = profile_model(
            model, kwargs={"input_ids": ids, "attention_mask": torch.ones_like(ids)}, mode="modules", runs=1
        )
    assert report.mode == "modules" and len(report.rows) > 5
