"""A paper's reproduction as a campaign stage (`python3 -m disentbook campaign --stage reproduce-PAPER`), on the β-VAE
tutorial's smoke scale: the budget's timer ends it `partial` with its folder unlocked, the next call finishes it with the
same per-run numbers as a call never cut, and a folder holding a report of other settings is refused in one line. A GPU
stage rehearsed on the CPU: cut after a checkpoint, packed, unpacked into another checkout, finished there, packed back,
its references measured where it is unpacked. A paper whose gates' reading is settled before its curves are done
trains no more curve rows and no reproduction."""
import json, os, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the stage `reproduce-refvae` declared as the tutorial's smoke reproduction (in processes, as the cpu stages train); the
# timer's margins off
DRIVER = """
import os, sys
import disentbook.campaign.reproductions as R
from disentbook.cli import main
R.REPRODUCTIONS["reproduce-refvae"] = R.Reproduction("vae", scale="smoke", runner="processes", why="a test")
R.MARGIN, R.MIN_LEFT = 0.0, 0.0
if os.environ.get("SLOW_RATES"):                      # the rows' measured rate: 1,000 s a step
    import disentbook.repro.runs as runs
    runs._rates = lambda jobs: [1000.0] * len(jobs)
sys.exit(main(["campaign", *sys.argv[1:]]))
"""


# the stage `gpu-vae` rehearsed on the CPU at the tutorial's smoke scale, a checkpoint every 2 steps; CUT_AFTER_SAVES=n
# ends the call as the budget's timer would, right after the n-th checkpoint
GPU_DRIVER = """
import os, sys
import disentbook.campaign.reproductions as R
from disentbook.cli import main
from disentbook.repro.declare import PAPERS
from disentbook.training.trainer import Trainer
R.GPU_REPRODUCTIONS["gpu-vae"] = R.Reproduction("vae", scale="smoke", device="cpu", options=dict(references="later"),
                                                why="a rehearsal")
R.MARGIN, R.MIN_LEFT = 0.0, 0.0
PAPERS["vae"].scales["smoke"]["train"]["ckpt_every"] = 2
cut, saves = int(os.environ.get("CUT_AFTER_SAVES", "0")), [0]
if cut:
    save = Trainer.save
    def counted(self, *a, **k):
        out = save(self, *a, **k); saves[0] += 1
        if saves[0] >= cut: raise R.OutOfBudget()
        return out
    Trainer.save = counted
sys.exit(main(["campaign", *sys.argv[1:]]))
"""


def campaign(root, *args, driver=DRIVER, **env):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", driver, *args, "--root", str(root)], capture_output=True, text=True,
                          env=env, timeout=600)


def status(root, stage="reproduce-refvae") -> str:
    return json.loads((root / "benchmarks" / "campaign.json").read_text())["stages"][stage]["status"]


def runs(root) -> dict:
    m = json.loads((root / "reports" / "vae-smoke" / "metrics.json").read_text())
    return {(t, row, i): {k: v for k, v in r.items() if "seconds" not in k and k != "precision_fallback"}
            for t, rows in m["results"].items() for row, seeds in rows.items() for i, r in enumerate(seeds)}


def pages(root):
    "The two pages a checkout generates from its reports, stale."
    from disentbook.repro.summary import CLAIMS_END, CLAIMS_START, INDEX_END, INDEX_START
    for f, a, b in ((root / "reports" / "README.md", INDEX_START, INDEX_END), (root / "docs" / "claims.md", CLAIMS_START, CLAIMS_END)):
        f.parent.mkdir(parents=True, exist_ok=True); f.write_text(f"# page\n\n{a}\nSTALE\n{b}\n\nprose\n")


def assert_pages(root, out: str):
    "Both pages written again from the reports (the index lists the smoke report), the rest of each kept."
    index, claims = (root / "reports" / "README.md").read_text(), (root / "docs" / "claims.md").read_text()
    assert "STALE" not in index + claims and index.endswith("\n\nprose\n") and claims.endswith("\n\nprose\n")
    assert "[vae-smoke](vae-smoke/report.md)" in index and "reports/README.md: written again (1 reports)" in out, out[-1500:]


