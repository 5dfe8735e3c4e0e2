"repro.harness: judging on seeds (golden), claim parsing, tables, a toy paper end to end (cache, resume, refusal, lock)."
import json, math
from pathlib import Path

import numpy as np
import pytest

from disentbook.cli import main
from disentbook.core import InputError, REPRODUCTIONS
from disentbook.repro.claims import Claim, band, judge_claim, parse_tolerance
from disentbook.repro.declare import Metric, PAPERS, Paper, Table, scale_config
from disentbook.repro.harness import register_reproduction, rejudge
from disentbook.repro.reference import untrained_gate
from disentbook.repro.report import claim_lines, table_markdown, table_rows
from disentbook.repro.runs import train_group
from disentbook.repro.verdicts import FAILS, Gate, HOLDS, INCONCLUSIVE, NOT_CHECKED, NOT_LEARNED, NOT_TESTED, compare, learned_rows, welch, within
from disentbook.training.run import model_spec


def test_compare_golden():
    "One-sided Welch t at alpha 0.05 (golden: scipy's ttest_ind(equal_var=False))."
    from scipy import stats
    win, lose = [0.50, 0.52, 0.51], [0.30, 0.31, 0.29]
    assert compare(win, lose, ">") == HOLDS and compare(lose, win, ">") == FAILS
    assert compare([0.50, 0.60, 0.40], [0.45, 0.55, 0.35]) == INCONCLUSIVE       # t = 0.61 on 4 df
    assert compare([0.9], [0.1]) == INCONCLUSIVE                                   # one seed: no standard error
    assert compare([0.9], [0.1], a_exact=True, b_exact=True) == HOLDS
    a, b = [0.3, 0.5, 0.7, 0.4], [0.1, 0.2, 0.3, 0.5]
    r = welch(a, b)
    assert r["p_holds"] == pytest.approx(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)
    # at the edge: p just above / below alpha decides
    t_crit = stats.t.isf(0.05, 2)                                                      # one-sample, n = 3: df 2
    x = np.array([-1.0, 0.0, 1.0]); se = 1 / np.sqrt(3)
    assert compare(x + 0.99 * t_crit * se, [0.0], b_exact=True) == INCONCLUSIVE
    assert compare(x + 1.01 * t_crit * se, [0.0], b_exact=True) == HOLDS
    assert compare([0.0, 0.0, 0.0], [0.1], "<", b_exact=True) == INCONCLUSIVE      # 0 ± 0 cannot decide alone
    assert compare([float("nan")], [1.0]) == NOT_CHECKED
    with pytest.raises(InputError): compare(a, b, ">=")


def test_within_and_tolerances():
    assert within([0.010, 0.011, 0.012], 0.005, 0.02) == HOLDS
    assert within([0.030, 0.031, 0.032], 0.005, 0.02) == FAILS
    assert within([0.015, 0.020, 0.025], 0.005, 0.02) == INCONCLUSIVE
    assert within([0.01], 0.0, 1.0) == INCONCLUSIVE
    assert band(0.5253, parse_tolerance("±0.05 or ±25%")) == pytest.approx((0.5253 * 0.75, 0.5253 * 1.25))
    assert band(0.0417, parse_tolerance("±0.05 or ±25%")) == pytest.approx((-0.0083, 0.0917))
    assert band(3.01, parse_tolerance("±0.5 or 2 paper std"), 0.31) == pytest.approx((2.39, 3.63))
    with pytest.raises(InputError, match="tolerance"): parse_tolerance("5 percent")


def test_claims_parse_and_judge():
    res = {"A (x=1, y)": dict(m=[0.50, 0.52, 0.51]), "B": dict(m=[0.30, 0.31, 0.29]), "C": dict(m=[0.45, 0.60, 0.35])}
    j = lambda *parts, **kw: judge_claim(Claim("t", *parts, **kw), res, kw.pop("scale", "quick"), kw.pop("paper", None))["verdict"]
    assert j("A (x=1, y) > B on m") == HOLDS
    assert j("B > A (x=1, y) on m") == FAILS
    assert j("A (x=1, y) > C on m") == INCONCLUSIVE
    assert j("max(B, A (x=1, y)) > C + 0.01 on m") == INCONCLUSIVE and j("max(B, A (x=1, y)) > 2 * B on m") == FAILS
    assert j("min(B, C) < 0.4 on m") == HOLDS                                        # B < 0.4 suffices
    assert j("max(B, C) < 0.4 on m") == INCONCLUSIVE                                 # C is not clearly below
    assert j("A (x=1, y) > max(B, C) on m") == INCONCLUSIVE                          # every other row, not the best mean
    assert j("D > B on m") == NOT_CHECKED and j("B > A (x=1, y) on other") == NOT_CHECKED
    assert j("A (x=1, y) > B on m", "B > A (x=1, y) on m") == FAILS
    assert j("A (x=1, y) > B on m", "A (x=1, y) > C on m") == INCONCLUSIVE
    assert j("A (x=1, y) > B on m", "A (x=1, y) > C on m", "D > B on m", need="most") == INCONCLUSIVE
    assert judge_claim(Claim("t", "A (x=1, y) > B on m"), res, "smoke")["verdict"] == NOT_TESTED   # never holds at smoke
    p = {"B": dict(m=0.3)}
    assert judge_claim(Claim("t", "B within ±0.05 of paper on m"), res, "quick", p)["verdict"] == HOLDS
    assert judge_claim(Claim("t", "B within ×1.2 of paper on m"), res, "quick", {"B": dict(m=0.5)})["verdict"] == FAILS
    for bad in ("A > B", "A >> B on m", "A within 5 of paper on m"):
        with pytest.raises(InputError): Claim("t", bad)


