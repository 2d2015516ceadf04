from statskit.central import mean, median, mode
from statskit.spread import stdev, variance
from statskit.summary import summary

__all__ = ["mean", "median", "mode", "stdev", "summary", "variance"]
