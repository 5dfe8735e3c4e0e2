"""tools/campaign.py, the CPU campaign, at a tiny scale: a learning curve cut short by its budget goes on from its last
checkpoint to the weights of one straight run, its rows land as CSV + PNG, the ledger says partial then ok, the pause
file holds it, the length rule is the one written down, and bad inputs are one-line errors."""
import csv, importlib.util, json, sys, threading, time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
spec = importlib.util.spec_from_file_location("campaign", ROOT / "tools" / "campaign.py")
C = importlib.util.module_from_spec(spec); spec.loader.exec_module(C)
sys.modules["campaign"] = C          # tools/dsprites_curves.py and paper_curves.py import `campaign`: the same module, so
import dsprites_curves as D          # monkeypatches of its folders reach them
import dsprites_seeds as S


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    for k, v in dict(RESULTS=tmp_path / "results", LEDGER=tmp_path / "campaign.json", CURVES=tmp_path / "curves",
                     FIGURES=tmp_path / "figures", CHUNK=5, PAUSE_POLL=0.05, THREADS=1).items():
        monkeypatch.setattr(C, k, v)
    monkeypatch.setattr(D, "LENGTHS", (10,))
    monkeypatch.setattr(D, "EVAL", dict(num_points=300, seed=1, fvae=dict(batch_size=8, num_train=20, num_eval=10,
                                                                          num_variance_estimate=300)))
    monkeypatch.setattr(D, "SETTINGS", dict(D.SETTINGS, batch_size=8, hidden=16, threads=1))
    return tmp_path


class Stingy(C.Clock):
    "A budget that allows `n` chunks."
    def __init__(self, n): super().__init__(1e9); self.n = n
    def fits(self, seconds=None):
        self.n -= 1
        return self.n >= 0


def test_choose_length_is_the_written_rule():
    rows = [dict(steps=s, mig=m) for s, m in ((1000, .05), (2500, .18), (5000, .25), (7500, .26), (10_000, .255))]
    L, why = C.choose_length(rows)
    assert L == 5000 and "no longer run measured improves mig by 0.02" in why
    L, why = C.choose_length(rows[:3])
    assert L == 5000 and "still rising" in why
    assert C.choose_length([dict(steps=7, mig=.1)])[0] == 7


def test_a_curve_cut_short_resumes_to_a_straight_run(tiny):
    from disentbook.cli import train_job
    from disentbook.train import load_model
    name = "beta_vae_b1"
    assert D.run_curve(name, Stingy(1)) is False                     # one chunk (5 of 10 steps), then the budget is spent
    assert D._at(D.curve_dir(name) / "run") == 5 and D.read_curve(name) == []
    assert D.run_curve(name, Stingy(10)) is True                     # goes on from the checkpoint at 5
    rows = D.read_curve(name)
    assert [r["steps"] for r in rows] == [10] and all(0 <= r["mig"] <= 1 and "loss/loss" in r for r in rows)
    assert D.run_curve(name, Stingy(0)) is True                      # done: nothing to train
    stem = D.curve_stem(name)                                        # the fixture's width (16): NAME-h16
    assert stem == f"{name}-h16" and (tiny / "curves" / f"{stem}.csv").is_file() and (tiny / "curves" / f"{stem}.png").is_file()
    s = D.SETTINGS
    train_job(method="beta_vae", dataset="dsprites", params=dict(beta=1.0), steps=10, batch_size=s["batch_size"],
              lr=s["lr"], latent_dim=s["latent_dim"], hidden=s["hidden"], out_dir=tiny / "straight", device="cpu",
              seed=s["seed"], evaluate=False, threads=1, precision=s["precision"])
    a = load_model(D.curve_dir(name) / "step_10" / "checkpoint").state_dict()
    b = load_model(tiny / "straight" / "checkpoint").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_ledger_partial_then_ok(tiny, monkeypatch):
    monkeypatch.setattr(D, "DSPRITES", ("beta_vae_b1",))
    assert C.run_stage("dsprites-curves", Stingy(1)) == "partial"
    assert C.read_ledger(C.LEDGER)["stages"]["dsprites-curves"]["status"] == "partial"
    assert C.run_stage("dsprites-curves", Stingy(10)) == "ok"
    r = C.read_ledger(C.LEDGER)["stages"]["dsprites-curves"]
    assert r["status"] == "ok" and r["cpu"] and r["torch"] == torch.__version__ and r["precision"] in ("bf16", "fp32")


