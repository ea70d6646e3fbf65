"""Running detectors: the Keras detector (``detector``: ``YOLO``, ``load_detector``), which engine
runs a ``.keras`` network and its cached conversion (``engines``), the runners of exported files
and the detector over them (``runners``), video and webcams, keras-yolo3's ``YOLO()`` arguments.

Imports ``checkpoint``, ``evaluation``, ``modeling``, ``data``, ``ops``, ``config`` and ``core``.
"""
