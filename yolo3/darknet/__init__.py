"""Darknet's file formats: the cfg parser (no Keras), the weights file, the cfg of a registered
variant (``layout``) and random weights for tests and benchmarks. Converting Darknet weights into a
Keras body is :mod:`yolo3.checkpoint.darknet_convert`, writing a body back as Darknet files
:mod:`yolo3.export.darknet`.

Imports ``config`` and ``core``; no backend.
"""
from yolo3.darknet.cfg import DarknetCfg, equivalent, parse_cfg, parse_cfg_text
from yolo3.darknet.weights import Header, read_weights, write_weights

__all__ = ["DarknetCfg", "Header", "parse_cfg", "parse_cfg_text", "equivalent", "read_weights",
           "write_weights"]
