"""`reproduce NAME --scale gpu --plan` (repro.plan): the throughput table, the rates, every paper's gpu plan within its
share of issue 22's 20 minutes, and the one-line errors (a plan over budget, a broken table)."""
import json, math

import pytest

import disentbook  # noqa: F401  (registers every reproduction)
from disentbook.cli import main
from disentbook.core import InputError
from disentbook.repro import plan as P
from disentbook.repro.declare import PAPERS, scale_config
from disentbook.repro.runs import MODES

PAPERS_GPU = ("vae", "dipvae", "tcwae", "contrastive", "refvae", "invariance")


def test_committed_table_holds_the_issue_anchors_marked_as_such():
    t = P.load_throughput()
    assert t["path"].endswith("benchmarks/throughput.json") and t["device"]
    if not t["measured"]:                      # until bench_gpu.py has run on a GPU: the issue's figures, said so
        assert t["source"] == P.ISSUE_ANCHOR == "the planning anchors, not measured here"
        got = {(r["mode"], r["group_size"]): r["images_per_s"] for r in t["rows"]}
        assert got == {("eager", 1): 12463, ("captured_single", 1): 51449, ("captured_ensemble", 8): 54197,
                       ("captured_ensemble", 32): 125802}
    assert all(r["mode"] in MODES and r["images_per_s"] > 0 for r in t["rows"])


def test_the_package_ships_the_checkouts_table_and_plans_on_it_when_installed(monkeypatch):
    "An installed package (no checkout around it) plans on the copy of the measured table it ships, the same file."
    pkg = P.Path(P.core.__file__).resolve().parent
    shipped, checkout = pkg / P.PACKAGED_THROUGHPUT, pkg.parent / P.THROUGHPUT_FILE
    assert shipped.read_bytes() == checkout.read_bytes()                  # --unpack writes both; never one without the other
    monkeypatch.delenv("DISENTBOOK_THROUGHPUT", raising=False)
    monkeypatch.setattr(P, "THROUGHPUT_FILE", "benchmarks/no-such-table.json")   # as installed: no checkout
    assert P.throughput_path() == shipped and P.load_throughput()["device"] == json.loads(shipped.read_text())["device"]


def _curves_with_threads(monkeypatch, threads, cores=2):
    "dipvae's shipped curve record with every row's rate re-labelled as measured on `threads` threads (the test's own fixture)."
    import copy
    from disentbook.repro.declare import curve_lengths
    got = copy.deepcopy(curve_lengths("dipvae"))
    assert got is not None                                                      # measured and shipped with the package
    for r in got["rows"].values(): r["threads"] = threads
    got["machine"] = dict(got["machine"], cores=cores, threads=threads if threads > 1 else cores)
    monkeypatch.setattr(P, "curve_lengths", lambda name: got)
    return got


def test_a_cpu_plan_says_when_its_evaluation_is_not_the_one_its_curves_timed(monkeypatch):
    "dipvae's cpu scale fits the Z-diff SVM on more points than quick (the curves' settings): its plan says so; vae's does not."
    _curves_with_threads(monkeypatch, 2)                                        # rates of one run at a time on both cores
    p = P.cpu_plan("dipvae")
    assert p["eval_note"] and "evaluation: this scale evaluates with other settings" in P.cpu_plan_text(p)
    q = dict(p, eval_note=None)
    assert "evaluation:" not in P.cpu_plan_text(q)
    # in processes the runs take less than the hours of one run at a time, which the plan still counts: it says so
    assert "runner: processes" not in P.cpu_plan_text(p)
    r = P.cpu_plan("dipvae", runner="processes")
    assert r["hours"] == p["hours"] and "runner: processes, one single-threaded run per core" in P.cpu_plan_text(r)


