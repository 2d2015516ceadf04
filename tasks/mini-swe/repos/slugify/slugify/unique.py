from slugify.core import slugify


def unique_slug(text, taken):
    base = slugify(text) or "item"
    slug, n = base, 2
    while slug in taken:
        slug = f"{base}-{n}"
        n += 1
    return slug
