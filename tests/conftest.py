import os, shutil, sys, sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST = ("tests/test_notebooks.py",)          # the longest file: begun first, while the other workers take the rest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one test process per core (`-n auto`): each, and every process it starts, computes on one thread (two processes
    # of several threads each on two cores run about ten times slower)
    os.environ.setdefault("OMP_NUM_THREADS", "1"); os.environ.setdefault("MKL_NUM_THREADS", "1")
    import torch; torch.set_num_threads(1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    "`-n auto`: one worker per core, at most four (each holds PyTorch and a test's data)."
    return max(1, min(os.cpu_count() or 1, 4))


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda it: not any(str(it.fspath).endswith(f) for f in FIRST))


def script(name: str) -> str:
    "Path of a console script installed next to the running interpreter (pyenv shims need no rehash)."
    for d in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        p = shutil.which(name, path=d)
        if p: return p
    p = shutil.which(name)
    if p is None: pytest.fail(f"console script {name!r} is not installed; run: python -m pip install -e '.[dev]'")
    return p


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def clean_env(tmp_path):
    "Environment for subprocesses: no IN_TEST leak, a private data directory, offline."
    env = {k: v for k, v in os.environ.items() if k not in ("IN_TEST", "PYTEST_CURRENT_TEST")}
    env["DISENTBOOK_DATA"] = str(tmp_path / "data")
    env["DISENTBOOK_OFFLINE"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.fixture
def offline_data(tmp_path, monkeypatch):
    "No MNIST files and no network: datasets fall back to the embedded digits (tests that call the CLI in-process)."
    monkeypatch.setenv("DISENTBOOK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DISENTBOOK_OFFLINE", "1")


def cli_run(capsys, *argv):
    "Run the `disentbook` command in-process: (exit code, stdout, stderr)."
    from disentbook.cli import main
    try: rc = main([str(a) for a in argv])
    except SystemExit as e: rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def trust_mnist_files(monkeypatch):
    """`trust(raw)`: the registry checks the extracted MNIST files now in `raw` (a test's tiny stand-ins) by their own
    sizes and sha256 instead of the real files' (restored after the test)."""
    import dataclasses, hashlib
    from disentbook.data import registry
    def trust(raw):
        info = registry.DATASETS["mnist"]
        fake = tuple(dataclasses.replace(f, size=(Path(raw) / f.name).stat().st_size,
                                         sha256=hashlib.sha256((Path(raw) / f.name).read_bytes()).hexdigest())
                     for f in info.extracted)
        monkeypatch.setitem(registry.DATASETS, "mnist", dataclasses.replace(info, extracted=fake))
    return trust
