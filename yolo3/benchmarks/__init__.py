"""Benchmarks that run their contenders side by side in one process and print a table of ratios,
with the machine they ran on (CPU model, flags, float32 matmul peak) beside absolute figures.

``yolo3 benchmark <name>`` / ``tools/benchmark_<name>.py``: ``data`` (tf.data vs the classic
generator), ``training`` (images/s, share of the matmul peak, wrapper overhead), ``inference``
(OpenCV DNN vs our forward vs end to end), ``convert`` (Darknet converter time and memory),
``recipe`` (time to accuracy: keras-yolo3's recipe vs today's defaults), ``export`` (deployment
formats: latency, size and mAP). Each module's ``run(args)`` runs it; its arguments are defined by
:mod:`yolo3.cli.benchmark`.
"""
