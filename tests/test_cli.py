import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.__main__ import COMMANDS, main

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_unknown_command_is_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help(command):
    result = subprocess.run([sys.executable, "-m", "labkit", command, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage: python -m labkit " + command in result.stdout


@pytest.mark.parametrize("command", ["student-copy", "docs"])
def test_output_commands_refuse_a_file_as_outdir_without_traceback(command, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    result = subprocess.run([sys.executable, "-m", "labkit", command, str(afile)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{command}: ") and result.stderr.count("\n") == 1, result.stderr
    assert "is a file, not a folder" in result.stderr and afile.read_text() == "mine"


@pytest.mark.parametrize("argv", [["docs", "site"], ["student-copy", "student"], ["hosted"]])
def test_the_authors_commands_say_they_need_a_checkout_when_run_from_an_installed_labkit(
    argv, tmp_path, monkeypatch, capsys
):
    """An installed wheel has no notebooks/ or docs/ beside it (test_wheel.py runs these from a real one)."""
    from labkit import labs
    from labkit.authoring import docs, hosted

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(labs, "NOTEBOOKS_DIR", tmp_path / "site-packages" / "notebooks")
    monkeypatch.setattr(hosted, "NOTEBOOKS_DIR", labs.NOTEBOOKS_DIR)
    monkeypatch.setattr(docs, "DOCS_SOURCE", tmp_path / "site-packages" / "docs")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{argv[0]}: `labkit {argv[0]}` works in a checkout of labkit's repository (") and err.count("\n") == 1
    assert "installed without one" in err and "pip install -e '.[docs]'" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def _help(argv0: str) -> str:
    """``--help`` as a process whose ``sys.argv[0]`` is ``argv0`` (a console script's path, or ``-m``'s)."""
    code = f"import sys; sys.argv[0] = {argv0!r}; from labkit.__main__ import main; main()"
    result = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_help_lists_the_learners_commands_first_and_the_authors_apart():
    from labkit.__main__ import INSTRUCTOR_COMMANDS, LEARNER_COMMANDS

    out = _help("/home/ada/venv/bin/labkit")
    assert out.startswith("usage: labkit [-h] [--version] COMMAND ...\n")  # the console script's own name
    description = out.split("\n\n")[1]
    assert not re.search(r"``|\*\*|:mod:|<command>", description), description  # no raw markup
    headings = ["learning with the labs:", "running a workshop:", "writing, translating and measuring the labs:"]
    starts = [out.index(f"\n{heading}\n") for heading in headings]
    assert starts == sorted(starts)
    listed = re.findall(r"^  ([a-z][\w-]*)  ", out, flags=re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS)  # each command once
    assert listed[:len(LEARNER_COMMANDS)] == list(LEARNER_COMMANDS) and listed[0] == "lab"
    authors = listed[len(LEARNER_COMMANDS) + len(INSTRUCTOR_COMMANDS):]
    assert {"docs", "notebooks", "i18n", "bench"} <= set(authors) and not set(authors) & set(LEARNER_COMMANDS)


def test_the_program_is_named_as_the_user_typed_it():
    assert _help("/usr/lib/python3/site-packages/labkit/__main__.py").startswith("usage: python -m labkit ")
    result = subprocess.run([sys.executable, "-m", "labkit", "--help"], capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith("usage: python -m labkit [-h] [--version] COMMAND ...")
    script = Path(sys.executable).with_name("labkit")  # the console script pip installed beside this Python
    if script.is_file():
        shown = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120).stdout
        assert shown.startswith("usage: labkit ")


def _help_in(language: str, *command: str) -> str:
    """``labkit [command] --help`` as a learner whose labkit speaks ``language`` sees it, 80 columns wide."""
    env = {**os.environ, "LABKIT_LANG": language, "COLUMNS": "80"}
    result = subprocess.run([sys.executable, "-m", "labkit", *command, "--help"], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(("language", "usage", "options", "learning", "progress_help"), [
    ("zh", "用法：python -m labkit ", "\n选项:\n", "\n用这些实验学习:\n", "你自己的进度"),
    ("ru", "использование: python -m labkit ", "\nпараметры:\n", "\nучёба по лабораторным работам:\n",
     "ваш собственный прогресс"),
])
def test_help_speaks_the_learners_language_and_fits_her_terminal(language, usage, options, learning, progress_help):
    from labkit.core.columns import columns

    main_help = _help_in(language)
    assert main_help.startswith(usage + "[-h] [--version] COMMAND ...")
    assert options in main_help and learning in main_help and progress_help in main_help
    shown = {command: _help_in(language, command) for command in ("lab", "progress", "doctor", "workspace", "profile", "zoo")}
    for command, text in shown.items():
        assert text.startswith(usage + command) and options in text
        # every option's help translated: no line of the options but the option names is English prose
        english = [line for line in text.splitlines() if re.search(r"\b(the|your|default|of|and)\b", line)]
        assert english == [], english
    # past the usage lines (argparse's own: a {choice,list} is one token it cannot break, in English too)
    wide = [line for text in (main_help, *shown.values()) for line in text.split("\n\n", 1)[1].splitlines()
            if columns(line) > 80]
    assert wide == [], wide  # a Chinese line wrapped by characters would run past the edge


@pytest.mark.parametrize(("command", "status"), [(["--help"], 0), (["progress"], 1)])  # argparse's help ignores it
def test_a_reader_that_leaves_early_gets_no_traceback(command, status, tmp_path):
    reader, writer = os.pipe()
    os.close(reader)  # as `labkit progress | head -1` once head has its line: every write finds the pipe closed
    try:
        done = subprocess.run([sys.executable, "-m", "labkit", *command], stdout=writer, stderr=subprocess.PIPE,
                              text=True, timeout=120, cwd=tmp_path, env={**os.environ, "LABKIT_PROGRESS": "off"})
    finally:
        os.close(writer)
    assert done.stderr == "" and done.returncode == status
