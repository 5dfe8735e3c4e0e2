"""`pip install disentbook` from a built wheel gives a working library and CLI."""
import subprocess, sys, sysconfig, venv
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    root = Path(__file__).resolve().parent.parent
    tmp = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"), str(root)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list((tmp / "dist").glob("disentbook-*.whl"))
    assert len(wheels) == 1, wheels
    # A fresh environment that sees the already-installed dependencies (torch, ...) through a .pth file
    # naming this interpreter's site-packages, but not the editable install of the source tree (.pth files
    # inside a directory added that way are not processed, so the editable finder never loads).
    venv.create(tmp / "venv", system_site_packages=False, with_pip=True)
    py = tmp / "venv" / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    parent = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_disentbook_test_deps.pth").write_text("\n".join(sorted(parent)) + "\n")
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheels[0])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp, py, wheels[0]


def test_wheel_contents(wheel_env):
    import zipfile
    names = zipfile.ZipFile(wheel_env[2]).namelist()
    for f in ("disentbook/core.py", "disentbook/cli.py", "disentbook/paper_values/dipvae.csv",
              "disentbook/paper_values/tcwae.csv", "disentbook/paper_values/contrastive.csv",
              "disentbook/paper_values/cpu_lengths.json", "disentbook/assets/throughput.json"):
        assert f in names, f"{f} missing from the wheel"
    assert not any(n.startswith(("nbs/", "tests/")) for n in names)


def test_wheel_imports_and_cli(wheel_env, clean_env):
    tmp, py, _ = wheel_env
    r = subprocess.run([str(py), "-c", "import disentbook, disentbook.objectives.vae, disentbook.cli; print(disentbook.__file__)"],
                       cwd=tmp, env=clean_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert str(tmp / "venv") in r.stdout, f"imported the source tree, not the wheel: {r.stdout}"
    exe = tmp / "venv" / "bin" / "disentbook"
    r = subprocess.run([str(exe), "--version"], env=clean_env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("disentbook "), r.stdout + r.stderr
    out = tmp / "smoke"
    r = subprocess.run([str(exe), "reproduce", "vae", "--scale", "smoke", "--out", str(out), "--device", "cpu"],
                       cwd=tmp, env=clean_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for f in ("report.md", "metrics.json", "table.csv", "reconstructions.png", "traversals.png"):
        assert (out / f).stat().st_size > 0, f"{f} not written"
    r = subprocess.run([str(exe), "data", "list"], cwd=tmp, env=clean_env, capture_output=True, text=True)
    assert r.returncode == 0 and "dsprites" in r.stdout and "mnist" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([str(py), "-m", "disentbook", "train", "--method", "nope"], cwd=tmp, env=clean_env,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown objective 'nope'" in r.stderr, r.stderr
