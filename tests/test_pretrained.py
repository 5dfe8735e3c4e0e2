"""The pretrained models shipped in disentbook/assets/pretrained/ (issue 16.1): every card is complete and honest
(the command parses to the recorded settings, the sha256 matches), every model loads as float32 in eval mode, and
its recorded metrics come back when recomputed on the card's fixed evaluation set (MIG, FactorVAE score and the
per-latent KL for every dSprites model, DCI for one, clustering for the contrastive model, the style probes of the
sRb-VAE, the two-step classifier's accuracies of the invariance model); the three models of the papers' own data pass
their "did it learn" gate (issue 23), recorded on the card and recomputed from the weights; damaged or missing files give
clear errors."""
import json, shlex, shutil, sys
from pathlib import Path

import numpy as np
import pytest
import torch

import disentbook
from disentbook.classroom.pretrained import (GATES, PRETRAINED_DIR, available_pretrained, check_gate, measure, pretrained,
                                             pretrained_card, sample_images)
from disentbook.core import CorruptFileError, DataNotFoundError, sha256_file

EXPECTED = ["annealed_vae", "beta_tcvae", "beta_vae_b1", "beta_vae_b4", "contrastive_w2", "dip_vae_i", "dip_vae_ii", "factor_vae", "srb_vae",
            "swap_invariance", "tcwae_mws"]
DSPRITES = ["annealed_vae", "beta_tcvae", "beta_vae_b1", "beta_vae_b4", "dip_vae_i", "dip_vae_ii", "factor_vae", "tcwae_mws"]
GATED = ["contrastive_w2", "srb_vae", "swap_invariance"]          # a gate per model of the papers' own data (issue 23)
# shipped models that do not pass their gate, and why (measured; their cards say FAILED): a model listed here that starts to
# pass, or one not listed that fails, fails the tests below
GATE_FAILED = {"swap_invariance": "no length measured (900-6,000 steps, the paper's weight or the former recipe) reaches "
                                  "the bar of 0.6 average accuracy on unseen background colours (best 0.582): the unseen "
                                  "yellow background scores 0.23-0.32 at every length, cyan 0.95-0.98 (measured)"}
ROOT = Path(__file__).resolve().parents[1]
ATOL = 0.02          # thread counts and BLAS kernels may flip a vote or a tree split; the metrics are otherwise exact


def test_available_and_small():
    assert set(EXPECTED) <= set(available_pretrained())
    assert all(pretrained_card(n)["dataset"] == "dsprites" for n in DSPRITES)
    total = sum(f.stat().st_size for f in PRETRAINED_DIR.iterdir() if f.suffix in (".pt", ".json"))
    assert total <= 16e6, f"{total / 1e6:.2f} MB"          # eight dSprites models of 1-1.5 MB (hidden 128 / 256), three digit models


@pytest.mark.parametrize("name", EXPECTED)
def test_card_is_complete_and_honest(name):
    _check_card(pretrained_card(name), PRETRAINED_DIR)


