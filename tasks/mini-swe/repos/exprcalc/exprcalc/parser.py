"""Recursive-descent parser.

Grammar:
    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := "-" unary | power
    power  := atom ("^" unary)?
    atom   := NUMBER | "(" expr ")"
"""

from exprcalc.ast import BinOp, Neg, Num
from exprcalc.lexer import tokenize


class Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos]

    def take(self):
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expr(self):
        left = self.term()
        if self.peek().kind == "op" and self.peek().text in "+-":
            op = self.take().text
            return BinOp(op, left, self.expr())
        return left

    def term(self):
        left = self.unary()
        if self.peek().kind == "op" and self.peek().text in "*/":
            op = self.take().text
            return BinOp(op, left, self.term())
        return left

    def unary(self):
        if self.peek().kind == "op" and self.peek().text == "-":
            self.take()
            return Neg(self.unary())
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek().kind == "op" and self.peek().text == "^":
            self.take()
            return BinOp("^", base, self.unary())
        return base

    def atom(self):
        tok = self.take()
        if tok.kind == "num":
            return Num(float(tok.text))
        if tok.kind == "lparen":
            node = self.expr()
            if self.take().kind != "rparen":
                raise SyntaxError("expected ')'")
            return node
        raise SyntaxError(f"unexpected token {tok.text!r}")


def parse(src):
    p = Parser(tokenize(src))
    node = p.expr()
    if p.peek().kind != "end":
        raise SyntaxError(f"trailing input at token {p.pos}")
    return node
