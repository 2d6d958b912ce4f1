"""Problems from the command line: the grid's defaults, and a suite kept to the options given."""

from __future__ import annotations

import argparse

import pytest

from stuning.cli.errors import CLIError
from stuning.cli.problems import add_problem_args, cases_from_args
from stuning.suite import SDDMMCase, Semi24Case, SpMMCase, preset


def cases(*argv: str) -> list:
    p = argparse.ArgumentParser()
    add_problem_args(p)
    return cases_from_args(p.parse_args(list(argv)))


def test_the_grid_takes_its_defaults_where_an_option_is_not_given():
    assert cases() == [SpMMCase(4096, 4096, 128, 0.9, 0.0, "fp16")]
    assert cases("--op", "sddmm", "--n", "64", "--dtype", "bf16") == [
        SDDMMCase(4096, 4096, 64, 0.9, "bf16", "wgrad", False)]


def test_a_suite_with_no_problem_options_is_the_whole_preset():
    whole = [c for op_cases in preset("first-table").values() for c in op_cases]
    assert cases("--suite", "first-table") == whole


def test_suite_options_keep_only_the_problems_they_name():
    kept = cases("--suite", "first-table", "--op", "spmm", "--dtype", "fp32", "--sparsity", "70")
    whole = preset("first-table", ["spmm"])["spmm"]
    wanted = [c for c in whole if c.dtype == "fp32" and abs(c.sparsity - 0.7) < 1e-9]
    assert kept == wanted and len(wanted) < len(whole)
    assert {c.skew_cv for c in kept} == {c.skew_cv for c in whole}  # --skew not given: every skew

    skewed = cases("--suite", "first-table", "--op", "spmm", "--skew", "0.4", "--n", "16,2048",
                   "--shape", "4096x11008")
    assert skewed and all((c.m, c.k, c.skew_cv) == (4096, 11008, 0.4) and c.n in (16, 2048) for c in skewed)


def test_suite_options_that_do_not_apply_to_an_op_keep_its_problems():
    kept = cases("--suite", "first-table", "--sparsity", "0.95", "--dtype", "fp16")
    semi24 = [c for c in kept if isinstance(c, Semi24Case)]
    assert semi24 == [c for c in preset("first-table", ["semi24"])["semi24"] if c.dtype == "fp16"]
    sddmm = [c for c in kept if isinstance(c, SDDMMCase)]
    assert sddmm and all(c.sparsity == 0.95 for c in sddmm)
    # --n is the SDDMM's inner K.
    k256 = cases("--suite", "first-table", "--op", "sddmm", "--n", "256")
    assert k256 and {c.k for c in k256} == {256}


@pytest.mark.parametrize("argv, message", [
    (["--suite", "first-table", "--op", "spmm", "--sparsity", "0.8"], "no problem of the suite matches --sparsity 0.8"),
    (["--suite", "quick", "--dtype", "fp8"], "unknown dtype 'fp8'"),
    (["--suite", "quick", "--n", "0"], "--n values must be positive"),
    (["--mask", "causal", "--op", "sddmm"], "unknown SDDMM mask 'causal'"),
])
def test_bad_problem_options_are_named(argv, message):
    with pytest.raises(CLIError, match=message):
        cases(*argv)
