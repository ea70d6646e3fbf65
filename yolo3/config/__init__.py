"""What a model and a run are, as data: the variant registry (``specs``), the architectures
written once as Darknet operations, anchor masks, the anchor-free head's facts, the training
settings (``train_config``), the values settings may take (``choices``) and precision choices.

Imports ``core`` only; no TensorFlow, Keras or other backend (the registry is read by ``--help``).
"""
