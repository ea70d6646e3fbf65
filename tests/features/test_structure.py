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
from pathlib import Path
from typing import List, Tuple

import pytest
from locations import REPO

from yolo3.config.specs import SPECS, all_specs, get_spec, spec_names

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
        if spec.anchor_free:  # see tests/config/test_specs.py
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


def _contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    return config


def test_import_contracts_are_kept():
    proc = _lint_imports(REPO, REPO)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    count = sum(1 for section in _contracts().sections() if section.startswith("importlinter:contract"))
    assert count == 4 and f"{count} kept, 0 broken" in proc.stdout


def test_the_contracts_catch_an_upward_import(tmp_path):
    """A copy of the package with one upward import (the registry's mask rule reaching the
    training loop) breaks the folders contract, and one TensorFlow import in ops/ the boundary."""
    shutil.copytree(PACKAGE, tmp_path / "yolo3", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path / ".importlinter")
    masks = tmp_path / "yolo3" / "config" / "masks.py"
    masks.write_text(masks.read_text() + "\nfrom yolo3.training import train  # noqa\n")
    boxes = tmp_path / "yolo3" / "ops" / "boxes.py"
    boxes.write_text(boxes.read_text() + "\nimport tensorflow  # noqa\n")
    proc = _lint_imports(tmp_path, tmp_path)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "yolo3.config is not allowed to import yolo3.training" in proc.stdout, proc.stdout[-3000:]
    assert "yolo3.ops is not allowed to import tensorflow" in proc.stdout, proc.stdout[-3000:]


def _layers() -> List[str]:
    """The folders and top-level modules of the layers contract, top to bottom."""
    text = _contracts()["importlinter:contract:folders"]["layers"]
    return [name.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
            for name in re.split(r"[:|]", line)]


