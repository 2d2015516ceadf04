def runs(text):
    """Yield (char, count) for each run of equal characters."""
    if not text:
        return
    current, count = text[0], 1
    for c in text[1:]:
        if c == current:
            count += 1
        else:
            yield current, count
            current, count = c, 1
    yield current, count