def test_rates_interpolate_in_log_k_and_never_extrapolate_growth():
    t = json.loads(json.dumps(P.ANCHORS))
    ens = lambda k: P.rate(t, "conv64_vae", "captured_ensemble", k)[0]
    assert ens(1) == 51449 and ens(8) == 54197 and ens(32) == 125802 and ens(100) == 125802
    assert ens(16) == pytest.approx(54197 + (125802 - 54197) * math.log(2) / math.log(4))
    assert ens(2) < ens(5) < ens(8) < ens(15) < ens(31)
    assert P.rate(t, "conv64_vae", "eager", 9)[0] == 12463 and P.rate(t, "conv64_vae", "captured_single", 9)[0] == 51449
    r, why = P.rate(t, "conv28_contrastive_vae", "captured_ensemble", 8)
    assert r == 54197 and "no figure for conv28_contrastive_vae" in why and "not measured here" in why
    t["rows"].append(dict(family="conv28_vae", mode="captured_single", group_size=1, images_per_s=99999))
    assert P.rate(t, "conv28_vae", "captured_ensemble", 5)[0] == 99999                 # its own figure, held at K = 1
    t2 = json.loads(json.dumps(P.ANCHORS))                                             # a family measured eager only
    t2["rows"].append(dict(family="conv28_vae", mode="eager", group_size=1, images_per_s=777))
    r, why = P.rate(t2, "conv28_vae", "captured_ensemble", 8)
    assert r == 54197 and "no captured ensemble figure for conv28_vae: assumed equal" in why
    assert P.rate(t2, "conv28_vae", "eager", 8)[0] == 777
    r, why = P.rate(t, "conv28_vae", "eager", 5)                                       # no eager figure of its own
    assert r == 12463 and "no eager figure for conv28_vae" in why
    t["measured"] = True
    t["rows"].append(dict(family="conv64_vae_adv", mode="captured_single", group_size=1, precision="bf16", images_per_s=1000))
    assert P.rate(t, "conv64_vae_adv", "captured_ensemble", 4) == (1000.0, "conv64_vae_adv, ensemble held at K = 1, measured")


def test_a_host_stage_group_uses_its_own_row_else_the_eager_rate():
    "Eq. 8's captured steps solve an OT plan on the host first: never rated as a plain captured model."
    t = json.loads(json.dumps(P.ANCHORS))
    t["rows"].append(dict(family="conv28_contrastive_vae", mode="captured_single", group_size=1, images_per_s=40000))
    r, why = P.rate(t, "conv28_contrastive_vae", "captured_single", 1, host_stage=True)
    assert r == 12463 and "no figure for it: rated as eager" in why
    assert P.rate(t, "conv28_contrastive_vae", "captured_single", 1)[0] == 40000
    t["rows"].append(dict(family="conv28_contrastive_vae", mode="captured_single", group_size=1, images_per_s=20000, host_stage=True))
    r, why = P.rate(t, "conv28_contrastive_vae", "captured_single", 1, host_stage=True)
    assert r == 20000 and "captured with a host stage" in why
    assert P.rate(t, "conv28_contrastive_vae", "captured_single", 1)[0] == 40000      # the host-stage row is its own
    p = P.plan("contrastive", "gpu", throughput=P.ANCHORS)
    eq8 = [g for g in p["groups"] if g["objectives"] == ["contrastive_w2"]]
    assert eq8 and all(g["plan_mode"] == "captured_single" and "rated as eager" in g["rate_source"] for g in eq8)
    assert not [g for g in p["groups"] if g["mode"] == "eager"]                         # every contrastive group is captured
    if P.load_throughput()["measured"]:                                                  # the committed table has its row
        eq8 = [g for g in P.plan("contrastive", "gpu")["groups"] if g["objectives"] == ["contrastive_w2"]]
        assert eq8 and all("captured with a host stage" in g["rate_source"] for g in eq8)


def test_every_gpu_plan_fits_its_share_with_five_seeds():
    assert sum(P.GPU_SHARES.values()) == P.GPU_BUDGET_MINUTES == 20.0
    total = 0.0
    for name in PAPERS_GPU:
        assert scale_config(PAPERS[name], "gpu")["seeds"] >= 5, name
        p = P.plan(name, "gpu")
        P.check_budget(p)
        assert p["runs"] == sum(g["members"] for g in p["groups"]) and p["runs"] % 5 == 0, name
        for g in p["groups"]:
            assert g["images"] == g["members"] * g["steps"] * g["batch_size"]
            assert g["seconds"] == pytest.approx(g["images"] / g["images_per_s"])
        # the rows and seeds fit at the scale's own length; a length the learning curves chose may exceed it (the budget gives)
        assert P.planned_minutes(p) <= p["budget_minutes"], (name, p["minutes"])
        total += P.planned_minutes(p) if name in P.GPU_SHARES else 0.0
    assert total <= P.GPU_BUDGET_MINUTES