def test_gate_and_report_lines():
    "A claim on a row that did not learn is not tested, with the number; not-tested claims print no part bullets."
    res = {"A": dict(rec=[0.03, 0.031, 0.029], blank=[0.07] * 3), "B": dict(rec=[0.0700, 0.0701, 0.0699], blank=[0.07] * 3)}
    gate = learned_rows([Gate("rec", "<", "blank", "reconstructs better than a blank image")], res)
    assert gate["A"]["learned"] and not gate["B"]["learned"]
    c = judge_claim(Claim("A beats B", "A < B on rec", source="Table 1"), res, "quick", learned=gate)
    assert c["verdict"] == NOT_LEARNED and "B: reconstructs better than a blank image" in c["not_learned"][0]
    assert judge_claim(Claim("A beats B", "A < B on rec"), res, "quick")["verdict"] == HOLDS
    lines = claim_lines([c, judge_claim(Claim("x", "A < B on rec", ours=True), res, "smoke")])
    assert lines[0].startswith("- **A beats B: NOT TESTED: LEARNING NOT SHOWN** (paper: Table 1)")
    assert lines[-1] == "- **x: NOT TESTED AT THIS SCALE** (ours)"                        # no sub-bullets
    assert not any("inconclusive" in l for l in lines)


def test_table_rendering():
    t = Table("T", "d", (), (Metric("m", "M", "{:.2f}", "±0.1"), Metric("k", "K", "{:.1f}")), paper_table="T")
    rows = table_rows({"A": dict(m=[0.50, 0.52, 0.51], k=[3.0, 4.0, 5.0]), "B": dict(m=[0.9, 0.91, 0.92], k=[1.0])}, t,
                        {"A": dict(m=0.5), "B": dict(m=0.5, m_std=0.01)}, "quick")
    assert [r["verdict"] for r in rows] == ["hit", "—", "miss (higher)", "—"]
    md = table_markdown(rows, t)
    assert "| A | 0.51 ± 0.01 | 0.50 | hit | 4.0 ± 1.0 | 3 |" in md and "| B | 0.91 ± 0.01 | 0.50 ± 0.01 | miss (higher) | 1.0 | 3 |" in md
    assert table_rows({"A": dict(m=[0.5, 0.5])}, t, {"A": dict(m=0.5)}, "smoke")[0]["verdict"] == "not tested"


@pytest.fixture(scope="module")
def toy():
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    calls = []
    def evaluate(model, data, cfg, seed, spec):
        calls.append((spec["slug"], seed))
        return dict(score=1.0 + 0.01 * seed + 5 * (spec["objective"] == "beta_vae"),
                    w=float(next(model.parameters()).detach().sum()))
    paper = Paper(name="toy_test", title="Toy", scales=dict(
                        smoke=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1)),
                        quick=dict(seeds=2, train=dict(steps=3, batch_size=8, log_every=1))),
                    tables=(Table("T", "small", (model_spec("VAE", "vae", "VAE"), model_spec("b4", "beta_vae", "β=4", beta=4)),
                                    (Metric("score", "score", "{:.2f}"),)),
                            Table("S", "small", (model_spec("VAE", "vae", "VAE"),), when=lambda ctx: ctx.options["extra"],
                                    skip_note="not asked")),
                    data=lambda name, cfg, seed, options: small, evaluate=evaluate,
                    claims=(Claim("β = 4 scores higher", "b4 > VAE on score"),), options=dict(extra=False))
    fn = register_reproduction(paper)
    yield fn, calls
    del REPRODUCTIONS["toy_test"], PAPERS["toy_test"]


def test_channels_last_option_trains_in_that_layout_and_says_so(toy, tmp_path):
    """`-o channels_last=true`: every run's trainer keeps its conv weights channels-last on the CPU in fp32 (its checkpoint
    and eval.json record it, the report's "how each run trained" says it); a value that is not a boolean is refused."""
    fn, calls = toy
    n = len(calls)
    fn("smoke", out_dir=tmp_path / "cl", device="cpu", precision="fp32", channels_last=True)
    run = tmp_path / "cl" / "runs" / "small" / "vae" / "seed0"
    assert json.loads((run / "eval.json").read_text())["mode"]["channels_last"] is True
    assert json.loads((run / "train" / "checkpoint" / "config.json").read_text())["train"]["channels_last"] is True
    assert "eager, fp32, channels-last" in (tmp_path / "cl" / "report.md").read_text()
    fn("smoke", out_dir=tmp_path / "default", device="cpu", precision="fp32")
    assert json.loads((tmp_path / "default" / "runs" / "small" / "vae" / "seed0" / "eval.json").read_text())["mode"]["channels_last"] is False
    with pytest.raises(InputError, match="channels_last: expected true or false"):
        fn("smoke", out_dir=tmp_path / "bad", device="cpu", channels_last="yes")
    del calls[n:]                                                   # the fixture's count, as the other tests expect it


