from globmatch.match import match


def filter_paths(paths, include=("**",), exclude=()):
    return [
        p
        for p in paths
        if any(match(i, p) for i in include) and not any(match(e, p) for e in exclude)
    ]
