"""The narrow stderr filter: known torch noise is dropped, from native code and from Python alike; nothing else is."""
import os
import sys

from labkit.core.noise import filtered_native_stderr


def test_a_known_line_printed_by_python_is_dropped_and_any_other_kept(capsys):
    with filtered_native_stderr():  # torch 2.6's cpp_extension prints its CUDA notice to sys.stderr
        print("No CUDA runtime is found, using CUDA_HOME='/usr/local'", file=sys.stderr)
        print("a real warning", file=sys.stderr)
    assert capsys.readouterr().err == "a real warning\n"


def test_a_known_line_written_to_file_descriptor_2_is_dropped_and_any_other_kept(capfd):
    with filtered_native_stderr():
        os.write(2, b"USDT: probe ignored\n")
        os.write(2, b"native trouble\n")
    assert capfd.readouterr().err == "native trouble\n"


def test_a_native_line_without_a_newline_is_not_glued_to_a_printed_one(capfd):
    with filtered_native_stderr():
        os.write(2, b"native trouble")
        print("No CUDA runtime is found, using CUDA_HOME='/usr/local'", file=sys.stderr)
    assert capfd.readouterr().err == "native trouble"