def test_cli_prints_the_plan_and_refuses_one_over_budget(capsys, monkeypatch):
    assert main(["reproduce", "dipvae", "--scale", "gpu", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "plan: dipvae at scale gpu: 20 runs in 3 groups" in out and "device minutes" in out
    measured = P.load_throughput()["measured"]
    assert ("measured" if measured else "not measured here") in out and "13,000" in out
    assert "within it" in out or ("the budget gives, not the length" in out and "learning curves" in out)
    # the Figure 1 sweep, against a budget smaller than its device minutes (at the curves' length it fits dipvae's own share)
    assert main(["reproduce", "dipvae", "--scale", "gpu", "--plan", "-o", "sweep=true"]) == 0
    monkeypatch.setitem(P.GPU_SHARES, "dipvae", 0.25)
    assert main(["reproduce", "dipvae", "--scale", "gpu", "--plan", "-o", "sweep=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "over its budget of 0.25" in err and "paper scale" in err, err
    assert main(["reproduce", "tcwae", "--scale", "quick", "--plan"]) == 0                       # no budget off gpu
    assert "budget" not in capsys.readouterr().out
    assert main(["reproduce", "tcwae", "--scale", "gpu", "--plan", "-o", "bogus=1"]) == 2
    assert "has no option bogus" in capsys.readouterr().err


def test_broken_throughput_tables_are_one_line_errors(tmp_path, monkeypatch):
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"): P.load_throughput(bad)
    bad.write_text(json.dumps(dict(device="x", measured=True, rows=[dict(family="conv64_vae", mode="warp", group_size=1, images_per_s=5)])))
    with pytest.raises(InputError, match="row 0 needs family, mode"): P.load_throughput(bad)
    with pytest.raises(InputError, match="no such file"): P.load_throughput(tmp_path / "missing.json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(dict(device="a GPU", measured=True, rows=[
        dict(family="conv64_vae", mode="captured_single", group_size=1, images_per_s=1000.0)])))
    monkeypatch.setenv("DISENTBOOK_THROUGHPUT", str(good))
    p = P.plan("vae", "gpu")                                           # 5 seeds x its steps x 64 images at 1,000 images/s
    steps = scale_config(PAPERS["vae"], "gpu")["train"]["steps"]        # 20,000, or as many images as its curves chose
    assert p["device"] == "a GPU" and p["measured"] and p["seconds"] == pytest.approx(5 * steps * 64 / 1000)
    with pytest.raises(P.OverBudgetError, match="over its budget of 2"): P.check_budget(p)


def test_a_captured_row_timed_eagerly_rates_as_eager(tmp_path):
    "A single-model row whose capture fell back (engine_mode 'eager') is an eager figure, never a captured one."
    import json
    t = dict(device="a GPU", measured=True, reference_family="conv64_vae", rows=[
        dict(family="conv64_vae", method="beta_vae", mode="eager", group_size=1, precision="bf16", images_per_s=100.0),
        dict(family="conv64_vae", method="beta_vae", mode="captured_single", group_size=1, precision="bf16",
             images_per_s=90.0, engine_mode="eager"),
        dict(family="conv64_vae", method="beta_vae", mode="captured_ensemble", group_size=8, precision="bf16",
             images_per_s=800.0, engine_mode="capturing")])
    f = tmp_path / "t.json"; f.write_text(json.dumps(t))
    table = P.load_throughput(f)
    assert [r["mode"] for r in table["rows"]] == ["eager", "eager", "captured_ensemble"]
    assert table["rows"][1]["planned_mode"] == "captured_single"
    assert P.rate(table, "conv64_vae", "eager", 1)[0] == 90.0
    assert P.rate(table, "conv64_vae", "captured_ensemble", 8)[0] == 800.0


def test_the_ensemble_rng_benchmark_runs_on_a_cpu(tmp_path, capsys):
    "benchmarks/bench_ensemble_rng.py --device cpu --tiny: exact and fast ensembles measured, the ratio printed, the rows written."
    import importlib.util, sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("bench_ensemble_rng", root / "benchmarks" / "bench_ensemble_rng.py")
    B = importlib.util.module_from_spec(spec); spec.loader.exec_module(B)
    assert B.main(["--device", "cpu", "--tiny", "--out", str(tmp_path / "rng.json")]) == 0
    assert "exact / fast" in capsys.readouterr().out
    t = json.loads((tmp_path / "rng.json").read_text())
    assert t["tiny"] and {r["rng"] for r in t["rows"]} == {"exact", "fast"} and all(r["images_per_s"] > 0 for r in t["rows"])


def test_a_cpu_plan_from_rates_of_single_threaded_runs_shares_them_among_the_cores(monkeypatch):
    """Curves trained in processes (one single-threaded run per core) record `threads: 1` per row: the plan's total is the
    sum over the cores, as the rates were measured, and a plan of one run at a time says it may take longer."""
    _curves_with_threads(monkeypatch, 2)
    base = P.cpu_plan("dipvae", runner="processes")
    _curves_with_threads(monkeypatch, 1)
    p = P.cpu_plan("dipvae", runner="processes")
    assert p["apart"] and p["hours"] == pytest.approx(base["hours"] / 2)
    text = P.cpu_plan_text(p)
    assert "one single-threaded run per core, 2 at once" in text and "the total shares them among the cores" in text
    assert "the hours above are of one run at a time" not in text
    q = P.cpu_plan_text(P.cpu_plan("dipvae"))
    assert "runner: one run at a time on every core; the rates were measured with one single-threaded run per core" in q
