"""The README and docs/ stay true: every tool command they show exists and accepts the flags it
uses, and the README stays a page for users (its length, its links)."""
from __future__ import annotations

import contextlib
import io
import re
import runpy
import shlex
import subprocess
import sys

import pytest
from locations import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = {path.name: path.read_text(encoding="utf-8") for path in sorted((REPO / "docs").glob("*.md"))}
TEXTS = [README, *DOCS.values()]  # the commands they show are checked alike


def _shell_commands() -> list:
    """Commands in the README's bash blocks, continuation lines joined, env assignments dropped."""
    commands = []
    blocks = [b for text in TEXTS for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]
    for block in blocks:
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("  #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            words = shlex.split(line)
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words.pop(0)
            commands.append(words)
    for text in TEXTS:  # e.g. the commands of the figures tables
        for inline in re.findall(r"`(python [^`]+)`", text):
            commands.append(shlex.split(inline))
    return commands


def _script_commands():
    for words in _shell_commands():
        if len(words) >= 2 and words[0] == "python" and words[1].endswith(".py"):
            yield words[1], [w.split("=", 1)[0] for w in words[2:] if w.startswith("--")]


def _yolo3_commands():
    """``(command words, flags)`` of every ``yolo3 COMMAND ...`` line (``yolo3 benchmark NAME``)."""
    for words in _shell_commands():
        if len(words) >= 2 and words[0] == "yolo3":
            depth = 3 if words[1] == "benchmark" else 2
            yield words[1:depth], [w.split("=", 1)[0] for w in words[depth:] if w.startswith("--")]


def _cli_help(command) -> str:
    from yolo3.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*command, "--help"])  # main returns argparse's exit code, never exits
    assert code == 0
    return out.getvalue()


def test_every_readme_yolo3_command_exists_and_accepts_its_flags():
    commands = list(_yolo3_commands())
    assert {c[0] for c, _ in commands} >= {"train", "convert", "detect", "evaluate", "export",
                                           "kmeans", "check", "voc", "coco"}
    helps = {}
    for command, flags in commands:
        key = tuple(command)
        if key not in helps:
            helps[key] = _cli_help(command)
        for flag in flags:
            assert re.search(rf"{re.escape(flag)}\b", helps[key]), \
                f"README passes {flag} to yolo3 {' '.join(command)}, which does not accept it"


def _help_text(script: str) -> str:
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [script, "--help"]
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
            runpy.run_path(str(REPO / script), run_name="__main__")
    finally:
        sys.argv = argv
    assert info.value.code == 0
    return out.getvalue()


def test_readme_shows_the_two_commands_test_first():
    test_at = README.index("bash tools/test.sh")
    demo_at = README.index("bash tools/demo.sh")
    assert test_at < demo_at
    assert (REPO / "tools" / "test.sh").is_file() and (REPO / "tools" / "demo.sh").is_file()


def test_every_readme_tool_command_exists_and_accepts_its_flags():
    commands = list(_script_commands())
    scripts = {script for script, _ in commands}
    assert {"train_multi_gpu.py", "tools/benchmark_training.py", "tools/benchmark_data.py",
            "tools/benchmark_inference.py", "tools/benchmark_convert.py",
            "tools/benchmark_recipe.py", "tools/benchmark_export.py"} <= scripts
    start = README.index("## The command line")
    table = README[start:README.index("\n## ", start + 1)]
    for script in REPO.glob("tools/*.py"):  # every tool script is named in the command table
        assert f"tools/{script.name}" in table or script.name.startswith("benchmark_"), script.name
    helps = {}
    for script, flags in commands:
        assert (REPO / script).is_file(), f"README runs {script}, which does not exist"
        if script not in helps:
            helps[script] = _help_text(script)
        for flag in flags:
            assert re.search(rf"{re.escape(flag)}\b", helps[script]), \
                f"README passes {flag} to {script}, which does not accept it"


