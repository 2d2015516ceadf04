def build_query(params):
    parts = []
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            parts.append(f"{key}={v}")
    return "&".join(parts)