def test_toy_end_to_end_cache_resume_refusal(toy, tmp_path):
    fn, calls = toy
    import inspect
    assert list(inspect.signature(fn).parameters) == ["scale", "out_dir", "device", "seed", "overwrite", "resume", "runner",
                                                      "ray_address", "allow_eager", "precision", "references", "channels_last", "seeds",
                                                      "extra"]
    r = fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    assert r["seeds"] == [3, 4] and len(calls) == 4 and r["claims"][0]["verdict"] == HOLDS
    assert r["skipped"] == {"S": "not asked"}
    run = tmp_path / "runs" / "small" / "beta_vae_beta4" / "seed4"
    for f in ("settings.json", "eval.json", "train/history.csv", "train/checkpoint/config.json", "../losses.png"):
        assert (run / f).exists(), f
    md = (tmp_path / "report.md").read_text()
    assert not (run / "losses.png").exists() and "`runs/small/beta_vae_beta4/losses.png` (loss curves, every seed)" in md
    assert "| b4 | 6.04 ± 0.01 | 2 |" in md and "HOLDS" in md and "S: not asked" in md
    # a finished report is refused; resume reuses every run (no evaluation, no training)
    with pytest.raises(InputError, match="already holds a finished report"): fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    r2 = fn("quick", out_dir=tmp_path, device="cpu", seed=3, resume=True)
    assert len(calls) == 4 and r2["results"] == r["results"]
    # a run whose evaluation is lost reloads its final checkpoint: same weights, no training step
    (run / "eval.json").unlink()
    r3 = fn("quick", out_dir=tmp_path, device="cpu", seed=3, resume=True)
    assert len(calls) == 5 and r3["results"]["T"]["b4"][1]["w"] == r["results"]["T"]["b4"][1]["w"]
    # other settings (scale) train afresh in the same run folders; overwrite deletes the runs first
    fn("smoke", out_dir=tmp_path, device="cpu", seed=3, resume=True)
    assert json.loads((run / "settings.json").read_text())["train"]["steps"] == 2 and len(calls) == 9
    fn("smoke", out_dir=tmp_path, device="cpu", seed=3, overwrite=True)
    assert len(calls) == 13 and not (tmp_path / ".lock").exists()


def test_a_run_whose_evaluation_file_is_corrupt_is_evaluated_again_with_a_warning(toy, tmp_path):
    "A truncated eval.json is not a finished run: resume warns, evaluates the final checkpoint again (no training) and writes it whole."
    fn, calls = toy
    r = fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    ej = tmp_path / "runs" / "small" / "beta_vae_beta4" / "seed4" / "eval.json"
    ej.write_text(ej.read_text()[:20])
    n = len(calls)
    with pytest.warns(UserWarning, match="is not readable JSON: the run is evaluated again"):
        r2 = fn("quick", out_dir=tmp_path, device="cpu", seed=3, resume=True)
    assert len(calls) == n + 1 and r2["results"]["T"]["b4"][1]["w"] == r["results"]["T"]["b4"][1]["w"]
    assert json.loads(ej.read_text())["metrics"]["score"] == r["results"]["T"]["b4"][1]["score"]


def test_a_report_judged_again_keeps_its_training_line_and_not_run_list_in_order(toy, tmp_path):
    """metrics.json keeps its keys sorted; the report written from it again lists the training settings and the tables
    not run in the same order as the report the runs wrote (the paper's table order, the settings by name)."""
    import re
    fn, _ = toy
    fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    m = json.loads((tmp_path / "metrics.json").read_text())
    m["skipped"] = {"Z later": "not run", "T": "not run here"}          # as if the call had skipped them, in this order
    (tmp_path / "metrics.json").write_text(json.dumps(m))
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge"]) == 0
    first = (tmp_path / "report.md").read_text()
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge"]) == 0
    again = (tmp_path / "report.md").read_text()
    def parts(md): return re.findall(r"training \{.*?\}\.", md), md[md.index("## Not run"):].splitlines()[2:4]
    assert parts(first) == parts(again) and parts(first)[0]
    assert parts(first)[1] == ["- T: not run here", "- Z later: not run"]            # the paper's table first


def test_rejudge_applies_this_judge_to_finished_runs_without_training(toy, tmp_path, monkeypatch):
    "`--rejudge`: claims, cells and report rebuilt from metrics.json (what a later judge fix needs); nothing trains."
    fn, calls = toy
    fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    n, m = len(calls), json.loads((tmp_path / "metrics.json").read_text())
    assert m["claims"][0]["verdict"] == HOLDS
    for k, run in enumerate(m["results"]["T"]["b4"]): run["score"] = 0.5 + 0.01 * k       # as if judged on other numbers
    (tmp_path / "metrics.json").write_text(json.dumps(m))
    def no_training(*a, **k): raise AssertionError("rejudge trained")
    monkeypatch.setattr("disentbook.repro.harness.train_group", no_training)
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge"]) == 0
    r = json.loads((tmp_path / "metrics.json").read_text())
    assert len(calls) == n and r["claims"][0]["verdict"] == FAILS and r["seconds"] == m["seconds"]
    assert r["rejudged"]["trained"].startswith("the runs of this folder") and r["figures"] == m["figures"]
    md = (tmp_path / "report.md").read_text()
    assert "\n## How the runs were made\n\nRe-judged " in md and "FAILS" in md and "| b4 | 0.51 ± 0.01 | 2 |" in md
    assert md.index("**How to read this report**") < md.index("| b4 |") < md.index("## How the runs were made")   # the table first
    assert not (tmp_path / ".lock").exists()
    # bad input: one-line errors
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(InputError, match="not readable JSON"): rejudge(PAPERS["toy_test"], tmp_path)
    (tmp_path / "metrics.json").unlink()
    with pytest.raises(InputError, match="metrics.json not found"): rejudge(PAPERS["toy_test"], tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps(dict(m, paper="other")))
    with pytest.raises(InputError, match="holds a 'other' reproduction"): rejudge(PAPERS["toy_test"], tmp_path)


