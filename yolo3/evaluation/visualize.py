"""Drawing detections, per-class colours and precision-recall plots.

Boxes are ``(x1, y1, x2, y2)`` pixels of the image they are drawn on; colours are RGB tuples.
"""
from __future__ import annotations

import colorsys
from typing import List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from yolo3.core.fileio import atomic_write
from yolo3.core.output_folder import YOLO3_SOFTWARE
from yolo3.data.annotations import box_sizes
from yolo3.evaluation.error_analysis import ERROR_TYPES, SHORT_NAMES, caption

Color = Tuple[int, int, int]

_GOLDEN = 0.618033988749895
TRACK_COLOURS = 32  # tracks take the class palette's first 32 colours, by ID


def class_colors(num_classes: int) -> List[Color]:
    """One stable RGB colour per class id: hues spaced by the golden ratio, fixed saturation/value.

    Deterministic (no random state): class ``k`` has the same colour in every run and every image.
    """
    colors = []
    for k in range(num_classes):
        hue = (k * _GOLDEN) % 1.0
        sat = 0.75 if k % 2 == 0 else 0.95
        val = 0.95 if (k // 2) % 2 == 0 else 0.8
        r, g, b = colorsys.hsv_to_rgb(hue, sat, val)
        colors.append((int(r * 255), int(g * 255), int(b * 255)))
    return colors


def text_color(background: Color) -> Color:
    """Black or white, whichever reads better on ``background`` (relative luminance)."""
    r, g, b = background
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (255, 255, 255)


def _font(image_size: Tuple[int, int]) -> ImageFont.ImageFont:
    size = int(np.clip(round(0.025 * min(image_size) + 8), 10, 40))
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def draw_detections(image: Image.Image, boxes: np.ndarray, scores: Optional[np.ndarray],
                    classes: np.ndarray, class_names: Sequence[str],
                    colors: Optional[Sequence[Color]] = None,
                    ids: Optional[np.ndarray] = None,
                    trails: Optional[Sequence[np.ndarray]] = None) -> Image.Image:
    """Return a copy of ``image`` with boxes and ``"name 0.87"`` labels drawn: the one box drawer
    (detections, ground truth with ``scores=None``: labels without a score, and tracks).

    boxes: ``(N, 4)`` ``(x1, y1, x2, y2)`` pixels of ``image``; scores ``(N,)``; classes ``(N,)`` ids
    into ``class_names``. Labels sit above the box, or inside it at the top when there is no room.
    ``ids`` (tracks): each box coloured by its ID and labelled ``"#7 name 0.87"``; ``trails``: per
    box, its recent centres ``(T, 2)`` ``x, y``, drawn as a line in its colour.
    """
    image = image.convert("RGB").copy()
    colors = list(colors) if colors is not None else class_colors(len(class_names))
    if ids is not None:  # one colour per track, the class palette's, cycled
        palette = class_colors(TRACK_COLOURS)
        colors = [palette[int(i) % TRACK_COLOURS] for i in ids]
    draw = ImageDraw.Draw(image)
    font = _font(image.size)
    width, height = image.size
    thickness = max(1, int(round((width + height) / 600)))
    # Draw low scores first so the most confident labels end up on top.
    order = range(len(boxes)) if scores is None else np.argsort(np.asarray(scores), kind="stable")
    for i in order:
        x1, y1, x2, y2 = [float(v) for v in boxes[i]]
        cls = int(classes[i])
        name = class_names[cls] if 0 <= cls < len(class_names) else str(cls)
        color = colors[i] if ids is not None else colors[cls % len(colors)]
        if trails is not None and len(trails[i]) > 1:
            draw.line([(float(x), float(y)) for x, y in trails[i]], fill=color,
                      width=thickness)
        draw.rectangle([x1, y1, x2, y2], outline=color, width=thickness)
        label = name if scores is None else f"{name} {float(scores[i]):.2f}"
        if ids is not None:
            label = f"#{int(ids[i])} {label}"
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        tw, th = right - left, bottom - top
        pad = 2
        ty = y1 - th - 2 * pad if y1 - th - 2 * pad >= 0 else y1
        tx = min(max(x1, 0), max(width - tw - 2 * pad, 0))
        draw.rectangle([tx, ty, tx + tw + 2 * pad, ty + th + 2 * pad], fill=color)
        draw.text((tx + pad - left, ty + pad - top), label, fill=text_color(color), font=font)
    return image


def draw_on_array(image: np.ndarray, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  class_names: Sequence[str], colors: Optional[Sequence[Color]] = None,
                  ids: Optional[np.ndarray] = None,
                  trails: Optional[Sequence[np.ndarray]] = None) -> np.ndarray:
    """:func:`draw_detections` for an ``(H, W, 3)`` uint8 RGB array; returns a new array."""
    drawn = draw_detections(Image.fromarray(np.asarray(image, dtype=np.uint8)), boxes, scores, classes,
                            class_names, colors, ids, trails)
    return np.asarray(drawn)


def draw_batch(images: np.ndarray, boxes: np.ndarray, class_names: Sequence[str],
               columns: int = 4) -> np.ndarray:
    """A training batch as the model sees it, one picture: ``images`` ``(B, H, W, 3)`` float in
    ``[0, 1]`` (or uint8), ``boxes`` ``(B, M, 5)`` ``x1, y1, x2, y2, class`` input pixels (rows of
    zeros: padding), each image with its boxes and class names (the ground-truth drawer), in a
    grid of ``columns``; returns uint8 ``(rows * H, columns * W, 3)``."""
    images = np.asarray(images)
    if images.dtype != np.uint8:
        images = (np.clip(images, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    count, h, w = images.shape[:3]
    columns = max(1, min(int(columns), count))
    rows = -(-count // columns)
    grid = np.full((rows * h, columns * w, 3), 114, np.uint8)
    for k in range(count):
        b = np.asarray(boxes[k], np.float64).reshape(-1, 5)
        b = b[(b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])]  # padding rows out
        drawn = draw_on_array(images[k], b[:, :4], None, b[:, 4].astype(int), class_names)
        r, c = divmod(k, columns)
        grid[r * h:(r + 1) * h, c * w:(c + 1) * w] = drawn
    return grid


def plot_pr_curves(curves: Sequence[Optional[dict]], class_names: Sequence[str], path: str,
                   title: str = "Precision-recall (IoU 0.5)") -> str:
    """Plot per-class precision-recall curves to a PNG.

    curves: per class ``{"recall": (D,), "precision": (D,), "ap": float}`` or None (no ground truth).
    Returns ``path``. Needs matplotlib (``pip install yolo3[plot]``).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 6), dpi=100)
    colors = class_colors(len(class_names))
    drawn = 0
    for k, curve in enumerate(curves):
        if curve is None:
            continue
        rec = np.concatenate([[0.0], np.asarray(curve["recall"], dtype=float)])
        prec = np.concatenate([[1.0], np.asarray(curve["precision"], dtype=float)])
        ax.plot(rec, prec, color=np.array(colors[k]) / 255.0, linewidth=1.2,
                label=f"{class_names[k]} ({curve['ap']:.3f})")
        drawn += 1
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if 0 < drawn <= 30:
        ax.legend(fontsize=7, loc="lower left", ncol=2 if drawn > 10 else 1)
    path = _save(fig, path)
    plt.close(fig)
    return path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: str, **savefig) -> str:
    """Write a matplotlib figure to the PNG ``path`` atomically, marked as yolo3's (its
    ``Software`` text: :func:`yolo3.core.output_folder.written_by_yolo3` recognises it, so the next run
    may replace it and a user's file of the same name is never replaced)."""
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", metadata={
        "Software": YOLO3_SOFTWARE}, **savefig), suffix=".png")
    return path


