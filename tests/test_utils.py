"""yolo3.utils: keras-yolo3's ``compose``, ``rand``, ``letterbox_image`` and ``get_random_data``
keep their contracts (arguments, defaults, return values, NumPy's global generator)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image


def test_compose_and_rand():
    from yolo3.utils import compose, rand
    assert compose(lambda x: x + 1, lambda x: x * 10)(2) == 30
    with pytest.raises(ValueError, match="empty"):
        compose()
    np.random.seed(3)
    a = [rand(2, 5) for _ in range(100)]
    np.random.seed(3)
    assert a == [rand(2, 5) for _ in range(100)] and 2 <= min(a) and max(a) < 5


def test_letterbox_image_is_a_gray_padded_pil_image():
    from yolo3.ops.letterbox import geometry_np
    from yolo3.utils import letterbox_image
    image = Image.fromarray(np.full((50, 200, 3), 200, np.uint8))
    boxed = letterbox_image(image, (128, 96))  # size is (w, h)
    assert isinstance(boxed, Image.Image) and boxed.size == (128, 96) and boxed.mode == "RGB"
    new_hw, offset, _ = geometry_np((50, 200), (96, 128))
    arr = np.asarray(boxed)
    top, height = int(offset[0]), int(new_hw[0])
    assert np.all(arr[:top] == 128) and np.all(arr[top + height:] == 128)
    assert np.all(arr[top + 1:top + height - 1] == 200)


def test_get_random_data_keeps_its_contract(line_image):
    from yolo3.ops.letterbox import letterbox_np
    from yolo3.utils import get_random_data
    line = f"{line_image} 40,30,100,90,1 5,5,5,20,0\t"  # a degenerate box, a trailing tab
    image, boxes = get_random_data(line, (96, 128), random=False)
    assert image.shape == (96, 128, 3) and boxes.shape == (20, 5)
    np.testing.assert_array_equal(image, letterbox_np(np.asarray(Image.open(line_image)), (96, 128)))
    np.testing.assert_allclose(boxes[0], [32, 24, 80, 72, 1], atol=1e-4)  # scale 0.8, no offset
    assert not boxes[1:].any()
    assert get_random_data(line, (96, 128), random=False, proc_img=False)[0] == 0
    np.random.seed(7)
    first = get_random_data(line, (64, 64), max_boxes=5)
    np.random.seed(7)
    second = get_random_data(line, (64, 64), max_boxes=5)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[0].shape == (64, 64, 3) and first[1].shape == (5, 5)
    assert 0 <= first[0].min() and first[0].max() <= 1
    kept = first[1][first[1].any(axis=1)]
    for x1, y1, x2, y2, c in kept:  # the red pixels lie inside the (augmented) box
        assert 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 64 and c == 1




def test_get_random_data_names_a_line_it_cannot_use(line_image):
    from yolo3.core.errors import AnnotationError
    from yolo3.utils import get_random_data
    with pytest.raises(AnnotationError, match="expected one annotation line"):
        get_random_data(f"{line_image} 1,1,9,9,0\n{line_image} 2,2,8,8,0", (64, 64), random=False)
    with pytest.raises(AnnotationError, match="x1,y1"):
        get_random_data(f"{line_image} 1,1,9", (64, 64), random=False)
