"""Darknet cfg/weights <-> Keras bodies: parsing, conversion, export and random test weights.

Submodules: :mod:`~yolo3.darknet.cfg` (parser, no Keras), :mod:`~yolo3.darknet.weights` (file
format), :mod:`~yolo3.checkpoint.darknet_convert` (Darknet -> Keras), :mod:`~yolo3.export.darknet`
(Keras -> Darknet), :mod:`~yolo3.darknet.random_weights`. Keras is imported lazily.
"""
from yolo3.darknet.cfg import DarknetCfg, equivalent, parse_cfg, parse_cfg_text
from yolo3.darknet.weights import Header, read_weights, write_weights

__all__ = ["DarknetCfg", "Header", "parse_cfg", "parse_cfg_text", "equivalent", "read_weights",
           "write_weights"]
