from urlquery.build import build_query


def with_params(url, params):
    if not params:
        return url
    sep = "&" if "?" in url else "?"
    return url + sep + build_query(params)