def _save(fig, path: str) -> str:
    save_figure(fig, path, bbox_inches="tight")
    fig.clf()
    return path


def plot_confusion_matrix(matrix: np.ndarray, class_names: Sequence[str], path: str) -> str:
    """Plot a ``(C + 1, C + 1)`` confusion matrix ``[predicted, true]`` (last: background) to a
    PNG, each true class's column normalised to 1, with the counts written in (up to 30 classes).
    Needs matplotlib (``pip install yolo3[plot]``)."""
    plt = _pyplot()
    matrix = np.asarray(matrix, np.float64)
    labels = list(class_names) + ["background"]
    shares = matrix / np.maximum(matrix.sum(axis=0, keepdims=True), 1)
    side = min(4 + 0.45 * len(labels), 24)
    fig, ax = plt.subplots(figsize=(side, side * 0.85), dpi=100)
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    ticks = np.arange(len(labels))
    ax.set_xticks(ticks, labels, rotation=90, fontsize=8)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_xlabel("true")
    ax.set_ylabel("predicted")
    ax.set_title("Confusion matrix (columns: true class, normalised; counts inside)")
    if len(labels) <= 31:
        for (i, j), count in np.ndenumerate(matrix):
            if count:
                ax.text(j, i, f"{int(count)}", ha="center", va="center", fontsize=7,
                        color="white" if shares[i, j] > 0.5 else "black")
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_confidence_curves(curves, class_names: Sequence[str], path: str) -> str:
    """Plot precision, recall and F1 against confidence (a
    :class:`yolo3.evaluation.diagnostics.ConfidenceCurves`) to one PNG of three panels: a thin line
    per class, a thick one for the mean, the best-F1 confidence marked. Needs matplotlib."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 5), dpi=100)
    colors = class_colors(len(class_names))
    best = curves.best()
    for ax, (what, per_class, mean) in zip(axes, (
            ("precision", curves.precision, curves.mean_precision),
            ("recall", curves.recall, curves.mean_recall),
            ("F1", curves.f1, curves.mean_f1))):
        if len(curves.classes) <= 30:
            for k in curves.classes:
                ax.plot(curves.confidence, per_class[k], color=np.array(colors[k]) / 255.0,
                        linewidth=0.8, alpha=0.8, label=class_names[k])
        ax.plot(curves.confidence, mean, color="black", linewidth=2.5, label="all classes")
        ax.axvline(best["confidence"], color="gray", linestyle="--", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("confidence")
        ax.set_ylabel(what)
        ax.grid(True, alpha=0.3)
    axes[2].set_title(f"best F1 {best['f1']:.3f} at confidence {best['confidence']:.3f}")
    axes[0].set_title("precision (IoU 0.5)")
    axes[1].set_title("recall (IoU 0.5)")
    axes[2].legend(fontsize=7, loc="lower center", ncol=2 if len(curves.classes) > 10 else 1)
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_labels(records, class_names: Sequence[str], input_hw: Sequence[int], path: str,
                anchors: Optional[np.ndarray] = None, strides: Sequence[int] = (32, 16, 8),
                notes: Sequence[str] = ()) -> str:
    """The labels of a dataset, drawn (``yolo3 check --plots``): class counts, box centres (a
    heat map over the image, as shares of its width and height), box width against height at
    ``input_hw`` ``(h, w)`` (letterboxed, pixels, log scales) with the model's ``strides`` and
    ``anchors`` ``(A, 2)`` ``(w, h)`` marked, and the spread of box sides at that size; ``notes``
    (the rare classes, the tile suggestion) under the title. ``records``: each with its
    ``image_hw``. Needs matplotlib."""
    plt = _pyplot()
    known = [r for r in records if r.image_hw is not None]
    boxes = [np.asarray(r.boxes, np.float64).reshape(-1, 5) for r in known]
    classes = np.concatenate([b[:, 4] for b in boxes]).astype(int) if boxes else np.zeros(0, int)
    centres = np.concatenate([np.stack([(b[:, 0] + b[:, 2]) / 2 / r.image_hw[1],
                                        (b[:, 1] + b[:, 3]) / 2 / r.image_hw[0]], axis=1)
                              for r, b in zip(known, boxes)]) if boxes else np.zeros((0, 2))
    wh = box_sizes(known, input_hw)
    fig, axes = plt.subplots(2, 2, figsize=(13, 10), dpi=100)
    counts = np.bincount(classes, minlength=len(class_names))[:len(class_names)]
    colors = np.array(class_colors(max(len(class_names), 1))) / 255.0
    ax = axes[0, 0]
    ax.bar(np.arange(len(class_names)), counts, color=colors[:len(class_names)])
    ax.set_xticks(np.arange(len(class_names)), class_names, rotation=90 if len(class_names) > 8
                  else 0, fontsize=8)
    ax.set_ylabel("boxes")
    ax.set_title(f"class counts ({len(classes)} boxes, {len(known)} images)")
    ax = axes[0, 1]
    heat, _, _ = np.histogram2d(centres[:, 1], centres[:, 0], bins=40, range=[[0, 1], [0, 1]])
    image = ax.imshow(heat, extent=(0, 1, 1, 0), cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label="boxes")
    ax.set_xlabel("centre x / image width")
    ax.set_ylabel("centre y / image height")
    ax.set_title("box centres")
    size = f"{int(input_hw[1])}x{int(input_hw[0])}"
    ax = axes[1, 0]
    if len(wh):
        ax.scatter(np.maximum(wh[:, 0], 0.5), np.maximum(wh[:, 1], 0.5), s=4, alpha=0.3,
                   c=colors[classes % len(colors)], label="boxes")
    for stride in strides:
        ax.axvline(stride, color="grey", linestyle="--", linewidth=0.8)
        ax.axhline(stride, color="grey", linestyle="--", linewidth=0.8)
        ax.text(stride, 0.02, f" stride {stride}", color="grey", fontsize=7, rotation=90,
                va="bottom", transform=ax.get_xaxis_transform())
    if anchors is not None and len(anchors):
        anchors = np.asarray(anchors, np.float64).reshape(-1, 2)
        ax.scatter(anchors[:, 0], anchors[:, 1], marker="x", s=60, color="red", label="anchors")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"width at {size} (px)")
    ax.set_ylabel(f"height at {size} (px)")
    ax.set_title("box sizes against the strides and anchors")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[1, 1]
    side = np.sqrt(np.prod(np.maximum(wh, 0.5), axis=1)) if len(wh) else np.zeros(0)
    low = max(float(side.min()) * 0.8, 0.5) if len(side) else 0.5
    bins = np.geomspace(low, max(float(side.max()) if len(side) else 1.0, low * 2) * 1.1, 40)
    ax.hist(side, bins=bins, color="steelblue")
    for stride in strides:
        ax.axvline(stride, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel(f"box side sqrt(w*h) at {size} (px)")
    ax.set_ylabel("boxes")
    ax.set_title("box sides at the input size")
    fig.suptitle("Labels" + "".join(f"\n{note}" for note in notes), fontsize=10)
    path = _save(fig, path)
    plt.close(fig)
    return path


def save_png(image: Image.Image, path: str) -> str:
    """Write a PIL image to the PNG ``path`` atomically, marked as yolo3's (as :func:`save_figure`)."""
    from PIL.PngImagePlugin import PngInfo
    info = PngInfo()
    info.add_text("Software", YOLO3_SOFTWARE)
    atomic_write(path, lambda tmp: image.save(tmp, format="PNG", pnginfo=info, compress_level=3),
                 suffix=".png")
    return path


