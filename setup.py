"""yolo3: train and run YOLOv3 detectors on TensorFlow 2 / Keras 3."""
import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
VERSION = re.search(r'^__version__ = "([^"]+)"',
                    (HERE / "yolo3" / "core" / "version.py").read_text(), flags=re.M).group(1)
OPENVINO = [
    # OpenVINO IR export and runtime (yolo3 export --openvino, --engine openvino / auto) and
    # NNCF's post-training int8 quantization of the IR
    "openvino>=2024.4",
    "nncf>=2.14",
]
EXPORT = [
    # ONNX export (tf2onnx 1.17 converts TF 2.21 / Keras 3 functions) and running exported models
    "tf2onnx>=1.17",
    "onnx>=1.16",
    "onnxruntime>=1.18",
    # LiteRT runs TFLite models (TensorFlow's own tf.lite.Interpreter is deprecated)
    "ai-edge-litert>=1.2",
    *OPENVINO,
]

setup(
    name="yolo3",
    version=VERSION,
    description="YOLOv3, YOLOv3-SPP and tiny YOLOv3 for TensorFlow 2 / Keras 3: training "
    "(multi-GPU, tf.distribute), Darknet conversion, inference, evaluation and export.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["yolo3", "yolo3.*"]),
    install_requires=[
        "tensorflow>=2.16",
        # yolo3.modeling.keras_compat reaches two private Keras APIs (keras.src): capped at the
        # newest minor release tested here, raised when a newer one passes the suite
        "keras>=3,<3.16",
        "numpy",
        "pillow>=9.4",  # ImageOps.exif_transpose(in_place=True)
        # OpenCV 5 dropped cv2.dnn.readNetFromDarknet, the reference the tests compare against.
        "opencv-python>=4.8,<5",
        "tqdm",
        # data.yaml files of the YOLO layout (Ultralytics, Roboflow, CVAT, Label Studio exports)
        "pyyaml>=6",
        # training writes TensorBoard logs (keras.callbacks.TensorBoard needs the package)
        "tensorboard",
        # every run's plots (labels.png, results.png) and evaluate's
        "matplotlib",
    ],
    extras_require={
        "export": EXPORT,
        "openvino": OPENVINO,
        "test": [
            "pytest>=7.3",
            "pytest-timeout",
            # tools/test.sh runs the suite in 2 processes: 8 minutes instead of 14 on CI's 2 cores
            "pytest-xdist>=3.5",
            "hypothesis",
            "pycocotools",
            # tracking (the track extra) and py-motmetrics, the independent check of its scores
            "trackers>=2.6",
            "supervision",
            "trackeval>=1.3",
            "motmetrics",
            # the TIDE error breakdown's reference (tests/evaluation/test_error_analysis.py)
            "tidecv",
            "matplotlib",
            # the layer contracts in .importlinter, checked by tests/features/test_structure.py
            "import-linter>=2.1",
            # the same training step on JAX as on TensorFlow (tests/features/test_backends.py);
            # PyTorch's wheel pulls gigabytes of CUDA libraries: its tests run where it is installed
            "jax>=0.4.30",
            # photographs for yolo3 synth --style photo, run with TensorFlow unimportable
            # (tests/features/test_without_tensorflow.py)
            "scikit-image",
            # the experiment trackers (a real MLflow server in the slow set; W&B offline) and
            # the search over settings
            "mlflow>=2.16",
            "wandb>=0.18",
            "optuna>=3.6",
            *EXPORT,
        ],
        "plot": ["matplotlib"],  # now a core dependency: kept so that yolo3[plot] still installs
        # yolo3 track: Roboflow's motion trackers (ByteTrack, BoT-SORT, OC-SORT, SORT; no
        # PyTorch) and TrackEval's HOTA, IDF1 and MOTA
        "track": ["trackers>=2.6", "supervision", "trackeval>=1.3"],
        # benchmarks: photographs for yolo3 synth --style photo (scikit-image's wheel ships
        # permissively licensed ones), COCO scoring, plots. The peer (Ultralytics) pulls torch:
        # it lives in its own environment, never here.
        "bench": ["scikit-image", "pycocotools", "matplotlib"],
        # yolo3 train --tracker mlflow | wandb: experiment trackers
        "mlflow": ["mlflow>=2.16"],
        "wandb": ["wandb>=0.18"],
        # yolo3 tune: the search over settings (Optuna, its SQLite storage)
        "tune": ["optuna>=3.6"],
    },
    entry_points={
        "console_scripts": [
            "yolo3=yolo3.cli:main",
            "yolo3-train=yolo3.cli.train:main",
            "yolo3-tune=yolo3.cli.tune:main",
            "yolo3-detect=yolo3.cli.detect:main",
            "yolo3-track=yolo3.cli.track:main",
            "yolo3-evaluate-tracks=yolo3.cli.evaluate_tracks:main",
            "yolo3-evaluate=yolo3.cli.evaluate:main",
            "yolo3-convert=yolo3.cli.convert:main",
            "yolo3-export=yolo3.cli.export:main",
            "yolo3-kmeans=yolo3.cli.kmeans:main",
            "yolo3-voc=yolo3.cli.voc_annotation:main",
            "yolo3-coco=yolo3.cli.coco_annotation:main",
            "yolo3-annotations=yolo3.cli.annotations:main",
            "yolo3-check=yolo3.cli.check_dataset:main",
            "yolo3-plot=yolo3.cli.plot_history:main",
            "yolo3-report=yolo3.cli.report:main",
            "yolo3-synth=yolo3.cli.make_synthetic_dataset:main",
            "yolo3-benchmark=yolo3.cli.benchmark:main",
        ]
    },
)
