"""RL algorithms: advantage estimators and policy losses, registered by name.

``train.algorithm: {type: grpo|dr_grpo|dapo|gspo|rloo|reinforce_pp, ...}``
(:mod:`.config`) builds an :class:`~.algorithm.Algorithm` whose ``prepare``
scores a step's groups and whose ``loss`` gives a micro-batch's loss and
statistics; the worker calls these two and nothing else. Estimators and
losses are registered in :mod:`.registry`; the built-in ones are in
:mod:`.advantages` and :mod:`.losses`, the sampler/trainer mismatch
corrections in :mod:`.correction`.
"""
