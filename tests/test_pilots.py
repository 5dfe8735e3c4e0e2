"""The declared learning-rate pilot's rule (`benchmarks/pilot_learning_rate.py`) on synthetic MIGs: it adopts only a gain
of at least 0.02 that a one-sided paired t-test at 5 % holds over three seeds, and decides nothing while a seed lacks
its row at the deciding length."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("pilot_learning_rate", ROOT / "benchmarks" / "pilot_learning_rate.py")
pilot = importlib.util.module_from_spec(spec); spec.loader.exec_module(pilot)
L = pilot.LENGTHS[-1]
OLD = {0: {L: 0.07}, 1: {L: 0.06}, 2: {L: 0.08}}


def arm(*migs): return {s: {L: m} for s, m in zip(pilot.SEEDS, migs)}


def test_adopts_a_large_steady_gain():
    d = pilot.decide(arm(0.20, 0.25, 0.22), OLD)
    assert d["adopt"] is True and d["differences"] == pytest.approx([0.13, 0.19, 0.14])
    assert d["t"] == pytest.approx(2.919986, abs=1e-5)          # t(0.95, 2)


def test_keeps_the_rate_when_one_lucky_seed_carries_the_gain():
    assert pilot.decide(arm(0.20, 0.05, 0.09), OLD)["adopt"] is False


def test_keeps_the_rate_for_a_steady_gain_under_the_minimum():
    d = pilot.decide(arm(0.08, 0.085, 0.095), OLD)               # t-test holds, gain 0.017 < 0.02
    assert d["mean"] < pilot.MIN_GAIN and d["adopt"] is False


def test_keeps_the_rate_when_it_loses():
    assert pilot.decide(arm(0.01, 0.02, 0.03), OLD)["adopt"] is False


def test_undecided_while_a_seed_lacks_its_row():
    new = arm(0.20, 0.25, 0.22); del new[2][L]
    d = pilot.decide(new, OLD)
    assert d["adopt"] is None and "2" in d["why"]
    assert pilot.decide(arm(0.20, 0.25, 0.22), {0: {L: 0.07}, 1: {L: 0.06}})["adopt"] is None


def test_file_names_and_rule():
    assert pilot.lr_name(1e-4) == "1e-4" and pilot.lr_name(5e-4) == "5e-4"
    assert pilot.record_file("factor_vae", 1e-4).name == "factor_vae-lr1e-4.json"
    assert pilot.RULE.startswith("For a recipe R, seeds 0, 1 and 2") and "one-sided paired t-test at 5 %" in pilot.RULE
