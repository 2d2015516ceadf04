from iniconf.config import Config
from iniconf.parser import ParseError, parse

__all__ = ["Config", "ParseError", "parse"]
