"""Training: the loop over named steps (``train``), checkpoints and evaluation callbacks, the
recipe's decisions, the loss-summing replica wrapper (``parallel``), ``tf.distribute``
strategies, batch-norm statistics, resume state, the history file and learning-rate schedules.

Imports every folder below ``cli``/``benchmarks``/``export``. TensorFlow-only parts (tf.data,
tf.distribute) live here.
"""