def test_rejudge_finishes_a_call_stopped_before_its_report(toy, tmp_path, monkeypatch, capsys):
    "A folder whose every run finished but whose call stopped before the report: `--rejudge` judges it from the runs' eval.json."
    fn, calls = toy
    full = fn("quick", out_dir=tmp_path, device="cpu", seed=3)
    for f in ("metrics.json", "report.md", "table.csv"): (tmp_path / f).unlink()
    def no_training(*a, **k): raise AssertionError("finishing trained")
    monkeypatch.setattr("disentbook.repro.harness.train_group", no_training)
    n = len(calls)
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge", "--scale", "quick", "--seed", "3"]) == 0
    r = json.loads((tmp_path / "metrics.json").read_text())
    assert len(calls) == n and r["table"] == full["table"] and r["claims"][0]["verdict"] == full["claims"][0]["verdict"]
    assert math.isnan(r["seconds"]) and "finish_from_runs" in (tmp_path / "report.md").read_text()
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge"]) == 0      # then an ordinary re-judge
    capsys.readouterr()
    # a run not evaluated (or evaluated at other settings): a one-line error naming it
    (tmp_path / "metrics.json").unlink()
    sorted(tmp_path.glob("runs/*/*/seed4/eval.json"))[0].unlink()
    assert main(["reproduce", "toy_test", "--out", str(tmp_path), "--rejudge", "--scale", "quick", "--seed", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "1 of 4 runs have no evaluation" in err and "--resume" in err
    assert main(["reproduce", "toy_test", "--out", str(tmp_path / "empty"), "--rejudge"]) == 2


def test_seed_before_model_gives_identical_runs(toy, tmp_path):
    fn, _ = toy
    a = fn("smoke", out_dir=tmp_path / "a", device="cpu")["results"]["T"]
    b = fn("smoke", out_dir=tmp_path / "b", device="cpu")["results"]["T"]
    assert [r["w"] for r in a["VAE"]] == [r["w"] for r in b["VAE"]] and a["VAE"][0]["w"] != a["VAE"][1]["w"]


def test_bad_input(toy, tmp_path):
    fn, _ = toy
    with pytest.raises(InputError, match="scale must be one of smoke, quick, got 'huge'"): fn("huge", out_dir=tmp_path)
    with pytest.raises(InputError, match="has no option bogus"): fn("smoke", out_dir=tmp_path, bogus=1)
    with pytest.raises(InputError, match="runner: expected one of"): fn("smoke", out_dir=tmp_path, runner="dask")
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file"): fn("smoke", out_dir=tmp_path / "f")
    (tmp_path / "busy").mkdir(); (tmp_path / "busy" / ".lock").write_text("1")           # pid 1 is alive
    with pytest.raises(InputError, match="another process"): fn("smoke", out_dir=tmp_path / "busy")


def test_runner_errors(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(InputError, match="needs Ray"): train_group([dict()], runner="ray")
    assert train_group([], runner="auto") == []


def test_ensemble_runner_equals_runs_one_by_one(toy, tmp_path, monkeypatch):
    """The gpu scale's runner (engine ensembles; eager on the CPU) gives the runs' results within float tolerance (both in
    fp32: on a CPU the engine's vmapped ensembles train in fp32 where the Trainer would take bf16)."""
    fn, calls = toy
    a = fn("quick", out_dir=tmp_path / "one", device="cpu", runner="local", precision="fp32")["results"]["T"]
    def no_single_runs(job): raise AssertionError("the ensemble runner fell back to single runs")
    from disentbook.repro import runs as R_
    monkeypatch.setattr(R_, "train_run", no_single_runs)          # the runner lives in repro.runs
    b = fn("quick", out_dir=tmp_path / "ens", device="cpu", runner="ensemble", precision="fp32")["results"]["T"]
    for row in ("VAE", "b4"):
        assert [r["score"] for r in a[row]] == [r["score"] for r in b[row]]
        for ra, rb in zip(a[row], b[row]):
            assert abs(ra["w"] - rb["w"]) < 1e-3 * max(1.0, abs(ra["w"])), (row, ra["w"], rb["w"])
            assert ra["steps"] == rb["steps"] == 3
    run = tmp_path / "ens" / "runs" / "small" / "beta_vae_beta4" / "seed1"
    for f in ("settings.json", "eval.json", "train/checkpoint/config.json", "../losses.png"):
        assert (run / f).exists(), f
    n = len(calls)
    fn("quick", out_dir=tmp_path / "ens", device="cpu", runner="ensemble", resume=True, precision="fp32")   # cached: nothing trains
    assert len(calls) == n


def test_a_row_no_gate_applies_to_is_never_learned():
    "A row without the gate's metric says 'no gate', and a claim resting on it is not tested, never judged as learned."
    res = {"A": dict(rec=[0.1, 0.11, 0.12], blank=[0.5] * 3, m=[0.9, 0.91, 0.92]), "C": dict(m=[0.1, 0.11, 0.12])}
    gate = learned_rows([Gate("rec", "<", "blank", "reconstructs better than a blank image")], res)
    assert gate["A"]["learned"] is True and gate["C"]["learned"] is None and gate["C"]["why"].startswith("no gate")
    j = judge_claim(Claim("A beats C", "A > C on m"), res, "quick", learned=gate)
    assert j["verdict"] == NOT_LEARNED and any("C: no gate" in b for b in j["not_learned"])


def test_reference_gate_measures_untrained_networks_once_and_rejudge_reuses_them(tmp_path):
    "A score that training does not change is not 'learned': the untrained network scores the same (a reference gate)."
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    calls, asked = [], []
    def evaluate(model, data, cfg, seed, spec):
        calls.append(spec["objective"]); asked.append(tuple(cfg["eval"]["metrics"]))
        return dict(score=1.0 + 0.01 * seed + 5 * (spec["objective"] == "beta_vae"))
    paper = Paper(name="toy_ref", title="Toy", scales=dict(quick=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1),
                                                                        eval=dict(metrics=("score", "costly")))),
                    tables=(Table("T", "small", (model_spec("VAE", "vae", "VAE"), model_spec("b4", "beta_vae", "β=4", beta=4),
                                                   model_spec("b8", "beta_vae", "β=8", beta=8)),
                                    (Metric("score", "score", "{:.2f}"),)),),
                    data=lambda name, cfg, seed, options: small, evaluate=evaluate,
                    claims=(Claim("β = 4 scores higher", "b4 > VAE on score"),),
                    learned=(untrained_gate("score", ">", 0.5, "scores more than its untrained network"),))
    fn = register_reproduction(paper)
    try:
        r = fn("quick", out_dir=tmp_path, device="cpu")
        # 6 trained runs, then the untrained references: b4 and b8 share theirs (one objective, one architecture)
        assert len(calls) == 6 + 4, calls
        assert asked == [("score", "costly")] * 6 + [("score",)] * 4      # a reference computes only what its gate reads
        assert r["references"]["T"]["b4"]["score"] == r["references"]["T"]["b8"]["score"] == [6.0, 6.01]
        assert r["learned"]["T"]["b4"]["learned"] is False and "untrained:score" in r["learned"]["T"]["b4"]["why"]
        assert r["claims"][0]["verdict"] == NOT_LEARNED
        assert any(n.startswith("Reference (T)") for n in r["notes"])
        rejudge(paper, tmp_path); assert len(calls) == 10                              # kept in metrics.json
        # references=later (a GPU slot leaves them to the CPU): no gate checked, no claim tested, until a re-judge
        calls.clear()
        later = fn("quick", out_dir=tmp_path / "later", device="cpu", references="later")
        assert len(calls) == 6 and later["references"] == {} and later["claims"][0]["verdict"] == NOT_LEARNED
        assert all(g["learned"] is False and "references=later" in g["why"] for g in later["learned"]["T"].values())
        again = rejudge(paper, tmp_path / "later")
        assert len(calls) == 10 and again["references"]["T"] == r["references"]["T"]
        assert again["learned"] == r["learned"] and again["claims"][0]["verdict"] == r["claims"][0]["verdict"]
        with pytest.raises(InputError, match="references: expected 'here'"):
            fn("quick", out_dir=tmp_path / "bad", device="cpu", references="never")
    finally:
        del REPRODUCTIONS["toy_ref"], PAPERS["toy_ref"]


def test_rows_of_one_architecture_share_a_reference_when_the_evaluation_ignores_the_objective(tmp_path):
    """`Paper.reference_reads_objective = False` (the contrastive paper: its evaluation reads the codes only): the rows of one
    architecture are one network untrained per seed, evaluated once and shared; the default keeps one per objective."""
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    calls = []
    def evaluate(model, data, cfg, seed, spec):
        calls.append(spec["objective"])
        return dict(score=float(next(model.parameters()).detach().double().sum()))   # the network itself, not the row
    rows = (model_spec("VAE", "vae", "VAE"), model_spec("b4", "beta_vae", "β=4", beta=4), model_spec("fa", "factor_vae", "FactorVAE"))
    for reads, per_seed in ((False, 1), (True, 3)):
        name = f"toy_share_{reads}"
        paper = Paper(name=name, title="Toy", scales=dict(quick=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1))),
                        tables=(Table("T", "small", rows, (Metric("score", "score", "{:.2f}"),)),),
                        data=lambda name, cfg, seed, options: small, evaluate=evaluate, reference_reads_objective=reads,
                        learned=(untrained_gate("score", ">", 0.0, "scores more than its untrained network"),))
        fn = register_reproduction(paper)
        try:
            calls.clear()
            r = fn("quick", out_dir=tmp_path / name, device="cpu")
            assert len(calls) == 6 + 2 * per_seed, (reads, calls)
            refs = r["references"]["T"]
            assert refs["VAE"]["score"] == refs["b4"]["score"] == refs["fa"]["score"]         # the same untrained networks
            note = next(n for n in r["notes"] if n.startswith("Reference (T)"))
            assert ("once per architecture, objective and seed" in note) is reads, note
        finally:
            del REPRODUCTIONS[name], PAPERS[name]


