"""keras-yolo3's contracts under keras-yolo3's names, for the faces ``yolo3.model`` and
``yolo3.utils``. Nothing inside yolo3 imports this folder or the faces.
"""