def test_every_module_lies_in_a_folder_of_the_layers():
    """Each module is one of the layers or inside one (the package's own ``__init__`` excepted),
    so a new module cannot escape the contract; the layers are the package's folders."""
    layers = _layers()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "yolo3" and not any(name == f or name.startswith(f + ".") for f in layers):
            missing.append(name)
    assert not missing, f"modules in no layer of .importlinter: {missing}"
    folders = {f"yolo3.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= set(layers), folders - set(layers)


def test_each_named_tensorflow_exception_imports_tensorflow_itself():
    """The backend boundary names each module that may import TensorFlow below the applications;
    an entry whose module no longer imports it must go (the list only shrinks)."""
    ignored = _contracts()["importlinter:contract:tensorflow-only-where-named"]["ignore_imports"]
    entries = [line.split("->")[0].strip() for line in ignored.splitlines() if "->" in line]
    assert len(entries) == len(set(entries))
    for module in entries:
        path = REPO.joinpath(*module.split(".")).with_suffix(".py")
        text = path.read_text(encoding="utf-8")
        assert re.search(r"^\s*(import tensorflow|from tensorflow)", text, re.M), module


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


def loss_option_signatures(source: str, names) -> List[tuple]:
    """``(line, function, [names])`` of every function whose parameters spell out loss options
    one by one (``names``) instead of taking the one LossOptions."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            spelled = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} & names
            if spelled:
                found.append((node.lineno, node.name, sorted(spelled)))
    return found


def test_loss_options_travel_whole():
    """Issue 69: no signature lists the loss's options one by one (7 did) but keras-yolo3's own
    (the compat face's ``ignore_thresh``), LossOptions' maker from a recipe and 0.2's gains
    check beside it."""
    from dataclasses import fields

    from yolo3.config.loss_options import LEGACY_NAMES, LossOptions
    names = {f.name for f in fields(LossOptions)} | set(LEGACY_NAMES)
    assert loss_option_signatures("def f(x, options=None, box_gain=1.0): pass", names) == [
        (1, "f", ["box_gain"])]  # the checker catches one
    allowed = {("compat/keras_yolo3.py", "yolo_loss"), ("config/loss_options.py", "from_recipe"),
               ("config/loss_options.py", "check_gains")}  # 0.2's yolo3.loss.check_gains
    found = [(str(p.relative_to(PACKAGE)), name, spelled) for p in LIBRARY
             for _, name, spelled in loss_option_signatures(p.read_text(encoding="utf-8"), names)]
    assert [f for f in found if f[:2] not in allowed] == []


# the heads' facts (config) and the head kinds (heads/): where the kinds differ
HEAD_MODULES = {"config/heads.py", "config/anchor_free_head.py", "config/head_kinds.py",
                "heads/base.py", "heads/anchor.py", "heads/anchor_free.py", "heads/registry.py"}


def _tests_the_head_kind(test: ast.AST) -> bool:
    """Whether a condition asks which kind of head it has: ``.anchor_free``, ``head is (not)
    None``, ``isinstance(x, ...Head)``."""
    for node in ast.walk(test):
        if isinstance(node, (ast.Attribute, ast.Name)) and "anchor_free" in (
                getattr(node, "attr", None), getattr(node, "id", None)):
            return True
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot))
                                                 for o in node.ops):
            sides = [node.left, *node.comparators]
            if any("head" in getattr(x, "id", getattr(x, "attr", "")) for x in sides) and any(
                    isinstance(x, ast.Constant) and x.value is None for x in sides):
                return True
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"
                and any(getattr(n, "id", "").endswith("Head") for n in ast.walk(node.args[1]))):
            return True
    return False


def head_kind_branches(source: str) -> List[int]:
    """Lines of every ``if``, ternary, ``while`` and comprehension filter that tests the head's
    kind (issue 69 counts them: the head should answer instead)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        tests = ([node.test] if isinstance(node, (ast.If, ast.IfExp, ast.While))
                 else node.ifs if isinstance(node, ast.comprehension) else [])
        found += [t.lineno for t in tests if _tests_the_head_kind(t)]
    return sorted(found)


# issue 69 takes the branches on the head's kind outside the head modules to 0: the ceiling only
# falls (25 by this count on 2026-11-29, 27 by the issue's; 24 once the heads gave their priors;
# 22 once the head kinds (yolo3/heads/) gave the targets, training model, decoding and output
# convolutions: ops/decode.py's two are yolo3 0.6's decode functions, given a head's facts;
# 18 once the head kinds refit, show and write their anchors: the data step, the run folder;
# 13 with the benchmarks' targets encoded by the head, the heads' darknet_layer and a dead branch;
# 9 with the recipe benchmark's anchors refitted by the head, and the variants' two lists;
# 6 once every variant held its head's facts (Darknet's anchor head too), which answer its masks
# and channels, and ModelInfo.of_head took the facts of a head; 0 once a model file's facts
# always held a head (read by its recorded kind, config/head_kinds.py), the kind took the anchors
# a file gives where it has any (with_found_anchors), and yolo3 0.6's decode functions, below
# the heads, read its two kinds from a table by name)
HEAD_KIND_BRANCHES_CEILING = 0


def test_branches_on_the_heads_kind_do_not_grow():
    assert head_kind_branches("x = 1 if spec.anchor_free else 2\nif head is None: pass\n"
                              "y = [h for h in hs if isinstance(h, AnchorHead)]") == [1, 2, 3]
    found = {str(p.relative_to(PACKAGE)): head_kind_branches(p.read_text(encoding="utf-8"))
             for p in LIBRARY if str(p.relative_to(PACKAGE)) not in HEAD_MODULES}
    found = {k: v for k, v in found.items() if v}
    assert sum(map(len, found.values())) <= HEAD_KIND_BRANCHES_CEILING, found


# The input size's names (docs/architecture.md's table of owners, "the input size"): ``input_hw`` is
# the network input's (height, width) in code. Only these public signatures and records keep
# the other names, which their callers and files use: the user's ``input_size`` (one side or
# (h, w)), keras-yolo3's and yolo3 0.6's ``input_shape``, keras-yolo3's ``model_image_size``.
INPUT_SIZE_NAMES = {"input_size", "input_shape", "model_image_size", "fixed_hw"}
PUBLIC_INPUT_SIZE_NAMES = {
    ("config/train_config.py", "ModelSettings"),  # the setting, as in settings files
    ("checkpoint/metadata.py", "ModelInfo"), ("checkpoint/metadata.py", "write_sidecars"),
    ("checkpoint/darknet_convert.py", "ConvertResult"),
    ("data/dataset_config.py", "DatasetConfig"), ("data/dataset_config.py", "from_arguments"),
    ("inference/detector.py", "__init__"), ("inference/detector.py", "from_body"),
    ("inference/detector.py", "_setup"), ("inference/detector.py", "load_detector"),
    ("inference/detector.py", "_exported_detector"),
    ("inference/keras_yolo3_args.py", "resolve_yolo_kwargs"),
    ("export/darknet.py", "export_darknet"), ("darknet/layout.py", "layout_cfg_text"),
    ("modeling/bodies.py", "build_spec_body"), ("modeling/bodies.py", "build_body"),
    ("checkpoint/darknet_convert.py", "build_model"),
    ("ops/decode.py", "yolo_head"), ("ops/decode.py", "correct_boxes"),
    ("ops/decode.py", "boxes_and_scores"), ("ops/decode.py", "raw_boxes_and_scores"),
    ("ops/decode.py", "decode_detections"), ("ops/targets.py", "preprocess_true_boxes"),
    ("ops/targets.py", "encode_targets"), ("utils.py", "get_random_data"),
}
KERAS_SHAPE_METHODS = {"build", "compute_output_shape", "compute_output_spec"}


def input_size_names(path: Path) -> List[Tuple[str, str]]:
    """``(owner, name)`` of each parameter or annotated field named as an input size otherwise
    than ``input_hw`` in the module at ``path`` (compat/ holds keras-yolo3's own names)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in KERAS_SHAPE_METHODS:
                continue
            found += [(node.name, a.arg) for a in node.args.args + node.args.kwonlyargs
                      if a.arg in INPUT_SIZE_NAMES]
        elif isinstance(node, ast.ClassDef):
            found += [(node.name, item.target.id) for item in node.body
                      if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                      and item.target.id in INPUT_SIZE_NAMES]
    return found


def test_the_input_size_has_one_name_in_code():
    stray, kept = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("compat/"):
            continue
        for owner, name in input_size_names(path):
            if (where, owner) in PUBLIC_INPUT_SIZE_NAMES:
                kept.add((where, owner))
            else:
                stray.append(f"{where}: {owner}({name})")
    assert not stray, stray
    assert kept == PUBLIC_INPUT_SIZE_NAMES, PUBLIC_INPUT_SIZE_NAMES - kept  # no stale entry


def test_the_flags_input_side_agrees_with_the_one_input_size_check():
    """``--input-size``'s parse-time type (kept light: no NumPy at ``--help``) refuses what
    ``check_input_size`` refuses, for every variant: the same multiple, every side it takes
    passes the check."""
    import inspect

    from yolo3.cli.flags import INPUT_SIDE
    from yolo3.config.specs import SPECS, check_input_size
    default = inspect.signature(check_input_size).parameters["multiple"].default
    assert INPUT_SIDE.multiple == default == max(s.max_stride for s in SPECS.values())
    for side in range(INPUT_SIDE.lo, int(INPUT_SIDE.hi) + 1, INPUT_SIDE.multiple):
        assert check_input_size(side) == (side, side)


def test_the_input_size_check_sees_a_stray_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(input_size, input_hw):\n    pass\n\n\nclass C:\n"
                      "    input_shape: tuple = (1, 1)\n    def build(self, input_shape):\n"
                      "        pass\n")
    assert input_size_names(module) == [("f", "input_size"), ("C", "input_shape")]


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
        if path == PACKAGE / "core" / "fileio.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and (node.value.id, node.attr) in RENAMES:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not offenders, "write through yolo3.core.fileio instead:\n" + "\n".join(offenders)


# reading a JSON or CSV file whole: only through core.fileio's readers, which name the file and
# the cause (a binary history.csv or a cut run.json is a FileFormatError, exit 2, never an
# "unexpected UnicodeDecodeError"); the manifest reads a damaged record as one listing nothing
# (then every file there is the user's, the safe side)
FILE_READERS = {("json", "load"), ("csv", "DictReader"), ("csv", "reader")}
OWN_READERS = {PACKAGE / "core" / "fileio.py", PACKAGE / "core" / "manifest.py"}


def test_one_module_reads_json_and_csv_files():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in OWN_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and (node.value.id, node.attr) in FILE_READERS:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not offenders, "read through yolo3.core.fileio (read_json, read_csv_rows):\n" + \
        "\n".join(offenders)


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


def where_tested(module: Path) -> Path:
    """Where a library module's tests live: ``yolo3/<folder>/<m>.py`` in
    ``tests/<folder>/test_<m>.py``; a top-level module ``yolo3/<m>.py`` in ``tests/test_<m>.py``."""
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return REPO.joinpath("tests", *parts[:-1], f"test_{parts[-1]}.py")


def test_tests_mirror_the_package():
    assert where_tested(PACKAGE / "training" / "stages.py") == \
        REPO / "tests" / "training" / "test_stages.py"
    assert where_tested(PACKAGE / "model.py") == REPO / "tests" / "test_model.py"


def test_every_library_module_has_its_test_module():
    """Each module outside the applications (the command line, the benchmarks: tested through
    their commands in tests/features and tests/cli) has its test module where the package's
    layout says; feature tests live in tests/features."""
    library = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"
               and not {"cli", "benchmarks"} & set(p.relative_to(PACKAGE).parts)]
    missing = [str(where_tested(p).relative_to(REPO)) for p in sorted(library)
               if not where_tested(p).is_file()]
    assert not missing, f"library modules without their test module: {missing}"