def _check_card(c: dict, root: Path | None = None):
    "The checks every card passes: weights' sha256, the command parses to the recorded settings, finite metrics."
    from disentbook.cli import build_parser, parse_params
    if root is not None: assert c["sha256"] == sha256_file(root / c["weights"])
    assert c["dtype"] == "float16"
    assert c["train"]["steps"] > 0 and c["train"]["seconds"] > 0 and "cpu" in c["train"]["device"]
    assert set(c["metrics"]) and all(np.all(np.isfinite(v)) for v in c["metrics"].values())
    if "run" in c:          # a reproduction's run, shipped (tools/train_pretrained.py FROM_RUN): its command is the reproduction
        from disentbook.repro.declare import PAPERS, scale_config
        args = build_parser().parse_args(shlex.split(c["command"])[1:])
        cfg = scale_config(PAPERS[args.name], args.scale, dict(o.split("=", 1) for o in args.option or []) or None)
        assert (args.command, c["run"]["paper"], c["run"]["seed"]) == ("reproduce", args.name, c["train"]["seed"])
        assert [c["train"][k] for k in ("batch_size", "lr", "steps")] == [cfg["train"][k] for k in ("batch_size", "lr", "steps")]
        assert all(c["model"][k] == v for k, v in cfg["model"].items()) and c["params"] == cfg.get("objective", {})
        assert "reproduction" in c["note"] and f"{c['train']['steps']:,} steps" in c["note"] and c["run"]["method"] == c["method"]
        return
    if zoo_card(c):         # a zoo recipe shipped by the campaign: its command is the zoo's stage, its settings the zoo's
        from disentbook.campaign import zoo
        r, seeds = zoo.RECIPES[c["name"]], c["seeds"]["seeds"]
        assert c["recipe"] == f"disentbook.campaign.zoo.RECIPES['{c['name']}']" and (c["method"], c["params"]) == (r.method, r.params)
        s = zoo.recipe_settings(r)                    # the zoo's settings with those a declared pilot changed
        assert [c["train"][k] for k in ("batch_size", "lr")] == [s[k] for k in ("batch_size", "lr")]
        assert [c["model"][k] for k in ("hidden", "latent_dim")] == [s[k] for k in ("hidden", "latent_dim")]
        assert all(c["model"].get(k) == v for k, v in r.model.items()) and c.get("pilot", "") == r.pilot
        assert c["train"]["seed"] == c["seeds"]["shipped"] == max(sorted(map(int, seeds)), key=lambda s: seeds[str(s)]["mig"])
        assert f"{c['train']['steps']:,} steps" in c["note"] and f"MIG {c['check']['mig']:.3f}" in c["note"]
        assert c["check"]["mig"] == seeds[str(c["train"]["seed"])]["check_mig"] or "trained_again" in c
        return
    assert "CPU-budget model" in c["note"] and (f"{c['train']['steps']:,}" in c["note"] or str(c["train"]["steps"]) in c["note"])
    args = build_parser().parse_args(shlex.split(c["command"])[1:])      # the recorded command, as the CLI reads it
    assert (args.method, args.dataset, args.steps) == (c["method"], c["dataset"], c["train"]["steps"])
    assert (args.batch_size, args.lr, args.seed, args.hidden) == (c["train"]["batch_size"], c["train"]["lr"],
                                                                  c["train"]["seed"], c["model"]["hidden"])
    sizes = dict(vae=dict(latent_dim=args.latent_dim), contrastive_vae=dict(z_dim=args.z_dim, s_dim=args.s_dim),
                 ref_vae=dict(z_dim=args.z_dim, e_dim=args.s_dim))[c["model"]["kind"]]
    assert all(c["model"][k] == v for k, v in sizes.items()), (sizes, c["model"])
    assert parse_params(args.param) == c["params"]


@pytest.mark.parametrize("name", EXPECTED)
def test_loads_float32_eval(name):
    m = pretrained(name)
    assert not m.training and all(p.dtype == torch.float32 for p in m.parameters())
    stored = torch.load(PRETRAINED_DIR / m.card["weights"], weights_only=True)
    assert all(torch.equal(m.state_dict()[k], v.float()) for k, v in stored.items())
    x = sample_images(name, 4)
    assert x.dtype == torch.uint8 and tuple(x.shape[1:]) == tuple(m.shape)
    assert torch.isfinite(m.reconstruct(x)).all()


def _same_verdicts(gate: dict, card: dict):
    "The gate recomputed from the weights gives every check the card's verdict, and passes unless listed in GATE_FAILED."
    assert [c["passed"] for c in gate["checks"]] == [c["passed"] for c in card["gate"]["checks"]], (gate, card["gate"])
    assert gate["passed"] == (card["name"] not in GATE_FAILED), gate


def _close(got: dict, card: dict, keys):
    for k in keys:
        assert np.allclose(got[k], card[k], atol=ATOL), (k, got[k], card[k])


@pytest.mark.parametrize("name", DSPRITES)
def test_recorded_metrics_recomputed(name):
    card = pretrained_card(name)
    got = measure(name, metrics=("mig", "factor_vae"))
    _close(got, card["metrics"], [k for k in card["metrics"] if k.split("/")[0] in ("mig", "factor_vae")])
    assert np.allclose(got["kl_per_dim"], card["metrics"]["kl_per_dim"], atol=1e-3)


