from statskit.central import mean, median
from statskit.spread import stdev


def summary(data):
    return {
        "n": len(data),
        "mean": mean(data),
        "median": median(data),
        "stdev": stdev(data) if len(data) > 1 else 0.0,
        "min": min(data),
        "max": max(data),
    }
