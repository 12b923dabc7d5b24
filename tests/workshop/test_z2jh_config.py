"""workshop/z2jh/config.yaml: valid for the Zero to JupyterHub chart it names, without Kubernetes or the network.

Why this way: ``helm`` validates a release's values against the chart's
``values.schema.json`` after merging the user's file over the chart's own
``values.yaml``. This test does the same with the chart files vendored in
``workshop/z2jh/chart/`` (version and commit in workshop/z2jh/README.md), so a
misspelled or misplaced key fails here, not on the instructor's cluster. The
schema leaves ``hub.config`` (JupyterHub traits) and the init containers open,
so those are checked against JupyterHub's own classes and the rest of the file.
"""
from __future__ import annotations

import copy
import importlib
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from labkit.i18n.messages import LANGUAGES

Z2JH = Path(__file__).resolve().parents[2] / "workshop" / "z2jh"
WORKSPACE = "/home/jovyan/labkit-workspace"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return _load(Z2JH / "chart" / "values.schema.yaml")


@pytest.fixture(scope="module")
def chart_defaults() -> dict[str, Any]:
    return _load(Z2JH / "chart" / "values.yaml")


@pytest.fixture()
def config() -> dict[str, Any]:
    return _load(Z2JH / "config.yaml")


def helm_merge(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The values helm renders with: maps merge key by key, anything else replaces, and null deletes a default."""
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def schema_errors(values: dict[str, Any], schema: dict[str, Any], chart_defaults: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(schema)
    errors = validator.iter_errors(helm_merge(chart_defaults, values))
    return sorted(f"{'.'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors)


def test_the_chart_files_are_the_ones_the_readme_names(schema, chart_defaults):
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema_errors({}, schema, chart_defaults) == [], "the chart's own defaults must satisfy its schema"
    assert "4.4.0" in (Z2JH / "README.md").read_text(encoding="utf-8")


def test_config_matches_the_chart_values_schema(config, schema, chart_defaults):
    assert schema_errors(config, schema, chart_defaults) == []


@pytest.mark.parametrize("section, wrong, right", [
    ("singleuser", "defaultURL", "defaultUrl"),
    ("cull", "timout", "timeout"),
    (None, "singleusers", "singleuser"),
])
def test_a_misspelled_key_is_rejected(config, schema, chart_defaults, section, wrong, right):
    parent = config if section is None else config[section]
    parent[wrong] = parent.pop(right)
    assert any(wrong in error and "not allowed" in error for error in schema_errors(config, schema, chart_defaults))


def test_a_value_of_the_wrong_type_is_rejected(config, schema, chart_defaults):
    config["cull"]["timeout"] = "an hour"
    assert any(error.startswith("cull.timeout:") for error in schema_errors(config, schema, chart_defaults))


CONFIGURABLES = {  # the classes config.yaml configures by name, where they are defined
    "JupyterHub": "jupyterhub.app:JupyterHub",
    "Authenticator": "jupyterhub.auth:Authenticator",
    "Spawner": "jupyterhub.spawner:Spawner",
    "NativeAuthenticator": "nativeauthenticator:NativeAuthenticator",
    "MappingKernelManager": "jupyter_server.services.kernels.kernelmanager:MappingKernelManager",
}


def unknown_traits(traitlets_config: dict[str, dict[str, Any]]) -> set[str]:
    """``Class.trait`` names in a traitlets configuration that the class does not have."""
    unknown = set()
    for class_name, traits in traitlets_config.items():
        assert class_name in CONFIGURABLES, f"{class_name}: a class this test does not know; add it to CONFIGURABLES"
        module, _, name = CONFIGURABLES[class_name].partition(":")
        known = set(getattr(importlib.import_module(module), name).class_trait_names())
        unknown |= {f"{class_name}.{trait}" for trait in traits if trait not in known}
    return unknown


def test_hub_config_names_only_traits_jupyterhub_has(config):
    pytest.importorskip("nativeauthenticator", reason="the workshop extra (pip install -e '.[workshop]') is not installed")
    assert unknown_traits(config["hub"]["config"]) == set()
    assert unknown_traits({"NativeAuthenticator": {"open_sigup": False}}) == {"NativeAuthenticator.open_sigup"}


def test_the_learners_jupyter_server_config_names_only_real_traits(config):
    server_config = config["singleuser"]["extraFiles"]["kernel-culling"]
    assert server_config["mountPath"] == "/etc/jupyter/jupyter_server_config.json"  # read by every Jupyter server
    assert unknown_traits(server_config["data"]) == set()


def test_the_hub_is_never_open(config):
    hub_config = config["hub"]["config"]
    assert hub_config["JupyterHub"]["authenticator_class"] == "nativeauthenticator.NativeAuthenticator"
    assert hub_config["NativeAuthenticator"]["open_signup"] is False
    assert hub_config["Authenticator"]["admin_users"], "the instructor must be an admin"


def test_the_workspace_is_made_from_the_learners_image_on_their_volume(config, chart_defaults):
    singleuser = config["singleuser"]
    (init,) = singleuser["initContainers"]
    image = singleuser["image"]
    assert init["image"] == f"{image['name']}:{image['tag']}", "set the same image in both places"
    assert init["command"][:5] == ["python", "-m", "labkit", "workspace", WORKSPACE]
    volume = chart_defaults["singleuser"]["storage"]["dynamic"]["volumeNameTemplate"]
    home = chart_defaults["singleuser"]["storage"]["homeMountPath"]
    assert init["volumeMounts"] == [{"name": volume, "mountPath": home}], "the init container must write to the learner's volume"
    assert WORKSPACE.startswith(home + "/")
    assert singleuser["defaultUrl"] == "/lab/tree/" + WORKSPACE.removeprefix(home + "/")
    assert init["securityContext"]["runAsUser"] == chart_defaults["singleuser"]["uid"], "made as the learner, never as root"


def test_the_solutions_hook_is_off_until_the_instructor_turns_it_on_and_is_valid_shell(config):
    singleuser = config["singleuser"]
    shell, flag, script = singleuser["lifecycleHooks"]["postStart"]["exec"]["command"]
    assert (shell, flag) == ("sh", "-c")
    assert singleuser["extraEnv"]["LABKIT_HAND_OUT_SOLUTIONS"] == "no"
    assert f"hand-out-solutions {WORKSPACE} " in script
    assert script.rstrip().endswith("|| true; fi"), "a failed hand-out must not stop the learner's server"
    syntax = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True, timeout=30)
    assert syntax.returncode == 0, syntax.stderr


def test_resources_guarantee_no_more_than_they_limit(config):
    singleuser = config["singleuser"]
    assert float(singleuser["cpu"]["guarantee"]) <= float(singleuser["cpu"]["limit"])
    assert _bytes(singleuser["memory"]["guarantee"]) <= _bytes(singleuser["memory"]["limit"])
    assert int(singleuser["extraEnv"]["OMP_NUM_THREADS"]) == int(singleuser["cpu"]["limit"]), "torch's threads = the CPU limit"
    assert config["cull"]["enabled"] is True


def _bytes(size: str) -> float:
    """KubeSpawner's sizes: a number and K, M, G or T (powers of 1024)."""
    return float(size[:-1]) * 1024 ** "KMGT".index(size[-1].upper()) * 1024


def test_each_learners_server_is_on_a_subdomain_with_a_wildcard_certificate(config):
    """A learner's page on the hub's origin would act as whoever opens it: every server has a subdomain of its own."""
    subdomain_host = config["hub"]["config"]["JupyterHub"]["subdomain_host"]
    assert subdomain_host.startswith("https://")
    host = subdomain_host.removeprefix("https://")
    https = config["proxy"]["https"]
    assert https["enabled"] and https["type"] == "secret" and https["secret"]["name"]  # no wildcard from letsencrypt
    assert https["hosts"] == [host, f"*.{host}"]


def test_the_learners_servers_speak_a_language_labkit_knows_and_their_workspace_is_made_in_it(config):
    language = config["singleuser"]["extraEnv"]["LABKIT_LANG"]
    assert language in LANGUAGES
    command = config["singleuser"]["initContainers"][0]["command"]
    assert command[command.index("--lang") + 1] == language, "the workspace's labs in the room's language"


def test_the_board_and_its_queue_have_the_roles_and_scopes_the_one_server_hub_gives_them(config):
    from labkit.workshop.board_service import NAME, SERVER_TOKEN_SCOPES, board_roles
    from labkit.workshop.settings import HubSettings
    hub = config["hub"]
    roles = {role["name"]: role for role in board_roles(HubSettings())}
    assert {name: {key: value for key, value in role.items()} for name, role in hub["loadRoles"].items()} == {
        name: {key: value for key, value in role.items() if key != "name"} for name, role in roles.items()}
    assert hub["config"]["Spawner"]["server_token_scopes"] == SERVER_TOKEN_SCOPES
    assert hub["config"]["JupyterHub"]["load_groups"]["instructors"]["users"] == hub["config"]["Authenticator"]["admin_users"]
    assert set(hub["services"]) == {NAME}


def test_the_board_runs_beside_the_hub_with_every_setting_the_one_server_hub_passes_it(config):
    from labkit.workshop.board_service import NAME, PREFIX, board_service
    from labkit.workshop.settings import HubSettings
    hub = config["hub"]
    (board,) = [container for container in hub["extraContainers"] if container["name"] == NAME]
    image = config["singleuser"]["image"]
    assert board["image"] == f"{image['name']}:{image['tag']}", "the board runs from the learners' image"
    assert board["command"][-1].endswith("exec python -m labkit.workshop.board")
    environment = {item["name"]: item.get("value") for item in board["env"]}
    passed = set(board_service(HubSettings(subdomain_host="https://hub.example.org"))["environment"])
    left_out = {"LABKIT_BOARD_COOKIE_SECRET_FILE", "LABKIT_BOARD_EXERCISES",  # beside the database; the grid's columns
                "JUPYTERHUB_COOKIE_HOST_PREFIX_ENABLED"}  # as seen in events (the track is the image's)
    assert passed - left_out <= set(environment), sorted(passed - left_out - set(environment))
    for name in ("STUCK_ATTEMPTS", "STUCK_MINUTES", "STUCK_REPEATS", "STUCK_SLOWER", "LOOK_SECONDS"):
        assert int(environment["LABKIT_BOARD_" + name]) >= 1
    assert environment["LABKIT_LANG"] == config["singleuser"]["extraEnv"]["LABKIT_LANG"]
    assert environment["LABKIT_BOARD_INSTRUCTORS"] in hub["config"]["Authenticator"]["admin_users"]
    assert environment["JUPYTERHUB_SERVICE_PREFIX"] == PREFIX
    assert "{name}." + hub["config"]["JupyterHub"]["subdomain_host"].removeprefix("https://") in \
        environment["LABKIT_BOARD_SERVER_URL"]
    port = int(environment["JUPYTERHUB_SERVICE_URL"].rsplit(":", 1)[1])
    assert hub["services"][NAME]["url"] == f"http://hub:{port}"
    assert [(extra["port"], extra["targetPort"]) for extra in hub["service"]["extraPorts"]] == [(port, port)]
    assert port in hub["networkPolicy"]["allowedIngressPorts"]
    for reaching in (config["singleuser"], config["proxy"]["chp"]):  # learners' kernels post; the proxy routes pages
        (rule,) = reaching["networkPolicy"]["egress"]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
        assert rule["to"] == [{"podSelector": {"matchLabels": {"app": "jupyterhub", "component": "hub"}}}]
    assert config["singleuser"]["extraEnv"]["LABKIT_BOARD_URL"] == f"http://hub:{port}{PREFIX}"
    assert environment["LABKIT_BOARD_DB"].startswith(board["volumeMounts"][0]["mountPath"] + "/")
