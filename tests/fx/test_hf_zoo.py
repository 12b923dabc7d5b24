"""labkit.fx.hf_zoo: Hugging Face types from small configs, seeded random weights, keyword inputs, clear errors."""
import socket
import sys
import types

import pytest
import torch

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.fx import hf_zoo

REQUIRED = ("bert", "gpt2", "t5", "llama", "vit", "whisper", "clip")


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: building from a config must download nothing."""
    monkeypatch.setattr(socket.socket, "connect", lambda *a, **k: pytest.fail("tried to open a connection"))


def _fake_transformers(monkeypatch, version="5.0.0", torch_ok=True):
    fake = types.ModuleType("transformers")
    fake.__version__ = version
    fake.utils = types.SimpleNamespace(is_torch_available=lambda: torch_ok)
    monkeypatch.setitem(sys.modules, "transformers", fake)
    return fake


def test_the_registry_holds_the_types_the_issue_names_each_with_a_small_config():
    assert set(REQUIRED) <= set(hf_zoo.registry())
    for entry in hf_zoo.registry().values():
        assert entry.model_class.endswith("Model") and entry.config_class.endswith("Config")
        assert "hidden 64, " in entry.config_text() and entry.config_text().endswith("4 heads")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bert", "input_ids 1x16, attention_mask 1x16"),
        ("t5", "input_ids 1x16, attention_mask 1x16, decoder_input_ids 1x16"),
        ("vit", "pixel_values 1x3x32x32"),
        ("whisper", "input_features 1x80x64, decoder_input_ids 1x16"),  # num_mel_bins x 2 * max_source_positions
        ("clip", "input_ids 1x16, attention_mask 1x16, pixel_values 1x3x32x32"),
    ],
)
def test_inputs_in_words_come_from_the_small_config_without_transformers(name, text, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    assert hf_zoo.registry()[name].input_text() == text


@pytest.mark.parametrize(
    ("given", "name"), [("BERT", "bert"), ("gpt-2", "gpt2"), ("Qwen2Model", "qwen2"), ("distil_bert", "distilbert"),
                        (" ViT ", "vit")],
)
def test_names_resolve_in_any_case_with_or_without_separators(given, name):
    assert hf_zoo.resolve_name(given) == name


def test_an_unknown_type_lists_the_close_matches():
    with pytest.raises(LabkitValueError) as info:
        hf_zoo.resolve_name("bret")
    assert str(info.value) == (
        "Unknown Hugging Face model type 'bret'. Did you mean bert, bart? Run `python -m labkit zoo --list` to see every type.")
    with pytest.raises(LabkitValueError, match=r"^Unknown Hugging Face model type 'zzzz'\. Run "):
        hf_zoo.resolve_name("zzzz")


def test_comma_lists_repeats_and_all():
    assert hf_zoo.resolve_names(["bert,GPT2", "bert", "t5,"]) == ["bert", "gpt2", "t5"]
    assert hf_zoo.resolve_names(["llama", "all"]) == ["llama"] + [n for n in hf_zoo.registry() if n != "llama"]


def test_transformers_missing_is_a_labkit_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(hf_zoo.TransformersUnavailableError) as info:
        hf_zoo.build_model("bert")
    assert isinstance(info.value, LabkitError) and isinstance(info.value, ImportError)
    assert str(info.value).endswith("Install labkit's extra for it: pip install 'torch-labkit[hf]'")


def test_a_torch_too_old_for_transformers_names_both_versions(monkeypatch):
    _fake_transformers(monkeypatch, "5.1.0", torch_ok=False)
    with pytest.raises(hf_zoo.TransformersUnavailableError) as info:
        hf_zoo.build_model("bert")
    message = str(info.value)
    assert message.startswith(f"transformers 5.1.0 does not run on torch {torch.__version__}: ")
    assert "transformers 5 needs torch >= 2.6" in message and message.endswith("pip install 'transformers>=4.45,<4.46'")


def test_an_old_transformers_or_a_missing_class_says_to_upgrade(monkeypatch):
    _fake_transformers(monkeypatch, "4.30.2")
    with pytest.raises(hf_zoo.TransformersUnavailableError, match=r"^transformers 4\.30\.2 is older than 4\.45, "):
        hf_zoo.build_model("bert")
    _fake_transformers(monkeypatch, "4.46.0")
    with pytest.raises(hf_zoo.TransformersUnavailableError, match=r"^transformers 4\.46\.0 has no Qwen2Config\. Upgrade"):
        hf_zoo.build_model("qwen2")


@pytest.mark.parametrize("name", list(hf_zoo.registry()))
def test_each_type_builds_and_runs_eagerly_on_its_inputs(name, transformers, no_network):
    model = hf_zoo.build_model(name)
    inputs = hf_zoo.example_inputs(name, model)
    assert not model.training and model.config._attn_implementation == hf_zoo.ATTENTION
    assert sum(p.numel() for p in model.parameters()) < 300_000  # small: the full-size configs are 10^8 - 10^9
    shapes = hf_zoo.registry()[name].shapes()
    assert {k: tuple(v.shape) for k, v in inputs.items() if k != "use_cache"} == shapes
    with torch.no_grad():
        output = model(**inputs)
    hidden = output.logits_per_image if name == "clip" else output.last_hidden_state
    assert torch.isfinite(hidden).all() and hidden.shape[0] == 1


#: The types whose config has use_cache: decoders, and encoders whose forward takes it.
DECODERS = ("gpt2", "llama", "mistral", "qwen2", "t5", "bart", "whisper")


@pytest.mark.parametrize("name", [name for name in DECODERS if name in hf_zoo.registry()])
def test_a_decoder_is_profiled_by_a_graph_without_use_cache_in_its_inputs(name, transformers, no_network):
    from labkit.fx.profile import profile_model

    model = hf_zoo.build_model(name)
    inputs = hf_zoo.example_inputs(name, model)
    inputs.pop("use_cache", None)  # as a user who never heard of it calls it
    report = profile_model(model, kwargs=inputs, warmup=0, runs=1, fallback=False)
    assert report.capture in ("symbolic_trace", "export")
    assert any("use_cache=False was passed" in note for note in report.notes) and "use_cache" not in inputs


def test_use_cache_false_goes_to_every_model_that_takes_it(transformers):
    assert hf_zoo.example_inputs("gpt2")["use_cache"] is False
    assert hf_zoo.example_inputs("whisper")["use_cache"] is False
    assert "use_cache" not in hf_zoo.example_inputs("vit") and "use_cache" not in hf_zoo.example_inputs("clip")


def test_token_ids_lie_in_the_vocabulary_and_masks_are_ones(transformers):
    inputs = hf_zoo.example_inputs("t5", batch=3)
    assert inputs["input_ids"].shape == (3, hf_zoo.SEQUENCE_LENGTH) and inputs["input_ids"].dtype == torch.long
    assert 0 <= int(inputs["decoder_input_ids"].min()) and int(inputs["input_ids"].max()) < 1000
    assert bool((inputs["attention_mask"] == 1).all())
    with pytest.raises(LabkitValueError, match=r"^batch must be at least 1 \(got 0\); e\.g\. batch=1\.$"):
        hf_zoo.example_inputs("t5", batch=0)


def test_builds_and_inputs_are_seeded_and_leave_the_global_rng_alone(transformers):
    state = torch.get_rng_state()
    first, second = hf_zoo.build_model("llama"), hf_zoo.build_model("llama")
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    other = hf_zoo.build_model("llama", seed=1)
    assert not torch.equal(other.embed_tokens.weight, first.embed_tokens.weight)
    assert torch.equal(hf_zoo.example_inputs("vit")["pixel_values"], hf_zoo.example_inputs("vit")["pixel_values"])