def test_demo_takes_a_relative_output_from_where_it_is_run(tmp_path):
    """demo.sh changes into the project first; a relative ``--output`` still means the caller's
    folder (its own argument parsing, run from ``tmp_path``, stopped before any set-up)."""
    script = (REPO / "tools" / "demo.sh").read_text()
    parsing = script[:script.index("\ndone\n") + len("\ndone\n")]
    probe = tmp_path / "parse.sh"
    probe.write_text(parsing.replace('cd "$(dirname "$0")/.."', f'cd "{REPO}"') +
                     'echo "$OUTPUT"\n')
    run = lambda *args: subprocess.run(["bash", str(probe), *args], cwd=tmp_path, text=True,
                                       capture_output=True, check=True).stdout.strip()
    assert run("--output", "mine") == f"{tmp_path}/mine"
    assert run("--output", "/abs/out") == "/abs/out"
    assert run() == "demo_output"  # the default stays in the project


def test_demo_options_in_readme_exist_with_their_defaults():
    demo = (REPO / "tools" / "demo.sh").read_text()
    start = README.index("Options (defaults): `--num-images")
    section = README[start:README.index("\n\n", start)]
    options = re.findall(r"`(--[a-z-]+) [A-Z]+` \(`?([\w.]+)`?", section)
    assert len(options) == 7, options
    for flag, default in options:
        assert f"{flag})" in demo, f"README names demo option {flag}, demo.sh does not parse it"
        variable = re.search(rf"{re.escape(flag)}\) (\w+)=", demo).group(1)
        assert re.search(rf"^{variable}={re.escape(default)}$", demo, flags=re.M), \
            f"README says {flag} defaults to {default}; demo.sh sets {variable} otherwise"


def test_the_readme_is_a_page_for_users():
    """At most about 400 lines; the full figures, the recipe and the architecture live in docs/,
    and every link it makes to them (and to its own headings) leads somewhere."""
    assert len(README.splitlines()) <= 400
    for name in ("benchmarks.md", "recipe.md", "architecture.md", "guide.md", "ci.md"):
        assert f"docs/{name}" in README and name in DOCS
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", README, flags=re.M)}
    for target in re.findall(r"\]\(([^)]+)\)", README):
        path, _, anchor = target.partition("#")
        if not path:
            assert anchor in anchors, target
            continue
        assert (REPO / path).exists(), target
        if anchor:
            text = (REPO / path).read_text(encoding="utf-8")
            assert anchor in {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}, \
                target


def _anchor(heading: str) -> str:
    """A heading's link anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_guides_line_counting_example_counts_what_crosses(monkeypatch, capsys):
    """The guide's tracking example, run as written: a detector that sees two objects, one
    moving down across the line y = 240, one moving sideways above it; it prints 1."""
    import numpy as np

    import yolo3.inference.detector as detector_module
    import yolo3.inference.video as video

    guide = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```python\n(.*?)```", guide, flags=re.S)
               if "crossed the line" in b]

    class Detector:
        t = 0

        def detect(self, frame):
            self.t += 1
            down = [300, 180 + 3 * self.t, 340, 220 + 3 * self.t]  # centre from y 203 to 317
            side = [50 + 3 * self.t, 60, 90 + 3 * self.t, 100]
            return np.array([down, side], float), np.array([0.9, 0.9]), np.array([0, 1])

    class Video:
        def frames(self):
            return (np.zeros((480, 640, 3), np.uint8) for _ in range(40))

    monkeypatch.setattr(detector_module, "load_detector", lambda *a, **kw: Detector())
    monkeypatch.setattr(video, "open_video", lambda path: Video())
    exec(compile(block, "docs/guide.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "1 objects crossed the line"


def test_every_section_the_library_cites_is_a_heading_of_that_page():
    """A message that sends the user to "(docs/benchmarks.md: Frozen batch norm)" or
    "(README: ...)" names a heading that exists, so that a moved section fails here."""
    import ast
    import re
    cited = []
    for path in sorted((REPO / "yolo3").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                cited += [(path.name, page, section.strip()) for page, section in
                          re.findall(r"(README|docs/[\w-]+\.md): ([^)\n]+)\)", node.value)]
    assert len(cited) >= 3  # the warnings of freeze_bn, bn_stats_images and --freeze-bn
    for source, page, section in cited:
        text = (REPO / ("README.md" if page == "README" else page)).read_text(encoding="utf-8")
        headings = [line.lstrip("#").strip().lower() for line in text.splitlines()
                    if line.startswith("#")]
        assert any(h.startswith(section.lower()) for h in headings), (source, page, section)
