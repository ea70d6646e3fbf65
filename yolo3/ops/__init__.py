"""The numerics between images and a network: box geometry and IoU, anchors (files and k-means),
the letterbox, target encoding for the anchor head and the anchor-free head's task-aligned
assignment, and decoding raw maps into boxes.

Imports ``config`` and ``core``. ``boxes`` and ``anchors`` are NumPy; ``box_ops``, ``letterbox``,
``targets``, ``decode`` and ``anchor_free`` still call TensorFlow (named in ``.importlinter`` until
they are written in ``keras.ops``).
"""
