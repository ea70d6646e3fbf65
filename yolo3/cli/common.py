"""What every command shares: the parser, argument blocks, and the one place that turns errors into
messages and exit codes.

Exit codes, everywhere: 0 success; 1 a failure while working (some inputs could not be read, a
check found problems, a write failed, training stopped on NaN); 2 bad input (a missing or malformed
file, an argument that cannot work; argparse's own usage errors are 2 too). Messages read
``yolo3 <command>: error: <reason>``; a bad file's reason starts with ``FILE:LINE:``. An unexpected
exception is reported in one line (``--debug``, or ``YOLO3_TRACEBACK=1``, shows the traceback),
never as a bare traceback from deep inside TensorFlow.

Nothing here imports TensorFlow: ``--help`` stays fast.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

from yolo3.cli.flags import (
    COUNT,
    COUNT0,
    FRACTION,
    INPUT_SIDE,
    OVERLAP,
    POSITIVE,
    TILE_OR_OFF,
    InputPath,
    Text,
    check_environment,
    declared_paths,
)
from yolo3.cli.relations import check_distinct_outputs, check_relations, command_of
from yolo3.core.errors import word_settings
from yolo3.core.log import NOTICE

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it
EXIT_TERMINATED = 143  # SIGTERM

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "EXIT_TERMINATED",
           "Terminated", "Parser", "make_parser", "run_command", "execute", "error", "warn",
           "configure_logging", "add_model_arguments", "add_variant_argument",
           "add_precision_argument", "add_exist_ok_argument", "add_threshold_arguments",
           "model_choices", "fraction", "positive_int", "non_negative_int", "positive_float",
           "MAX_MESSAGE", "capped", "terminate_as_interrupt", "check_arguments",
           "protect_inputs", "SideOrHeightWidth", "parse_or_exit_code"]
MAX_MESSAGE = 2000  # characters of an error message shown; the rest is counted, not printed


def prog(name: str) -> str:
    return f"yolo3 {name}"


class Parser(argparse.ArgumentParser):
    """argparse's parser with yolo3's one error format: a refused argument is one line,
    ``yolo3 <command>: error: argument --flag: reason`` (``--help`` shows the usage), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {capped(message)} ({self.prog} --help "
                                  "lists the flags)\n")


def make_parser(name: str, description: str, epilog: Optional[str] = None,
                parser: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    """The parser of command ``name`` (or ``parser``, a sub-parser, filled the same way)."""
    kwargs = dict(description=description, epilog=epilog,
                  formatter_class=argparse.RawDescriptionHelpFormatter)
    if parser is None:
        parser = Parser(prog=prog(name), **kwargs)
    else:
        parser.description, parser.epilog = description, epilog
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an unexpected error")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("--quiet", action="store_true",
                          help="only summary lines, warnings and errors (no progress bars)")
    loudness.add_argument("--verbose", action="store_true", help="also the library's debug messages")
    return parser


class ConsoleHandler(logging.Handler):
    """The library's log records as the command line shows them: information on stdout as it is,
    warnings and errors on stderr as ``yolo3 <command>: warning: ...``. The streams are looked up at
    each record, so a redirected ``sys.stdout`` gets them."""

    def __init__(self, name: str, name_of: Optional[Callable[[str], Optional[str]]] = None):
        super().__init__()
        self.command = name
        self.name_of = name_of  # a record's ``settings`` worded as this command's flags

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            settings = getattr(record, "settings", None)
            if settings and self.name_of is not None:
                message = word_settings(message, settings, self.name_of)
            if record.levelno >= logging.ERROR:
                error(self.command, message)
            elif record.levelno >= logging.WARNING:
                warn(self.command, message)
            else:
                print(message, file=sys.stdout)
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def configure_logging(name: str, quiet: bool = False, verbose: bool = False,
                      parser: Optional[argparse.ArgumentParser] = None) -> None:
    """Show the ``yolo3`` loggers' records for command ``name``: INFO and above (``--quiet``:
    NOTICE and above, :mod:`yolo3.core.log`; ``--verbose``: DEBUG too); settings a record names are
    worded as ``parser``'s flags. Replaces a handler an earlier command set."""
    logger = logging.getLogger("yolo3")
    for handler in [h for h in logger.handlers if isinstance(h, ConsoleHandler)]:
        logger.removeHandler(handler)
    logger.addHandler(ConsoleHandler(name, None if parser is None else _flags(parser).get))
    logger.setLevel(NOTICE if quiet else logging.DEBUG if verbose else logging.INFO)


