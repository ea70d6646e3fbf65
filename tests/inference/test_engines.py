"""Engines for .keras detectors (yolo3.inference.engines): the ``auto`` choice, conversion checked
against Keras on Darknet's real tiny weights and the shared photographs, the cache (reused on a
second run, rebuilt when the model changes), and the fallbacks."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from locations import SHARED, shared

from yolo3.core.errors import ArgumentError
from yolo3.inference.engines import engine_installed, resolve_engine

PHOTOS = sorted((SHARED / "images").glob("*.jpg"))


def rel_err(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Darknet's real COCO yolov3-tiny, converted, and its float32 Keras detector."""
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.inference.detector import YOLO
    root = tmp_path_factory.mktemp("engines")
    convert(shared("darknet", "yolov3-tiny.cfg"), shared("darknet", "yolov3-tiny.weights"),
            root / "tiny.keras", progress=False)
    return root / "tiny.keras", YOLO(root / "tiny.keras", precision="float32", score=0.25)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "engines"


def _photos():
    from yolo3.data.images import load_image
    return [load_image(p) for p in PHOTOS]


def test_auto_is_openvino_on_a_cpu_where_it_is_installed(monkeypatch):
    import yolo3.inference.engines as engines
    assert engine_installed("openvino")  # the test environment installs yolo3[export]
    assert resolve_engine("auto") == "openvino"
    assert resolve_engine("auto", gpu=True) == "keras"
    assert resolve_engine("keras") == "keras" and resolve_engine("onnxruntime") == "onnxruntime"
    monkeypatch.setattr(engines.importlib.util, "find_spec",
                        lambda name: None if name == "openvino" else object())
    assert resolve_engine("auto") == "keras"  # not installed: Keras, no error
    with pytest.raises(ArgumentError, match=r"pip install 'yolo3\[openvino\]'"):
        resolve_engine("openvino")
    with pytest.raises(ArgumentError, match="engine must be one of"):
        resolve_engine("tensorrt")


@pytest.mark.parametrize("engine", ["openvino", pytest.param("onnxruntime", marks=pytest.mark.slow)])
def test_converted_network_finds_what_keras_finds_on_real_weights(tiny, cache, engine):
    """float32 on both sides: raw maps within 1e-4 relative, the same detections on the photos."""
    from yolo3.inference.detector import YOLO
    path, keras_det = tiny
    det = YOLO(path, precision="float32", score=0.25, engine=engine)
    assert det.engine.engine == engine and det.engine.converted
    assert (Path(det.engine.cached) / "source.json").is_file()
    x = np.stack([keras_det.preprocess(im) for im in _photos()[:2]])
    errors = [rel_err(a, b) for a, b in zip(det.forward(x), keras_det.forward(x))]
    assert max(errors) <= 1e-4, errors
    found = 0
    for image in _photos():
        (kb, ks, kc), (b, s, c) = keras_det.detect(image), det.detect(image)
        assert len(b) == len(kb) and np.array_equal(np.sort(c), np.sort(kc))
        order_k, order = np.argsort(-ks), np.argsort(-s)
        np.testing.assert_allclose(b[order], kb[order_k], atol=0.05)
        np.testing.assert_allclose(s[order], ks[order_k], atol=1e-4)
        found += len(kb)
    assert found >= 10
    batch = det.detect_batch(_photos())  # several requests in flight: the same as one by one
    for image, (b, s, c) in zip(_photos(), batch):
        ref = det.detect(image)
        np.testing.assert_allclose(np.sort(s), np.sort(ref[1]), atol=1e-6)


def test_openvino_at_the_machines_precision_agrees_with_keras(tiny, cache):
    """``auto`` precision (bfloat16 where the CPU computes it natively) is as close to float32 as
    Keras's own bfloat16: on these photos both are 1.1e-2 relative (oneDNN's bfloat16
    convolutions under both), so the bound is Keras's error, and 1.5e-2."""
    from yolo3.config.precision import resolve_precision
    from yolo3.inference.detector import YOLO, load_detector
    path, keras_det = tiny
    det = load_detector(path, score=0.25)
    assert det.engine.engine == "openvino"
    assert det.engine.precision == resolve_precision("auto", gpu=False)
    x = np.stack([keras_det.preprocess(im) for im in _photos()])
    error = max(rel_err(a, b) for a, b in zip(det.forward(x), keras_det.forward(x)))
    if det.engine.precision == "float32":
        assert error <= 1e-4
    else:
        keras_bf16 = YOLO(path, precision="bfloat16")
        own = max(rel_err(a, b) for a, b in zip(keras_bf16.forward(x), keras_det.forward(x)))
        assert error <= min(1.5e-2, 1.05 * own + 1e-4), (error, own)


