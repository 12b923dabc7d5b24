import pytest
import torch

from labkit.core.device import ENV_VAR, available_devices, device_line, pick_device, synchronize
from labkit.core.errors import LabkitError


def test_available_devices_end_with_cpu():
    devices = available_devices()
    assert devices[-1] == "cpu"
    assert ("cuda" in devices) == torch.cuda.is_available()


def test_pick_device_defaults_to_best_available(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert pick_device().type == available_devices()[0]


def test_explicit_preference_and_env_override(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cpu")
    assert pick_device() == torch.device("cpu")
    assert pick_device("cpu") == torch.device("cpu")


def test_unknown_device_name_is_a_labkit_error(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "gpu-please")
    with pytest.raises(LabkitError, match="not a device name"):
        pick_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_says_what_is_available():
    with pytest.raises(LabkitError, match=r"'cuda' was requested but is not available.*\['cpu'"):
        pick_device("cuda")


def test_synchronize_and_device_line_on_cpu():
    synchronize("cpu")
    assert device_line("cpu") == f"cpu ({torch.get_num_threads()} threads)"
