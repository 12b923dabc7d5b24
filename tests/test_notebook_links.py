"""Every notebook links the PyTorch documentation of the torch APIs it teaches, and the upstream tutorial it follows.

No network: the links are checked for presence and form only.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
DOCS = r"https://pytorch\.org/docs/stable/"
TUTORIALS = "https://pytorch.org/tutorials/intermediate/"

MEMORY_FORMAT = DOCS + r"tensor_attributes\.html#torch\.memory_format"
FX = DOCS + r"fx\.html"
PROFILER = DOCS + r"profiler\.html"
BENCHMARK = DOCS + r"benchmark_utils\.html"
AUTOCAST = DOCS + r"amp\.html#torch\.autocast"
FORWARD_AD = DOCS + r"autograd\.html#forward-mode-automatic-differentiation"


def generated(name: str) -> str:
    """The docs page PyTorch generates for one API, ``generated/<name>.html``."""
    return DOCS + r"generated/" + re.escape(name) + r"\.html"


# notebook stem -> (API name, regex of an acceptable docs URL) that its markdown must link
REQUIRED_API_LINKS: dict[str, list[tuple[str, str]]] = {
    "00_start_here": [
        ("torch.fx", FX),
        ("torch.profiler", PROFILER),
        ("torch.channels_last", MEMORY_FORMAT),
        ("torch.autograd.forward_ad", FORWARD_AD),
    ],
    "01_fx_profiling": [
        ("torch.fx.symbolic_trace", FX + r"#torch\.fx\.symbolic_trace"),
        ("torch.fx.Interpreter", FX + r"#torch\.fx\.Interpreter"),
        ("torch.fx.GraphModule", FX + r"#torch\.fx\.GraphModule"),
        ("torch.fx.Proxy", FX + r"#torch\.fx\.Proxy"),
        ("torch.fx.Tracer", FX + r"#torch\.fx\.Tracer"),
        # fuse has no docs page of its own: the notebooks link the function it calls on each Conv-BN pair
        ("torch.fx.experimental.optimization.fuse", generated("torch.nn.utils.fusion.fuse_conv_bn_eval")),
        ("torch.nn.utils.fusion.fuse_linear_bn_eval", generated("torch.nn.utils.fusion.fuse_linear_bn_eval")),
        ("torch.export", DOCS + r"export\.html"),
        ("torch.profiler", PROFILER),
        ("torch.utils.benchmark", BENCHMARK),
        ("register_forward_pre_hook", generated("torch.nn.Module") + r"#torch\.nn\.Module\.register_forward_pre_hook"),
        ("register_forward_hook", generated("torch.nn.Module") + r"#torch\.nn\.Module\.register_forward_hook"),
    ],
    "02_memory_format": [
        ("torch.memory_format", MEMORY_FORMAT),
        ("Tensor.stride", generated("torch.Tensor.stride")),
        ("Tensor.is_contiguous", generated("torch.Tensor.is_contiguous")),
        ("Tensor.contiguous", generated("torch.Tensor.contiguous")),
        ("Tensor.to", generated("torch.Tensor.to")),
        ("Module.to", generated("torch.nn.Module") + r"#torch\.nn\.Module\.to"),
        ("torch.overrides.TorchFunctionMode", DOCS + r"notes/extending\.html"),
        ("convert_conv2d_weight_memory_format", generated("torch.nn.utils.convert_conv2d_weight_memory_format")),
        ("convert_conv3d_weight_memory_format", generated("torch.nn.utils.convert_conv3d_weight_memory_format")),
        ("torch.utils.benchmark", BENCHMARK),
        ("torch.autocast", AUTOCAST),
    ],
    "03_forward_ad": [
        ("torch.autograd.forward_ad", FORWARD_AD),
        ("torch.func", DOCS + r"func\.html"),
        ("torch.func.jvp", generated("torch.func.jvp")),
        ("torch.func.jacfwd", generated("torch.func.jacfwd")),
        ("torch.func.jacrev", generated("torch.func.jacrev")),
        ("torch.func.vmap", generated("torch.func.vmap")),
        ("torch.func.grad", generated("torch.func.grad")),
        ("torch.func.functional_call", generated("torch.func.functional_call")),
        ("torch.autograd.Function", DOCS + r"autograd\.html#torch\.autograd\.Function"),
        ("autograd.Function under torch.func (setup_context, jvp)", DOCS + r"notes/extending\.func\.html"),
        ("torch.autograd.Function.jvp", generated("torch.autograd.Function.jvp")),
        ("torch.func.hessian", generated("torch.func.hessian")),
        ("torch.autograd.gradcheck", DOCS + r"autograd\.html#numerical-gradient-checking"),
        ("torch.no_grad", generated("torch.no_grad")),
        ("torch.nn.Parameter", generated("torch.nn.parameter.Parameter")),
        ("torch.utils.benchmark", BENCHMARK),
        ("torch.profiler", PROFILER),
    ],
    "04_capstone": [
        ("torch.memory_format", MEMORY_FORMAT),
        ("torch.fx", FX),
        ("torch.fx.experimental.optimization.fuse", generated("torch.nn.utils.fusion.fuse_conv_bn_eval")),
        ("torch.compile", generated("torch.compile")),
        ("torch.allclose", generated("torch.allclose")),
        ("torch.autocast", AUTOCAST),
    ],
}

UPSTREAM_TUTORIALS = {
    "01_fx_profiling": TUTORIALS + "fx_profiling_tutorial.html",
    "02_memory_format": TUTORIALS + "memory_format_tutorial.html",
    "03_forward_ad": TUTORIALS + "forward_ad_usage.html",
}

MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PYTORCH_ORG_URL = re.compile(r"https?://(?:[\w-]+\.)*pytorch\.org[^\s)\]>\"']*")
PYTORCH_ORG_FORM = re.compile(r"https://pytorch\.org/(?:docs/stable|tutorials)/[\w./-]+\.html(?:#[\w.:-]+)?")


def markdown_of(stem: str) -> str:
    nb = nbformat.read(NOTEBOOKS_DIR / f"{stem}.ipynb", as_version=4)
    return "\n\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")


def linked_urls(markdown: str) -> list[str]:
    return MARKDOWN_LINK.findall(markdown)


def all_notebooks() -> list[str]:
    return sorted(path.stem for path in NOTEBOOKS_DIR.glob("0*.ipynb"))


def test_every_notebook_has_a_list_of_required_links():
    assert sorted(REQUIRED_API_LINKS) == all_notebooks()


@pytest.mark.parametrize("stem", sorted(REQUIRED_API_LINKS))
def test_notebook_links_the_docs_of_the_apis_it_teaches(stem):
    urls = linked_urls(markdown_of(stem))
    missing = [
        api for api, pattern in REQUIRED_API_LINKS[stem]
        if not any(re.fullmatch(pattern + r"(?:#.*)?", url) for url in urls)
    ]
    assert not missing, f"{stem}: no markdown link to the PyTorch docs of {missing}"


@pytest.mark.parametrize("stem", sorted(UPSTREAM_TUTORIALS))
def test_notebook_links_the_upstream_tutorial_it_follows(stem):
    assert UPSTREAM_TUTORIALS[stem] in linked_urls(markdown_of(stem)), (
        f"{stem}: its markdown does not link {UPSTREAM_TUTORIALS[stem]}"
    )


@pytest.mark.parametrize("stem", all_notebooks())
def test_every_pytorch_org_link_is_a_stable_docs_or_tutorial_page(stem):
    markdown = markdown_of(stem)
    bad = [url for url in PYTORCH_ORG_URL.findall(markdown) if not PYTORCH_ORG_FORM.fullmatch(url)]
    assert not bad, f"{stem}: pytorch.org links not of the form https://pytorch.org/(docs/stable|tutorials)/....html: {bad}"


def test_the_link_form_accepts_docs_and_tutorials_and_rejects_the_rest():
    good = [
        "https://pytorch.org/docs/stable/fx.html#torch.fx.Interpreter",
        "https://pytorch.org/docs/stable/generated/torch.func.jvp.html",
        "https://pytorch.org/tutorials/intermediate/forward_ad_usage.html",
    ]
    bad = [
        "http://pytorch.org/docs/stable/fx.html",
        "https://pytorch.org/docs/main/fx.html",
        "https://pytorch.org/docs/2.3/fx.html",
        "https://pytorch.org/docs/stable/fx",
        "https://pytorch.org/",
        "https://docs.pytorch.org/docs/stable/fx.html",
    ]
    assert all(PYTORCH_ORG_FORM.fullmatch(url) for url in good)
    found = [PYTORCH_ORG_URL.findall(url) for url in bad]
    assert all(len(urls) == 1 for urls in found)
    assert not any(PYTORCH_ORG_FORM.fullmatch(urls[0]) for urls in found)


# --- links to labkit's own repository: none that cannot work -------------------------------------------------------
ROOT = NOTEBOOKS_DIR.parent
# What users read: the README, the docs site's sources, the notebooks (and their translations), the other READMEs.
READ_BY_USERS = ("README.md", "INSTRUCTORS.md", "CONTRIBUTING.md", "environment.yml", "postBuild", "docs/**/*.md",
                 "docs/_ext/*.py", "notebooks/**/*.ipynb", "notebooks/**/*.md", "workshop/**/*.md")
PLACEHOLDER = re.compile(r"\bOWNER/|/OWNER\b|github\.com/(?:USER|YOU|NAME|your)", re.IGNORECASE)
HOSTED_URL = re.compile(r"https://(?:colab\.research\.google\.com|mybinder\.org)/[^\s)\]>\"'`]+")


def files_read_by_users() -> list[Path]:
    found = {path for pattern in READ_BY_USERS for path in ROOT.glob(pattern) if path.is_file()}
    return sorted(path for path in found if not {".ipynb_checkpoints", "node_modules", "_build"} & set(path.parts))


def test_no_placeholder_address_reaches_the_readme_a_notebook_or_a_page():
    placeholders = {str(path.relative_to(ROOT)): PLACEHOLDER.findall(path.read_text(encoding="utf-8"))
                    for path in files_read_by_users()}
    assert not {name: found for name, found in placeholders.items() if found}


def test_every_colab_and_binder_link_is_one_the_configured_repository_makes():
    """None while labkit.labs.REPOSITORY_URL is None; once it is set, only the ones labkit.authoring.hosted generates."""
    from labkit.authoring import hosted

    made = {hosted.colab_url(path.name) for path in NOTEBOOKS_DIR.glob("0*.ipynb")} | {hosted.binder_url()}
    for path in files_read_by_users():
        unknown = set(HOSTED_URL.findall(path.read_text(encoding="utf-8"))) - made
        assert not unknown, f"{path.relative_to(ROOT)} links {sorted(unknown)}, which labkit.authoring.hosted does not make"


def test_the_placeholder_check_catches_the_old_links():
    old = ("pip install \"labkit @ git+https://github.com/OWNER/labkit\"",
           "https://mybinder.org/v2/gh/OWNER/labkit/HEAD", "https://colab.research.google.com/github/OWNER/labkit/blob/main/x")
    assert all(PLACEHOLDER.search(text) for text in old)
    assert not PLACEHOLDER.search("https://github.com/pytorch/pytorch and the repository's owner")