def test_a_headline_only_scale_fills_the_tables_made_of_its_runs_and_trains_nothing_more(tmp_path):
    """A scale that trains one table's headline rows (`only`, the cpu scale) also reports another table built from exactly
    those runs (here a second view of the same models, as DIP-VAE's Z-diff classifiers), and skips a table that would need
    other runs (other data), saying why; every run trains once."""
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    calls = []
    def evaluate(model, data, cfg, seed, spec):
        calls.append((spec["slug"], seed)); return dict(score=1.0 + seed, other=2.0)
    models = (model_spec("VAE", "vae", "VAE"), model_spec("b4", "beta_vae", "β=4", beta=4), model_spec("b8", "beta_vae", "β=8", beta=8))
    paper = Paper(name="toy_only", title="Toy", scales=dict(quick=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1),
                                                                         only=dict(table="T", rows=["vae", "beta_vae_beta4"]))),
                    tables=(Table("T", "small", models, (Metric("score", "score", "{:.2f}"),)),
                            Table("T view", "small", models, (Metric("other", "other", "{:.2f}"),)),
                            Table("T other data", "tiny", models, (Metric("score", "score", "{:.2f}"),))),
                    data=lambda name, cfg, seed, options: small, evaluate=evaluate)
    fn = register_reproduction(paper)
    try:
        r = fn("quick", out_dir=tmp_path, device="cpu")
        assert sorted(calls) == sorted((s, k) for s in ("vae", "beta_vae_beta4") for k in (0, 1))   # 2 rows x 2 seeds, once each
        assert set(r["results"]) == {"T", "T view"} and set(r["results"]["T view"]) == {"VAE", "b4"}
        assert r["results"]["T view"]["b4"] == r["results"]["T"]["b4"]                              # the very same runs
        assert "T other data" in r["skipped"] and "headline claims' rows of T only" in r["skipped"]["T other data"]
    finally:
        del REPRODUCTIONS["toy_only"], PAPERS["toy_only"]


