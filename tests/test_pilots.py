"""The declared pilots of the dSprites zoo as the campaign runs them (`disentbook.campaign.pilots`, notebook
`89l_campaign_pilots`, where the rule is checked on simulated nulls): their committed records continue under their
declared rule, a record's decision is the rule's on its own rows, their stages come in the declared order, and a run
folder of another recipe is refused."""
import json, subprocess, sys
from pathlib import Path

import pytest

from disentbook.campaign import pilots, zoo
from disentbook.campaign.curves import read_curve
from disentbook.campaign.ledger import CampaignError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("pilot", pilots.PILOTS, ids=lambda p: p.name)
def test_a_committed_record_continues_and_its_decision_is_the_rules(pilot):
    arm = pilots.PilotArm(pilot)
    if not arm.curve_file(ROOT).is_file(): pytest.skip(f"{pilot.name}: no record yet")
    rec = read_curve(ROOT, arm)                                   # the declared identity and rule: read, not refused
    assert set(map(int, rec["seeds"])) <= set(pilot.seeds)
    if "decision" in rec:               # the decision follows from the numbers the record says it read (the recipe's
        against = {int(s): {int(L): v for L, v in r.items()} for s, r in rec["against"]["mig"].items()}   # rows may move on)
        assert rec["decision"] == pilots.decide(pilots.arm_values(ROOT, arm, pilot), against, pilot)


def test_the_stages_come_in_the_declared_order():
    from disentbook.campaign.stages import FIRST, ORDER, ZOO_ORDER, stages
    names = [f"pilot-{p.name}" for p in pilots.PILOTS]
    assert sorted(s for s in ORDER if s.startswith("pilot-")) == sorted(names)      # each declared pilot, once
    table = stages()
    for p, s in zip(pilots.PILOTS, names):
        assert ORDER.index(s) > max(ORDER.index(f) for f in FIRST) and "declared pilot" in table[s][0]
        if f"zoo-{p.recipe}" not in FIRST:      # just before its recipe's zoo stage, after its other pilots alone
            between = ORDER[ORDER.index(s) + 1:ORDER.index(f"zoo-{p.recipe}")]
            assert all(b in names and pilots.PILOTS[names.index(b)].recipe == p.recipe for b in between), between
    zoo_stages = [s[4:] for s in ORDER if s.startswith("zoo-") and s[4:] in ZOO_ORDER]
    assert zoo_stages == [n for n in ZOO_ORDER if f"zoo-{n}" not in FIRST]       # the zoo recipes in ZOO_ORDER's order
    assert zoo_stages[-1] == "dip_vae_i"


def test_the_campaign_lists_them():
    r = subprocess.run([sys.executable, "-m", "disentbook", "campaign", "--list"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for p in pilots.PILOTS: assert f"pilot-{p.name}" in r.stdout


def test_a_run_folder_of_another_learning_rate_is_refused(tmp_path):
    from disentbook.jobs import train_job
    arm = pilots.PilotArm(pilots.PILOTS[1])
    s = zoo.recipe_settings(zoo.recipe(arm.pilot.recipe))          # the recipe's own 5e-4 in the pilot's folder
    train_job(method=arm.recipe.method, dataset="dsprites", params=arm.recipe.params, steps=2, batch_size=8, lr=s["lr"],
              latent_dim=s["latent_dim"], hidden=s["hidden"], out_dir=arm.run_dir(tmp_path, 0), device="cpu", seed=0,
              evaluate=False, threads=1, precision="fp32")
    with pytest.raises(CampaignError, match="another recipe"):
        arm.check_run(tmp_path, 0)
    assert arm.step_of(tmp_path, 0) == 2                            # nothing changed


def test_a_change_that_changes_nothing_is_refused():
    with pytest.raises(CampaignError, match="already trains"):
        pilots.PilotArm(pilots.Pilot("factor_vae", dict(lr=5e-4)))


def test_a_pilot_of_adams_eps_trains_with_it_and_refuses_a_run_without_it(tmp_path):
    from disentbook.jobs import train_job
    from disentbook.training.checkpoints import read_checkpoint_config
    arm = next(pilots.PilotArm(p) for p in pilots.PILOTS if "eps" in p.changes)
    s, r = zoo.recipe_settings(arm.recipe), arm.recipe
    run = lambda eps: train_job(method=r.method, dataset="dsprites", params=r.params, steps=2, batch_size=8, lr=s["lr"],
                                latent_dim=s["latent_dim"], hidden=s["hidden"], out_dir=arm.run_dir(tmp_path, 0), device="cpu",
                                seed=0, evaluate=False, threads=1, precision="fp32", eps=eps, overwrite=True)
    run(s["eps"])
    assert read_checkpoint_config(arm.run_dir(tmp_path, 0) / "checkpoint")["train"]["eps"] == s["eps"] == 8e-4
    arm.check_run(tmp_path, 0)                                       # its own run: accepted
    run(None)                                                        # the trainer's default ε in the pilot's folder
    with pytest.raises(CampaignError, match="another recipe"):
        arm.check_run(tmp_path, 0)
