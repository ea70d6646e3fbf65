"""tools/detect.py / yolo3-detect: images, folders, globs, videos; JSON; errors reported and skipped."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from locations import shared
from PIL import Image, ImageOps

from yolo3.data.class_names import write_classes
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, write_anchors

INPUT = 128


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import keras

    from yolo3.modeling.bodies import build_body

    keras.utils.set_random_seed(11)
    folder = tmp_path_factory.mktemp("cli_model")
    body = build_body("tiny", 2)
    layer = body.get_layer("output_s32")
    w, b = layer.get_weights()
    layer.set_weights([w * 8.0, b])
    body.save(folder / "final.keras")
    write_anchors(folder / "anchors.txt", TINY_YOLO_ANCHORS)
    write_classes(folder / "classes.txt", ["thing", "other"])
    return folder


def pil_rgb(path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


def test_folder_with_a_broken_file(model_dir, tmp_path, capsys):
    from yolo3.cli.detect import main
    from yolo3.inference.detector import YOLO

    photos = shared("images")
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("dog.jpg", "eagle.jpg"):
        shutil.copy(photos / name, inputs / name)
    (inputs / "dog_broken.jpg").write_bytes(b"not a jpeg at all")  # between the two: the
    # detections read ahead must stay with their images
    out, js = tmp_path / "out", tmp_path / "dets.json"
    rc = main(["--model", str(model_dir / "final.keras"), "--input", str(inputs), "--output", str(out),
               "--json", str(js), "--score", "0.2", "--input-size", str(INPUT), "--batch-size", "2",
               "--precision", "float32"])  # compared exactly below: never the machine's auto
    err = capsys.readouterr().err
    assert rc == 1 and "broken.jpg" in err and "2 images processed, 1 failed" in err
    assert sorted(p.name for p in out.iterdir()) == [".yolo3-output.json", "dog.jpg", "eagle.jpg"]
    entries = json.loads(js.read_text())
    assert [Path(e["image"]).name for e in entries] == ["dog.jpg", "eagle.jpg"]
    det = YOLO(model_dir / "final.keras", score=0.2, input_size=INPUT, precision="float32")
    for e in entries:
        image = pil_rgb(e["image"])
        boxes, scores, classes = det.detect(image)
        assert set(e) == {"image", "boxes", "scores", "classes", "names"}
        assert len(e["boxes"]) == len(boxes) > 0
        np.testing.assert_allclose(e["boxes"], boxes, atol=0.01)
        np.testing.assert_allclose(e["scores"], scores, atol=1e-5)
        assert e["classes"] == classes.tolist()
        assert e["names"] == [["thing", "other"][c] for c in classes]
        assert Image.open(out / Path(e["image"]).name).size == image.shape[1::-1]


def test_glob_single_file_and_bad_input(model_dir, tmp_path, capsys):
    from yolo3.cli.detect import main

    args = ["--model", str(model_dir / "final.keras"), "--input-size", str(INPUT), "--no-draw"]
    js = tmp_path / "g.json"
    rc = main(args + ["--input", str(shared("images") / "[dg]*.jpg"), "--output", str(tmp_path / "o"),
                      "--json", str(js)])
    assert rc == 0
    assert [Path(e["image"]).name for e in json.loads(js.read_text())] == ["dog.jpg", "giraffe.jpg"]
    assert main(args + ["--input", str(tmp_path / "nothing*.png"), "--output", str(tmp_path / "o")]) == 2
    assert "no file matches" in capsys.readouterr().err


def test_progress_bar_unless_quiet(model_dir, tmp_path, capsys):
    from yolo3.cli.detect import main

    args = ["--model", str(model_dir / "final.keras"), "--input-size", str(INPUT), "--no-draw",
            "--input", str(shared("images", "dog.jpg"))]
    for quiet in (False, True):
        js = tmp_path / f"{quiet}.json"
        assert main(args + ["--output", str(tmp_path / "o"), "--json", str(js)]
                    + (["--quiet"] if quiet else [])) == 0
        assert len(json.loads(js.read_text())) == 1
        assert ("images: 100%" in capsys.readouterr().err) is not quiet


def test_video_keeps_frame_rate_and_frame_count(model_dir, tmp_path):
    import cv2

    from yolo3.cli.detect import main

    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 12.0, (160, 96))
    rng = np.random.default_rng(0)
    for _ in range(6):
        writer.write(rng.integers(0, 256, (96, 160, 3), dtype=np.uint8))
    writer.release()
    out, js = tmp_path / "vout", tmp_path / "v.json"
    rc = main(["--model", str(model_dir / "final.keras"), "--input", str(video), "--output", str(out),
               "--json", str(js), "--input-size", str(INPUT), "--fourcc", "MJPG", "--score", "0.2"])
    assert rc == 0
    cap = cv2.VideoCapture(str(out / "clip.avi"))
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(12.0)
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == 6
    entries = json.loads(js.read_text())
    assert [e["frame"] for e in entries] == list(range(6))


def test_precision_flag_reaches_the_detector(model_dir, tmp_path):
    from yolo3.cli.detect import main
    from yolo3.inference.detector import YOLO

    image = shared("images", "dog.jpg")
    js = tmp_path / "bf16.json"
    rc = main(["--model", str(model_dir / "final.keras"), "--input", str(image), "--output",
               str(tmp_path / "o"), "--json", str(js), "--score", "0.2", "--input-size", str(INPUT),
               "--no-draw", "--precision", "bfloat16"])
    assert rc == 0
    [entry] = json.loads(js.read_text())
    half = YOLO(model_dir / "final.keras", score=0.2, input_size=INPUT, precision="bfloat16")
    boxes, scores, _ = half.detect(pil_rgb(image))
    assert len(entry["boxes"]) == len(boxes) > 0
    np.testing.assert_allclose(entry["scores"], scores, atol=1e-5)


def test_tiled_detection_equals_the_api_and_bad_tile_flags_are_refused(model_dir, tmp_path,
                                                                        capsys):
    from cli_harness import assert_refused, run_cli

    from yolo3.inference.detector import YOLO
    from yolo3.inference.tiled import TiledDetector

    image = shared("images", "dog.jpg")
    js = tmp_path / "tiled.json"
    common = ["detect", "--model", model_dir / "final.keras", "--input", image, "--score", "0.2",
              "--input-size", INPUT, "--precision", "float32", "--engine", "keras"]
    code, err = run_cli([*common, "--output", tmp_path / "o", "--json", js, "--tile", 200,
                         "--overlap", 0.3, "--merge", "wbf", "--batch-size", 3], capsys)
    assert code == 0, err
    assert "sliced: tiles of 200x200 px overlapping 0.3 plus the whole image, merged by wbf" in err
    [entry] = json.loads(js.read_text())
    plain = YOLO(model_dir / "final.keras", score=0.2, input_size=INPUT, precision="float32",
                 engine="keras")
    boxes, scores, classes = TiledDetector(plain, 200, 0.3, "wbf").detect(pil_rgb(image))
    assert len(entry["boxes"]) == len(boxes) > 0
    np.testing.assert_allclose(entry["boxes"], boxes, atol=1e-3)
    np.testing.assert_allclose(entry["scores"], scores, atol=1e-5)
    for bad, named in ((["--tile", 16], "--tile"), (["--tile", 200, "--overlap", 1], "--overlap"),
                       (["--overlap", 0.3], "--tile"), (["--merge", "wbf"], "--merge"),
                       (["--tile", 200, "--merge", "mean"], "--merge")):
        code, err = run_cli([*common, "--output", tmp_path / "bad", *bad], capsys)
        assert_refused(code, err, named)
        assert not (tmp_path / "bad").exists()


def test_a_model_trained_on_tiles_slices_by_default_and_tile_0_turns_it_off(model_dir, tmp_path,
                                                                             capsys):
    """The model file's slicing (ModelInfo.slicing, written by tiled training) is detect's
    default, said on the first line; --tile 0 gives the whole image, as the API's plain detector;
    an explicit --tile wins over the model's."""
    from cli_harness import run_cli

    from yolo3.checkpoint.metadata import ModelInfo, embed_info
    from yolo3.config.masks import default_masks
    from yolo3.inference.detector import YOLO
    from yolo3.inference.tiled import TiledDetector
    from yolo3.ops.tiles import Slicing

    model = tmp_path / "tiled.keras"
    shutil.copy(model_dir / "final.keras", model)
    embed_info(model, ModelInfo(TINY_YOLO_ANCHORS, default_masks(6, 2), 2, ["thing", "other"],
                                "tiny", (INPUT, INPUT),
                                slicing=Slicing(200, 0.3, "wbf", whole_from=16)))
    image = shared("images", "dog.jpg")
    common = ["detect", "--model", model, "--input", image, "--score", "0.2", "--precision",
              "float32", "--engine", "keras"]
    plain = YOLO(model, score=0.2, precision="float32", engine="keras")
    # the model's hand-over to the whole image holds with its tiles or the user's
    runs = {"default": ([], TiledDetector(plain, 200, 0.3, "wbf", whole_from=16)),
            "--tile 0": (["--tile", 0], plain),
            "--tile 160": (["--tile", 160], TiledDetector(plain, 160, 0.2, "nms", whole_from=16))}
    for name, (flags, reference) in runs.items():
        js = tmp_path / f"{name}.json"
        code, err = run_cli([*common, "--output", tmp_path / name, "--json", js, *flags], capsys)
        assert code == 0, err
        first = err.strip().splitlines()[0]
        if name == "default":
            assert first == ("sliced: tiles of 200x200 px overlapping 0.3 plus the whole image "
                             "(objects from 16 px at the whole-image input: from the whole image), "
                             "merged by wbf at IoU 0.45 (as the model was trained; --tile 0: the "
                             "whole image only)"), first
        elif name == "--tile 0":
            assert "sliced" not in err
        else:
            assert first.startswith("sliced: tiles of 160x160 px") and "as the model" not in first
        [entry] = json.loads(js.read_text())
        boxes, scores, _ = reference.detect(pil_rgb(image))
        assert len(entry["boxes"]) == len(boxes) > 0, name
        np.testing.assert_allclose(entry["boxes"], boxes, atol=1e-3)
        np.testing.assert_allclose(entry["scores"], scores, atol=1e-5)