def labels_beside_predictions(image: Image.Image, truth: np.ndarray, detections, class_names:
                              Sequence[str], caption: str = "", height: int = 320,
                              score: float = 0.0) -> Image.Image:
    """One row of a gallery: the image with its labels (left) and with its detections scored at
    least ``score`` (right), scaled to ``height`` pixels, ``caption`` above. ``truth``: ``(N, 5)``
    ``x1, y1, x2, y2, class``; ``detections``: ``(boxes (M, 4), scores (M,), classes (M,))``,
    pixels of ``image``."""
    image = image.convert("RGB")
    scale = height / max(image.height, 1)
    size = (max(1, round(image.width * scale)), height)
    truth = np.asarray(truth, np.float64).reshape(-1, 5)
    boxes, scores, classes = (np.asarray(a) for a in detections)
    scores = scores.reshape(-1)
    keep = scores >= score
    small = image.resize(size, Image.BILINEAR)
    left = draw_detections(small, truth[:, :4] * scale, None, truth[:, 4].astype(int), class_names)
    right = draw_detections(small, np.asarray(boxes, np.float64).reshape(-1, 4)[keep] * scale,
                            scores[keep], classes.reshape(-1).astype(int)[keep], class_names)
    font = _font((size[0] * 2, 2 * height))
    strip = 2 * (font.getbbox("Ag")[3] + 4)
    caption_width = font.getbbox(caption)[2] + 8 if caption else 0
    row = Image.new("RGB", (max(2 * size[0] + 8, caption_width), height + strip), (255, 255, 255))
    row.paste(left, (0, strip))
    row.paste(right, (size[0] + 8, strip))
    draw = ImageDraw.Draw(row)
    draw.text((4, 2), caption, fill=(0, 0, 0), font=font)
    draw.text((4, strip // 2 + 1), "labels", fill=(0, 110, 0), font=font)
    draw.text((size[0] + 12, strip // 2 + 1), "predictions", fill=(160, 0, 0), font=font)
    return row


def stack_rows(rows: Sequence[Image.Image], gap: int = 8) -> Image.Image:
    """Rows (:func:`labels_beside_predictions`) one under the other on white, left-aligned."""
    width = max(r.width for r in rows)
    sheet = Image.new("RGB", (width, sum(r.height for r in rows) + gap * (len(rows) - 1)),
                      (255, 255, 255))
    top = 0
    for r in rows:
        sheet.paste(r, (0, top))
        top += r.height + gap
    return sheet


def plot_error_breakdown(breakdown, path: str) -> str:
    """The TIDE breakdown (:class:`yolo3.evaluation.error_analysis.ErrorBreakdown`) as two bar
    charts: the AP@0.5 points each error type costs, fixed on its own, and what perfect
    precision or recall would add. Needs matplotlib."""
    plt = _pyplot()
    fig, (main, special) = plt.subplots(1, 2, figsize=(11, 3.8), dpi=100,
                                        gridspec_kw={"width_ratios": [3, 1.3]})
    values = [100 * breakdown.delta_ap[t] for t in ERROR_TYPES]
    labels = [f"{SHORT_NAMES[t]}\n{t}" for t in ERROR_TYPES]
    colors = np.array(class_colors(len(ERROR_TYPES))) / 255.0
    main.barh(labels[::-1], values[::-1], color=colors[::-1])
    for y, v in enumerate(values[::-1]):
        main.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    main.set_xlabel("AP@0.5 points gained by fixing this type alone")
    main.set_title(f"Errors (TIDE), AP@0.5 {100 * breakdown.ap50:.2f}: the types overlap and "
                   "do not add up", fontsize=9)
    extra = [100 * breakdown.special["false_positives"], 100 * breakdown.special["false_negatives"]]
    special.bar(["false\npositives", "false\nnegatives"], extra, color=["#c0504d", "#4f81bd"])
    for x, v in enumerate(extra):
        special.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    special.set_ylabel("AP@0.5 points")
    special.set_title("all of them fixed", fontsize=9)
    fig.tight_layout()
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_results(columns, path: str, title: str = "Training") -> str:
    """Every series a training run logged (``history.csv``'s columns: ``epoch``, numbered from 1,
    and the rest), one small panel each against the epoch; epochs without a value (NaN: not
    evaluated) left out. ``columns``: ``{name: [value per row]}``. Needs matplotlib."""
    from matplotlib.figure import Figure  # no pyplot: safe in any thread, no global state
    from matplotlib.ticker import MaxNLocator
    epochs = list(columns.get("epoch", []))
    names = [k for k in columns if k != "epoch"]
    cols = min(4, max(1, len(names)))
    rows = -(-len(names) // cols) if names else 1
    fig = Figure(figsize=(3.2 * cols, 2.6 * rows), dpi=90)
    for k, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, k + 1)
        points = [(e, v) for e, v in zip(epochs, columns[name]) if v == v]  # NaN left out
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", ms=3, color="tab:blue" if "loss" in name else "tab:green")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{title}: every logged series by epoch", fontsize=10)
    # fixed margins: tight_layout draws the figure twice more (a third of the time)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.08, top=1 - 0.45 / fig.get_figheight(),
                        wspace=0.35, hspace=0.45)
    return save_figure(fig, path)


def draw_worst_images(report, image_of, gt, dets, class_names: Sequence[str],
                      height: int = 320) -> Optional[Image.Image]:
    """The gallery of an :class:`~yolo3.evaluation.error_analysis.ErrorReport`'s worst images, one
    row each: labels beside the detections scored at least its score. ``image_of(image_id)``: the
    ``(H, W, 3)`` uint8 image, or None to leave that row out. None when no row is left."""
    rows = []
    for im, reason in report.worst:
        array = image_of(im.image)
        if array is None:
            continue
        name = str(im.image).replace("\\", "/").rsplit("/", 1)[-1]
        rows.append(labels_beside_predictions(
            Image.fromarray(array), gt[im.image],
            dets.get(im.image, (np.zeros((0, 4)), np.zeros(0), np.zeros(0))), class_names,
            caption(im, reason, name), height=height, score=report.per_class.score))
    return stack_rows(rows) if rows else None
