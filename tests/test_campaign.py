"""tools/gpu_campaign.py on a CPU (`--device cpu --tiny`): the GPU machine's checks (contact, tests, bench) pack what
they return into a results folder that travels (<= 8 files, <= 16 MiB each), each names its device, a landed stage is
done for a later session, and the bad inputs are one-line errors. (The papers' gpu reproductions are the campaign's
`gpu-PAPER` stages: tests/test_campaign_reproductions.py.)"""
import importlib.util, json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_campaign", ROOT / "tools" / "gpu_campaign.py")
G = importlib.util.module_from_spec(spec); spec.loader.exec_module(G)


def test_list_and_bad_inputs(capsys, tmp_path):
    assert G.main(["--list", "--results", str(tmp_path), "--ledger", ""]) == 0
    out = capsys.readouterr().out
    assert [l.split()[0] for l in out.splitlines()] == list(G.STAGES) and "not run" in out
    assert G.main(["--stage", "bench", "--device", "cpu", "--results", str(tmp_path)]) == 2        # cpu without --tiny
    assert "add --tiny" in capsys.readouterr().err
    assert G.main(["--results", str(tmp_path)]) == 2
    assert "--stage NAME, --next or --all" in capsys.readouterr().err
    if not torch.cuda.is_available():                                                              # a GPU stage here
        assert G.main(["--stage", "bench", "--results", str(tmp_path), "--ledger", ""]) == 2    # not landed (no ledger)
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


def test_tiny_bench_stage(capsys, tmp_path):
    res, out = tmp_path / "results", tmp_path / "out"
    led = ["--ledger", str(tmp_path / "ledger.json")]          # not the committed ledger: its landed GPU stages would be skipped
    assert G.main(["--stage", "bench", "--device", "cpu", "--tiny", "--results", str(res), "--out", str(out), *led]) == 0, \
        capsys.readouterr().out[-3000:]
    files = sorted(p.name for p in res.iterdir())
    assert files == ["checks.tar.gz"] and sorted(p.name for p in out.iterdir()) == files
    G.check_limits(res)
    rec = G.stage_record(res, "bench")
    assert rec["status"] == "ok" and rec["device"].startswith("cpu") and rec["tiny"], rec
    checks = G.read_archive(res / "checks.tar.gz")
    table = json.loads(checks["bench/throughput.json"])
    # on a CPU no capture happens: the single captured models were timed eagerly and are recorded as eager figures
    assert table["measured"] and table["tiny"] and {r["mode"] for r in table["rows"]} == {"eager", "captured_ensemble"}
    assert {r.get("planned_mode") for r in table["rows"] if r.get("engine_mode") == "eager"} >= {"captured_single"}
    assert G.main(["--stage", "bench", "--device", "cpu", "--tiny", "--results", str(res), *led]) == 0  # done: not run again
    assert "is done" in capsys.readouterr().out
    assert G.main(["--list", "--results", str(res), *led]) == 0
    listed = capsys.readouterr().out
    assert "bench" in listed and "ok (" in listed and "tests        not run" in listed


