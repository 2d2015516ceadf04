SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def quote(text):
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(ch if ch in SAFE else f"%{byte:02X}")
    return "".join(out)


def unquote(text):
    text = text.replace("+", " ")
    raw, i = bytearray(), 0
    while i < len(text):
        if text[i] == "%" and i + 2 < len(text) + 0 and _is_hex(text[i + 1 : i + 3]):
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(text[i].encode("utf-8"))
            i += 1
    return raw.decode("utf-8", errors="replace")


def _is_hex(s):
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)
