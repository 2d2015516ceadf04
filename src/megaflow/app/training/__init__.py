"""The closed RL loop behind `megaflow train` (:mod:`megaflow.app.training.loop`).

``plan`` fixes the prompts of every step, ``splits`` loads the train and
held-out task sets, ``rollouts`` runs a step's tasks and reads back its GRPO
groups, ``staleness`` bounds how old a sample's weights may be, ``weights``
names the engines the run's weight sync updates, ``probe`` checks at start that
the rollout model answers with the trainer's token ids, ``learner`` wraps the trainer,
``curve`` keeps and draws the learning curve.
"""
