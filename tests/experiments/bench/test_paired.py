"""Paired comparisons of Table I runs (POAM against each baseline, seed by seed) and the sign test."""

import math
from pathlib import Path

import numpy as np
import pytest

from onlinegp.experiments.bench.poam import RunRecord, paired_comparisons, write_paired
from onlinegp.experiments.protocols import sign_test


def record(env, method, seed, smse):
    columns = {"smse": np.array([smse, smse]), "msll": np.array([-smse, -smse])}
    return RunRecord("", env, method, seed, Path("."), columns)


def test_sign_test_against_the_binomial_distribution():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    # 9 wins, 1 loss: 2 * P(X <= 1), X ~ Bin(10, 1/2)
    assert sign_test(9, 1) == pytest.approx(2 * (1 + 10) / 1024)
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(20, 0) == pytest.approx(2 * math.comb(20, 0) / 2**20)


def test_wins_losses_ties_per_environment_and_overall(tmp_path):
    records = [
        record("a", "poam", 0, 0.1),
        record("a", "ssgp++", 0, 0.2),  # win
        record("a", "poam", 1, 0.3),
        record("a", "ssgp++", 1, 0.2),  # loss
        record("b", "poam", 0, 0.1),
        record("b", "ssgp++", 0, 0.1),  # tie
        record("b", "poam", 1, 0.1),  # no rival for this seed: left out
        record("b", "ovc", 0, 0.5),  # win
    ]
    rows = {(r["env"], r["other"], r["metric"]): r for r in paired_comparisons(records)}
    a, b, both = rows["a", "ssgp++", "smse"], rows["b", "ssgp++", "smse"], rows["all", "ssgp++", "smse"]
    assert (a["wins"], a["losses"], a["ties"]) == (1, 1, 0)
    assert (b["wins"], b["losses"], b["ties"]) == (0, 0, 1)
    assert (both["wins"], both["losses"], both["ties"]) == (1, 1, 1)
    # MSLL is −SMSE in these records: POAM's wins in SMSE are its losses in MSLL
    m = rows["all", "ssgp++", "msll"]
    assert (m["wins"], m["losses"]) == (1, 1)
    assert rows["all", "ovc", "smse"]["wins"] == 1 and ("a", "ovc", "smse") not in rows
    files = write_paired(paired_comparisons(records), tmp_path)
    assert "POAM vs SSGP++" in files["paired_md"].read_text()
