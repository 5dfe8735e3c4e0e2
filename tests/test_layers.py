"""The package's layers (DESIGN.md): a module imports only from its own layer or the layers below it, and no
import cycle exists anywhere. Walks every module's imports (module level and inside functions alike)."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "disentbook"
LAYERS = ("core", "data", "nets", "objectives", "training", "eval", "repro", "classroom", "cli")
LAYER_OF = {"core": "core", "checking": "core", "nets": "nets", "cli": "cli", "jobs": "cli", "campaign": "cli", "__main__": "cli"}


def layer(mod: str) -> int:
    "Rank of a module name relative to the package ('data.dsprites' -> rank of 'data')."
    head = mod.split(".")[0]
    return LAYERS.index(LAYER_OF.get(head, head))


def modules() -> dict:
    out = {}
    for f in PKG.rglob("*.py"):
        if f.name == "_modidx.py": continue
        rel = f.relative_to(PKG).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = f
    return out


def source_of(name: str, f: Path, node: ast.ImportFrom) -> str | None:
    "The package module (relative to the package, '' for its root) an ImportFrom in module `name` reads from; None outside."
    pkg_parts = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
    if node.level:
        base = pkg_parts[: len(pkg_parts) - (node.level - 1)] if node.level > 1 else pkg_parts
        return ".".join([p for p in base if p] + ([node.module] if node.module else []))
    if node.module and node.module.split(".")[0] == "disentbook":
        return node.module[len("disentbook."):] if "." in node.module else ""
    return None


def fake_package(tmp_path, monkeypatch, files: dict) -> Path:
    "A package `disentbook` of `files` ({relative path: source}) that the walkers read instead of the real one."
    pkg = tmp_path / "disentbook"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True); (pkg / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    return pkg


def imports(mods: dict) -> dict:
    "{module: {imported package module}} (relative and absolute imports of disentbook, resolved to modules)."
    edges = {}
    for name, f in mods.items():
        targets = set()
        for node in ast.walk(ast.parse(f.read_text())):
            cands = []
            if isinstance(node, ast.ImportFrom):
                if (mod := source_of(name, f, node)) is None: continue
                cands = [f"{mod}.{a.name}".lstrip(".") for a in node.names] + [mod]
            elif isinstance(node, ast.Import):
                cands = [a.name[len("disentbook."):] for a in node.names if a.name.startswith("disentbook.")]
            for c in cands:
                while c and c not in mods: c = c.rpartition(".")[0]
                if c and c != name and mods[c].name != "__init__.py": targets.add(c); break
        edges[name] = targets
    return edges


def test_layer_table_covers_every_module():
    for name, f in modules().items():
        if f.name == "__init__.py": continue
        layer(name)                                   # raises ValueError for a module outside the layer table


def test_no_upward_imports():
    mods = modules(); edges = imports(mods)
    bad = [f"{m} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]})" for m, ts in edges.items()
           if mods[m].name != "__init__.py" for t in ts if layer(t) > layer(m)]
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    edges = imports(modules()); state, stack, cycles = {}, [], []
    def visit(v):
        state[v] = 1; stack.append(v)
        for w in edges.get(v, ()):
            if state.get(w) == 1: cycles.append(stack[stack.index(w):] + [w])
            elif w not in state: visit(w)
        stack.pop(); state[v] = 2
    for v in edges:
        if v not in state: visit(v)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_walker_sees_a_violation(tmp_path, monkeypatch):
    "The walker itself: a fake package with an upward import and a cycle is caught."
    fake_package(tmp_path, monkeypatch, {"data/__init__.py": "", "core.py": "from .data.base import X\n",
                                         "data/base.py": "from ..core import Y\nX = 1\n"})
    edges = imports(modules())
    assert edges["core"] == {"data.base"} and edges["data.base"] == {"core"}
    with pytest.raises(AssertionError, match="upward"): test_no_upward_imports()
    with pytest.raises(AssertionError, match="cycles"): test_no_import_cycles()


def test_no_module_below_the_cli_imports_the_package_root():
    "Registries fill themselves from their source modules (core.Registry), so nothing below the CLI imports `disentbook` itself."
    bad = []
    for name, f in modules().items():
        if name in ("cli", "__main__", "") or f.name == "__init__.py": continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "disentbook" for a in node.names): bad.append(f"{name}: import disentbook")
            if isinstance(node, ast.ImportFrom) and node.module == "disentbook" and not node.level:
                bad += [f"{name}: from disentbook import {a.name}" for a in node.names if not (PKG / a.name).exists()
                        and not (PKG / f"{a.name}.py").exists()]
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module is None and name.count(".") == 1:
                bad += [f"{name}: from .. import {a.name}" for a in node.names if not (PKG / f"{a.name}.py").exists()
                        and not (PKG / a.name).is_dir()]
    assert not bad, bad


def test_a_registry_imports_its_sources_on_first_lookup(tmp_path, monkeypatch):
    import sys
    from disentbook.core import InputError, Registry
    reg = Registry("thing", ("fake_things_module",))
    (tmp_path / "fake_things_module.py").write_text("import builtins\nbuiltins._REG.register('gadget')(object())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins; builtins._REG = reg
    try:
        assert "fake_things_module" not in sys.modules
        assert "gadget" in reg and "fake_things_module" in sys.modules and list(reg) == ["gadget"]
        with pytest.raises(InputError, match="unknown thing 'widget'; known: gadget"): reg["widget"]
    finally:
        del builtins._REG; sys.modules.pop("fake_things_module", None)


def facades(mods: dict | None = None) -> tuple[list, list]:
    """(star imports, private names imported across modules) of the package: `from X import *`, and `from X import _name`
    or `module._name` where X / module is another package module (a name a module keeps to itself stays there)."""
    mods = mods if mods is not None else modules()
    star, private = [], []
    for name, f in mods.items():
        tree, aliases = ast.parse(f.read_text()), {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if (src := source_of(name, f, node)) is None: continue
                for a in node.names:
                    full = f"{src}.{a.name}".lstrip(".")
                    if a.name == "*": star.append(f"{name}: from {src or 'disentbook'} import *")
                    elif full in mods: aliases[a.asname or a.name] = full
                    elif a.name.startswith("_") and not a.name.startswith("__") and src != name:
                        private.append(f"{name}: from {src} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("disentbook.") and a.asname: aliases[a.asname] = a.name[len("disentbook."):]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                private.append(f"{name}: {aliases[node.value.id]}.{node.attr}")
    return star, private


def test_no_facades():
    "Every import names the module that defines the name: no star import, no private name taken from another module."
    star, private = facades()
    assert not star, star
    assert not private, private


def test_the_facade_scan_sees_what_it_looks_for(tmp_path, monkeypatch):
    fake_package(tmp_path, monkeypatch, {"a.py": "_x = 1\ny = 2\n", "b.py": "from .a import *\nfrom .a import _x\n"
                                         "from disentbook import a as A\nz = A._x\nfrom .a import y\n"})
    star, private = facades()
    assert star == ["b: from a import *"] and sorted(private) == ["b: a._x", "b: from a import _x"], (star, private)


def test_the_package_docstring_is_its_doc():
    "`help(disentbook)` shows what the package is: the module docstring stands first in `__init__.py` (the version after it)."
    import disentbook
    assert disentbook.__doc__ and "registry" in disentbook.__doc__ and disentbook.__version__


def reexports(mods: dict | None = None) -> list[str]:
    """Imports of a name from a package module that only imports it from another package module (a re-export): the
    import should name the module that defines it."""
    mods = mods if mods is not None else modules()
    imported = {}                                      # module -> {name: module it was imported from}, top level only
    for name, f in mods.items():
        imported[name] = {}
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.ImportFrom) and (src := source_of(name, f, node)) is not None:
                for a in node.names:
                    if a.name != "*" and f"{src}.{a.name}".lstrip(".") not in mods: imported[name][a.asname or a.name] = src
    bad = []
    for name, f in mods.items():
        if name == "": continue                        # the package root gathers the registries on purpose
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (src := source_of(name, f, node)) and src in mods:
                bad += [f"{name}: from {src} import {a.name} (it comes from {imported[src][a.name]})" for a in node.names
                        if a.name in imported.get(src, {})]
    return bad


def test_imports_name_the_defining_module():
    bad = reexports()
    assert not bad, bad


def test_the_reexport_scan_sees_one(tmp_path, monkeypatch):
    fake_package(tmp_path, monkeypatch, {"a.py": "x = 1\n", "b.py": "from .a import x\n",
                                         "c.py": "from .b import x\nfrom .a import x as y\n"})
    assert reexports() == ["c: from b import x (it comes from a)"]


def listed_imports(mods: dict | None = None) -> list[str]:
    "Names a package module lists in `__all__` but imports from another module (a re-export offered to `import *`)."
    mods = mods if mods is not None else modules()
    out = []
    for name, f in mods.items():
        if f.name == "__init__.py": continue
        tree = ast.parse(f.read_text())
        imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        listed = [n.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                  for n in getattr(node.value, "elts", []) if isinstance(n, ast.Constant)]
        out += [f"{name}: {n}" for n in listed if n in imported]
    return out


def test_no_module_lists_what_it_imports():
    "A module's `__all__` holds what it defines: no name imported from another module offered again."
    assert not listed_imports(), listed_imports()


def test_the_listed_import_scan_sees_what_it_looks_for(tmp_path, monkeypatch):
    fake_package(tmp_path, monkeypatch, {"a.py": "y = 2\n", "b.py": "from .a import y\n__all__ = ['y', 'z']\nz = 3\n"})
    assert listed_imports() == ["b: y"]


# one place builds a run, one trains it: a Trainer is constructed in `training.run.build_run` (and by `Trainer.resume`,
# in the module that defines it), an Ensemble or a CapturedStep in `training.fit`
BUILDERS = {"Trainer": {"training.run", "training.trainer"}, "Ensemble": {"training.fit"}, "CapturedStep": {"training.fit"}}


def constructions() -> list[str]:
    "'module: Name' for every call of a run class outside the module allowed to construct it."
    bad = []
    for name, f in modules().items():
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.Call): continue
            fn = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
            if fn in BUILDERS and name not in BUILDERS[fn]: bad.append(f"{name}: {fn}(...)")
    return sorted(bad)


def test_runs_are_built_in_one_place():
    assert not constructions(), constructions()


def test_the_construction_scan_sees_one(tmp_path, monkeypatch):
    fake_package(tmp_path, monkeypatch, {"training/__init__.py": "", "training/run.py": "t = Trainer(1)\n",
                                         "repro/__init__.py": "", "repro/x.py": "import m\nm.Ensemble([])\nTrainer(2)\n"})
    assert constructions() == ["repro.x: Ensemble(...)", "repro.x: Trainer(...)"]


def test_design_lists_every_module_as_the_code_says():
    "DESIGN.md's table of modules is generated (`tools/design_table.py`): one line per module, none missing, none stale."
    import subprocess, sys
    root = PKG.parent
    r = subprocess.run([sys.executable, str(root / "tools" / "design_table.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (root / "DESIGN.md").read_text()
    for name, f in modules().items():
        if f.name == "__init__.py" and name: continue
        assert f"| `{name or '__init__'}` |" in text, name
