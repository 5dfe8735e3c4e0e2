"""Fault injection, the fast part (seconds): a real kill -9 inside a checkpoint save, then resume, bit-identical to
an uninterrupted run; a flipped bit and a truncation refused by name. The campaign (random kill points x 20 per
method, many corruptions, read-only data) is `benchmarks/faults.py`; set DISENTBOOK_FAULTS=1 to run a small one here."""
import importlib.util, os, random, sys
from pathlib import Path

import pytest
import torch

from disentbook.core import CorruptFileError
from disentbook.training.checkpoints import load_checkpoint, read_checkpoint_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def faults():
    spec = importlib.util.spec_from_file_location("disentbook_faults", ROOT / "benchmarks" / "faults.py")
    mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reference(faults, tmp_path_factory):
    "An uninterrupted factor_vae run (the method with an auxiliary net and optimizer): 8 steps, saves every 2."
    threads = torch.get_num_threads()
    out = tmp_path_factory.mktemp("ref")
    try: faults.run_to_end("factor_vae", out, 8, 2)
    finally: torch.set_num_threads(threads)
    return out


@pytest.mark.skipif(sys.platform == "win32", reason="fork and SIGKILL")
def test_kill_9_before_the_commit_then_resume_bit_identical(faults, reference, tmp_path):
    """The training process SIGKILLs itself at its 5th os.replace: save 1 (step 2) did 3 (state, config.json,
    history.csv), so the 5th is the commit of save 2, after its state file was renamed into place."""
    assert faults.run_killed("factor_vae", tmp_path, 8, 2, die_at_replace=5)
    ck = tmp_path / "checkpoint"
    assert read_checkpoint_config(ck)["step"] == 2, "the old checkpoint, complete"
    assert faults.inspect_run_dir(tmp_path) == "ok" and faults.leftovers(tmp_path), "an uncommitted state file is left"
    threads = torch.get_num_threads()
    try: faults.run_to_end("factor_vae", tmp_path, 8, 2)           # resumes from step 2 (and cleans up first)
    finally: torch.set_num_threads(threads)
    assert not faults.leftovers(tmp_path)
    assert faults.same_state(faults.final_state(tmp_path), faults.final_state(reference))


def test_bit_flip_and_truncation_named(faults, reference, tmp_path):
    import shutil
    ck = tmp_path / "ck"; shutil.copytree(reference / "checkpoint", ck)
    f = ck / read_checkpoint_config(ck)["state_file"]; good = f.read_bytes()
    raw = bytearray(good); raw[random.Random(0).randrange(len(raw))] ^= 0x04; f.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=f"{f.name} is corrupt"): load_checkpoint(ck, *faults.build("factor_vae"))
    f.write_bytes(good[:len(good) - 1])
    with pytest.raises(CorruptFileError, match=f"{f.name} is truncated"): load_checkpoint(ck)
    f.write_bytes(good)
    assert load_checkpoint(ck)["config"]["step"] == 8


@pytest.mark.skipif(not os.environ.get("DISENTBOOK_FAULTS"), reason="the fault campaign takes minutes: DISENTBOOK_FAULTS=1")
def test_fault_campaign(faults, tmp_path):
    threads = torch.get_num_threads()
    try: rc = faults.main(["--n", "2", "--steps", "12", "--corrupt", "3", "--json", str(tmp_path / "f.json")])
    finally: torch.set_num_threads(threads)
    assert rc == 0
