"""Run configuration: YAML -> validated pydantic models."""

from megaflow.config.loader import load_config, parse_config
from megaflow.config.models import RunConfig

__all__ = ["RunConfig", "load_config", "parse_config"]
