"""The shared argument type: what a time limit or budget on a command line may be."""

import argparse

import pytest

from lean_env.arguments import positive_float


@pytest.mark.parametrize("text, value", [("60", 60.0), ("0.5", 0.5), ("1e-3", 0.001)])
def test_positive_finite_numbers_are_read(text, value):
    assert positive_float(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "inf", "-inf", "nan", "Infinity", "ten", ""])
def test_zero_negative_endless_and_unreadable_values_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a positive finite number"):
        positive_float(text)


def test_argparse_names_the_flag_and_exits_2(capsys):
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--timeout", type=positive_float)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--timeout", "inf"])
    assert stop.value.code == 2
    assert "argument --timeout: 'inf' is not a positive finite number" in capsys.readouterr().err