def test_a_reproduction_cut_by_its_budget_goes_on_and_a_folder_of_other_settings_is_refused(tmp_path):
    cut, straight = tmp_path / "cut", tmp_path / "straight"
    r = campaign(cut, "--stage", "reproduce-refvae", "--budget", "1s")
    assert r.returncode == 0 and "stage reproduce-refvae: partial" in r.stdout, (r.stdout[-1500:], r.stderr[-1500:])
    assert status(cut) == "partial" and not (cut / "reports" / "vae-smoke" / ".lock").exists()
    r = campaign(cut, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 0 and status(cut) == "ok", r.stderr[-2000:]
    pages(straight)
    r = campaign(straight, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 0, r.stderr[-2000:]
    assert runs(cut) == runs(straight)
    assert_pages(straight, r.stdout)                               # the generated pages follow the finished report
    r = campaign(cut, "--list")
    assert "reproduce-refvae" in r.stdout and "runs done" in r.stdout
    # a report of another length in the folder: one line, status 2, the report left as it was
    f = straight / "reports" / "vae-smoke" / "metrics.json"
    m = json.loads(f.read_text()); m["config"]["train"]["steps"] += 5; f.write_text(json.dumps(m))
    before, ledger = f.read_bytes(), (straight / "benchmarks" / "campaign.json").read_bytes()
    r = campaign(straight, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "holds another report" in r.stderr, r.stderr[-2000:]
    assert f.read_bytes() == before and (straight / "benchmarks" / "campaign.json").read_bytes() == ledger
    # a stage never run before, refused (a GPU stage where no GPU is): the ledger byte for byte as it was, no record added
    import torch
    if not torch.cuda.is_available():
        r = campaign(straight, "--stage", "gpu-vae", "--budget", "10m")
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "CUDA" in r.stderr, r.stderr[-2000:]
        assert (straight / "benchmarks" / "campaign.json").read_bytes() == ledger


def test_a_reproduction_does_not_begin_runs_that_would_not_finish_within_its_budget(tmp_path):
    "At its rows' measured rate no run would end within the budget: none begins, the stage is partial; then it trains."
    r = campaign(tmp_path, "--stage", "reproduce-refvae", "--budget", "10m", SLOW_RATES="1")
    assert r.returncode == 0 and "stage reproduce-refvae: partial" in r.stdout, (r.stdout[-1500:], r.stderr[-1500:])
    assert "not begun: they would not have finished in time" in r.stdout, r.stdout[-1500:]
    assert not list((tmp_path / "reports" / "vae-smoke").glob("runs/*/*/seed*/eval.json"))
    r = campaign(tmp_path, "--stage", "reproduce-refvae", "--budget", "10m")
    assert r.returncode == 0 and status(tmp_path) == "ok", r.stderr[-2000:]


def test_the_declared_order_puts_each_reproduction_after_the_curves_its_length_needs():
    from disentbook.campaign.reproductions import REPRODUCTIONS
    from disentbook.campaign.stages import ORDER, stages
    assert list(stages())[:len(ORDER)] == list(ORDER)              # every declared name is a stage, in that order
    for name, r in REPRODUCTIONS.items():
        assert name in ORDER
        if r.needs_curves: assert ORDER.index(f"curves-{r.paper}-seeds") < ORDER.index(name), name
    from disentbook.campaign import papers, pilots, zoo
    assert sorted(ORDER) == sorted([*(f"zoo-{n}" for n in zoo.RECIPES), *(f"curves-{p}-seeds" for p in papers.METRICS),
                                    *REPRODUCTIONS, *(f"pilot-{p.name}" for p in pilots.PILOTS), "zoo-models"])     # each once
    # the headlines that can be decided come before the zoo recipes no long-trained public model put at MIG 0.2;
    # invariance's (undecidable under the spec's palette, notebook 71) after them
    late = min(ORDER.index(f"zoo-{n}") for n in ("factor_vae", "dip_vae_i", "dip_vae_ii", "tcwae_mws", "beta_vae_b1"))
    assert max(ORDER.index(n) for n in REPRODUCTIONS if n != "reproduce-invariance") < late < ORDER.index("curves-invariance-seeds")
    assert ORDER[-1] == "zoo-models"


def test_carry_takes_a_reproductions_live_checkpoints_to_a_clone_and_never_a_reports_runs_away(tmp_path):
    """`--carry` while a reproduction stage is not done: its finished runs' small files go in the index, its runs'
    checkpoints (optimizer state) only with `checkpoints`, then they reach a fresh clone (unless the committed files
    would pass the size aim); a plain `--carry` takes a carried checkpoint out again; once done, only they and the copies
    of weights carried for the report's figures leave."""
    import shutil
    from disentbook.campaign.ledger import LEDGER, write_stage
    from disentbook.campaign.stages import CARRY_MIN_SECONDS, carry
    from disentbook.training.checkpoints import write_checkpoint
    root = tmp_path / "repo"; root.mkdir()
    shutil.copy(ROOT / ".gitignore", root / ".gitignore")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q"); git("config", "user.email", "t@t"); git("config", "user.name", "t")
    def put(rel, text="{}"):
        p = root / rel; p.parent.mkdir(parents=True, exist_ok=True); p.write_text(text); return rel
    def ckpt(d, s):
        cfg = json.loads((write_checkpoint(root / d, b"w", dict(step=1, train_seconds=s)) / "config.json").read_text())
        return [f"{d}/config.json", f"{d}/{cfg['state_file']}"]
    runs = "reports/refvae-cpu/runs/MNIST/srb_vae"
    live = ckpt(f"{runs}/seed0/train/checkpoint", CARRY_MIN_SECONDS + 1)
    ckpt(f"{runs}/seed2/train/checkpoint", CARRY_MIN_SECONDS - 1)                  # too little training to carry
    done = [put(f"{runs}/seed1/eval.json"), put(f"{runs}/seed1/settings.json")]
    copy = put(f"{runs}/seed1/train/figure_model/config.json")                    # ignored: only --carry takes it
    write_stage(root / LEDGER, "reproduce-refvae", dict(status="partial"))
    git("add", "-A"); git("commit", "-qm", "first")                                  # a report's run files: not ignored
    base = set(git("ls-files").split())
    assert set(done) <= base and not set(live) & base
    now, old, left = carry(root)                 # the default: no checkpoint, whatever the budget
    assert not any("/checkpoint/" in p for p in now) and not old
    assert [p.relative_to(root).as_posix() for p in left] == [live[0].rsplit("/", 1)[0]]
    assert copy not in base and set(git("ls-files").split()) == base | {copy}   # the runs' files were committed already
    now, old, left = carry(root, aim=1, checkpoints=True)   # no room left under the size aim: the checkpoint stays out
    assert not set(live) & set(now) and not old and [p.relative_to(root).as_posix() for p in left] == [live[0].rsplit("/", 1)[0]]
    now, old, left = carry(root, checkpoints=True)
    assert set(live) <= set(now) and not old and not left and not any("seed2" in p for p in now)
    git("commit", "-qm", "carry")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, capture_output=True)
    assert all((clone / p).read_bytes() == (root / p).read_bytes() for p in live + done)
    now, old, left = carry(clone)                # a plain --carry in the clone: the carried checkpoint leaves the index
    assert sorted(old) == sorted(live) and all((clone / p).is_file() for p in live) and not any("/checkpoint/" in p for p in now)
    # the run finished and the stage done: its checkpoint leaves the index (not the disk); the runs' files stay committed
    put(f"{runs}/seed0/eval.json"); git("add", "-A")
    write_stage(root / LEDGER, "reproduce-refvae", dict(status="ok"))
    now, old, left = carry(root)
    assert sorted(old) == sorted(live + [copy]) and all((root / p).is_file() for p in live + [copy])
    assert set(done) | {f"{runs}/seed0/eval.json"} <= set(git("ls-files").split())


def test_a_gpu_stage_cut_at_a_calls_limit_travels_in_parts_and_goes_on_in_another_checkout(tmp_path):
    gpu, here, straight, parts = (tmp_path / n for n in ("gpu", "here", "straight", "parts"))
    r = campaign(gpu, "--stage", "gpu-vae", "--budget", "10m", driver=GPU_DRIVER, CUT_AFTER_SAVES="3")
    assert r.returncode == 0 and "stage gpu-vae: partial" in r.stdout, (r.stdout[-1500:], r.stderr[-1500:])
    r = campaign(gpu, "--pack", str(parts), driver=GPU_DRIVER)
    assert r.returncode == 0 and "packed" in r.stdout, r.stderr[-1500:]
    assert 2 <= len(list(parts.iterdir())) <= 8
    # a fresh checkout (another GPU machine): the cut run's checkpoint arrives and the stage goes on from it
    r = campaign(here, "--unpack", str(parts), driver=GPU_DRIVER)
    assert r.returncode == 0 and status(here, "gpu-vae") == "partial", r.stderr[-1500:]
    cks = list((here / "reports" / "vae-smoke" / "runs").glob("*/*/seed*/train/checkpoint/config.json"))
    assert cks and all(p.read_bytes() == (gpu / p.relative_to(here)).read_bytes() for p in cks)
    r = campaign(here, "--stage", "gpu-vae", "--budget", "10m", driver=GPU_DRIVER)
    assert r.returncode == 0 and status(here, "gpu-vae") == "ok", r.stderr[-2000:]
    m = json.loads((here / "reports" / "vae-smoke" / "metrics.json").read_text())
    assert m["options"]["references"] == "later"
    # back to the first checkout: the report lands, and its gates' references are measured there
    shutil.rmtree(parts)
    assert campaign(here, "--pack", str(parts), driver=GPU_DRIVER).returncode == 0
    pages(gpu)
    r = campaign(gpu, "--unpack", str(parts), driver=GPU_DRIVER)
    assert r.returncode == 0 and "references measured here" in r.stdout and status(gpu, "gpu-vae") == "ok", r.stderr[-2000:]
    assert_pages(gpu, r.stdout)
    m = json.loads((gpu / "reports" / "vae-smoke" / "metrics.json").read_text())
    assert any("measured on a CPU by `disentbook campaign --unpack`" in n for n in m["notes"])
    # the same numbers per run as a stage never cut
    assert campaign(straight, "--stage", "gpu-vae", "--budget", "10m", driver=GPU_DRIVER).returncode == 0
    assert runs(gpu) == runs(straight)
    # a damaged pack: one line, exit 2
    p = next(parts.glob("campaign-state.tar.*")); p.write_bytes(p.read_bytes()[:-10])
    r = campaign(tmp_path / "other", "--unpack", str(parts), driver=GPU_DRIVER)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "do not add up" in r.stderr, r.stderr[-1500:]


def test_the_long_dipvae_gpu_stage_is_a_declared_sensitivity_in_its_own_folder(tmp_path):
    """`gpu-dipvae-long`: finding (1)'s rows x 5 seeds at 100,000 steps (`-o length=long`), its plan
    within the gpu share at the scale's own length (the budget gives, not the length); its own report folder, listed with its option;
    a report of the gpu scale's own settings there is refused; the option is the gpu scale's only."""
    import pytest
    from disentbook.campaign.ledger import CampaignError
    from disentbook.campaign.reproductions import claim_folder, declared
    from disentbook.core import InputError
    from disentbook.repro.declare import PAPERS, scale_config
    from disentbook.repro.dipvae import HEADLINE_ROWS, LONG_STEPS
    from disentbook.repro.plan import check_budget, plan, planned_minutes
    from disentbook.repro.summary import sensitivity_of
    r = declared("gpu-dipvae-long")
    assert r.folder(tmp_path) == tmp_path / "reports" / "dipvae-gpu-long" and r.sensitive() == {"length": "long"}
    assert declared("gpu-dipvae").folder(tmp_path).name == "dipvae-gpu" and declared("gpu-dipvae").sensitive() == {}
    cfg = r.config()
    assert cfg["train"]["steps"] == LONG_STEPS == 100_000 and cfg["only"] == dict(table="Table 1", rows=list(HEADLINE_ROWS))
    assert cfg["seeds"] == 5 and cfg["length"]["planned"] == PAPERS["dipvae"].scales["gpu"]["train"]["steps"]
    p = plan("dipvae", "gpu", length="long")
    assert p["runs"] == 15 and planned_minutes(p) == pytest.approx(p["minutes"] * cfg["length"]["planned"] / LONG_STEPS)
    check_budget(p)                                               # its rows and seeds fit the share at the planned length
    assert sensitivity_of(dict(paper="dipvae", options=dict(length="long"))) == "length=long"
    for scale in ("smoke", "quick", "cpu"):
        with pytest.raises(InputError, match="a sensitivity of the gpu scale"): scale_config(PAPERS["dipvae"], scale, dict(length="long"))
    with pytest.raises(InputError, match="length: expected one of curves, long"): scale_config(PAPERS["dipvae"], "gpu", dict(length="longer"))
    out = r.folder(tmp_path); out.mkdir(parents=True)
    shutil.copy(ROOT / "reports" / "dipvae-gpu" / "metrics.json", out / "metrics.json")      # the gpu scale's own report
    with pytest.raises(CampaignError, match="holds another report"): claim_folder(r, out)
    listed = campaign(tmp_path / "listed", "--list")
    said = "reproduce dipvae --scale gpu -o length=long -o references=later -o allow_eager=true into reports/dipvae-gpu-long"
    assert said in listed.stdout, listed.stderr[-800:]
    from disentbook.cli import parse_params                      # the listed options are the command's: its plan takes them
    opts = parse_params(said.split(" into ")[0].split(" -o ")[1:])
    assert opts == dict(length="long", references="later", allow_eager=True) and plan("dipvae", "gpu", **opts)["runs"] == 15


def test_every_cpu_reproduction_can_claim_its_committed_folder_keeping_a_former_report_as_history(tmp_path):
    """A stage reached by the campaign does not stop at a report committed in its folder: its own report (its seeds at its
    length) stays; a former one (dipvae, tcwae, invariance: seeds 0-4 or 0-2 at a length one seed's curve chose) is on
    seeds none of the stage's, so it moves to history at the length the curves over seeds choose or at another. On
    copies: nothing in the checkout moves."""
    from disentbook.campaign.reproductions import REPRODUCTIONS, claim_folder
    checked = []
    for name, r in REPRODUCTIONS.items():
        f = r.folder(ROOT) / "metrics.json"
        if not f.is_file(): continue
        m, steps = json.loads(f.read_text()), r.config()["train"]["steps"]
        own = m["seeds"] == r.seeds()
        assert own or not set(m["seeds"]) & set(r.seeds()), (name, m["seeds"], r.seeds())
        for k in ((1,) if own else (1, 2)):                  # a former report at the stage's length, and at another
            out = tmp_path / name / str(k); out.mkdir(parents=True)
            (out / "metrics.json").write_text(json.dumps(dict(m, config=dict(m["config"], train=dict(m["config"]["train"], steps=steps * k)))))
            moved = claim_folder(r, out, print)
            if own: assert moved is None and (out / "metrics.json").is_file(); continue
            assert moved == out / "history" / f"seeds-{min(m['seeds'])}-{max(m['seeds'])}" and (moved / "metrics.json").is_file()
        checked.append(name)
    assert len(checked) >= 3, checked                        # dipvae, tcwae, invariance (and contrastive once it is done)


def test_a_page_without_its_markers_is_left_as_it_is(tmp_path):
    "A checkout's page of the user's own (no generated section) is said and kept, never a failed stage."
    from disentbook.campaign.reproductions import refresh_pages
    (tmp_path / "reports").mkdir(); (tmp_path / "reports" / "README.md").write_text("mine\n")
    said = []
    refresh_pages(tmp_path, said.append)
    assert len(said) == 1 and "left as it is" in said[0] and "index:start" in said[0]
    assert (tmp_path / "reports" / "README.md").read_text() == "mine\n"


def test_a_curve_stage_settled_before_its_rows_are_done_trains_no_more_rows_and_its_reproduction_records_why(tmp_path):
    """Two of invariance's headline rows have finished curves and the others none: the first falls short of a
    worst-group gate at every length the stage could read it at, so `curves-invariance-seeds` trains none of the other
    rows and ends `ok`, the reading is kept as settled, and `reproduce-invariance` ends `ok` without a chosen length."""
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.futility import recorded
    from disentbook.campaign.ledger import LEDGER, read_ledger
    from disentbook.campaign.papers import PaperRow, curve_seeds, headline
    from disentbook.campaign.stages import main, progress
    slugs = headline("invariance")[1]
    for k, slug in enumerate(slugs[:2]):
        subj = PaperRow("invariance", slug)
        rec = read_curve(tmp_path, subj)
        rec["seeds"] = {str(s): [dict(steps=n, avg_acc=0.5, worst_acc=0.0 if k == 0 else 0.3, chance_acc=0.1,
                                      worst_acc_train=0.99) for n in (500, 1500, 3000)] for s in curve_seeds("invariance")}
        rec["choice"] = dict(steps=1500, why="a check", rising=False, record={})
        subj.curve_file(tmp_path).parent.mkdir(parents=True, exist_ok=True)
        subj.curve_file(tmp_path).write_text(json.dumps(rec))
    assert main(["--stage", "curves-invariance-seeds", "--root", str(tmp_path), "--budget", "2m"]) == 0
    rec = recorded(tmp_path, "invariance")
    assert rec["foreclosed"] and not rec["train"] and rec["read_at"] == {rec["gates"][0]["row"]: [1500, 3000]}
    assert all(not read_curve(tmp_path, PaperRow("invariance", s))["seeds"] for s in slugs[2:])      # none trained
    assert progress(tmp_path, "curves-invariance-seeds").endswith("settled before the other rows' curves: not trained")
    assert main(["--stage", "reproduce-invariance", "--root", str(tmp_path), "--budget", "2m"]) == 0
    led = read_ledger(tmp_path / LEDGER)["stages"]
    assert led["curves-invariance-seeds"]["status"] == led["reproduce-invariance"]["status"] == "ok"
    assert not (tmp_path / "reports").exists()                                   # nothing trained, no report begun