@pytest.mark.slow  # CI runs it (.ci/run); about 25 s on 2 cores, kept out of the default 15 minutes
def test_the_conversion_is_cached_and_rebuilt_when_the_model_changes(tiny, cache, tmp_path,
                                                                     monkeypatch):
    import yolo3.inference.engines as engines
    from yolo3.inference.detector import YOLO
    path = tmp_path / "m.keras"
    shutil.copy(tiny[0], path)
    first = YOLO(path, engine="openvino")
    assert first.engine.converted and len(list(cache.glob("*/model.xml"))) == 1

    def no_conversion(*args):
        raise AssertionError("converted again")
    monkeypatch.setattr(engines, "_convert_openvino", no_conversion)
    second = YOLO(path, engine="openvino")
    assert not second.engine.converted and second.engine.cached == first.engine.cached
    assert "reused" in second.engine.summary()
    monkeypatch.undo()
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(cache.parent))
    # the same model at another input size is another network
    other_size = YOLO(path, engine="openvino", input_size=320)
    assert other_size.engine.converted and other_size.engine.cached != first.engine.cached
    with open(path, "ab") as f:  # the model file changes (its hash with it)
        f.write(b"\0")
    changed = YOLO(path, engine="openvino")
    assert changed.engine.converted and changed.engine.cached != first.engine.cached
    assert len(list(cache.glob("*/model.xml"))) == 3


@pytest.mark.slow  # CI runs it (.ci/run); about 20 s on 2 cores, kept out of the default 15 minutes
def test_a_conversion_that_does_not_match_is_not_used(tiny, cache, monkeypatch):
    import yolo3.inference.engines as engines
    from yolo3.inference.detector import YOLO
    from yolo3.inference.engines import EngineCheckFailed
    monkeypatch.setattr(engines, "_check", lambda *args: 0.5)
    with pytest.raises(EngineCheckFailed, match="differs from the Keras network by 0.5"):
        YOLO(tiny[0], engine="openvino")
    assert not list(cache.glob("*/model.xml"))  # nothing half-made is cached
    det = YOLO(tiny[0], engine="auto")  # auto: Keras runs, and says why
    assert det.engine.engine == "keras" and "failed its check" in det.engine.reason
    image = _photos()[0]
    np.testing.assert_allclose(det.detect(image)[1], YOLO(tiny[0]).detect(image)[1])


def test_engines_keras_keeps(tiny, cache):
    """Each image at its own size runs on Keras; new weights drop the converted network."""
    from yolo3.core.errors import SettingError
    from yolo3.inference.detector import YOLO
    with pytest.raises(SettingError, match="needs the Keras engine"):
        YOLO(tiny[0], engine="openvino", model_image_size=(None, None))
    fit = YOLO(tiny[0], engine="auto", model_image_size=(None, None))
    assert fit.engine.engine == "keras" and "own size" in fit.engine.reason
    det = YOLO(tiny[0], engine="openvino", precision="float32")
    det.sync_weights()
    assert det.engine.engine == "keras" and det.engine.reason == "weights changed"
    x = np.random.default_rng(0).uniform(0, 1, (1, *det.input_hw, 3)).astype(np.float32)
    np.testing.assert_allclose(det.forward(x)[0], tiny[1].forward(x)[0], rtol=1e-5, atol=1e-5)


def test_the_command_line_prints_the_engine_once_and_refuses_a_missing_one(tiny, cache, tmp_path,
                                                                             capsys, monkeypatch):
    import yolo3.inference.engines as engines
    from yolo3.cli import main
    assert main(["detect", "--model", str(tiny[0]), "--input", str(PHOTOS[0]), "--output",
                 str(tmp_path / "o"), "--json", str(tmp_path / "d.json"), "--no-draw"]) == 0
    err = capsys.readouterr().err
    assert err.count("engine: openvino") == 1
    assert json.loads((tmp_path / "d.json").read_text())[0]["names"]
    monkeypatch.setattr(engines.importlib.util, "find_spec",
                        lambda name: None if name == "openvino" else object())
    assert main(["detect", "--model", str(tiny[0]), "--input", str(PHOTOS[0]), "--output",
                 str(tmp_path / "o2"), "--engine", "openvino"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'yolo3[openvino]'" in err and "Traceback" not in err
    assert not (tmp_path / "o2").exists() or not any((tmp_path / "o2").iterdir())
    monkeypatch.setitem(sys.modules, "openvino", None)
    assert main(["detect", "--model", str(tiny[0]), "--input", str(PHOTOS[0]), "--output",
                 str(tmp_path / "o3"), "--no-draw"]) == 0
    assert "engine: keras" in capsys.readouterr().err


def test_load_detector_lives_in_the_detector_module_and_its_old_place_warns():
    import sys

    import yolo3
    import yolo3.inference.detector
    assert yolo3.load_detector is yolo3.inference.detector.load_detector
    sys.modules.pop("yolo3.runtimes", None)
    with pytest.warns(DeprecationWarning, match="yolo3.runtimes is now yolo3.inference.runners"):
        import yolo3.runtimes as old
    assert old.load_detector is yolo3.inference.detector.load_detector
    with pytest.raises(AttributeError):
        old.no_such_name
