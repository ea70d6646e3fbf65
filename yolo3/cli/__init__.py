"""Command-line entry points. Each module parses arguments and calls the library; tools/*.py and the
console scripts are thin wrappers over ``main()``."""


def add_precision_argument(parser) -> None:
    """``--precision {float32,bfloat16}`` for the programs that run a :class:`yolo3.detector.YOLO`."""
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32",
                        help="inference precision: bfloat16 is about 1.7x faster on CPUs with AVX-512 "
                             "BF16 / AMX and on recent GPUs, at ~1%% error on the raw maps (slower "
                             "where bfloat16 is emulated)")
