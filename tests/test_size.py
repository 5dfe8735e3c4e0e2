"""The repository stays small enough to travel: a GPU machine takes a working tree of at most 64 MiB, wheels and
checkpoints included. The budget: committed files about 40 MB (this test fails above 45 MB); figures sized for reading
(most at most 200 KB, none above 400 KB; `eval.viz.save_figure` writes palette PNGs); training checkpoints carried
for a run that moves between machines (`--carry`) at most 10 MB in all, anything longer is trained again; the models
shipped in the package (fp16 weights, `disentbook/assets/pretrained/`) at most 16 MB in all."""
import re, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
TRACKED_MAX = 45 * MB                 # the aim is 40 MB; above 45 MB this fails
FIGURE_MAX, FIGURE_MOST, MOST = 400_000, 200_000, 0.95
CARRIED_MAX = 10 * MB                 # checkpoints of cut-short runs carried between machines, all together
SHIPPED_MAX = 16 * MB                 # the shipped models' weights, all together
SHIPPED = "disentbook/assets/pretrained/"
CHECKPOINT = re.compile(r"(^|/)checkpoints?/|\.(pt|pth|safetensors|ckpt)$")


@pytest.fixture(scope="module")
def tracked() -> dict:
    "{path: bytes on disk} of every committed file present in the working tree."
    try: out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError): pytest.skip("not a git checkout: no list of committed files")
    return {f: (ROOT / f).stat().st_size for f in out.split("\0") if f and (ROOT / f).is_file()}


def _largest(files: dict, n: int = 10) -> str:
    return "\n".join(f"{s / MB:8.2f} MB  {f}" for f, s in sorted(files.items(), key=lambda x: -x[1])[:n])


def test_committed_files_within_budget(tracked):
    total = sum(tracked.values())
    assert total <= TRACKED_MAX, f"committed files take {total / MB:.1f} MB (budget 40, limit 45); the largest:\n{_largest(tracked)}"


def test_figures_sized_for_reading(tracked):
    pngs = {f: s for f, s in tracked.items() if f.endswith(".png")}
    assert pngs, "no committed figure found"
    over = {f: s for f, s in pngs.items() if s > FIGURE_MAX}
    assert not over, f"figures above {FIGURE_MAX // 1000} KB (rewrite them with eval.viz.compact_png):\n{_largest(over)}"
    small = sum(s <= FIGURE_MOST for s in pngs.values()) / len(pngs)
    assert small >= MOST, f"only {small:.0%} of the figures are at most {FIGURE_MOST // 1000} KB:\n{_largest(pngs)}"


def test_checkpoints_within_budget(tracked):
    ckpt = {f: s for f, s in tracked.items() if CHECKPOINT.search(f) and not f.endswith((".py", ".ipynb"))}
    carried = {f: s for f, s in ckpt.items() if not f.startswith(SHIPPED)}
    shipped = {f: s for f, s in ckpt.items() if f.startswith(SHIPPED)}
    assert sum(carried.values()) <= CARRIED_MAX, \
        f"carried checkpoints take {sum(carried.values()) / MB:.1f} MB (budget 10 MB; train the rest again):\n{_largest(carried)}"
    assert shipped and sum(shipped.values()) <= SHIPPED_MAX, \
        f"the shipped models take {sum(shipped.values()) / MB:.1f} MB (budget 16 MB):\n{_largest(shipped)}"


def test_the_checks_see_what_they_look_for():
    assert CHECKPOINT.search("results/campaign/x/run/checkpoint/state-0017000-8205c6224982.pt")
    assert CHECKPOINT.search("runs/a/checkpoint/config.json") and CHECKPOINT.search(SHIPPED + "beta_tcvae.pt")
    assert not CHECKPOINT.search("disentbook/checkpoints.py")
    assert not CHECKPOINT.search("nbs/04a_checkpoints.ipynb") and not CHECKPOINT.search("reports/x/figure.png")
