from datetime import timedelta


def days(start, end):
    """Every date from start up to, but excluding, end."""
    d = start
    while d < end:
        yield d
        d += timedelta(days=1)
