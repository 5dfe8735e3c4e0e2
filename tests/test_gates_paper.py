"""The paper's own models pass every gate the package asks their rows to pass: a gate that the paper's reported value of a
row would fail (against the untrained network or the raw pixels measured in the committed `quick` report, or a constant
such as chance) would leave the claims on that row untestable whatever a reproduction learns."""
import json
from pathlib import Path

import numpy as np
import pytest

import disentbook  # noqa: F401  (registers every reproduction)
from disentbook.repro.declare import PAPERS as REG
from disentbook.repro.reference import PIXEL_ROW, PIXELS, UNTRAINED
from disentbook.repro.report import paper_lookup

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ("dipvae", "tcwae", "contrastive", "refvae", "invariance")


def _cases(name):
    p = REG[name]
    refs = json.loads((ROOT / "reports" / f"{name}-quick" / "metrics.json").read_text()).get("references", {})
    for t in p.tables:
        if not t.paper_table or t.name not in refs: continue
        paper = paper_lookup(p.values or p.name, t.paper_table, t.paper_dataset)
        for g in p.learned:
            if not isinstance(g.ref, str):                  # a constant (e.g. chance): the paper's value against it
                for row, vals in paper.items():
                    if g.metric in vals: yield t.name, row, g, float(vals[g.metric]), float(g.ref)
                continue
            if not g.ref.startswith((UNTRAINED, PIXELS)): continue
            kind, metric = (UNTRAINED, g.ref[len(UNTRAINED):]) if g.ref.startswith(UNTRAINED) else (PIXELS, g.ref[len(PIXELS):])
            for row, vals in paper.items():
                if g.metric not in vals: continue
                ref = refs[t.name].get(PIXEL_ROW if kind == PIXELS else row, {}).get(metric)
                if not ref: continue
                yield t.name, row, g, float(vals[g.metric]), float(np.mean(ref))


@pytest.mark.parametrize("name", PAPERS)
def test_paper_values_pass_the_reference_gates(name):
    checked, failed = 0, []
    for table, row, g, value, ref in _cases(name):
        r = g.check(row, {g.metric: [value], **({g.ref: [ref]} if isinstance(g.ref, str) else {})})
        if r is None: continue
        checked += 1
        if not r["learned"]: failed.append(f"{table}, {row}: {r['why'] or r['checked']}")
    assert not failed, "the paper's own values fail: " + "; ".join(failed)
    assert checked, f"{name}: no gate checked against a paper value"


def test_the_check_can_fail():
    "Without its skip, tcwae's MIG gate would fail the paper's own WAE (MIG .026 against the untrained .0055 + 0.02)."
    import dataclasses
    g = next(g for g in REG["tcwae"].learned if g.ref == UNTRAINED + "mig")
    assert g.check("WAE (lambda=200)", {"mig": [0.026], g.ref: [0.0065]}) is None
    r = dataclasses.replace(g, skip=()).check("WAE (lambda=200)", {"mig": [0.026], g.ref: [0.0065]})
    assert r["learned"] is False


CHANCE = {"Colored-MNIST": 0.1, "RC-MNIST": 0.1, "3dShapes": 0.25, "MPI3D": 1 / 6}    # 1 / classes


def test_paper_values_pass_the_claims_own_gates():
    """A claim's own gate (invariance: every row of a worst-group claim above chance on each test group) is one that the
    paper's own rows pass: each row of the claim's table, at chance for its dataset."""
    p = REG["invariance"]
    checked = 0
    for c in p.claims:
        own = [g for g in (c.gates or ()) if not isinstance(g, str)]
        if not own: continue
        t = next(t for t in p.tables if t.name == c.table)
        paper = paper_lookup(p.values or p.name, t.paper_table, t.paper_dataset)
        chance = CHANCE[t.paper_dataset]
        rows = {r for part in c.parts for side in ("lhs", "rhs") for r in part.get(side, {}).get("rows", ())}
        for g in own:
            for row in rows:
                if g.metric not in paper.get(row, {}): continue
                r = g.check(row, {g.metric: [float(paper[row][g.metric])], g.ref: [chance]})
                assert r["learned"], f"{c.text}: {row} {r['numbers']}"
                checked += 1
    assert checked >= 20, checked