def show_progress(args: argparse.Namespace) -> bool:
    """Whether a command shows progress bars: yes, unless ``--quiet`` (whose help promises none)."""
    return not getattr(args, "quiet", False)


def capped(message: object, limit: int = MAX_MESSAGE) -> str:
    """``message`` as text, cut at ``limit`` characters with the count of the rest (a value a
    user's file holds can be megabytes long)."""
    text = str(message)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def error(name: str, message: object) -> None:
    """Print ``yolo3 <name>: error: <message>`` to stderr (at most :data:`MAX_MESSAGE` characters
    of it)."""
    print(f"{prog(name)}: error: {capped(message)}", file=sys.stderr)


def warn(name: str, message: object) -> None:
    print(f"{prog(name)}: warning: {capped(message)}", file=sys.stderr)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it cleans up as on Ctrl-C (temporary files
    and folders removed by the ``finally`` blocks of :mod:`yolo3.core.fileio`)."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`Terminated` (a further SIGTERM during the
    clean-up is ignored; SIGKILL still ends the process). Only in the main thread, where Python
    delivers signals; the previous handler is put back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def execute(name: str, run: Callable[[argparse.Namespace], Optional[int]],
            args: argparse.Namespace) -> int:
    """Run a command's ``run(args)`` and map what it raises to a message and an exit code."""
    from yolo3.core.errors import CommandFailed, Yolo3Error
    if getattr(args, "parser", None) is not None:  # a benchmark's refusals name it whole
        name = command_of(args.parser)
    configure_logging(name, getattr(args, "quiet", False), getattr(args, "verbose", False),
                      getattr(args, "parser", None))
    from yolo3.cli.quiet import quiet_tensorflow
    loud = getattr(args, "verbose", False) or getattr(args, "debug", False)
    try:
        with terminate_as_interrupt(), quiet_tensorflow(not loud):
            check_arguments(args)
            code = run(args)
        return EXIT_OK if code is None else int(code)
    except CommandFailed as e:
        error(name, e)
        return EXIT_FAILED
    except Yolo3Error as e:
        error(name, _worded(e, getattr(args, "parser", None)))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        error(name, "terminated" if terminated else "interrupted")
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except OSError as e:  # a write or read that failed while working (disk full, permissions ...)
        error(name, f"{e.filename + ': ' if getattr(e, 'filename', None) else ''}"
                    f"{e.strerror or e}")
        return EXIT_FAILED
    except ModuleNotFoundError as e:  # a backend, or a package, that is not installed
        if getattr(args, "debug", False) or os.environ.get("YOLO3_TRACEBACK"):
            raise
        error(name, missing_module(e))
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the one place unexpected errors become a message
        if getattr(args, "debug", False) or os.environ.get("YOLO3_TRACEBACK"):
            raise
        first = str(e).splitlines()[0] if str(e).strip() else ""
        error(name, f"unexpected {type(e).__name__}: {capped(first, 300)} "
                    "(--debug shows the traceback)")
        return EXIT_FAILED


# Keras's backends: the module each needs, its name and what installs it
BACKEND_MODULES = {"tensorflow": ("TensorFlow", "tensorflow"), "jax": ("JAX", "jax"),
                   "jaxlib": ("JAX", "jax"), "torch": ("PyTorch", "torch")}


def missing_module(e: ModuleNotFoundError) -> str:
    """The message of a package that is not installed: a Keras backend named as the backend
    KERAS_BACKEND chose (and how to install it or choose another), any other package by name."""
    module = (e.name or "").split(".")[0] or str(e)
    if module in BACKEND_MODULES:
        label, package = BACKEND_MODULES[module]
        chosen = os.environ.get("KERAS_BACKEND", "tensorflow (Keras's default)")
        return (f"the Keras backend {label} is not installed (KERAS_BACKEND={chosen}): pip "
                f"install {package}, or set KERAS_BACKEND to one that is (tensorflow, jax, torch)")
    from yolo3.core.extras import install_hint
    return f"the package {module!r} is not installed ({install_hint(module)})"


def check_arguments(args: argparse.Namespace) -> None:
    """Everything about a command's arguments refused before any work and before a backend is
    imported, beside what argparse's declared types refused while parsing
    (:mod:`yolo3.cli.flags`): the environment variables yolo3 reads, the relations between the
    flags (:mod:`yolo3.cli.relations`), outputs that differ, and no output over an input
    (:func:`protect_inputs`)."""
    check_environment()
    parser = getattr(args, "parser", None)
    if parser is None:
        return
    check_relations(parser, args)
    check_distinct_outputs(parser, args)
    protect_inputs(args)


