"""The structure the features stand on: the spec registry is the only place that branches on a
variant name, light modules do not import TensorFlow, and one CLI serves every command."""
from __future__ import annotations

import ast
import configparser
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import List, Tuple

import pytest

from yolo3.config.specs import SPECS, all_specs, get_spec, spec_names

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "yolo3"
VARIANT_NAMES = {n for s in all_specs() for n in (s.name, *s.aliases)}


def _variant_literals(node: ast.AST):
    """String constants naming a variant directly inside ``node`` (a tuple/list/set or a constant)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in VARIANT_NAMES]


def variant_branches(source: str):
    """``(line, literal)`` of every comparison, dict key, match case or argparse ``choices`` that
    spells out a variant name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                found += [(node.lineno, v) for v in _variant_literals(side)]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, k.value) for k in node.keys
                      if isinstance(k, ast.Constant) and k.value in VARIANT_NAMES]
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, v.value) for v in ast.walk(node.pattern)
                      if isinstance(v, ast.Constant) and v.value in VARIANT_NAMES]
        elif isinstance(node, ast.keyword) and node.arg == "choices":
            found += [(node.value.lineno, v) for v in _variant_literals(node.value)]
    return found


def test_the_checker_catches_branches():
    code = ('if model == "tiny": pass\nx = {"yolov3": 1}\nok = m in ("yolov3", "other")\n'
            'p.add_argument("--m", choices=["tiny", "yolov3"])\nname = "tiny"  # a value is fine\n')
    assert [v for _, v in variant_branches(code)] == ["tiny", "yolov3", "yolov3", "tiny", "yolov3"]


def test_no_module_outside_the_registry_compares_a_variant_name():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "specs.py":
            continue
        for line, value in variant_branches(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(REPO)}:{line}: {value!r}")
    assert not offenders, "variant names branched on outside yolo3/config/specs.py:\n" + "\n".join(offenders)


def test_registry_lookup_and_facts():
    assert spec_names() == ["yolov3", "yolov3-spp", "tiny", "tiny-af", "yolov3-af"]
    assert get_spec("yolov3-tiny") is SPECS["tiny"] and get_spec(SPECS["tiny"]) is SPECS["tiny"]
    with pytest.raises(ValueError, match="unknown variant 'yolo9'.*yolov3, yolov3-spp, tiny"):
        get_spec("yolo9")
    for spec in all_specs():
        assert spec.default_anchors().shape == (len(spec.anchors), 2)
        assert spec.check_input_size(96) == (96, 96)
        with pytest.raises(ValueError, match="multiple of 32"):
            spec.check_input_size((96, 100))
        blocks = spec.blocks()
        assert len(blocks) == len(set(blocks))
        if spec.anchor_free:  # see tests/test_specs.py
            assert blocks[-1].endswith("_cls_pred") and spec.darknet_sources[0] == spec.base
            continue
        masks = spec.default_masks()
        assert len(masks) == spec.num_scales and sorted(sum(masks, [])) == list(range(len(spec.anchors)))
        assert blocks[-1].startswith("output_s")
        assert spec.darknet_sources[0] == spec.name
    assert get_spec("tiny").default_masks() == [[3, 4, 5], [0, 1, 2]]
    assert get_spec("yolov3-spp").default_masks(6) == [[4, 5], [2, 3], [0, 1]]
    assert len(get_spec("yolov3-spp").blocks()) == len(get_spec("yolov3").blocks()) + 1


