"""Weight sync: how the trainer's new weights reach the inference engines.

``abstract`` holds the :class:`WeightSync` interface and what it needs of an
engine; ``config`` one tagged config per backend (``train.weight_sync``), each
building its sync; ``in_process`` and ``disk`` are the backends.
"""
