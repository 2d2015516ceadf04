"""The RL trainer: training samples from trajectories, GRPO, weight sync.

Only :mod:`megaflow.train.samples` is importable without torch; the trainer
modules import torch and transformers (the ``train`` extra).
"""
