def strip_comment(line):
    """Remove a trailing comment from a line."""
    for marker in ("#", ";"):
        pos = line.find(marker)
        if pos != -1:
            line = line[:pos]
    return line.rstrip()
