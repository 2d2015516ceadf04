from exprcalc.evaluator import evaluate
from exprcalc.lexer import tokenize
from exprcalc.parser import parse

__all__ = ["evaluate", "parse", "tokenize"]
