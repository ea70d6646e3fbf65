"""The version of yolo3 (setup.py reads it here; ``yolo3.__version__`` is the same)."""
__version__ = "0.6.0"
