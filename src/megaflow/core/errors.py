"""The one exception tree of MegaFlow.

Every error MegaFlow raises derives from :class:`MegaFlowError`, and each
subclass also inherits the builtin it refines, so callers may catch either
(``except SandboxTimeout`` or ``except TimeoutError``). Messages say what
failed, with which input, and what to do about it.

::

    MegaFlowError
    ├── ConfigError (ValueError)             a config file or value is invalid
    ├── InvalidInput (ValueError)            a malformed task, key or request
    │   └── ArtifactKeyError                 an artifact key escapes the store root
    ├── InvalidTransition (ValueError)       an illegal task state change
    ├── NotFound (KeyError)                  a run, task, sandbox or artifact is unknown
    ├── AlreadyExists (ValueError)           a duplicate id
    ├── PluginError (ImportError)            a dotted path cannot be loaded
    ├── AuthError (PermissionError)          a missing or wrong bearer token
    ├── StorageError (OSError)               a store failed to read or write
    │   ├── ChecksumMismatch                 stored bytes do not match their checksum
    │   └── StoreUnavailable                 a store stayed unreachable past its deadline
    ├── Backpressure (RuntimeError)          a bounded buffer is full
    ├── InfraError (RuntimeError)            retryable infrastructure failure
    │   ├── SandboxError                     a sandbox failed
    │   │   └── SandboxStartError            a sandbox could not be started
    │   ├── InstanceLost                     an instance stopped heartbeating
    │   └── TransportError (ConnectionError) a backend or peer could not be reached
    │       └── ReplicaLost                  the replica holding an episode's tokens is gone
    ├── AgentError (RuntimeError)            the agent itself failed: final, never retried
    ├── ModelError (RuntimeError)            a model backend answered with an error
    ├── WarmStartFailed (RuntimeError)       a warm policy does not copy from the issue
    ├── MegaFlowTimeout (TimeoutError)       a deadline passed
    │   └── SandboxTimeout                   a command in a sandbox ran too long
    └── Cancelled (RuntimeError)             a task or run was cancelled
"""

from __future__ import annotations


class MegaFlowError(Exception):
    """Root of every error MegaFlow raises."""


class ConfigError(MegaFlowError, ValueError):
    """A configuration file or value is invalid.

    ``errors`` holds one ``(field_path, reason)`` pair per problem found.
    """

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors: list[tuple[str, str]] = errors or []


class InvalidInput(MegaFlowError, ValueError):
    """A malformed task, key or request."""


class ArtifactKeyError(InvalidInput):
    """An artifact key is empty, absolute or tries to escape the store root."""


class InvalidTransition(MegaFlowError, ValueError):
    """A task was asked to move between two states that are not connected."""


class NotFound(MegaFlowError, KeyError):
    """A run, task, sandbox or artifact does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; we do not want that
        return str(self.args[0]) if self.args else ""


class AlreadyExists(MegaFlowError, ValueError):
    """An object with the same id already exists."""


class PluginError(MegaFlowError, ImportError):
    """A plug-in given by dotted path could not be imported or is of the wrong kind."""


class AuthError(MegaFlowError, PermissionError):
    """A call carried no bearer token or a wrong one; nothing was done."""


class StorageError(MegaFlowError, OSError):
    """A store failed to read or write."""


class ChecksumMismatch(StorageError):
    """Stored bytes do not match the checksum recorded when they were written."""


class LeaseLost(StorageError):
    """This process no longer drives the run: another took its driver lease over
    (:mod:`megaflow.storage.lease`). Its writes are refused; the run goes on under
    the new driver, so nothing is lost by stopping."""


class StoreUnavailable(StorageError):
    """A store stayed unreachable (or its disk full) longer than its outage deadline.

    ``store`` names which one (``metadata``, ``queue``, ``events``, ``artifacts``).
    The work is not lost: the run stops, and ``megaflow run --resume`` finishes it."""

    def __init__(self, message: str, store: str = "") -> None:
        super().__init__(message)
        self.store = store


class Backpressure(MegaFlowError, RuntimeError):
    """A bounded buffer is full and the caller asked not to wait."""


class InfraError(MegaFlowError, RuntimeError):
    """An infrastructure failure. Tasks failing with it are retried with backoff."""


class SandboxError(InfraError):
    """A sandbox failed or misbehaved."""


class GradingEnvironmentError(InfraError):
    """An instance cannot be graded here: its test patch does not apply to the
    base, its runner does not start, or its tests fail without any patch."""


class SandboxFileError(SandboxError):
    """A file operation in a live sandbox failed: the file's doing (it is too
    large, unreadable, a directory), not the sandbox's."""


class SandboxStartError(SandboxError):
    """A sandbox could not be created or started."""


class InstanceLost(InfraError):
    """An instance stopped heartbeating; its tasks go back to the queue."""


class TransportError(InfraError, ConnectionError):
    """A model backend, store or peer service could not be reached."""


class ReplicaLost(TransportError):
    """The model replica that served a trajectory's earlier turns (and holds its
    token-in state) failed or left the rotation; the episode must start again from
    its first turn. A transport error, so the scheduler retries the task's attempt."""


class AgentError(MegaFlowError, RuntimeError):
    """The agent itself failed. The result is final and is never retried."""


class ModelError(MegaFlowError, RuntimeError):
    """A model backend answered, but with an error or an unusable response."""


class WarmStartFailed(MegaFlowError, RuntimeError):
    """A supervised warm start left a policy RL cannot start from: it does not copy
    from the issue what its answers need, so every sample would score 0."""


class MegaFlowTimeout(MegaFlowError, TimeoutError):
    """A deadline passed: queue wait, sandbox start or task deadline."""


class SandboxTimeout(MegaFlowTimeout):
    """A command in a sandbox ran past its timeout; its process group was killed."""


class Cancelled(MegaFlowError, RuntimeError):
    """A task or a run was cancelled by a user."""
