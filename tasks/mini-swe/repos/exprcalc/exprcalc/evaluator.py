from exprcalc.ast import BinOp, Neg, Num
from exprcalc.parser import parse

_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "^": lambda a, b: a**b,
}


def eval_node(node):
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg):
        return -eval_node(node.operand)
    if isinstance(node, BinOp):
        return _OPS[node.op](eval_node(node.left), eval_node(node.right))
    raise TypeError(f"unknown node {node!r}")


def evaluate(src):
    return eval_node(parse(src))