@pytest.mark.parametrize("name", ["dipvae", "contrastive"])
def test_pixel_references_measure_the_papers_metric_on_raw_pixels(name):
    """A paper with a raw-pixel gate computes its metric on the pixels of its own data (smoke scale here): a value in the
    metric's bounds, the same for the same seed; the DIP-VAE hook gives nothing on data without factors (CelebA)."""
    from disentbook.repro.reference import PIXELS, reference_metrics
    from disentbook.repro.runs import load_data, run_cfg
    p = PAPERS[name]
    need = reference_metrics(p.learned, PIXELS)
    assert need and p.pixels is not None
    cfg, t = scale_config(p, "smoke"), p.tables[0]
    ds = t.dataset_name(dict(p.options))
    rc = run_cfg(cfg, t.specs(cfg, dict(p.options))[0], ds)
    data = load_data(p, ds, rc, 0, dict(p.options))
    a, b = p.pixels(data, rc, 0), p.pixels(data, rc, 0)
    bounds = {m.key: m.bounds for m in t.metrics}
    for k in need:
        assert bounds[k][0] <= a[k] <= bounds[k][1] and a[k] == b[k], (k, a, b)
    if name == "dipvae": assert p.pixels(object(), rc, 0) == {}


def test_a_figure_whose_model_stayed_in_another_checkout_is_left_out_with_a_note(tmp_path):
    """A run that finished in another checkout travels with its evaluation, not its checkpoint: resumed here, the
    report is written (tables and claims from the evaluations), the figures that need its model are left out, and
    the report says so."""
    import shutil
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    def figure(ctx):
        ctx.model("T", "VAE")
        return {}
    paper = Paper(name="toy_figures", title="Toy", scales=dict(smoke=dict(seeds=1, train=dict(steps=2, batch_size=8, log_every=1))),
                  tables=(Table("T", "small", (model_spec("VAE", "vae", "VAE"),), (Metric("score", "score", "{:.2f}"),)),),
                  data=lambda name, cfg, seed, options: small, evaluate=lambda model, data, cfg, seed, spec: dict(score=1.0),
                  figures=(figure,), claims=())
    fn = register_reproduction(paper)
    try:
        first = fn("smoke", out_dir=tmp_path, device="cpu")
        assert not any("were not drawn" in n for n in first["notes"])
        shutil.rmtree(tmp_path / "runs" / "small" / "vae" / "seed0" / "train" / "checkpoint")
        again = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        assert again["results"] == first["results"]
        assert any("`figure` were not drawn" in n for n in again["notes"])
        assert "were not drawn" in (tmp_path / "report.md").read_text()
    finally:
        del REPRODUCTIONS["toy_figures"], PAPERS["toy_figures"]

def test_a_figure_shows_the_first_seed_whose_model_is_here_and_each_figure_is_left_out_alone(tmp_path):
    """Figures show the first seed whose checkpoint is in the folder, or the float16 copy of its weights a campaign carried
    (a note names either when it is not the first seed's checkpoint); with no model of a row left, `Context.draw` leaves
    out only the figures that need it, each with its note."""
    import shutil
    import torch
    from matplotlib.figure import Figure
    from disentbook.repro.figures import FIGURE_COPY
    from disentbook.training.checkpoints import load_model, write_weights_copy
    from disentbook.data.dsprites import DSprites
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    shown, models = [], []
    def figures(ctx):
        figs = {}
        def needs_model():
            shown.append(ctx.figure_seed("T", "VAE")); models.append(ctx.model("T", "VAE")); return Figure()
        ctx.draw(figs, "model.png", needs_model)
        ctx.draw(figs, "history.png", lambda: (ctx.history("T", "VAE"), Figure())[1])
        return figs
    paper = Paper(name="toy_seed_figures", title="Toy", scales=dict(smoke=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1))),
                  tables=(Table("T", "small", (model_spec("VAE", "vae", "VAE"),), (Metric("score", "score", "{:.2f}"),)),),
                  data=lambda name, cfg, seed, options: small, evaluate=lambda model, data, cfg, seed, spec: dict(score=1.0),
                  figures=(figures,), claims=())
    fn = register_reproduction(paper)
    ck = lambda s: tmp_path / "runs" / "small" / "vae" / f"seed{s}" / "train" / "checkpoint"
    try:
        first = fn("smoke", out_dir=tmp_path, device="cpu")
        assert shown == [0] and sorted(first["figures"]) == ["history.png", "model.png"]
        assert not any("show seed" in n or "not drawn" in n or "copy" in n for n in first["notes"])
        write_weights_copy(ck(0), ck(0).parent / FIGURE_COPY); shutil.rmtree(ck(0))
        copied = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        assert shown[-1] == 0 and sorted(copied["figures"]) == ["history.png", "model.png"]
        assert sum("Figures of VAE (T) draw seed 0's weights from a float16 copy" in n for n in copied["notes"]) == 1
        for (k, a), b in zip(models[0].state_dict().items(), models[-1].state_dict().values()):
            assert a.dtype == b.dtype and torch.allclose(a, b, rtol=2**-11, atol=1e-7), k
        shutil.rmtree(ck(0).parent / FIGURE_COPY)
        again = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        assert shown[-1] == 1 and sorted(again["figures"]) == ["history.png", "model.png"]
        assert sum("Figures of VAE (T) show seed 1" in n for n in again["notes"]) == 1
        shutil.rmtree(ck(1))
        last = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        assert last["results"] == first["results"] and last["figures"] == ["history.png"]
        assert any(n.startswith("`model.png` was not drawn") for n in last["notes"])
        assert "`model.png` was not drawn" in (tmp_path / "report.md").read_text()
    finally:
        del REPRODUCTIONS["toy_seed_figures"], PAPERS["toy_seed_figures"]


