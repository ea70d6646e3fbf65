"""Judging detections: COCO and VOC mAP (``metrics``), the confusion matrix and precision /
recall / F1 against confidence (``diagnostics``), drawing boxes and plots (``visualize``).

Imports ``data``, ``ops``, ``config`` and ``core``; no TensorFlow.
"""