def test_pause_file_holds_the_campaign(tiny):
    assert C.main(["--pause"]) == 0 and C.pause_file().exists()
    threading.Timer(0.3, lambda: C.pause_file().unlink()).start()
    t0 = time.monotonic(); C.Clock(60).wait_while_paused()
    assert time.monotonic() - t0 >= 0.25 and not C.pause_file().exists()
    C.main(["--pause"]); assert C.main(["--go-on"]) == 0 and not C.pause_file().exists()


def test_list_and_bad_inputs(tiny, capsys, tmp_path):
    assert C.main(["--list"]) == 0
    assert [l.split()[0] for l in capsys.readouterr().out.splitlines()] == [*C.STAGES, *C.GPU_STAGES]
    if not torch.cuda.is_available():                                  # a GPU stage here: gpu_campaign's one-line refusal
        fresh = ["--ledger", "", "--results", str(tmp_path / "gpu_results")]   # as if no GPU slot had run it yet
        assert C.run_gpu_stage("gpu-dipvae", fresh) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
    assert C.main(["--next", "--budget", "soon"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--budget 'soon'" in err
    assert C.parse_budget("2h") == 7200 and C.parse_budget("150m") == 9000 and C.parse_budget("90") == 5400
    C.LEDGER.write_text("{not json")
    assert C.main(["--list"]) == 2 and "not readable JSON" in capsys.readouterr().err


def test_a_paper_curve_resumes_and_chooses_a_length(tiny):
    "Invariance's Ours row at lengths 3 and 6 (chunks of 3): cut after one chunk, resumed, measured by the paper's evaluation."
    import paper_curves as PC
    assert PC.out_dir("invariance").is_relative_to(tiny)
    C.CHUNK = 3                                                     # the fixture's monkeypatch restores it
    assert PC.row_curve("invariance", "swap_invariance", Stingy(1), lengths=(3, 6)) is False
    assert [r["steps"] for r in PC.read_rows("invariance", "swap_invariance")] == [3]
    assert PC.row_curve("invariance", "swap_invariance", Stingy(5), lengths=(3, 6)) is True
    rows = PC.read_rows("invariance", "swap_invariance")
    assert [r["steps"] for r in rows] == [3, 6] and all(0 <= r["avg_acc"] <= 1 for r in rows)
    assert (tiny / "curves" / "invariance" / "swap_invariance.csv").is_file() and (tiny / "curves" / "invariance.png").is_file()
    L, why = PC.lengths("invariance")["swap_invariance"]
    assert L in (3, 6) and "avg_acc" in why


def test_the_models_stage_packages_the_chosen_length(tiny, monkeypatch):
    "A measured curve -> lengths.json -> fp16 weights and a card carrying its curve, the rule's reason and the figures."
    import train_pretrained as TP
    from disentbook.classroom.pretrained import pretrained, pretrained_card
    monkeypatch.setattr(TP, "DEFAULT_DEST", tiny / "dest")
    monkeypatch.setattr(D, "DSPRITES", ("beta_vae_b1", "beta_vae_b4"))
    monkeypatch.setattr(D, "ONLY", ("beta_vae_b1",))                    # `--recipes beta_vae_b1`: one of the two
    assert D.stage_models(Stingy(50)) == "partial" and not (tiny / "dest").exists()    # no curve yet: nothing packaged
    assert D.stage_curves(Stingy(10)) == "partial"                    # beta_vae_b1's curve; beta_vae_b4's left out
    assert D.stage_models(Stingy(50)) == "partial"                    # packaged, but not every recipe
    lengths = json.loads(D.lengths_file().read_text())
    assert lengths["beta_vae_b1"]["steps"] == 10 and lengths["beta_vae_b1"]["precision"] in ("bf16", "fp32")
    card = pretrained_card("beta_vae_b1", root=tiny / "dest")
    assert card["train"]["steps"] == 10 and [r["steps"] for r in card["curve"]] == [10]
    assert card["length"] == lengths["beta_vae_b1"]["why"] and "--steps 10 " in card["command"]
    assert f"--precision {lengths['beta_vae_b1']['precision']}" in card["command"] and "learning curve" in card["note"]
    assert card["train"]["precision"] == lengths["beta_vae_b1"]["precision"]
    assert not pretrained("beta_vae_b1", root=tiny / "dest").training
    for f in ("beta_vae_b1_curve.png", "beta_vae_b1_traversals.png", "README.md"): assert (tiny / "figures" / f).is_file(), f
    assert "`beta_vae_b1` | 16 | 10 |" in (tiny / "figures" / "README.md").read_text()
    assert card["figures"]["curve_csv"] == "benchmarks/curves/beta_vae_b1-h16.csv"


def test_the_seeds_stage_ships_the_best_seed_and_quotes_it_on_other_images(tiny, monkeypatch):
    """dsprites-seeds: a seeded recipe trains again with the extra seeds to seed 0's chosen length (each its own curve), the
    seed with the highest MIG on the curves' images ships (its weights, curve and command), every seed is measured again on
    CHECK_SEED's images, and cards and the models page quote that number; a recipe without seeds is measured there too."""
    import train_pretrained as TP
    from disentbook.classroom.pretrained import pretrained_card
    from disentbook.train import load_model
    monkeypatch.setattr(TP, "DEFAULT_DEST", tiny / "dest")
    monkeypatch.setattr(D, "DSPRITES", ("beta_vae_b1", "beta_vae_b4"))
    monkeypatch.setattr(D, "SEED_RECIPES", ("beta_vae_b1",))
    monkeypatch.setattr(D, "EXTRA_SEEDS", (1, 2))
    assert S.stage_seeds(Stingy(50)) == "partial" and not S.seeds_file().exists()      # no seed-0 curve yet
    assert D.stage_curves(Stingy(20)) == "ok"
    f = D.curve_dir("beta_vae_b1") / "curve.jsonl"                 # seed 0 scored lowest, so another seed must ship
    f.write_text("".join(json.dumps(dict(r, mig=-1.0)) + "\n" for r in D.read_curve("beta_vae_b1")))
    assert S.stage_seeds(Stingy(1)) == "partial"                                       # cut short: one chunk of seed 1
    assert D._at(D.curve_dir("beta_vae_b1", 1) / "run") == 5 and not S.seeds_file().exists()
    assert S.stage_seeds(Stingy(50)) == "ok"
    sel = json.loads(S.seeds_file().read_text())["beta_vae_b1"]
    migs = {k: v["mig"] for k, v in sel["seeds"].items()}
    assert set(migs) == {"0", "1", "2"} and sel["steps"] == 10 and str(sel["chosen"]) == max(migs, key=migs.get)
    assert all(0 <= v["check"]["mig"] <= 1 for v in sel["seeds"].values())
    for k in ("1", "2"):                                   # each extra seed: its own run and curve, seeded as the CLI seeds it
        assert [r["steps"] for r in D.read_curve("beta_vae_b1", int(k))] == [10]
        assert (tiny / "curves" / f"beta_vae_b1-h16-seed{k}.csv").is_file()
    a, b = (load_model(D.curve_dir("beta_vae_b1", s) / "step_10" / "checkpoint").state_dict() for s in (1, 2))
    assert not all(torch.equal(a[k], b[k]) for k in a)
    chosen = int(sel["chosen"])
    assert chosen in (1, 2)
    card = pretrained_card("beta_vae_b1", root=tiny / "dest")
    assert card["train"]["seed"] == chosen and f"--seed {chosen} " in card["command"]
    assert card["check"]["mig"] == sel["seeds"][str(chosen)]["check"]["mig"] and "which chose nothing" in card["note"]
    assert card["curve"][0]["mig"] == round(sel["seeds"][str(chosen)]["mig"], 5) and "ships, chosen by" in card["selection"]
    shipped = load_model(D.curve_dir("beta_vae_b1", chosen) / "step_10" / "checkpoint").state_dict()
    from disentbook.classroom.pretrained import pretrained
    got = pretrained("beta_vae_b1", root=tiny / "dest").state_dict()
    assert all(torch.allclose(got[k].float(), shipped[k].float().half().float()) for k in shipped)   # the chosen seed's weights
    other = pretrained_card("beta_vae_b4", root=tiny / "dest")                           # no seeds: seed 0, measured again
    assert other["train"]["seed"] == 0 and "selection" not in other and 0 <= other["check"]["mig"] <= 1
    page = (tiny / "figures" / "README.md").read_text()
    assert f"| `beta_vae_b1` | 16 | 10 | {chosen} | {card['check']['mig']:.3f} |" in page and "Seeds of `beta_vae_b1`" in page


def test_a_dsprites_curve_stops_once_flat(tiny):
    """The early-stop rule: STOP_AFTER measured lengths after the one choose_length picks, none improving MIG by FLAT, the
    longest at least half the longest length of the list (the fixture's list: (10,), so from 5 steps on)."""
    rows = lambda *migs, at=(2, 4, 6, 8, 10): [dict(steps=s, mig=m) for s, m in zip(at, migs)]
    assert D.stop_from() == 5
    assert not D.stopped_flat([]) and not D.stopped_flat(rows(.1, .2))            # still rising
    assert not D.stopped_flat(rows(.2, .2))                                        # one length after the pick: go on
    assert D.stopped_flat(rows(.2, .21, .19)) and D.curve_done(rows(.2, .21, .19))
    assert not D.stopped_flat(rows(.2, .21, .19, at=(1, 2, 3)))                    # flat, but not yet at half the list
    assert not D.stopped_flat(rows(.2, .21, .25)) and not D.curve_done(rows(.2, .21, .25))    # .25 - .2 > FLAT: go on


def test_paper_curves_give_the_cpu_scale_its_length_and_plan(tiny, monkeypatch, capsys):
    "Every headline row's curve -> the package's cpu lengths -> `scale_config(..., 'cpu')` and `--plan` in hours."
    import paper_curves as PC
    from disentbook.cli import main as cli
    from disentbook.core import InputError
    from disentbook.repro import harness as H
    from disentbook.repro.plan import plan, plan_text
    from disentbook.repro import declare
    monkeypatch.setattr(declare, "curve_lengths_path", lambda: tiny / "cpu_lengths.json")
    with pytest.raises(InputError, match="not measured yet"): H.scale_config(H.PAPERS["invariance"], "cpu")
    assert cli(["reproduce", "invariance", "--scale", "cpu", "--plan"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "curves-invariance" in err
    C.CHUNK = 3
    monkeypatch.setitem(PC.METRIC, "invariance", ("avg_acc", +1, (3, 6)))
    table, slugs = PC.headline("invariance")
    assert table == "Table 1" and len(slugs) == 7                  # the headline claim compares all seven rows
    assert PC.stage("invariance", Stingy(20)) == "ok"
    e = json.loads((tiny / "cpu_lengths.json").read_text())["invariance"]
    assert set(e["rows"]) == set(slugs) and e["steps"] == max(r["steps"] for r in e["rows"].values())
    assert all(r["seconds_per_step"] > 0 and r["steps"] in (3, 6) for r in e["rows"].values())
    cfg = H.scale_config(H.PAPERS["invariance"], "cpu")
    quick = H.scale_config(H.PAPERS["invariance"], "quick")
    assert cfg["train"]["steps"] == e["steps"] and cfg["seeds"] == 5
    assert {k: v for k, v in cfg.items() if k not in ("seeds", "train", "only")} == \
           {k: v for k, v in quick.items() if k not in ("seeds", "train")}          # quick's settings, as the curves ran
    p = plan("invariance", "cpu")
    assert len(p["runs"]) == 5 * len(slugs) and {r["steps"] for r in p["runs"]} == {e["steps"]}
    assert p["hours"] == pytest.approx(sum(r["seconds"] for r in p["runs"]) / 3600)
    text = plan_text(p)
    assert "hours" in text and "aim: 2 hours" in text and "Table 2" in text          # the other tables: not run, and why
    assert cli(["reproduce", "invariance", "--scale", "cpu", "--plan"]) == 0
    # the same curves set the gpu scale's length (as many images at its batch size); over its budget the budget gives
    g = H.scale_config(H.PAPERS["invariance"], "gpu")
    qb, gb = quick["train"]["batch_size"], g["train"]["batch_size"]
    assert g["train"]["steps"] == -(-e["steps"] * qb // gb) and "learning curves" in g["length"]["why"]
    from disentbook.repro.plan import check_budget
    gp = plan("invariance", "gpu")
    assert gp["length"]["steps"] == g["train"]["steps"] and "the scale's own plan was" in plan_text(gp)
    longer = dict(gp["length"], steps=gp["length"]["planned"] * 4)         # the curves asked for 4x the planned length
    check_budget(dict(gp, length=longer, minutes=gp["budget_minutes"] * 2))    # over only by that length: never cut to the budget
    with pytest.raises(InputError, match="over its budget"):                   # its rows and seeds over even at the planned length
        check_budget(dict(gp, length=longer, minutes=gp["budget_minutes"] * 8))
    with pytest.raises(InputError, match="over its budget"): check_budget(dict(gp, minutes=1e9, length=None))
    # the cpu-<paper> stage: cut by its budget in the middle of the reproduction, then resumed to a report
    monkeypatch.setitem(H.PAPERS["invariance"].scales["cpu"], "seeds", 1)
    monkeypatch.setattr(C, "reports_dir", lambda p: tiny / "reports" / f"{p}-cpu")
    monkeypatch.setattr(C, "CPU_MIN", 0.0)
    monkeypatch.setattr(C, "CPU_MARGIN", 1e9 - 1.0)                        # the timer fires one second in
    assert C.run_stage("cpu-invariance", C.Clock(1e9)) == "partial"
    out = tiny / "reports" / "invariance-cpu"
    assert not (out / "report.md").exists() and not (out / ".lock").exists()     # stopped, its folder unlocked
    assert json.loads(C.LEDGER.read_text())["stages"]["cpu-invariance"]["status"] == "partial"
    monkeypatch.setattr(C, "CPU_MARGIN", 0.0)
    assert C.run_stage("cpu-invariance", C.Clock(1e9)) == "ok"
    assert (out / "report.md").exists() and len(list(out.glob("runs/*/*/seed0/eval.json"))) == len(slugs)
    m = json.loads((out / "metrics.json").read_text())
    assert m["config"]["train"]["steps"] == e["steps"]
    # seed 0 of every row is its curve's run, resumed from the checkpoint the curve kept at that length: the same
    # weights, so the same evaluation as the curve's at that length; the report says so
    for slug in slugs:
        ev = json.loads(next(out.glob(f"runs/*/{slug}/seed0/eval.json")).read_text())["metrics"]
        at = next(r for r in PC.read_rows("invariance", slug) if r["steps"] == e["steps"])
        assert ev["steps"] == e["steps"] and ev["avg_acc"] == pytest.approx(at["avg_acc"], rel=1e-9, abs=1e-12), (slug, ev, at)
    assert any(n.startswith("Seed 0 of ") for n in m["notes"]) and "learning curve" in (out / "report.md").read_text()
    # the sensitivity, its own folder and label. Its palette changes the evaluation only: trained again under it, every
    # run has the weights of the cpu reproduction's run of the same row and seed ...
    from disentbook.checkpoints import read_checkpoint_config
    def weights(run):
        ck = run / "train" / "checkpoint"
        return torch.load(ck / read_checkpoint_config(ck)["state_file"], weights_only=True)["model"]
    mid = tiny / "reports" / "invariance-cpu-midpoint"
    monkeypatch.setattr(C, "EVAL_ONLY", set())
    assert C.run_stage("cpu-invariance-midpoint", C.Clock(1e9)) == "ok"
    assert "Sensitivity (ours)" in (mid / "report.md").read_text()
    runs = sorted(r.parent.relative_to(mid) for r in mid.glob("runs/*/*/seed*/eval.json"))
    assert len(runs) == len(slugs) and not list(mid.glob(f"runs/*/*/seed*/{C.FROM_BASE}"))
    for r in runs:
        a, b = weights(out / r), weights(mid / r)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), r
    trained = mid.rename(tiny / "trained-midpoint")
    # ... so the stage copies those models in and only evaluates them: the same evaluation, the report says where they trained
    monkeypatch.setattr(C, "EVAL_ONLY", {"cpu-invariance-midpoint"})
    assert C.run_stage("cpu-invariance-midpoint", C.Clock(1e9)) == "ok"
    assert len(list(mid.glob(f"runs/*/*/seed*/{C.FROM_BASE}"))) == len(runs)
    for r in runs:
        got, want = (json.loads((d / r / "eval.json").read_text())["metrics"] for d in (mid, trained))
        assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12) for k in want
                                                 if isinstance(want[k], float) and "seconds" not in k), r
        base = json.loads((out / r / "eval.json").read_text())["metrics"]
        assert "acc@red+green" in got and "acc@yellow" in base and "acc@yellow" not in got     # the other palette ...
        assert got["avg_acc_train"] == pytest.approx(base["avg_acc_train"], rel=1e-9, abs=1e-12)  # ... the same model
    rep = (mid / "report.md").read_text()
    assert "Sensitivity (ours)" in rep and "evaluated again" in rep and "invariance-cpu" in rep


def test_a_packaging_keeps_the_shipped_model_of_another_width_when_it_measured_higher():
    import dsprites_curves as D
    shipped = dict(hidden=None, steps=1000, mig=0.065)                     # a width-128 model, as lengths.json records it
    assert not D.better_than_shipped(dict(hidden=256, mig=0.036), shipped)   # the 256 curve did worse: kept
    assert D.better_than_shipped(dict(hidden=256, mig=0.168), dict(hidden=None, mig=0.056))
    assert D.better_than_shipped(dict(hidden=256, mig=0.01), dict(hidden=256, mig=0.2))   # same width: the curve's choice
    assert D.better_than_shipped(dict(hidden=256, mig=0.01), None)


def test_pilots_are_listed_and_not_shipped():
    "A piloted recipe keeps its committed curve, is listed with it on the models page, and is never packaged by default."
    import train_pretrained as TP
    assert TP.PILOTS and set(TP.PILOTS) <= set(TP.RECIPES) and not set(TP.PILOTS) & set(D.DSPRITES)
    lines = D.pilot_lines()
    for n in TP.PILOTS:
        line = next(l for l in lines if l.startswith(f"- `{n}`"))
        rows = list(csv.DictReader((C.CURVES / f"{D.curve_stem(n)}.csv").open()))
        assert f"{float(rows[-1]['mig']):.3f} at {int(rows[-1]['steps']):,}" in line and "not shipped" in line
        assert not (ROOT / "disentbook" / "assets" / "pretrained" / f"{n}.pt").exists()
    assert D._names(None) == D.DSPRITES
    page = (ROOT / "reports" / "pretrained" / "README.md").read_text()
    assert all(l in page for l in lines if l.startswith("- "))


@pytest.mark.parametrize("paper", ["contrastive", "refvae", "vae"])
def test_each_papers_curve_stage_measures_its_metric(tiny, paper):
    "The first headline row of each paper whose curves have not run yet: 3 steps, scored by the paper's own evaluation."
    import math
    import paper_curves as PC
    C.CHUNK = 3
    _, slugs = PC.headline(paper)
    metric = PC.METRIC[paper][0]
    assert PC.row_curve(paper, slugs[0], Stingy(5), lengths=(3,)) is True
    rows = PC.read_rows(paper, slugs[0])
    assert [r["steps"] for r in rows] == [3] and math.isfinite(rows[0][metric])


def test_carry_puts_cut_short_work_in_the_index_and_a_clone_gets_it(tmp_path, monkeypatch):
    "`--carry`: a cut-short run's checkpoint and an unfinished curve reach a fresh clone; finished ones leave the index."
    import shutil, subprocess
    root = tmp_path / "repo"; root.mkdir()
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    git = lambda *a, cwd=root: subprocess.run(["git", "-C", str(cwd), *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q"); git("config", "user.email", "t@t"); git("config", "user.name", "t")
    monkeypatch.setattr(C, "RESULTS", root / "results" / "campaign")
    monkeypatch.setattr(C, "LEDGER", root / "benchmarks" / "campaign.json")
    def put(rel, text="x"):
        p = root / rel; p.parent.mkdir(parents=True, exist_ok=True); p.write_text(text); return rel
    from disentbook.checkpoints import write_checkpoint
    def ckpt(d, state, s=600):                       # a real checkpoint (the package's writer), `s` seconds of training
        cfg = json.loads((write_checkpoint(root / d, state.encode(), dict(step=1, train_seconds=s)) / "config.json").read_text())
        return [f"{d}/config.json", f"{d}/{cfg['state_file']}"]
    cut = ckpt("reports/x-cpu/runs/D/m/seed0/train/checkpoint", "a") + [put("reports/x-cpu/runs/D/m/seed0/from_curve.json", "{}")]
    put("reports/x-cpu/runs/D/m/seed0/train/checkpoint/state-0000002-0123456789ab.pt.tmp")      # a save cut short: not carried
    ckpt("reports/x-cpu/runs/D/m/seed2/train/checkpoint", "b", s=C.CARRY_SECONDS - 1)            # cheap: not carried
    put("reports/x-cpu/runs/D/m/seed3/train/checkpoint/config.json", "{")                      # unreadable: not carried
    put("reports/x-cpu/runs/D/m/seed1/train/checkpoint/config.json"); put("reports/x-cpu/runs/D/m/seed1/eval.json", "{}")
    curve = [put(f"results/campaign/paper_curves/foo/row/{f}") for f in ("curve.jsonl", "seconds.json")] \
        + ckpt("results/campaign/paper_curves/foo/row/run/checkpoint", "c")
    put("results/campaign/paper_curves/foo/row/run/step_0000010/config.json")       # a kept length: not carried
    put("results/campaign/paper_curves/bar/row/run/checkpoint/config.json")          # its stage is done: not carried
    C.write_ledger("curves-foo", dict(status="partial")); C.write_ledger("curves-bar", dict(status="ok"))
    git("add", "-A"); git("commit", "-qm", "first")            # what git does not ignore
    base = set(git("ls-files").split())
    assert base == {".gitignore", "benchmarks/campaign.json", "reports/x-cpu/runs/D/m/seed1/eval.json"}
    now, old = C.carry(root)
    assert now == sorted(cut + curve) and old == []
    assert set(git("ls-files").split()) - base == set(cut + curve)
    git("commit", "-qm", "carry")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, capture_output=True)
    assert all((clone / p).read_text() == (root / p).read_text() for p in cut + curve)
    assert not (clone / "reports/x-cpu/runs/D/m/seed1/train/checkpoint/config.json").exists()
    # the run evaluated since and the curve done: both leave the index, their files stay on disk
    put("reports/x-cpu/runs/D/m/seed0/eval.json", "{}"); git("add", "-A"); C.write_ledger("curves-foo", dict(status="ok"))
    now, old = C.carry(root)
    assert now == [] and old == sorted(cut + curve) and set(git("ls-files").split()) == base | {"reports/x-cpu/runs/D/m/seed0/eval.json"}
    assert all((root / p).is_file() for p in cut + curve)
    with pytest.raises(C.CampaignError, match="git ls-files failed"): C.carry(tmp_path / "clone" / "..")   # not a repository