def protect_inputs(args: argparse.Namespace, more: Sequence[Optional[str]] = ()) -> None:
    """The one check of a command's outputs against what it reads: every declared output flag
    of ``args`` against every declared input flag and ``more`` (the images an annotation file
    lists, the files of an input folder): none may be an input, hold one, or (a folder) lie
    inside an input folder (:func:`yolo3.core.paths.check_outputs`)."""
    from yolo3.core.paths import check_outputs
    parser = getattr(args, "parser", None)
    if parser is None:
        return
    outputs, inputs = declared_paths(parser, args)
    check_outputs(files=[(flag, path) for flag, path, kind in outputs if kind == "file"],
                  dirs=[(flag, path) for flag, path, kind in outputs if kind == "folder"],
                  inputs=inputs + [p for p in more if p is not None])


def _worded(e: Exception, parser: Optional[argparse.ArgumentParser]) -> object:
    """A :class:`yolo3.core.errors.SettingError` worded with this command's flags (the setting
    ``batch_size`` is the flag whose destination it is, ``--batch-size``); other errors as they are."""
    worded = getattr(e, "worded", None)
    if worded is None or parser is None:
        return e
    return worded(_flags(parser).get)


def _flags(parser: argparse.ArgumentParser) -> Dict[str, str]:
    """Each setting (an option's destination) with the flag that sets it: ``batch_size`` ->
    ``--batch-size``."""
    return {action.dest: action.option_strings[0] for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS}


def run_command(name: str, description: str, add_arguments: Callable[[argparse.ArgumentParser], None],
                run: Callable[[argparse.Namespace], Optional[int]],
                argv: Optional[Sequence[str]] = None, epilog: Optional[str] = None) -> int:
    """Parse ``argv`` for command ``name`` and :func:`execute` it (the console scripts' ``main``)."""
    parser = make_parser(name, description, epilog)
    add_arguments(parser)
    args = parse_or_exit_code(parser, argv)
    if isinstance(args, int):
        return args
    args.parser = getattr(args, "command_parser", None) or parser
    return execute(name, run, args)


def parse_or_exit_code(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]):
    """``parser.parse_args(argv)``, or the exit code argparse would exit with (2 for a value its
    declaration refuses, 0 after ``--help``): ``main(argv)`` returns a code, never exits."""
    try:
        return parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else EXIT_BAD_INPUT)


def model_choices() -> list:
    """The registered variant names (:mod:`yolo3.config.specs`), for ``--variant``."""
    from yolo3.config.specs import spec_names
    return spec_names()


