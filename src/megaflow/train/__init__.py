"""The RL trainer: training samples from trajectories, RL algorithms, weight sync.

:mod:`~megaflow.train.samples`, :mod:`~megaflow.train.config` and
:mod:`~megaflow.train.stats` are importable without torch; the trainer
modules (``algorithms``, ``logprobs``, ``batching``, ``worker``, ``checkpoint``, ``protocol``,
``trainer``, ``launch``) import torch and transformers (the ``train`` extra).
``docs/train.md`` describes them.
"""
