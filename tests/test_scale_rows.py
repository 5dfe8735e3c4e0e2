"Every claim a scale can judge has its rows trained: a table a scale always runs trains every row its claims read."
from pathlib import Path

import pytest
import torch

from disentbook.repro.claims import claim_cells
from disentbook.repro.declare import scale_config
from disentbook.repro.declare import PAPERS
from disentbook.repro.figures import Context
from disentbook.repro.runs import HARNESS_OPTIONS

REAL = ("vae", "dipvae", "tcwae", "contrastive", "refvae", "invariance")


def _missing(name: str, scale: str) -> list[str]:
    "The claims of `name` whose unconditional table (no `when`) does not train every row they read at `scale`."
    p = PAPERS[name]
    cfg = scale_config(p, scale)
    opts = {**HARNESS_OPTIONS, **p.options, "scale": scale}
    ctx = Context(p, scale, cfg, Path("unused"), torch.device("cpu"), opts, [0])
    claims = p.claims(ctx) if callable(p.claims) else p.claims
    first = next(t.name for t in p.tables)
    out = []
    for c in claims:
        t = next(t for t in p.tables if t.name == (c.table or first))
        if t.when is not None: continue                                   # run by option or data: its report says when not
        rows = {s["row"] or s["label"] for s in t.specs(cfg, opts)}
        lack = sorted({r for r, _ in claim_cells(c)} - rows)
        if lack: out.append(f"{c.text[:60]}: {lack}")
    return out


@pytest.mark.parametrize("name", REAL)
def test_gpu_scale_trains_every_row_its_claims_read(name):
    "The gpu scale runs every row of the tables it runs (a dipvae gpu run once left claim (1)'s β = 4 untrained)."
    assert _missing(name, "gpu") == []


def test_the_check_finds_a_missing_row(monkeypatch):
    from disentbook.repro import dipvae
    gpu = dict(dipvae.DIPVAE_SCALES["gpu"], models=("VAE", "beta-VAE (beta=60)", "DIP-VAE-I (lambda_od=10)"))
    monkeypatch.setitem(dipvae.DIPVAE_SCALES, "gpu", gpu)
    assert any("beta-VAE (beta=4)" in m for m in _missing("dipvae", "gpu"))


def test_a_run_writes_at_most_history_rows():
    """Every scale whose length is known logs at most `HISTORY_ROWS` history rows (refvae's cpu scale, 50,000 steps at
    quick's log_every 50, would write 1,000 per run), and the rule leaves every committed report's settings as they were."""
    import json
    from disentbook.core import InputError
    from disentbook.repro.declare import HISTORY_ROWS
    for name in REAL:
        for scale in PAPERS[name].scales:
            try: t = scale_config(PAPERS[name], scale)["train"]
            except InputError: continue                                   # a length its curves have not chosen yet
            if isinstance(t.get("steps"), int): assert t["steps"] <= HISTORY_ROWS * t["log_every"], (name, scale, t)
    t = scale_config(PAPERS["refvae"], "cpu")["train"]
    assert (t["steps"], t["log_every"]) == (50_000, 125)
    reports = sorted((Path(__file__).resolve().parents[1] / "reports").glob("*/metrics.json"))
    assert len(reports) >= 10
    for f in reports:
        t = json.loads(f.read_text())["config"]["train"]
        if isinstance(t.get("steps"), int): assert t["log_every"] * HISTORY_ROWS >= t["steps"], f.parent.name
