"""The base: error types, writing files (atomically, and only where yolo3 may: the ownership
rule), output paths, logging's NOTICE level, deprecation of old spellings, settings' value types,
the cache of facts about files.

Imports nothing of yolo3 but ``core`` itself, and no TensorFlow, Keras or other backend: every
other folder may import it.
"""