def test_recorded_dci_recomputed():
    card = pretrained_card("beta_vae_b4")
    got = measure("beta_vae_b4", metrics=("dci",))
    _close(got, card["metrics"], [k for k in card["metrics"] if k.startswith("dci/")])


def test_contrastive_clustering_recomputed():
    card = pretrained_card("contrastive_w2")
    got = measure("contrastive_w2")
    _close(got, card["metrics"], list(card["metrics"]))
    _same_verdicts(check_gate(card, got), card)


def test_srb_vae_style_probes_recomputed():
    card = pretrained_card("srb_vae")
    got = measure("srb_vae")
    _close(got, card["metrics"], list(card["metrics"]))
    _same_verdicts(check_gate(card, got), card)                            # style in e: beats the mean predictor, z, untrained


def test_swap_invariance_accuracy_recomputed():
    card = pretrained_card("swap_invariance")
    got = measure("swap_invariance", metrics=("z_p",))
    _close(got, card["metrics"], [k for k in card["metrics"] if k.endswith("/z_p")])
    _same_verdicts(check_gate(card, got), card)                            # z_p's accuracy well above the old 0.43


@pytest.mark.parametrize("name", GATED)
def test_shipped_model_passes_its_gate(name):
    "The card records its gate (every check: number, reference, p-value, verdict), it follows from the recorded metrics, "
    "it passed (or the model is listed in GATE_FAILED and its note says FAILED), and the note says length, seconds, gate."
    card = pretrained_card(name)
    assert card["gate"] == check_gate(card), "the card's gate is not the one its recorded metrics give"
    assert card["gate"]["passed"] == (name not in GATE_FAILED), card["gate"]
    assert ("FAILED" in card["note"]) == (name in GATE_FAILED)
    assert len(card["gate"]["checks"]) == len(GATES[card["evaluation"]["kind"]])
    note = card["note"]
    assert f"{card['train']['steps']:,} steps" in note and f"{card['train']['seconds']:.0f} s" in note
    if card["train"]["device"].startswith("cpu"):          # a CPU recipe's card (tools/gpu_campaign.py writes its own note)
        assert "gate" in note and ("one torch thread" if "run" not in card else " torch thread") in note and "2-core" in note


@pytest.mark.parametrize("name", GATED)
def test_untrained_control_recomputed(name):
    "The card's control (the gate's metrics on three untrained networks of the architecture) comes back when recomputed."
    from disentbook.classroom.pretrained import untrained_control
    card = pretrained_card(name)
    got = untrained_control(name, seeds=card["control"]["seeds"])
    assert set(got) == set(card["control"]["metrics"])
    for k, v in got.items(): assert np.allclose(v, card["control"]["metrics"][k], atol=ATOL), (k, v)


def test_gate_fails_a_model_that_did_not_learn():
    "The gate is not a formality: each check fails on numbers of a model that did not learn, or an unclear p-value."
    for name, bad in (("contrastive_w2", {"clustering_s/accuracy/target": 0.15}),          # at chance
                      ("srb_vae", {"refvae/avg_mae_e/probe_test": 0.26}),                  # style probe from e no better than z
                      ("srb_vae", {"gate/p_e_below_z/probe_test": 0.2}),                   # e better than z, but not clearly
                      ("srb_vae", {"refvae/rec_l1/probe_test": 0.08}),                     # worse than a blank image
                      ("srb_vae", {"refvae/avg_mae_e/probe_test": 0.25, "refvae/avg_mae_z/probe_test": 0.26,
                                   "gate/untrained_mae_e_min/probe_test": 0.241}),            # e no better than untrained
                      ("swap_invariance", {"invariance/avg_acc/z_p": 0.43})):              # the 900-step model's accuracy
        card = pretrained_card(name)
        g = check_gate(card, dict(card["metrics"], **bad))
        assert not g["passed"], (name, bad, g)
    assert check_gate(pretrained_card("beta_vae_b4")) is None                           # the dSprites models have no gate
    card = pretrained_card("srb_vae")
    with pytest.raises(disentbook.core.InputError, match="gate/p_e_below_z"):
        check_gate(card, {k: v for k, v in card["metrics"].items() if k != "gate/p_e_below_z/probe_test"})


