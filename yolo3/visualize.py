"""Drawing detections, per-class colours and precision-recall plots.

Boxes are ``(x1, y1, x2, y2)`` pixels of the image they are drawn on; colours are RGB tuples.
"""
from __future__ import annotations

import colorsys
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Color = Tuple[int, int, int]

_GOLDEN = 0.618033988749895


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
                    colors: Optional[Sequence[Color]] = None) -> Image.Image:
    """Return a copy of ``image`` with boxes and ``"name 0.87"`` labels drawn: the one box drawer
    (detections, and ground truth with ``scores=None``: labels without a score).

    boxes: ``(N, 4)`` ``(x1, y1, x2, y2)`` pixels of ``image``; scores ``(N,)``; classes ``(N,)`` ids
    into ``class_names``. Labels sit above the box, or inside it at the top when there is no room.
    """
    image = image.convert("RGB").copy()
    colors = list(colors) if colors is not None else class_colors(len(class_names))
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
        color = colors[cls % len(colors)]
        draw.rectangle([x1, y1, x2, y2], outline=color, width=thickness)
        label = name if scores is None else f"{name} {float(scores[i]):.2f}"
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        tw, th = right - left, bottom - top
        pad = 2
        ty = y1 - th - 2 * pad if y1 - th - 2 * pad >= 0 else y1
        tx = min(max(x1, 0), max(width - tw - 2 * pad, 0))
        draw.rectangle([tx, ty, tx + tw + 2 * pad, ty + th + 2 * pad], fill=color)
        draw.text((tx + pad - left, ty + pad - top), label, fill=text_color(color), font=font)
    return image


def draw_on_array(image: np.ndarray, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  class_names: Sequence[str], colors: Optional[Sequence[Color]] = None) -> np.ndarray:
    """:func:`draw_detections` for an ``(H, W, 3)`` uint8 RGB array; returns a new array."""
    drawn = draw_detections(Image.fromarray(np.asarray(image, dtype=np.uint8)), boxes, scores, classes,
                            class_names, colors)
    return np.asarray(drawn)


def plot_pr_curves(curves: Sequence[Optional[dict]], class_names: Sequence[str], path: str,
                   title: str = "Precision-recall (IoU 0.5)") -> str:
    """Plot per-class precision-recall curves to a PNG.

    curves: per class ``{"recall": (D,), "precision": (D,), "ap": float}`` or None (no ground truth).
    Returns ``path``. Needs matplotlib (``pip install yolo3[plot]``).
    """
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
