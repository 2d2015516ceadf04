def to_ascii(text):
    """Drop every character that is not plain ASCII."""
    return "".join(c for c in text if ord(c) < 128)