def test_blocks_of_the_block_models():
    assert pretrained("swap_invariance").blocks == {"z_p (predictive)": list(range(10)), "z_n (nuisance)": list(range(10, 20))}
    assert not hasattr(pretrained("beta_vae_b4"), "blocks")
    from disentbook.classroom.widgets import latent_blocks
    assert latent_blocks(pretrained("srb_vae")) == {"z (content)": list(range(8)), "e (style)": list(range(8, 16))}


def test_errors(tmp_path):
    with pytest.raises(DataNotFoundError, match="available: annealed_vae, beta_tcvae, beta_vae_b1"): pretrained("beta_vae_b7")
    for f in ("beta_vae_b1.json", "beta_vae_b1.pt"): shutil.copy(PRETRAINED_DIR / f, tmp_path)
    w = tmp_path / "beta_vae_b1.pt"
    b = bytearray(w.read_bytes()); b[len(b) // 2] ^= 1; w.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match="sha256"): pretrained("beta_vae_b1", root=tmp_path)
    w.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="sha256"): pretrained("beta_vae_b1", root=tmp_path)
    w.unlink()
    with pytest.raises(DataNotFoundError, match="missing"): pretrained("beta_vae_b1", root=tmp_path)
    (tmp_path / "beta_vae_b1.json").write_text("{not json")
    with pytest.raises(CorruptFileError, match="not a readable JSON"): pretrained_card("beta_vae_b1", root=tmp_path)
    with pytest.raises(disentbook.core.InputError, match="not on the card"): measure("beta_vae_b1", metrics=("sap",))
    with pytest.raises(disentbook.core.InputError, match="not on the card"): measure("swap_invariance", metrics=("z_n",))


# the dSprites models trained at the length their learning curve chose: every one of them
CURVED = ["annealed_vae", "beta_tcvae", "beta_vae_b1", "beta_vae_b4", "dip_vae_i", "dip_vae_ii", "factor_vae", "tcwae_mws"]


def test_every_dsprites_model_has_its_curve():
    assert sorted(DSPRITES) == sorted(CURVED)


# the one-seed rule these dSprites models were shipped by (the campaign's zoo replaces them with lengths chosen over
# seeds, `campaign.lengths`): the shortest measured length from which no longer length improves MIG by 0.02; a curve
# ends at 20,000 steps or two lengths after that choice
FORMER_FLAT, FORMER_LONGEST, FORMER_STOP_AFTER = 0.02, 20_000, 2


def former_choice(rows: list[dict]) -> tuple[int, str]:
    rows, key = sorted(rows, key=lambda r: r["steps"]), "mig"
    vals = [r[key] for r in rows]
    for i, r in enumerate(rows):
        if max(vals[i:]) - vals[i] < FORMER_FLAT:
            if i == len(rows) - 1 and len(rows) > 1 and vals[-1] - vals[-2] >= FORMER_FLAT:
                return int(r["steps"]), (f"still rising at the longest length measured ({key} {vals[-2]:.3f} -> "
                                         f"{vals[-1]:.3f} over the last {rows[-1]['steps'] - rows[-2]['steps']:,} steps)")
            return int(r["steps"]), (f"the shortest length from which no longer run measured improves {key} by "
                                     f"{FORMER_FLAT} or more ({key} {vals[i]:.3f}; best {max(vals):.3f} at "
                                     f"{rows[vals.index(max(vals))]['steps']:,} steps)")


def former_done(rows: list[dict]) -> bool:
    L = former_choice(rows)[0]
    return max(r["steps"] for r in rows) >= FORMER_LONGEST or sum(r["steps"] > L for r in rows) >= FORMER_STOP_AFTER


def zoo_card(c: dict) -> bool:
    "Whether a card is a zoo recipe's, shipped by the campaign (`campaign.models.ship`)."
    return str(c.get("command", "")).startswith("python3 -m disentbook campaign --stage zoo-")