def _run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_light_modules_do_not_import_tensorflow():
    out = _run_python(
        "import sys\n"
        "import yolo3, yolo3.darknet.cfg, yolo3.darknet.weights, yolo3.data.annotations\n"
        "import yolo3.config.specs, yolo3.checkpoint.metadata, yolo3.ops.anchors, yolo3.ops.boxes, yolo3.training.history, yolo3.cli\n"
        "import yolo3.darknet.layout, yolo3.evaluation.metrics, yolo3.config.precision\n"
        "from yolo3.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    assert out.strip() == "[]", out


@pytest.mark.parametrize("script", sorted(str(p.relative_to(REPO)) for p in
                                          list((REPO / "tools").glob("*.py"))) + ["train_multi_gpu.py"])
def test_every_tool_help_is_light(script):
    """``--help`` of every tool answers without importing TensorFlow (so in well under a second)."""
    out = _run_python(
        "import runpy, sys, io, contextlib\n"
        f"sys.argv = [{script!r}, '--help']\n"
        "buf = io.StringIO()\n"
        "try:\n"
        "    with contextlib.redirect_stdout(buf):\n"
        f"        runpy.run_path({script!r}, run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "assert 'usage:' in buf.getvalue()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    assert out.strip().splitlines()[-1] == "[]", out


def test_one_cli_lists_every_command_and_every_command_is_a_console_script():
    from yolo3.cli import COMMANDS, build_parser
    help_text = build_parser().format_help()
    setup = (REPO / "setup.py").read_text()
    for name, module in COMMANDS.items():
        assert re.search(rf"^\s+{name}\s", help_text, flags=re.M), name
        assert f'"yolo3-{name}={module}:main"' in setup, name
    assert '"yolo3=yolo3.cli:main"' in setup
    assert set(COMMANDS) >= {"train", "detect", "convert", "evaluate", "export", "kmeans", "voc",
                             "coco", "check", "plot", "synth", "benchmark"}


@pytest.mark.parametrize("argv", [
    ["detect", "--model", "{tmp}/none.keras", "--input", "{tmp}/c.txt", "--output", "{tmp}/o"],
    ["evaluate", "--annotations", "{tmp}/none.txt", "--classes", "{tmp}/c.txt", "--detections",
     "{tmp}/d.json", "--out", "{tmp}/e.json"],
    ["export", "--model", "{tmp}/none.keras", "--tflite", "{tmp}/m.tflite"],
    ["convert", "{tmp}/none.keras", "{tmp}/o.cfg", "{tmp}/o.weights"],
    ["kmeans", "--annotations", "{tmp}/none.txt", "--out", "{tmp}/a.txt"],
    ["check", "--annotations", "{tmp}/none.txt"],
    ["plot", "--history", "{tmp}/none.csv", "--out", "{tmp}/p.png"],
    ["voc", "--voc-root", "{tmp}", "--out", "{tmp}/v.txt"],
    ["coco", "--annotations", "{tmp}/none.json", "--images", "{tmp}", "--out", "{tmp}/c.txt"],
    ["train", "--annotations", "{tmp}/none.txt", "--classes", "{tmp}/c.txt", "--output", "{tmp}/t"],
])
def test_bad_input_is_exit_2_with_one_prefix_everywhere(tmp_path, capsys, argv):
    from yolo3.cli import main
    (tmp_path / "c.txt").write_text("a\n")
    args = [a.format(tmp=tmp_path) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"yolo3 {argv[0]}: error: ") and "Traceback" not in err
    assert "none" in err or "not found" in err


def test_unexpected_errors_are_one_line_exit_1(capsys, monkeypatch):
    from yolo3.cli.common import execute

    def boom(args):
        raise RuntimeError("deep inside\nmore lines")
    assert execute("detect", boom, None) == 1
    err = capsys.readouterr().err
    assert err.startswith("yolo3 detect: error: unexpected RuntimeError: deep inside")
    assert "more lines" not in err and "--debug" in err
    monkeypatch.setenv("YOLO3_TRACEBACK", "1")
    with pytest.raises(RuntimeError):
        execute("detect", boom, None)


# -- the floors (.importlinter) ----------------------------------------------------------------------

LIBRARY = [p for p in sorted(PACKAGE.rglob("*.py"))
           if p.parts[len(PACKAGE.parts)] != "cli" and p != PACKAGE / "__init__.py"]


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    code = "import sys\nfrom importlinter.cli import lint_imports\nsys.exit(lint_imports())\n"
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_import_contracts_are_kept():
    proc = _lint_imports(REPO, REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "3 kept, 0 broken" in proc.stdout


def test_the_contracts_catch_an_upward_import(tmp_path):
    """A copy of the package with one upward import (the mask rule reaching the registry, the cycle
    the renovation removed) breaks the floors contract."""
    shutil.copytree(PACKAGE, tmp_path / "yolo3", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    masks = tmp_path / "yolo3" / "masks.py"
    masks.write_text(masks.read_text() + "\nfrom yolo3.config.specs import get_spec  # noqa\n")
    proc = _lint_imports(tmp_path, tmp_path)
    assert proc.returncode != 0 and "yolo3.config.masks -> yolo3.config.specs" in proc.stdout, proc.stdout[-3000:]


def _floor_modules() -> set:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    text = config["importlinter:contract:floors"]["layers"]
    return {name.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")
            for name in re.split(r"[:|]", line)}


def test_the_tensorflow_ban_covers_exactly_the_floors_below_the_ops():
    """The forbidden contract's list is the floors from "pure formats" down, so a module added to
    those floors cannot escape the ban."""
    text = (REPO / ".importlinter").read_text(encoding="utf-8")  # raw: configparser drops comments
    floors = text.split("[importlinter:contract:floors]", 1)[1].split("\n[", 1)[0]
    lines = floors.split("layers =", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("# pure formats"))
    below = {name.strip() for line in lines[start:] if line.strip() and not line.strip().startswith("#")
             for name in re.split(r"[:|]", line)}
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    banned = config["importlinter:contract:no-tensorflow-below-ops"]["source_modules"].split()
    assert len(banned) == len(set(banned)) and set(banned) == below, set(banned) ^ below


def test_every_module_stands_on_a_floor():
    """Each module is in the floors contract itself or inside a package that is (package faces that
    only re-export, and the never-imported peer script, excepted)."""
    floors = _floor_modules()
    exempt = {"yolo3", "yolo3.data", "yolo3.darknet"}
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name in exempt or any(name == f or name.startswith(f + ".") for f in floors):
            continue
        missing.append(name)
    assert not missing, f"modules on no floor of .importlinter: {missing}"


_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")
_DYNAMIC = ("import_module", "__import__", "def __getattr__")


def dynamic_imports(path: Path, modules: set) -> set:
    """The modules a file may load by name: in a file that calls ``importlib.import_module`` or
    ``__import__`` or defines a module ``__getattr__``, every string literal naming one of
    ``modules`` (lazy tables, old-path tables, the benchmark registry)."""
    text = path.read_text(encoding="utf-8")
    if not any(word in text for word in _DYNAMIC):
        return set()
    return {node.value for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and _MODULE_NAME.match(node.value) and node.value in modules}


def import_cycles(package: str, root: Path) -> list:
    """Pairs ``(a, b)`` where ``a`` imports ``b`` and ``b`` leads back to ``a``: static imports at
    any level (function-level included, grimp) plus :func:`dynamic_imports`."""
    import grimp  # installed with import-linter (the test extra)
    graph = grimp.build_graph(package, cache_dir=None)
    modules = set(graph.modules)
    for module in sorted(modules):
        parts = module.split(".")
        path = root.joinpath(*parts[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if path.is_file():
            for target in dynamic_imports(path, modules) - {module}:
                graph.add_import(importer=module, imported=target)
    return [(a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
            if graph.chain_exists(importer=b, imported=a)]


def test_no_import_cycles_function_level_and_dynamic_imports_included():
    assert not import_cycles("yolo3", PACKAGE)


def test_the_cycle_check_follows_module_getattr_and_import_module(tmp_path, monkeypatch):
    package = tmp_path / "cyc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyc import b\n")
    (package / "b.py").write_text("def __getattr__(name):\n    import importlib\n"
                                  "    return importlib.import_module('cyc.a')\n")
    (package / "c.py").write_text("import importlib\nM = importlib.import_module('cyc.d')\n")
    (package / "d.py").write_text("def f():\n    from cyc import c\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {frozenset(pair) for pair in import_cycles("cyc", package)}
    assert frozenset({"cyc.a", "cyc.b"}) in found and frozenset({"cyc.c", "cyc.d"}) in found


def _function_level_yolo3_imports(path: Path):
    found = []

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            here = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if inside and isinstance(child, ast.ImportFrom) and (child.level or
                                                                 (child.module or "").startswith("yolo3")):
                found.append(child.lineno)
            elif inside and isinstance(child, ast.Import) and any(a.name.startswith("yolo3")
                                                                  for a in child.names):
                found.append(child.lineno)
            visit(child, here)
    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_at_most_ten_function_level_imports_outside_the_cli_each_with_its_reason():
    found = [(p, line) for p in LIBRARY for line in _function_level_yolo3_imports(p)]
    assert len(found) <= 10, found
    for path, line in found:
        text = path.read_text(encoding="utf-8").splitlines()[line - 1]
        assert "#" in text, f"{path.relative_to(REPO)}:{line}: say why this import is inside a function"


def test_the_library_logs_and_only_the_cli_prints():
    offenders = []
    for path in LIBRARY:
        if path.parts[len(PACKAGE.parts)] == "benchmarks":  # benchmarks print their tables
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, offenders


RENAMES = {("os", "replace"), ("os", "rename"), ("shutil", "move"), ("tempfile", "mkstemp"),
           ("tempfile", "mkdtemp")}


def test_one_module_renames_files_into_place():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "fileio.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and (node.value.id, node.attr) in RENAMES:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not offenders, "write through yolo3.core.fileio instead:\n" + "\n".join(offenders)


def test_variant_flags_keep_their_old_spelling_with_a_warning(capsys):
    from yolo3.cli import build_parser
    parser = build_parser()
    args = parser.parse_args(["benchmark", "training", "--variants", "tiny"])
    assert args.variants == ["tiny"] and capsys.readouterr().err == ""
    args = parser.parse_args(["benchmark", "training", "--models", "tiny", "yolov3"])
    assert args.variants == ["tiny", "yolov3"]
    assert "--models is now --variants" in capsys.readouterr().err
    args = parser.parse_args(["benchmark", "recipe", "--model", "tiny"])
    assert args.variant == "tiny" and "--model is now --variant" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["benchmark", "recipe", "--variant", "yolo9"])


# Library modules written before tests mirrored the package, whose tests live in feature files.
# The list may only shrink (it is empty now); a new module comes with its test module.
_TESTED_IN_FEATURE_FILES: set = set()


def _test_module_names(module: Path, stems: Counter) -> Tuple[str, List[str]]:
    """``(name, accepted test files)`` of a library module: ``yolo3/x.py`` is ``x`` and is tested in
    ``test_x.py``; ``yolo3/pkg/x.py`` is ``pkg_x``, tested in ``test_pkg_x.py`` or, when no other
    module is named ``x``, in ``test_x.py``."""
    parts = module.relative_to(REPO / "yolo3").with_suffix("").parts
    name = "_".join(parts)
    accepted = [f"test_{name}.py"]
    if len(parts) > 1 and stems[module.stem] == 1:
        accepted.append(f"test_{module.stem}.py")
    return name, accepted


def test_the_test_module_rule_qualifies_names_that_two_modules_share():
    stems = Counter({"verify": 2, "augment": 1, "train": 1})
    assert _test_module_names(REPO / "yolo3" / "train.py", stems) == ("train", ["test_train.py"])
    assert _test_module_names(REPO / "yolo3" / "data" / "augment.py", stems) == \
        ("data_augment", ["test_data_augment.py", "test_augment.py"])
    assert _test_module_names(REPO / "yolo3" / "export" / "verify.py", stems) == \
        ("export_verify", ["test_export_verify.py"])


def test_every_new_library_module_has_its_test_module():
    tests = Path(__file__).parent
    library = [p for p in (REPO / "yolo3").rglob("*.py") if p.name != "__init__.py"
               and not {"cli", "benchmarks"} & set(p.relative_to(REPO / "yolo3").parts)]
    stems = Counter(p.stem for p in library)
    missing = []
    for module in library:
        name, accepted = _test_module_names(module, stems)
        if not any((tests / f).exists() for f in accepted):
            missing.append(name)
    assert not set(missing) - _TESTED_IN_FEATURE_FILES, "new modules without their test module"
    assert not _TESTED_IN_FEATURE_FILES - set(missing), "a module got its test file: drop it here"
