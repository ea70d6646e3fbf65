"""yolo3.training.pictures: the run's first batches drawn are the batches training is fed, the
labels plot, results.png at each evaluation and the gallery only when the best model changes."""
from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
from PIL import Image

from yolo3.core.output_folder import OutputFolder, written_by_yolo3
from yolo3.evaluation.visualize import draw_batch
from yolo3.training.data_step import prepare_data
from yolo3.training.datasets import first_batches, make_datasets
from yolo3.training.pictures import GALLERY, LABELS, RESULTS, RunPictures, draw_start
from yolo3.training.placement import pick_strategy


def test_the_batches_drawn_are_the_batches_fed(step_config, tmp_path):
    config = step_config(pipeline="numpy", mosaic=1.0, batch_size=4)
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    fed, _ = make_datasets(config, data, placement)
    drawn = first_batches(config, data, placement)
    for k in range(2):
        (inputs, *_), _ = fed[k]
        images, boxes = drawn[k]
        np.testing.assert_array_equal(images, inputs)
    folder = OutputFolder(tmp_path / "run", "--output")
    with folder:
        draw_start(folder, data.records, data.class_names, data.input_hw, drawn,
                   anchors=data.anchors, strides=data.spec.strides)
    assert written_by_yolo3(tmp_path / "run" / LABELS)
    picture = np.asarray(Image.open(tmp_path / "run" / "train_batch1.jpg"), np.float64)
    images, boxes = drawn[1]
    expected = draw_batch(images, boxes, data.class_names)
    assert picture.shape == expected.shape
    buffer = io.BytesIO()
    Image.fromarray(expected).save(buffer, format="JPEG", quality=85)
    np.testing.assert_array_equal(picture, np.asarray(Image.open(buffer), np.float64))
    assert sorted(p.name for p in (tmp_path / "run").glob("train_batch*.jpg")) == [
        "train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg"]


def test_results_at_each_evaluation_and_the_gallery_when_best_changes(tmp_path):
    folder = OutputFolder(tmp_path / "run", "--output")
    image = np.full((64, 96, 3), 90, np.uint8)
    gt = {0: np.array([[10, 10, 40, 40, 0]], np.float64)}
    dets = {0: (np.array([[11, 10, 40, 41]], np.float64), np.array([0.8]), np.array([0]))}
    evaluation = SimpleNamespace(last=None, images=lambda: [image])
    checkpoint = SimpleNamespace(best_epoch=None)
    pictures = RunPictures(folder, evaluation, checkpoint, ["thing"])
    rows = "epoch,loss,mAP50_95\n"
    with folder:
        for epoch, evaluated, best in ((0, True, True), (1, False, False), (2, True, False)):
            rows += f"{epoch},{5 - epoch},{'nan' if not evaluated else 0.1 * epoch}\n"
            folder.write_text("history.csv", rows)
            evaluation.last = (epoch + 1, gt, dets) if evaluated else evaluation.last
            checkpoint.best_epoch = epoch + 1 if best else checkpoint.best_epoch
            before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "run").glob("*.png")}
            pictures.on_epoch_end(epoch, {})
            after = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "run").glob("*.png")}
            assert (after.get(RESULTS) != before.get(RESULTS)) == evaluated, epoch
            assert (after.get(GALLERY) != before.get(GALLERY)) == best, epoch
    assert written_by_yolo3(tmp_path / "run" / RESULTS)
    gallery = np.asarray(Image.open(tmp_path / "run" / GALLERY))
    assert gallery.shape[0] > 240 and (gallery != 255).any()


def test_without_matplotlib_one_warning_and_the_pictures_that_need_none(tmp_path, monkeypatch,
                                                                       caplog):
    import logging

    from yolo3.training.pictures import plots_wanted
    monkeypatch.setattr("yolo3.training.pictures.installed", lambda name: False)
    with caplog.at_level(logging.WARNING):
        assert plots_wanted(True) is False
    assert len([r for r in caplog.records if "matplotlib is not installed" in r.message]) == 1
    assert plots_wanted(False) is False
    folder = OutputFolder(tmp_path / "run", "--output")
    batches = [(np.zeros((2, 32, 32, 3), np.float32), np.zeros((2, 4, 5), np.float32))] * 3
    with folder:
        draw_start(folder, [], ["thing"], (32, 32), batches, plots=False)
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if not p.name.startswith(".")) == [
        "train_batch0.jpg", "train_batch1.jpg", "train_batch2.jpg"]
