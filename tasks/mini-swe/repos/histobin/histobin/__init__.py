from histobin.edges import linear_edges
from histobin.histogram import Histogram
from histobin.render import render_bars

__all__ = ["Histogram", "linear_edges", "render_bars"]
