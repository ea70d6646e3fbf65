"""The structure the features stand on: the spec registry is the only place that branches on a
variant name, light modules do not import TensorFlow, and one CLI serves every command."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from yolo3.specs import SPECS, all_specs, get_spec, spec_names

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
    assert not offenders, "variant names branched on outside yolo3/specs.py:\n" + "\n".join(offenders)


def test_registry_lookup_and_facts():
    assert spec_names() == ["yolov3", "yolov3-spp", "tiny"]
    assert get_spec("yolov3-tiny") is SPECS["tiny"] and get_spec(SPECS["tiny"]) is SPECS["tiny"]
    with pytest.raises(ValueError, match="unknown model 'yolo9'.*yolov3, yolov3-spp, tiny"):
        get_spec("yolo9")
    for spec in all_specs():
        assert spec.default_anchors().shape == (len(spec.anchors), 2)
        masks = spec.default_masks()
        assert len(masks) == spec.num_scales and sorted(sum(masks, [])) == list(range(len(spec.anchors)))
        assert spec.check_input_size(96) == (96, 96)
        with pytest.raises(ValueError, match="multiple of 32"):
            spec.check_input_size((96, 100))
        blocks = spec.blocks()
        assert len(blocks) == len(set(blocks)) and blocks[-1].startswith("output_s")
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
        "import yolo3.specs, yolo3.metadata, yolo3.anchors, yolo3.boxes, yolo3.history, yolo3.cli\n"
        "import yolo3.darknet.layout, yolo3.evaluation, yolo3.precision\n"
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
