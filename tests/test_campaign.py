"""tools/gpu_campaign.py on a CPU (`--device cpu --tiny`, smoke scale): stages pack what they return into a results
folder that travels (<= 8 files, <= 16 MiB each), each names its device, later stages read earlier ones (the bench's
table for the papers' plans), and the bad inputs are one-line errors. The other paper stages and `tests` run the same
code; `python3 tools/gpu_campaign.py --all --device cpu --tiny` runs them all (minutes)."""
import importlib.util, json, sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_campaign", ROOT / "tools" / "gpu_campaign.py")
G = importlib.util.module_from_spec(spec); spec.loader.exec_module(G)


def test_list_and_bad_inputs(capsys, tmp_path):
    assert G.main(["--list", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert [l.split()[0] for l in out.splitlines()] == list(G.STAGES) and "not run" in out
    assert G.main(["--stage", "bench", "--device", "cpu", "--results", str(tmp_path)]) == 2        # cpu without --tiny
    assert "add --tiny" in capsys.readouterr().err
    assert G.main(["--results", str(tmp_path)]) == 2
    assert "--stage NAME, --next or --all" in capsys.readouterr().err
    if not torch.cuda.is_available():                                                              # a GPU stage here
        assert G.main(["--stage", "dipvae", "--results", str(tmp_path), "--ledger", ""]) == 2   # not landed (no ledger)
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "needs a CUDA GPU" in err and "--device cpu --tiny" in err
    assert G.main(["--wheels", "--dry-run"]) == 0
    cmd = capsys.readouterr().out
    assert "pip download --no-deps --only-binary=:all: --python-version 3.12" in cmd and "POT==" in cmd and "/.whl" in cmd


def test_limits_of_the_results_folder(tmp_path):
    for i in range(9): (tmp_path / f"f{i}.tar.gz").write_bytes(b"x")
    with pytest.raises(G.CampaignError, match="9 files; at most 8"): G.check_limits(tmp_path)
    for i in range(2, 9): (tmp_path / f"f{i}.tar.gz").unlink()
    (tmp_path / "f1.tar.gz").write_bytes(b"x" * (G.MAX_FILE + 1))
    with pytest.raises(G.CampaignError, match="over 16 MiB"): G.check_limits(tmp_path)
    assert len({G.ARCHIVE[s] for s in G.STAGES}) <= G.MAX_FILES


def test_tiny_campaign_bench_and_papers(capsys, tmp_path):
    res, out = tmp_path / "results", tmp_path / "out"
    led = ["--ledger", str(tmp_path / "ledger.json")]          # not the committed ledger: its landed GPU stages would be skipped
    # invariance: its groups are captured on a GPU, and the bench's CPU table has only eager rows of its family (the plan
    # falls back to the reference family's captured figures, said so, instead of refusing)
    for stage in ("bench", "vae", "invariance"):
        assert G.main(["--stage", stage, "--device", "cpu", "--tiny", "--results", str(res), "--out", str(out), *led]) == 0, \
            capsys.readouterr().out[-3000:]
    files = sorted(p.name for p in res.iterdir())
    assert files == ["checks.tar.gz", "invariance.tar.gz", "vae.tar.gz"] and sorted(p.name for p in out.iterdir()) == files
    G.check_limits(res)
    for stage in ("bench", "vae"):
        rec = G.stage_record(res, stage)
        assert rec["status"] == "ok" and rec["device"].startswith("cpu") and rec["tiny"], rec
    checks = G.read_archive(res / "checks.tar.gz")
    table = json.loads(checks["bench/throughput.json"])
    # on a CPU no capture happens: the single captured models were timed eagerly and are recorded as eager figures
    assert table["measured"] and table["tiny"] and {r["mode"] for r in table["rows"]} == {"eager", "captured_ensemble"}
    assert {r.get("planned_mode") for r in table["rows"] if r.get("engine_mode") == "eager"} >= {"captured_single"}
    vae = G.read_archive(res / "vae.tar.gz")
    assert vae["vae/report.md"].decode().startswith("Measured on: cpu")
    assert json.loads(vae["vae/metrics.json"])["notes"][0].startswith("Measured on: cpu")     # kept by a re-judge
    assert any(k.endswith("/eval.json") for k in vae) and any(k.endswith("history.csv") for k in vae)
    assert not any(k.endswith(".pt") for k in vae)                                       # no checkpoint travels
    log = vae["vae/log.txt"].decode()
    assert "--plan" in log and "measured" in log                                         # the plan read the bench's table
    assert G.main(["--stage", "vae", "--device", "cpu", "--tiny", "--results", str(res), *led]) == 0  # done: not run again
    assert "is done" in capsys.readouterr().out
    assert G.main(["--list", "--results", str(res), *led]) == 0
    listed = capsys.readouterr().out
    assert "vae" in listed and "ok (" in listed and "tests        not run" in listed


def test_a_stage_cut_short_is_packed_and_not_done(capsys, tmp_path):
    "A stage that reaches its limit leaves its archive (status 'timeout', log) and stays to be run again."
    assert G.main(["--stage", "vae", "--device", "cpu", "--tiny", "--results", str(tmp_path), "--limit", "1"]) == 1
    rec = G.stage_record(tmp_path, "vae")
    assert rec["status"] == "timeout" and rec["returncode"] == 124 and not G.done(tmp_path, "vae")
    assert "limit" in G.read_archive(tmp_path / "vae.tar.gz")["vae/log.txt"].decode()
    capsys.readouterr()
    assert G.main(["--list", "--results", str(tmp_path)]) == 0 and "timeout" in capsys.readouterr().out


def test_stages_landed_by_an_earlier_session_are_done(capsys, tmp_path):
    "The committed ledger (`--unpack` writes it) carries the campaign across GPU slots: landed stages are skipped."
    import argparse
    res, ledger = tmp_path / "results", tmp_path / "gpu_campaign.json"
    res.mkdir()
    rec = dict(stage="bench", status="ok", returncode=0, device="NVIDIA H100 80GB HBM3", tiny=False, seconds=321.0,
               finished="2026-11-24 10:00:00 UTC", files=["bench/throughput.json"])
    G.write_archive(G.archive_path(res, "bench"), {"bench/stage.json": json.dumps(rec).encode()})
    G.write_ledger(argparse.Namespace(results=res, ledger=ledger))
    assert list(json.loads(ledger.read_text())["stages"]) == ["bench"] and "files" not in json.loads(ledger.read_text())["stages"]["bench"]
    other = tmp_path / "fresh"                                                   # the next session: an empty results folder
    assert G.done(other, "bench", ledger) and not G.done(other, "bench") and not G.done(other, "vae", ledger)
    assert G.main(["--list", "--results", str(other), "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "landed (321 s on NVIDIA H100" in out and "vae          not run" in out
    assert G.main(["--stage", "bench", "--results", str(other), "--ledger", str(ledger)]) == 0
    assert "landed earlier" in capsys.readouterr().out
    # a CPU rehearsal never lands; a corrupt ledger is a one-line error
    G.write_archive(G.archive_path(res, "vae"), {"vae/stage.json": json.dumps(dict(rec, stage="vae", tiny=True)).encode()})
    G.write_ledger(argparse.Namespace(results=res, ledger=ledger))
    assert "vae" not in json.loads(ledger.read_text())["stages"]
    ledger.write_text("{oops")
    assert G.main(["--list", "--results", str(other), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not readable JSON" in err


def test_unpack_leaves_landed_stages_alone(capsys, tmp_path, monkeypatch):
    "A stage the ledger says landed (same finish time) is not unpacked again: a report re-judged since stays as it is."
    import argparse
    res, ledger, root = tmp_path / "results", tmp_path / "gpu_campaign.json", tmp_path / "checkout"
    res.mkdir()
    monkeypatch.setattr(G, "ROOT", root)
    rec = dict(stage="vae", status="ok", returncode=0, device="NVIDIA H100 80GB HBM3", tiny=False, seconds=300.0,
               finished="2026-11-24 10:00:00 UTC", files=["vae/report.md"])
    G.write_archive(G.archive_path(res, "vae"), {"vae/stage.json": json.dumps(rec).encode(), "vae/report.md": b"as trained"})
    a = argparse.Namespace(results=res, ledger=ledger)
    assert G.unpack(a) == 0 and (root / "reports/vae-gpu/report.md").read_text() == "as trained"
    (root / "reports/vae-gpu/report.md").write_text("re-judged")
    assert G.unpack(a) == 0 and (root / "reports/vae-gpu/report.md").read_text() == "re-judged"
    assert "landed earlier" in capsys.readouterr().out
    # the same stage run again (a later finish time) lands again
    G.write_archive(G.archive_path(res, "vae"), {"vae/stage.json": json.dumps(dict(rec, finished="2026-11-25 10:00:00 UTC")).encode(),
                                                  "vae/report.md": b"run again"})
    assert G.unpack(a) == 0 and (root / "reports/vae-gpu/report.md").read_text() == "run again"


def test_plan_minutes_read_from_the_stage_log():
    "A paper stage records the training minutes its plan printed, so --list sets them beside the measured seconds."
    log = "plan: ...\ntotal: 7,680,000 images, 2.3 device minutes (training only; evaluation not included)\nbudget: 3 minutes"
    assert G.plan_minutes(log) == 2.3 and G.plan_minutes("no plan here") is None


def test_unpack_measures_the_references_a_gpu_stage_left_for_later(tmp_path, monkeypatch, capsys):
    "A paper stage run with references=later is re-judged by --unpack (references measured on the CPU); others are left alone."
    monkeypatch.setattr(G, "ROOT", tmp_path)
    seen = []
    monkeypatch.setattr("disentbook.repro.harness.rejudge", lambda paper, out: seen.append((paper.name, Path(out).name)))
    out = tmp_path / "reports" / "dipvae-gpu"; out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps(dict(paper="dipvae", options=dict(references="here"), notes=[])))
    G.judge_deferred("dipvae"); assert seen == []
    (out / "metrics.json").write_text(json.dumps(dict(paper="dipvae", options=dict(references="later"), notes=["Measured on: X"])))
    G.judge_deferred("dipvae"); assert seen == [("dipvae", "dipvae-gpu")]
    notes = json.loads((out / "metrics.json").read_text())["notes"]
    assert notes[0] == "Measured on: X" and "measured on a CPU" in notes[1]
    G.judge_deferred("tcwae")                                          # no report: nothing to do
    assert len(seen) == 1