def test_a_stage_cut_short_is_packed_and_not_done(capsys, tmp_path):
    "A stage that reaches its limit leaves its archive (status 'timeout', log) and stays to be run again."
    assert G.main(["--stage", "bench", "--device", "cpu", "--tiny", "--results", str(tmp_path), "--limit", "1"]) == 1
    rec = G.stage_record(tmp_path, "bench")
    assert rec["status"] == "timeout" and rec["returncode"] == 124 and not G.done(tmp_path, "bench")
    assert "limit" in G.read_archive(tmp_path / "checks.tar.gz")["bench/log.txt"].decode()
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
    assert G.done(other, "bench", ledger) and not G.done(other, "bench") and not G.done(other, "tests", ledger)
    assert G.main(["--list", "--results", str(other), "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "landed (321 s on NVIDIA H100" in out and "tests        not run" in out
    assert G.main(["--stage", "bench", "--results", str(other), "--ledger", str(ledger)]) == 0
    assert "landed earlier" in capsys.readouterr().out
    # a CPU rehearsal never lands; a corrupt ledger is a one-line error
    G.write_archive(G.archive_path(res, "contact"), {"bench/stage.json": json.dumps(rec).encode(),
                                                      "contact/stage.json": json.dumps(dict(rec, stage="contact", tiny=True)).encode()})
    G.write_ledger(argparse.Namespace(results=res, ledger=ledger))
    assert "contact" not in json.loads(ledger.read_text())["stages"]
    ledger.write_text("{oops")
    assert G.main(["--list", "--results", str(other), "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not readable JSON" in err


def test_unpack_leaves_landed_stages_alone(capsys, tmp_path, monkeypatch):
    "A stage the ledger says landed (same finish time) is not unpacked again; a later run of it lands again."
    import argparse
    res, ledger, root = tmp_path / "results", tmp_path / "gpu_campaign.json", tmp_path / "checkout"
    res.mkdir()
    monkeypatch.setattr(G, "ROOT", root)
    rec = dict(stage="contact", status="ok", returncode=0, device="NVIDIA H100 80GB HBM3", tiny=False, seconds=90.0,
               finished="2026-11-24 10:00:00 UTC", files=["contact/first_contact.json"])
    G.write_archive(G.archive_path(res, "contact"), {"contact/stage.json": json.dumps(rec).encode(),
                                                      "contact/first_contact.json": b"as measured"})
    a = argparse.Namespace(results=res, ledger=ledger)
    dest = root / "benchmarks" / "first_contact.json"
    assert G.unpack(a) == 0 and dest.read_text() == "as measured"
    dest.write_text("edited")
    assert G.unpack(a) == 0 and dest.read_text() == "edited"
    assert "landed earlier" in capsys.readouterr().out
    G.write_archive(G.archive_path(res, "contact"), {"contact/stage.json": json.dumps(dict(rec, finished="2026-11-25 10:00:00 UTC")).encode(),
                                                      "contact/first_contact.json": b"run again"})
    assert G.unpack(a) == 0 and dest.read_text() == "run again"


def test_a_timed_subject_measures_its_rate_first_then_trains_seeds_at_once_only_where_they_reach_the_horizon(tmp_path):
    """A subject whose rows record their training seconds: with no rate yet, its first seed trains alone (in this
    process) to the first length; then the seeds train two at once when that reaches the horizon within the budget, and
    one at a time on every core when only that does."""
    import os, torch
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)        # a campaign's own process computes on every core (not a test worker's one)
    try: _timed_subject(tmp_path)
    finally: torch.set_num_threads(threads)


def _timed_subject(tmp_path):
    import os
    from campaign_toys import SlowTimedToy, TimedToy
    from disentbook.campaign.curves import along_seeds, read_curve, seconds_per_step
    from disentbook.campaign.ledger import Clock
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    fast.mkdir(); slow.mkdir()
    said = []
    assert along_seeds(fast, TimedToy(), (0, 1, 2), [1000, 2000, 3000, 4000], Clock(3600), said.append, workers=2)
    rows = read_curve(fast, TimedToy())["seeds"]
    assert rows["0"][0]["pid"] == os.getpid() and rows["0"][0]["steps"] == 1000       # the first seed alone, here
    assert all(r["pid"] != os.getpid() for s in ("1", "2") for r in rows[s])          # the rest in child processes
    assert "timedtoy: seeds 0, 1, 2 in 2 processes at once" in said
    # 0.5 s a step: 4,000 steps take 2,000 s alone on every core, 2,000 * 2 / PAIR_GAIN s each two at once: a budget of
    # 3,000 s holds the one, not the other
    cores = os.cpu_count() or 1
    said = []
    assert along_seeds(slow, SlowTimedToy(), (0, 1, 2), [1000, 4000], Clock(3000), said.append, workers=2) is not None
    step_s, _ = seconds_per_step(read_curve(slow, SlowTimedToy()))
    assert abs(step_s - 0.5) < 1e-9                     # rows of seeds trained here, on every core: 0.5 s a step alone
    if cores == 2:
        assert any("seeds one at a time on every core" in s for s in said), said
        assert all(r["pid"] == os.getpid() for rr in read_curve(slow, SlowTimedToy())["seeds"].values() for r in rr)


def test_with_rates_of_another_cpu_only_the_seed_furthest_along_times_this_machine_first(tmp_path):
    """A record whose rows were measured on another CPU does not plan this machine: the seed furthest along trains alone,
    in this process, to the next length it lacks (its first steps timing the machine, kept in the work folder as a
    probe); the other seeds are then planned on that rate (here: two at once, in child processes)."""
    import json, os, torch
    from campaign_toys import ElsewhereTimedToy
    from disentbook.campaign.curves import PROBES, along_seeds, probed_rate, read_curve
    from disentbook.campaign.ledger import WORK, Clock
    from disentbook.core import write_json
    t = ElsewhereTimedToy()
    rec = read_curve(tmp_path, t)
    rec["seeds"] = {str(s): [dict(steps=1000, score=0.05, train_seconds=10.0, threads=1, seconds_eval=1.0, machine="another CPU")]
                    for s in (0, 1, 2)}
    write_json(rec, t.curve_file(tmp_path))
    for s, at in ((0, 1000), (1, 1000), (2, 1500)): t._f(tmp_path, s).write_text(str(at))     # seed 2 furthest along
    assert probed_rate(tmp_path, t) is None
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    said = []
    try: assert along_seeds(tmp_path, t, (0, 1, 2), [1000, 2000, 3000, 4000], Clock(3600), said.append, workers=2)
    finally: torch.set_num_threads(threads)
    rows = read_curve(tmp_path, t)["seeds"]
    first = next(r for r in rows["2"] if r["steps"] == 2000)
    assert first["pid"] == os.getpid()                                            # alone, here, to its next length
    assert any(x.startswith(f"{t.name} seed 2: ") and "s a step on this machine (200 steps timed)" in x for x in said), said
    assert all(r["pid"] != os.getpid() for s in ("0", "1") for r in rows[s] if r["steps"] > 1000)   # the rest at once
    assert t.name in json.loads((tmp_path / WORK / PROBES).read_text()) and probed_rate(tmp_path, t) is not None


def test_curve_seeds_in_processes_write_every_row_and_choose_as_one_at_a_time(tmp_path):
    """`workers=2`: the curve seeds train in two child processes at once, each on its share of the cores, and the record
    gets every row (its writes serialised by a lock), the same rows and choice as seeds trained one after another; a
    budget that runs out in the children says False; the further seeds train the same way."""
    import os
    from campaign_toys import FileToy
    from disentbook.campaign.curves import read_curve, train_curves, train_seeds
    from disentbook.campaign.ledger import Clock
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(); two.mkdir()
    assert not train_curves(two, FileToy(), Clock(1.0), say=lambda s: None, workers=2)     # no budget: nothing measured
    assert read_curve(two, FileToy())["seeds"] == {}
    assert train_curves(one, FileToy(), Clock(3600), say=lambda s: None, workers=1)
    said = []
    assert train_curves(two, FileToy(), Clock(3600), say=said.append, workers=2)
    a, b = read_curve(one, FileToy()), read_curve(two, FileToy())
    assert a["choice"] == b["choice"] and a["choice"]["steps"] == 4000
    for s in ("0", "1", "2"):
        assert [(r["steps"], r["score"]) for r in a["seeds"][s]] == [(r["steps"], r["score"]) for r in b["seeds"][s]]
        assert [r["steps"] for r in b["seeds"][s]] == [1000, 2000, 3000, 4000, 6000, 8000]
    kids = {r["pid"] for rows in b["seeds"].values() for r in rows}
    assert os.getpid() not in kids and len(kids) == 6                  # one child per seed and horizon (4,000, then 8,000)
    cores = os.cpu_count() or 1
    assert all(r["threads"] == r["subject_threads"] == max(1, cores // 2) for rows in b["seeds"].values() for r in rows)
    assert all(r["subject_threads"] is None for rows in a["seeds"].values() for r in rows)
    assert said.count("filetoy: seeds 0, 1, 2 in 2 processes at once") == 2 and said[-1].startswith("filetoy: length 4,000")
    assert train_seeds(two, FileToy(), Clock(3600), say=lambda s: None, workers=2)         # one seed: in this process
    assert [r["steps"] for r in read_curve(two, FileToy())["seeds"]["3"]] == [1000, 2000, 3000, 4000]


def test_a_campaign_killed_with_sigkill_leaves_no_seed_training_behind(tmp_path):
    """The seeds' child processes end within seconds of their campaign's SIGKILL (they watch their parent), so no
    orphan goes on writing a run that the next call trains again."""
    import os, signal, subprocess, sys, time
    tests = Path(__file__).resolve().parent
    code = f"import sys; sys.path.insert(0, {str(tests)!r})\nfrom campaign_toys import run_slow\nif __name__ == '__main__': run_slow({str(tmp_path)!r})\n"
    (tmp_path / "main.py").write_text(code)
    p = subprocess.Popen([sys.executable, str(tmp_path / "main.py")], cwd=tmp_path)
    try:
        t0 = time.monotonic()
        while not all((tmp_path / f"pid{s}").is_file() for s in (0, 1)):
            assert time.monotonic() - t0 < 60 and p.poll() is None, "the children did not start"
            time.sleep(0.2)
        kids = [int((tmp_path / f"pid{s}").read_text()) for s in (0, 1)]
        os.kill(p.pid, signal.SIGKILL); p.wait()
        def alive(pid):
            try: os.kill(pid, 0)
            except ProcessLookupError: return False
            return True
        t0 = time.monotonic()
        while any(alive(k) for k in kids) and time.monotonic() - t0 < 10: time.sleep(0.2)
        assert not any(alive(k) for k in kids), "a child went on after its campaign was killed"
    finally:
        if p.poll() is None: p.kill()


def test_a_seed_process_takes_its_share_of_the_cores_before_each_chunk(tmp_path):
    """The cores divided among the seeds of the running call not done yet (their files in `LIVE`, which each seed's
    child removes when it ends), at most `workers` of them: two share them, the last one alone takes them all, and a
    seed that has not started yet counts from the start (no child takes every core before its sibling is up)."""
    import os
    from campaign_toys import FileToy
    from disentbook.campaign.curves import LIVE, live_seeds, share_cores
    torch_threads = torch.get_num_threads()
    live = tmp_path / LIVE
    live.mkdir(parents=True)
    for s in (0, 1, 2): (live / f"seed{s}").touch()
    cores, t = os.cpu_count() or 1, FileToy()
    try:
        assert live_seeds(tmp_path, 2) == 2 and share_cores(tmp_path, t, 2) == max(1, cores // 2) == t.threads
        (live / "seed0").unlink(); (live / "seed1").unlink()
        assert live_seeds(tmp_path, 2) == 1 and share_cores(tmp_path, t, 2) == cores == torch.get_num_threads() == t.threads
    finally: torch.set_num_threads(torch_threads)


def test_progress_names_each_seeds_last_measured_length_exactly(tmp_path, monkeypatch):
    "`--list`'s progress gives a length between thousands as it is (2,500 reads 2.5k, 500 reads 0.5k, never 2k or 0k)."
    from campaign_toys import FileToy
    from disentbook.campaign import stages
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.ledger import write_json_atomic
    toy = FileToy()
    c = read_curve(tmp_path, toy)
    c["seeds"] = {"0": [dict(steps=10_000, score=1.0)], "1": [dict(steps=2500, score=1.0)], "2": [dict(steps=500, score=1.0)]}
    write_json_atomic(toy.curve_file(tmp_path), c)
    monkeypatch.setattr(stages, "subjects", lambda stage: [toy])
    assert stages.progress(tmp_path, "toy") == "seeds measured to 10k/2.5k/0.5k"


def test_a_stage_bound_to_bf16_trains_on_a_cpu_without_native_bf16(tmp_path, monkeypatch, capsys):
    """A curve stage whose measured rows trained in bf16, and vae's reproduction (its curves trained in bf16), are bound
    to bf16 and listed as any other stage on a CPU with or without native bf16: where it has none, the Trainer computes
    their convolutions and matrix products with fp32 kernels on bf16 operands (about fp32's speed), so nothing waits."""
    from campaign_toys import FileToy
    from disentbook.campaign import stages
    from disentbook.campaign.curves import read_curve
    from disentbook.campaign.ledger import write_json_atomic
    from disentbook.training import bf16_kernels
    toy = FileToy()
    c = read_curve(tmp_path, toy)
    c["seeds"] = {"0": [dict(steps=2500, score=1.0, precision="bf16")]}
    write_json_atomic(toy.curve_file(tmp_path), c)
    monkeypatch.setattr(stages, "subjects", lambda stage: [toy])
    assert stages.bound_precision(tmp_path, "curves-toy-seeds") == "bf16"
    monkeypatch.undo()
    line = lambda out, s: next(l for l in out.splitlines() if l.startswith(s + " "))
    for native in (False, True):
        monkeypatch.setattr(bf16_kernels, "cpu_native_bf16", lambda: native)
        assert bf16_kernels.uses_fp32_kernels("bf16", "cpu") is (not native)
        assert stages.main(["--list", "--root", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "not started" in line(out, "reproduce-vae"), line(out, "reproduce-vae")