@pytest.mark.parametrize("began", ["fp32", "bf16"])
def test_a_resumed_reproduction_trains_every_run_in_the_precision_its_runs_began_in(tmp_path, began):
    """A report begun in one precision and resumed with 'auto' on a machine where 'auto' means the other trains its
    remaining runs in the first one (rows compared in one report compute alike); a note says so only when this
    machine's 'auto' differs. Runs that already disagree are named in a note, nothing is forced."""
    import json, shutil, warnings
    from disentbook.data.dsprites import DSprites
    from disentbook.training.config import resolve_precision
    small = DSprites().subset(posX=range(0, 32, 8), posY=range(0, 32, 8), orientation=range(0, 40, 20))
    paper = Paper(name="toy_precision", title="Toy", scales=dict(smoke=dict(seeds=2, train=dict(steps=2, batch_size=8, log_every=1))),
                  tables=(Table("T", "small", (model_spec("VAE", "vae", "VAE"),), (Metric("score", "score", "{:.2f}"),)),),
                  data=lambda name, cfg, seed, options: small, evaluate=lambda model, data, cfg, seed, spec: dict(score=1.0),
                  claims=())
    fn = register_reproduction(paper)
    seed_dir = lambda s: tmp_path / "runs" / "small" / "vae" / f"seed{s}"
    mode = lambda s: json.loads((seed_dir(s) / "eval.json").read_text())["mode"]["precision"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # bf16 where the CPU has no native bf16: emulated, with a warning
            fn("smoke", out_dir=tmp_path, device="cpu", precision=began)
            assert mode(0) == mode(1) == began
            shutil.rmtree(seed_dir(1))
            again = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        differs = resolve_precision("auto", "cpu")[0] != began
        assert mode(1) == began and again["options"]["precision"] == (began if differs else "auto")
        assert any(n.startswith(f"Every run trains in {began}") for n in again["notes"]) == differs
        other = "bf16" if began == "fp32" else "fp32"
        e = json.loads((seed_dir(0) / "eval.json").read_text()); e["mode"]["precision"] = other
        (seed_dir(0) / "eval.json").write_text(json.dumps(e))      # as if seed 0 had trained in the other precision
        (tmp_path / "metrics.json").unlink()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            last = fn("smoke", out_dir=tmp_path, device="cpu", resume=True)
        assert last["options"]["precision"] == "auto"
        assert any("trained in bf16 and fp32" in n for n in last["notes"])
    finally:
        del REPRODUCTIONS["toy_precision"], PAPERS["toy_precision"]


def test_map_in_processes_keeps_the_items_order_raises_a_childs_error_and_ends_its_children():
    import multiprocessing as mp, signal, time
    from disentbook.repro.processes import map_in_processes
    assert map_in_processes(math.sqrt, [1.0, 4.0, 9.0], workers=2, order=[2, 0, 1]) == [1.0, 2.0, 3.0]
    assert map_in_processes(math.sqrt, []) == []
    with pytest.raises(InputError, match="permutation"): map_in_processes(math.sqrt, [1.0, 4.0], order=[0, 0])
    import os
    from disentbook.core import DisentbookError
    with pytest.raises(DisentbookError, match=r"ended without a result \(exit code 3\)"): map_in_processes(os._exit, [3])
    t = time.monotonic()
    # one child fails at once while the other would sleep two minutes: the error comes back, the sleeper is ended
    with pytest.raises(ValueError, match="non-negative"): map_in_processes(time.sleep, [120, -1], workers=2)
    class Budget(BaseException): pass
    def ring(*_): raise Budget()
    old = signal.signal(signal.SIGALRM, ring); signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(Budget): map_in_processes(time.sleep, [120, 120], workers=2)    # a budget's timer
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0); signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t < 60 and mp.active_children() == []