@pytest.mark.parametrize("name", CURVED)
def test_dsprites_card_carries_its_learning_curve(name):
    """A dSprites model ships at the length its learning curves chose by the rule written down before the curves: a zoo
    model by the length rule over seeds, recomputed from its committed curve record, and the seed of five that the
    declared rule names; a former model by one seed's curve (`former_choice`). Its card carries that curve, the reason
    and the figures that show it."""
    c = pretrained_card(name)
    curve = c["curve"]
    assert [r["steps"] for r in curve] == sorted(r["steps"] for r in curve) and len(curve) >= 3
    at = next(r for r in curve if r["steps"] == c["train"]["steps"])
    if zoo_card(c):
        from disentbook.campaign import zoo
        from disentbook.campaign.curves import seed_values
        from disentbook.campaign.lengths import curve_done
        from disentbook.campaign.lengths import LengthRule
        z, rec = zoo.ZooRecipe(name), json.loads((ROOT / c["figures"]["curve_record"]).read_text())
        # under the rule and seeds the card says chose it (a recipe read again over five seeds ships its three-seed
        # choice until the five-seed rule chooses)
        rule, seeds = LengthRule(**c["length_record"]["rule"]), tuple(c["length_record"]["seeds"])
        assert rule == z.rule or name in zoo.REREAD_RECIPES
        done, ch = curve_done(seed_values(rec, seeds, z.key, z.sign), z.grid, rule, z.key)
        assert done and (ch.steps, ch.why) == (c["train"]["steps"], c["length"]) and ch.record == c["length_record"]
        seed, sel = zoo.shipped_seed(rec)
        assert seed == c["train"]["seed"] and sorted(sel["seeds"]) == [0, 1, 2, 3, 4]
        assert [r for r in rec["seeds"][str(seed)] if r["steps"] == ch.steps][0]["mig"] == pytest.approx(at["mig"], abs=1e-5)
        assert f"MIG {c['check']['mig']:.3f}" in c["note"] and c["train"]["precision"] in ("bf16", "fp32")
    else:
        assert former_done(curve), "a card's curve reaches the longest length or stops flat by the rule"
        assert former_choice(curve) == (c["train"]["steps"], c["length"])
        assert 0 <= at["mig"] <= 1 and f"MIG {at['mig']:.3f}" in c["note"] and c["length"] in c["note"]
        assert c["train"]["precision"] in ("bf16", "fp32") and f"--precision {c['train']['precision']}" in c["command"]
    for f in c["figures"].values(): assert (ROOT / f).is_file(), f
    assert ("COLLAPSED" in c["note"]) == (at["active"] == 0)


def test_packaged():
    setup = (Path(__file__).resolve().parents[1] / "setup.py").read_text()
    assert '"assets/pretrained/*"' in setup


def test_a_reproduction_run_ships_as_a_pretrained_model(tmp_path):
    """tools/train_pretrained.py --from-run: a reproduction's sRb-VAE run becomes the shipped model; the card's command
    names the scale whose declared settings trained it, and the card passes the checks every shipped card passes; a
    folder that is not a finished run, or a run of another method, is refused with one line."""
    sys.path.insert(0, str(ROOT / "tools"))
    import train_pretrained as TP
    from disentbook.repro.declare import PAPERS
    from disentbook.repro.harness import reproduce
    out = tmp_path / "rep"
    reproduce(PAPERS["refvae"], scale="smoke", out_dir=out, device="cpu")
    run, dest, runs = next(out.glob("runs/*/srb_vae/seed0")), tmp_path / "dest", tmp_path / "runs"
    assert TP.main(["srb_vae", "--from-run", str(run), "--runs", str(runs), "--dest", str(dest)]) == 0
    card = pretrained_card("srb_vae", root=dest)
    assert card["command"] == "disentbook reproduce refvae --scale smoke" and card["run"]["seed"] == 0
    assert card["train"]["steps"] == json.loads((run / "settings.json").read_text())["train"]["steps"]
    _check_card(card, dest)
    assert check_gate(card) == card["gate"] and "reproduction" in card["note"]
    m = pretrained("srb_vae", root=dest)
    assert not m.training and m.config == card["model"]
    for bad, msg in ((tmp_path / "nothing", "not a finished reproduction run"),
                     (next(out.glob("runs/*/rb_vae/seed0")), "needs a finished 'srb_vae' run")):
        with pytest.raises(SystemExit, match=msg):
            TP.main(["srb_vae", "--from-run", str(bad), "--runs", str(runs), "--dest", str(dest)])
