"""One batch of the NumPy pipeline, made in the calling thread or process: the plans
(:class:`yolo3.data.planner.Planner`) applied to the pixels in NumPy and OpenCV, the targets
encoded. :class:`BatchMaker` imports no Keras and no TensorFlow and pickles whole, so worker
processes (:mod:`yolo3.data.feeds`) make batches from the same object; the batch layout is
:mod:`yolo3.data.numpy_pipeline`'s.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import numpy as np

from yolo3.data.annotations import Record
from yolo3.data.dataset_config import (
    DatasetConfig,
    cache_longest_side,
    epoch_batches,
    make_planner,
    new_seed,
    record_geometry,
    shard_range,
    training_inputs,
)
from yolo3.data.planner import ElementPlan, pad_boxes_np
from yolo3.data.device_cache import DeviceLayout
from yolo3.data.image_cache import DecodedImages, cached_hw
from yolo3.data.window_pack import (
    WINDOW_PLAN_WIDTH,
    WINDOWS_PER_ELEMENT,
    Window,
    image_plan,
    letterbox_window,
    pack_windows,
    placed_window,
)
from yolo3.data.image_ops import (
    augment_image_np,
    colour_plan,
    letterbox_image_np,
    letterbox_u8,
    mosaic_regions,
    place_image_u8,
)

__all__ = ["BatchMaker"]


class BatchMaker:
    """The batches of ``records`` as ``config`` says (:class:`DatasetConfig`): batch ``k`` of
    epoch ``e`` is a pure function of the seed (``config.seed``, or a fresh one), ``e`` and
    ``k``. Images come from :class:`DecodedImages` (the config's ``image_cache``)."""

    def __init__(self, records: Sequence[Record], config: DatasetConfig):
        self.config = config
        self.seed = new_seed() if config.seed is None else int(config.seed)
        image_hws, self.orientations = record_geometry(records)
        self.planner = make_planner(records, config, self.seed, image_hws)
        self.paths = [r.path for r in records]
        self.per_epoch = epoch_batches(len(records), config)
        kind = config.image_cache if config.image_cache != "none" else (
            "ram" if config.cache else "none")
        self.images = DecodedImages(
            self.paths, self.orientations, image_hws, kind,
            longest=cache_longest_side(config) if config.image_cache != "none" else None)
        if config.device_images and config.tiles is not None:
            raise ValueError("images kept on the device take no tiles yet (a tile's window is "
                             "cut at the image's own resolution)")
        # device_images: where each record's cached image begins in the buffer on the device
        self.device_starts = self._device_starts(records) if config.device_images else None
        targets = config.targets
        self.targets = targets if targets is None or targets.anchors is None else replace(
            targets, anchors=np.asarray(targets.anchors, np.float32).reshape(-1, 2))

    def decoded(self, index: int) -> np.ndarray:
        """Record ``index``'s image, uint8 ``(h, w, 3)`` (:class:`DecodedImages`: no larger than
        the recipe needs where cached; read-only)."""
        return self.images.get(index)

    def _source(self, plan: ElementPlan, k: int) -> Tuple[np.ndarray, Tuple[int, int]]:
        """Source ``k`` of ``plan`` cut to its window, and the displayed size its geometry is
        drawn for (a cached copy may be smaller: tiles keep the full resolution)."""
        index = plan.sources[k]
        image = self.decoded(index)
        if plan.windows is not None:
            x1, y1, x2, y2 = plan.windows[k]
            return image[y1:y2, x1:x2], (y2 - y1, x2 - x1)
        return image, self.planner.image_hws[index]

    def image_u8(self, plan: ElementPlan, out: Optional[np.ndarray] = None
                 ) -> Tuple[np.ndarray, np.ndarray]:
        """The uint8 ``(h, w, 3)`` canvas of one element's plan, without its colours, and its
        colour plan ``(14,)`` (:mod:`yolo3.modeling.pixel_input`): ``canvas / 255`` with the
        plan's colours is :meth:`image`. ``out``: the ``(h, w, 3)`` uint8 array to fill (a
        batch's row), else a new one."""
        H, W = plan.input_hw
        if plan.draws is None:
            image, hw = self._source(plan, 0)
            canvas = letterbox_u8(image, (H, W), hw)
            if out is not None:
                out[...] = canvas
                canvas = out
            return canvas, colour_plan(None, None, (H, W))
        if out is None:
            out = np.empty((H, W, 3), np.uint8)
        regions = ((0, H, 0, W),) if plan.split_yx is None else mosaic_regions(plan.split_yx,
                                                                                (H, W))
        for k, (y1, y2, x1, x2) in enumerate(regions):
            if y2 <= y1 or x2 <= x1:
                continue  # this source does not show
            image, _ = self._source(plan, k)
            place_image_u8(image, plan.draws[k], (H, W), (y1, y2, x1, x2),
                           out=out[y1:y2, x1:x2])
        return out, colour_plan(plan.draws, plan.split_yx, (H, W),
                                self.planner.augment.colours)

    def windows(self, plan: ElementPlan) -> Tuple[List[Optional[Window]], np.ndarray]:
        """One element's windows for the device's resampling (:mod:`yolo3.data.window_pack`:
        each source's visible window cut out of its image, four per element) and its colour
        plan ``(14,)``: resampled on the device they are :meth:`image_u8`'s canvas, to
        OpenCV's 1/32-pixel sample positions."""
        H, W = plan.input_hw
        if plan.draws is None:
            image, hw = self._source(plan, 0)
            return ([letterbox_window(image, (H, W), hw), None, None, None],
                    colour_plan(None, None, (H, W)))
        regions = ((0, H, 0, W), (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0)) \
            if plan.split_yx is None else mosaic_regions(plan.split_yx, (H, W))
        windows = [placed_window(self._source(plan, k)[0], plan.draws[k], (H, W), region)
                   if k < len(plan.sources) and region[1] > region[0] and region[3] > region[2]
                   else None for k, region in enumerate(regions)]
        return windows, colour_plan(plan.draws, plan.split_yx, (H, W),
                                    self.planner.augment.colours)

    def device_image_plans(self, plan: ElementPlan
                           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One element's window plans ``(4, 11)`` reading its sources where they are kept whole
        on the device (``device_images``), where each source begins in that buffer (int32
        ``(4,)``, :attr:`device_starts`; the plans' own ``start`` is 0) and its colour plan:
        no image is decoded or cut here, only its cached size is read."""
        H, W = plan.input_hw
        longest = cache_longest_side(self.config)
        plans = np.zeros((WINDOWS_PER_ELEMENT, WINDOW_PLAN_WIDTH), np.float32)
        starts = np.zeros(WINDOWS_PER_ELEMENT, np.int32)
        sizes = [np.broadcast_to(np.uint8(0), (*cached_hw(self.planner.image_hws[i], longest),
                                               3)) for i in plan.sources]
        if plan.draws is None:
            shown_hw = self.planner.image_hws[plan.sources[0]]
            plans[0] = letterbox_window(sizes[0], (H, W), shown_hw)[1]
            starts[0] = self.device_starts[plan.sources[0]]
            return plans, starts, colour_plan(None, None, (H, W))
        regions = ((0, H, 0, W),) if plan.split_yx is None else mosaic_regions(plan.split_yx,
                                                                                (H, W))
        for k, region in enumerate(regions):
            plans[k] = image_plan(sizes[k], plan.draws[k], (H, W), region, 0)
            starts[k] = self.device_starts[plan.sources[k]]
        return plans, starts, colour_plan(plan.draws, plan.split_yx, (H, W),
                                          self.planner.augment.colours)

    def _device_starts(self, records: Sequence[Record]) -> np.ndarray:
        """Where each record's cached image begins in the buffer kept on the device (pixels,
        int64): the config's ``device_layout``, else these records' own."""
        longest = cache_longest_side(self.config)
        layout = self.config.device_layout or DeviceLayout.of([(records, longest)])
        return layout.starts_of(self.paths, [cached_hw(hw, longest)
                                             for hw in self.planner.image_hws])

    def image(self, plan: ElementPlan) -> np.ndarray:
        """The float32 ``(h, w, 3)`` image of one element's plan (a mosaic's sources augmented
        only where they show)."""
        H, W = plan.input_hw
        regions = (None,) if plan.split_yx is None else mosaic_regions(plan.split_yx, (H, W))
        out = np.empty((H, W, 3), np.float32) if plan.split_yx is not None else None
        for k in range(len(plan.sources)):
            region = regions[k] if out is not None else None
            if region is not None and (region[1] <= region[0] or region[3] <= region[2]):
                continue  # this source does not show
            image, hw = self._source(plan, k)
            if plan.draws is None:
                canvas = letterbox_image_np(image, plan.input_hw, hw)
                if region is not None:
                    canvas = canvas[region[0]:region[1], region[2]:region[3]]
            else:
                colours = self.planner.augment.colours
                canvas = augment_image_np(image, plan.draws[k], plan.input_hw, colours, region)
            if out is None:
                return canvas
            out[region[0]:region[1], region[2]:region[3]] = canvas
        return out

    def batch(self, epoch: int, k: int):
        """Batch ``k`` of ``epoch``, made in this thread (with ``config.shard``: this process's
        share of it)."""
        size = self.config.batch_size
        indices = range(k * size, min((k + 1) * size, len(self.paths)))
        if self.config.shard != (0, 1):  # this process's share of the global batch
            indices = [indices[i] for i in shard_range(size, self.config.shard)
                       if i < len(indices)]
        plans = [self.planner.element(epoch, i) for i in indices]
        boxes = np.stack([pad_boxes_np(plan.boxes, self.config.max_boxes) for plan in plans])
        if self.config.device_images:  # plans only: the images live on the device
            H, W = plans[0].input_hw
            window_plans, starts, colours = zip(*(self.device_image_plans(plan)
                                                  for plan in plans))
            canvas = np.empty((len(plans), H, W, 0), np.uint8)
            return self.encode_parts((canvas, np.stack(window_plans), np.stack(starts),
                                      np.stack(colours)), boxes)
        if self.config.device_geometry:  # each element's windows, resampled on the device
            H, W = plans[0].input_hw
            elements, colours = zip(*(self.windows(plan) for plan in plans))
            window_pixels, window_plans = pack_windows(elements)
            canvas = np.empty((len(plans), H, W, 0), np.uint8)  # no bytes: the canvas's size
            return self.encode_parts((canvas, window_pixels, window_plans, np.stack(colours)),
                                     boxes)
        if self.config.device_colour:  # each uint8 canvas drawn into its row of the batch
            H, W = plans[0].input_hw  # a batch has one input size (multi-scale: by batches)
            images = np.empty((len(plans), H, W, 3), np.uint8)
            colours = np.stack([self.image_u8(plan, images[i])[1]
                                for i, plan in enumerate(plans)])
            return self.encode(images, boxes, colours)
        return self.encode(np.stack([self.image(plan) for plan in plans]), boxes)

    def encode(self, images: np.ndarray, boxes: np.ndarray,
               colours: Optional[np.ndarray] = None):
        """A batch -> what ``fit`` takes (:mod:`yolo3.data.numpy_pipeline`'s layout); ``colours``: the elements' colour
        plans, after the uint8 images."""
        return self.encode_parts((images,) if colours is None else (images, colours), boxes)

    def encode_parts(self, pixels: Tuple[np.ndarray, ...], boxes: np.ndarray):
        """:meth:`encode` of a batch's pixel inputs as they cross to the device (the canvas, or
        the windows and their plans), the targets encoded after them."""
        if self.config.targets is None:
            return (*pixels, boxes)
        return training_inputs(self.targets, pixels, boxes)

