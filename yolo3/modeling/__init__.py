"""Keras models: the Darknet blocks, the bodies built from the registry's architectures, both
losses and their training models, the fused batch norm, graph surgery on bodies, and every use of
a private Keras API (``keras_compat``).

Imports ``ops``, ``config`` and ``core``; Keras throughout. TensorFlow only where named in
``.importlinter`` (the losses, the fused batch norm, ``keras_compat``).
"""
