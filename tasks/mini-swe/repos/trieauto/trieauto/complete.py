def complete(trie, prefix, limit=None):
    node = trie.find(prefix)
    if node is None:
        return []
    out = []
    for word in trie.words_below(node, prefix):
        out.append(word)
        if limit is not None and len(out) >= limit:
            break
    return out


def count_prefix(trie, prefix):
    return len(complete(trie, prefix))
