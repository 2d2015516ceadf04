def check_rectangular(rows):
    if not rows or not rows[0]:
        raise ValueError("empty matrix")
    width = len(rows[0])
    for r in rows:
        if len(r) != width:
            raise ValueError("ragged rows")
    return len(rows), width
