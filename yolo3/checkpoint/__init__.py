"""Model files: what a saved model says about itself (``metadata``: ``ModelInfo``), saving and
loading ``.keras`` files, weights copied by layer name (name mapping, head transfer to another
class count), a TFLite file's info, and Darknet weights converted to Keras.

Imports ``modeling``, ``data``, ``darknet`` (its formats), ``ops``, ``config`` and ``core``.
"""
