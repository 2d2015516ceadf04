from semver.version import Version


def latest(texts, allow_pre=True):
    versions = [Version.parse(t) for t in texts]
    if not allow_pre:
        versions = [v for v in versions if not v.pre]
    return str(max(versions)) if versions else None