def test_the_processes_runner_trains_every_run_as_the_local_runner_does_on_one_thread(tmp_path):
    "refvae's smoke reproduction, the local runner on one thread against the processes runner: the same numbers per run."
    import torch
    from disentbook.repro.harness import reproduce
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try: a = reproduce(PAPERS["refvae"], "smoke", out_dir=tmp_path / "a", device="cpu", runner="local", precision="fp32")
    finally: torch.set_num_threads(threads)
    b = reproduce(PAPERS["refvae"], "smoke", out_dir=tmp_path / "b", device="cpu", runner="processes", precision="fp32")
    def same(m): return {(t, row, i): {k: v for k, v in r.items() if "seconds" not in k and k != "mode"}
                         for t, rows in m["results"].items() for row, seeds in rows.items() for i, r in enumerate(seeds)}
    assert same(a) == same(b) and len(same(a)) == 9
    modes = [r["mode"] for rows in b["results"].values() for seeds in rows.values() for r in seeds]
    assert all(m["threads"] == 1 and m["why"].startswith("runner 'processes'") for m in modes)
    assert "runner 'processes'" in (tmp_path / "b" / "report.md").read_text()


def test_a_cpu_run_saves_a_checkpoint_at_least_every_2000_steps():
    from disentbook.repro.runs import CPU_CKPT_EVERY, train_config
    long, short = dict(train=dict(steps=50_000, batch_size=36, lr=1e-4)), dict(train=dict(steps=5_000, batch_size=36, lr=1e-4))
    assert train_config(long, 0, "cpu").ckpt_every == CPU_CKPT_EVERY == 2000
    assert train_config(long, 0, "cuda").ckpt_every == 5000              # a GPU job's saves stay a tenth of its length
    assert train_config(short, 0, "cpu").ckpt_every == 1000


@pytest.mark.parametrize("name, paper, claim, gates, per_seed", [
    ("vae-gpu", "vae", "β-VAE (β = 4) reconstructs", "beta-VAE (beta=4): reconstructs better than the mean image", False),
    ("refvae-cpu-former", "refvae", "sRb-VAE beats Rb-VAE", "Rb-VAE: reconstructs better than a blank image (L1 per pixel)", True)])
def test_a_committed_report_rejudged_prints_the_gates_its_claims_declare(tmp_path, name, paper, claim, gates, per_seed):
    """A claim with gates of its own: the report says which gates it asked, row by row (a reconstruction claim asks no
    MIG; refvae's Rb-VAE, beaten, is asked to reconstruct) and, for `per_seed`, every seed; the committed report says the
    same as a fresh rejudge."""
    import shutil
    src = Path(__file__).resolve().parents[1] / "reports" / name
    out = tmp_path / name
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("*.png"))
    rejudge(PAPERS[paper], out)
    m = json.loads((out / "metrics.json").read_text())
    c = next(c for c in m["claims"] if c["claim"].startswith(claim))
    assert gates in c["gates"] and bool(c.get("per_seed")) == per_seed
    committed = next(c for c in json.loads((src / "metrics.json").read_text())["claims"] if c["claim"].startswith(claim))
    assert committed["verdict"] == c["verdict"] and committed.get("gates") == c["gates"]
    md = (out / "report.md").read_text()
    assert f"    - the gates this claim asks, declared with it: " in md
    assert ("    - per seed, Rb-VAE: avg_mae seed 0" in md) == per_seed
    if paper == "vae": assert "MIG" not in c["gates"] and c["verdict"] == HOLDS


def test_a_run_still_training_is_ignored_by_git_and_shows_once_evaluated(toy, tmp_path, monkeypatch):
    """A reproduction cut while a run trains leaves that run's folder on the disk (to resume) and out of `git status` /
    `git add` under the checkout's own .gitignore; finished runs' small files show; once the cut run is evaluated its
    files show too. Fails where an unfinished run's settings and partial history show as untracked files."""
    import shutil, subprocess
    from disentbook.repro import runs as runs_mod
    fn, calls = toy
    n = len(calls)
    shutil.copy(Path(__file__).resolve().parents[1] / ".gitignore", tmp_path / ".gitignore")
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], capture_output=True, text=True, check=True).stdout
    git("init", "-q")
    out = tmp_path / "reports" / "toy-quick"
    real = runs_mod._evaluate_run
    class Cut(Exception): pass
    def cut(job, *a, **k):
        if job["spec"]["objective"] == "beta_vae" and int(job["seed"]) == 4: raise Cut   # the budget ends here
        return real(job, *a, **k)
    monkeypatch.setattr(runs_mod, "_evaluate_run", cut)
    with pytest.raises(Cut): fn("quick", out_dir=out, device="cpu", seed=3, runner="local")
    cut_run = out / "runs" / "small" / "beta_vae_beta4" / "seed4"
    assert (cut_run / "settings.json").is_file() and (cut_run / "train" / "history.csv").is_file()
    shown = git("status", "--porcelain", "--untracked-files=all")
    assert "vae/seed3/eval.json" in shown and "vae/seed3/settings.json" in shown
    assert "beta_vae_beta4/seed4" not in shown, shown
    monkeypatch.setattr(runs_mod, "_evaluate_run", real)
    (out / ".lock").unlink(missing_ok=True)
    fn("quick", out_dir=out, device="cpu", seed=3, resume=True, runner="local")
    shown = git("status", "--porcelain", "--untracked-files=all")
    for f in ("eval.json", "settings.json", "train/history.csv"): assert f"beta_vae_beta4/seed4/{f}" in shown, f
    assert not (cut_run / ".gitignore").exists() and "checkpoint" not in shown
    # a call stopped between a run's eval.json and the marker's removal: the next call that reuses the run removes it
    from disentbook.repro.outdir import mark_in_flight
    mark_in_flight(cut_run); (out / ".lock").unlink(missing_ok=True)
    fn("quick", out_dir=out, device="cpu", seed=3, resume=True, runner="local")
    assert not (cut_run / ".gitignore").exists()
    del calls[n:]                                                   # the fixture's count, as the other tests expect it