class _RenamedFlag(argparse.Action):
    """An old spelling of a flag: stores into the new flag's destination and warns each time."""

    def __init__(self, option_strings, dest, new: str = "", **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is now {self.new} (the old spelling will "
              "go in a later release)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_variant_argument(parser: argparse.ArgumentParser, *, default=None, many: bool = False,
                         help: str = "", old: Optional[str] = None, **kwargs) -> None:
    """``--variant NAME`` (``--variants NAME ...`` with ``many``): a registered variant, the one name
    of the concept; the old spelling ``--model`` / ``--models`` (or ``old``) still works and
    warns (``--model`` names a model file everywhere else)."""
    flag = "--variants" if many else "--variant"
    dest = flag[2:]
    nargs = "+" if many else None
    names = model_choices()
    listed = f"one of {', '.join(names)}"
    parser.add_argument(flag, dest=dest, default=default, nargs=nargs, choices=names,
                        metavar="VARIANT", help=f"{help}: {listed}" if help else listed,
                        **kwargs)
    parser.add_argument(old or ("--models" if many else "--model"), dest=dest, nargs=nargs,
                        choices=names, action=_RenamedFlag, new=flag,
                        help=argparse.SUPPRESS)


def add_model_arguments(parser: argparse.ArgumentParser, model_help: str,
                        required: bool = True) -> None:
    """``--model PATH`` and the overrides of what the model carries: ``--anchors``, ``--classes``,
    ``--variant`` (for ``.weights.h5``; ``--model-type`` is its old spelling), ``--input-size``."""
    parser.add_argument("--model", required=required, type=InputPath("any"), help=model_help)
    parser.add_argument("--anchors", type=InputPath(text=True),
                        help="anchors file (default: the anchors the model carries, else the "
                             "file beside it)")
    parser.add_argument("--classes", type=InputPath(text=True),
                        help="classes file (default: the class names the model carries, else "
                             "classes.txt beside it)")
    add_variant_argument(parser, old="--model-type",
                         help="variant of a .weights.h5 file (default: from the anchor count)")
    add_input_size_argument(parser, None, "network input size: one side (square) or HEIGHT "
                            "WIDTH, multiples of 32 (default: the size the model was trained or "
                            "converted at, else 416)")


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """``--precision {auto,float32,bfloat16}`` for the programs that run a
    :class:`yolo3.inference.detector.YOLO`."""
    from yolo3.config.precision import PRECISIONS
    parser.add_argument("--precision", choices=list(PRECISIONS), default="auto",
                        help="inference precision of a .keras model (on Keras or OpenVINO): "
                             "auto (default) is bfloat16 where the hardware computes it faster "
                             "(AMX and AMD AVX-512 BF16 CPUs, recent GPUs: about 1.7x faster, "
                             "~1%% error on the raw maps), float32 elsewhere")


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """``--engine {auto,keras,openvino,onnxruntime}`` for the programs that run a detector."""
    from yolo3.config.choices import ENGINES
    parser.add_argument("--engine", choices=list(ENGINES), default="auto",
                        help="what runs a .keras model's network: auto (default) is OpenVINO on a "
                             "CPU where it is installed (converted once, checked against Keras "
                             "and cached under the user cache folder), else Keras; keras, "
                             "openvino or onnxruntime by name. Exported models run on their own "
                             "runtime")


def add_source_arguments(parser: argparse.ArgumentParser, annotations_help: str,
                         split: Optional[str]) -> None:
    """``--annotations`` or ``--data`` (one of them), and ``--split``: which split of ``--data``
    (``split`` by default; None: every split)."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--annotations", type=InputPath("any", text=True),
                       help=annotations_help + "; also a YOLO-layout image folder or image-list "
                       "file (labels in labels/ or beside the images)")
    group.add_argument("--data", type=InputPath(text=True),
                       help="a data.yaml (Ultralytics) or obj.data (Darknet): its --split "
                       "sources and its class names")
    parser.add_argument("--split", choices=("train", "val", "test"), default=split,
                        help=f"the split of --data to read (default: {split or 'every split'})")


def annotation_sources(args: argparse.Namespace):
    """``(sources, class names or None)`` of ``--annotations`` or ``--data`` / ``--split``."""
    if not args.data:
        return args.annotations, None
    from yolo3.data.yolo_layout import read_data_file
    dataset = read_data_file(args.data)
    if args.split:
        return dataset.sources(args.split), dataset.names
    return [s for split in dataset.splits for s in dataset.splits[split]], dataset.names


class SideOrHeightWidth(argparse.Action):
    """``--flag S`` (an int: square) or ``--flag H W`` (a ``(h, w)`` tuple)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if len(values) not in (1, 2):
            parser.error(f"argument {option_string}: give one side or HEIGHT WIDTH, got "
                         f"{len(values)} numbers")
        setattr(namespace, self.dest, values[0] if len(values) == 1 else tuple(values))


def add_input_size_argument(parser: argparse.ArgumentParser, default, help: str) -> None:
    """``--input-size SIZE`` or ``--input-size HEIGHT WIDTH`` (an int or an ``(h, w)`` tuple;
    each side a multiple of 32, :data:`yolo3.cli.flags.INPUT_SIDE`)."""
    parser.add_argument("--input-size", type=INPUT_SIDE, nargs="+", action=SideOrHeightWidth,
                        default=default, metavar="SIZE", help=help)


# ---------------------------------------------------- the old names of declared numeric types

fraction = FRACTION  # a finite number from 0 to 1 (a score or IoU threshold, a share)
positive_int = COUNT  # a whole number from 1
non_negative_int = COUNT0  # a whole number from 0
positive_float = POSITIVE  # a finite number above 0
tile_overlap = OVERLAP  # a tile overlap


def add_threshold_arguments(parser: argparse.ArgumentParser, score: float = 0.3,
                            iou: float = 0.45, score_help: str = "score threshold",
                            iou_help: str = "NMS IoU threshold") -> None:
    """``--score`` and ``--iou``: thresholds from 0 to 1, refused otherwise before any work."""
    parser.add_argument("--score", type=fraction, default=score,
                        help=f"{score_help}, 0 to 1 (default {score})")
    parser.add_argument("--iou", type=fraction, default=iou,
                        help=f"{iou_help}, 0 to 1 (default {iou})")


def add_video_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-frames N`` (0: all) and ``--fourcc CODE`` (the annotated video's codec), for the
    commands that read video and write it annotated (detect, track)."""
    parser.add_argument("--max-frames", type=COUNT0, default=0,
                        help="stop a video/webcam after N frames (0: all)")
    parser.add_argument("--fourcc", default="mp4v",
                        type=Text(length=4, pattern=r"[ -~]{4}",
                                  pattern_words="a video codec's code", example="mp4v"),
                        help="OpenCV video codec for the annotated video (four characters)")


def add_exist_ok_argument(parser: argparse.ArgumentParser) -> None:
    """``--exist-ok`` (also ``--overwrite``): write into an output folder that holds files yolo3
    did not write (:mod:`yolo3.core.output_folder`)."""
    parser.add_argument("--exist-ok", "--overwrite", dest="exist_ok", action="store_true",
                        help="write into an output folder that holds files yolo3 did not write: "
                             "they are kept, and only files of the names this command writes "
                             "are replaced (default: such a folder is refused)")


def add_tile_arguments(parser: argparse.ArgumentParser, what: str = "detect") -> None:
    """``--tile SIZE``, ``--overlap F``, ``--merge {nms,wbf}``, ``--no-whole-image``: sliced
    inference (:class:`yolo3.inference.tiled.TiledDetector`); without ``--tile``, as the model
    file records (a model trained on tiles); ``--tile 0``: the whole image only."""
    from yolo3.ops.tiles import MERGE_METHODS
    group = parser.add_argument_group("sliced inference (small objects in large images)")
    group.add_argument("--tile", type=TILE_OR_OFF, default=None, metavar="SIZE",
                       help=f"{what} on overlapping tiles of SIZE x SIZE pixels cut from each "
                            "image at its own resolution, plus the whole image, and merge; 0: "
                            "the whole image only (default: as the model was trained: a model "
                            "trained with --tile slices as its file records, others see the "
                            "whole image)")
    group.add_argument("--overlap", type=OVERLAP, default=0.2,
                       help="with --tile: the share of a tile that neighbours overlap, 0 to "
                            "0.75 (default %(default)s; objects up to that many pixels lie "
                            "whole in a tile)")
    group.add_argument("--merge", choices=list(MERGE_METHODS), default="nms",
                       help="with --tile: how the views' boxes merge: nms (default; per class, at "
                            "--iou) or wbf (weighted box fusion: boxes averaged by score)")
    group.add_argument("--no-whole-image", action="store_true",
                       help="with --tile: tiles only (objects cut by a tile edge are then kept "
                            "as pieces and merged)")


def tiled_detector(detector, args: argparse.Namespace) -> Tuple[Any, Optional[str]]:
    """``(detector, line)``: ``detector`` sliced as ``--tile``, ``--overlap``, ``--merge``,
    ``--no-whole-image`` say (the flags that shape the tiles need ``--tile``:
    :mod:`yolo3.cli.relations`), or, without ``--tile``, as the model file records
    (``detector.info.slicing``, a model trained on tiles: ``args`` then take its settings);
    unchanged with ``--tile 0`` or when neither slices. A tiled model's hand-over to the whole
    image (``whole_from``) holds with its tiles or the user's. ``line``: the slicing, for the
    command's first line (None when unsliced)."""
    from_model = False
    if args.tile is None:
        slicing = getattr(getattr(detector, "info", None), "slicing", None)
        if slicing is not None:
            args.tile, args.overlap, args.merge = slicing.tile, slicing.overlap, slicing.merge
            args.no_whole_image = not slicing.whole_image
            from_model = True
    if not args.tile:
        return detector, None
    from yolo3.inference.tiled import TiledDetector, recorded_whole_from
    tiled = TiledDetector(detector, args.tile, args.overlap, args.merge,
                          iou=getattr(args, "iou", None), whole_image=not args.no_whole_image,
                          batch_size=max(8, getattr(args, "batch_size", 1)),
                          whole_from=recorded_whole_from(detector))
    line = tiled.summary()
    if from_model:
        line += " (as the model was trained; --tile 0: the whole image only)"
    return tiled, line
