from rle.codec import decode, encode
from rle.stream import Decoder

__all__ = ["Decoder", "decode", "encode"]
