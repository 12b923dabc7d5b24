"""labkit.fx.model_zoo: every torchvision model by kind, its default size, name resolution, inputs that fit."""
import warnings

import pytest
import torch

torchvision = pytest.importorskip("torchvision")

from labkit.core.errors import LabkitValueError  # noqa: E402
from labkit.fx import model_zoo  # noqa: E402


def test_the_catalog_holds_every_model_of_each_kind_and_no_quantized_one():
    catalog = model_zoo.catalog()
    models = torchvision.models
    packages = {"classification": models, "detection": models.detection, "segmentation": models.segmentation,
                "video": models.video, "optical_flow": models.optical_flow}
    for kind, package in packages.items():
        assert sorted(n for n, e in catalog.items() if e.kind == kind) == sorted(models.list_models(module=package))
    assert not any(name.startswith("quantized_") for name in catalog)
    assert [e.kind for e in catalog.values()] == sorted((e.kind for e in catalog.values()), key=model_zoo.KINDS.index)


@pytest.mark.parametrize(
    ("name", "size", "min_size", "frames"),
    [
        ("resnet18", 224, 1, 0),
        ("inception_v3", 299, 75, 0),
        ("efficientnet_b7", 600, 1, 0),
        ("swin_v2_t", 256, 4, 0),  # its weights say 256, the network takes any side from 4 px
        ("vit_b_16", 224, 224, 0),
        ("vit_h_14", 224, 224, 0),  # its default weights are 518 px; weights=None builds a 224 px ViT
        ("fcn_resnet50", 520, 1, 0),
        ("ssd300_vgg16", model_zoo.DETECTION_SIZE, 1, 0),
        ("r3d_18", 112, 1, 16),
        ("mvit_v1_b", 224, 224, 16),
        ("raft_small", 128, 128, 0),
    ],
)
def test_default_sizes_come_from_the_weights_metadata(name, size, min_size, frames):
    entry = model_zoo.catalog()[name]
    assert (entry.size, entry.min_size, entry.frames) == (size, min_size, frames)


@pytest.mark.parametrize("name", sorted(model_zoo._ARCHITECTURE_MIN_SIZE))
def test_an_architecture_minimum_is_the_smallest_side_the_model_runs_at(name):
    minimum = model_zoo.catalog()[name].min_size
    assert minimum == model_zoo._ARCHITECTURE_MIN_SIZE[name]
    model = model_zoo.build_model(name)
    with torch.no_grad():
        assert model(*model_zoo.example_inputs(name, size=minimum)).shape == (1, 1000)
        with pytest.raises(RuntimeError):
            model(*model_zoo.example_inputs(name, size=minimum - 1))


def test_every_default_size_is_one_the_model_allows():
    for entry in model_zoo.catalog().values():
        model_zoo.validate_size(entry.name, entry.size)


@pytest.mark.parametrize(
    ("given", "name"),
    [("ResNet18", "resnet18"), (" VIT_B_16 ", "vit_b_16"), ("resnet-18", "resnet18"),
     ("mobilenet-v3-small", "mobilenet_v3_small"),
     ("SSDlite320_MobileNet_V3_Large", "ssdlite320_mobilenet_v3_large"), ("RAFT_small", "raft_small")],
)
def test_names_resolve_in_any_case_with_or_without_hyphens(given, name):
    assert model_zoo.resolve_model_name(given) == name


def test_a_typo_lists_the_nearest_names_and_how_to_see_them_all():
    with pytest.raises(LabkitValueError) as info:
        model_zoo.resolve_model_name("resnet19")
    message = str(info.value)
    assert message.startswith("Unknown torchvision model 'resnet19'. Did you mean resnet18, ")
    assert message.endswith("Run `python -m labkit profile --list` to see every model.")
    with pytest.raises(LabkitValueError, match=r"Did you mean mobilenet_v3_small, "):
        model_zoo.resolve_model_name("mobilenetv3_small")


def test_a_name_like_no_model_suggests_nothing():
    with pytest.raises(LabkitValueError) as info:
        model_zoo.resolve_model_name("zzzz")
    assert str(info.value) == "Unknown torchvision model 'zzzz'. Run `python -m labkit profile --list` to see every model."


def test_a_quantized_name_points_at_its_float_namesake():
    with pytest.raises(LabkitValueError, match=r"Profile resnet18 instead\.$"):
        model_zoo.resolve_model_name("Quantized_ResNet18")


@pytest.mark.parametrize(
    ("name", "shapes"),
    [
        ("resnet18", [(2, 3, 40, 40)]),
        ("deeplabv3_resnet50", [(2, 3, 40, 40)]),
        ("r3d_18", [(2, 3, 16, 40, 40)]),
        ("raft_small", [(2, 3, 40, 40), (2, 3, 40, 40)]),
    ],
)
def test_example_inputs_are_positional_tensors_of_the_kinds_shape(name, shapes):
    inputs = model_zoo.example_inputs(name, 2, 40)
    assert [tuple(x.shape) for x in inputs] == shapes and all(x.dtype == torch.float32 for x in inputs)


def test_a_detection_model_gets_one_list_of_images_in_0_1():
    (images,) = model_zoo.example_inputs("FasterRCNN_ResNet50_FPN", 3, 40)
    assert isinstance(images, list) and [tuple(x.shape) for x in images] == [(3, 40, 40)] * 3
    assert all(0 <= float(x.min()) and float(x.max()) <= 1 for x in images)


def test_example_inputs_default_to_the_models_size():
    assert [tuple(x.shape) for x in model_zoo.example_inputs("inception_v3")] == [(1, 3, 299, 299)]
    assert model_zoo.model_info("inception_v3").input_text(4, 64) == "4x3x64x64"


@pytest.mark.parametrize(("batch", "size"), [(0, 32), (1, 0)])
def test_example_inputs_refuse_an_empty_input(batch, size):
    with pytest.raises(LabkitValueError, match="must be at least 1"):
        model_zoo.example_inputs("resnet18", batch, size)


def test_build_model_is_random_eval_and_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # GoogLeNet warns about init_weights unless it is given
        model = model_zoo.build_model("GoogLeNet")
    assert not model.training and model.aux1 is None and model.aux2 is None


@pytest.mark.parametrize(
    ("name", "size"),
    [("mc3_18", 32), ("raft_small", 128), ("ssdlite320_mobilenet_v3_large", 32), ("lraspp_mobilenet_v3_large", 32)],
)
def test_each_kinds_input_runs_its_model_with_no_download(name, size, monkeypatch):
    import torch.hub

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", lambda *a, **k: pytest.fail("tried to download weights"))
    torch.manual_seed(0)
    model = model_zoo.build_model(name)
    with torch.no_grad():
        output = model(*model_zoo.example_inputs(name, 2, size))
    assert output is not None
