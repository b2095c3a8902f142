"""Ageing a stream consumer for the demo: rewrite its last-seen time inside a ``DUMP``.

Redis has no command to set when a consumer was last seen, yet a "dead consumer" is one
that has not been seen for minutes. The demo builds the stream, ``DUMP``s it, moves the
consumer's last-seen time (and, on Redis 7.2+, its last-active time) back in the
serialized value, recomputes the payload's CRC-64 and ``RESTORE``s it. The rewrite is
refused (None) unless the checksum of the original verifies and the consumer's name
occurs exactly once followed by timestamps close to the server's clock.
"""

from __future__ import annotations

import struct

MINUTE_MS = 60_000

_CRC64_POLY = 0x95AC9329AC4BC9B5  # Jones polynomial, reflected: the checksum of DUMP payloads
_CRC64_TABLE: list[int] = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ _CRC64_POLY if _crc & 1 else _crc >> 1
    _CRC64_TABLE.append(_crc)


def crc64(data: bytes) -> int:
    """Redis's CRC-64 (Jones), as used in the footer of ``DUMP`` payloads."""
    crc = 0
    for byte in data:
        crc = _CRC64_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def age_consumer_in_dump(payload: bytes, consumer: str, seen_ms: int, now_ms: int) -> bytes | None:
    """``payload`` (a stream's DUMP) with ``consumer``'s seen/active times set to ``seen_ms``.

    A consumer is serialized as its length-prefixed name followed by its last-seen time
    (and, since Redis 7.2, its last-active time) as 8-byte little-endian milliseconds.
    Returns None when the layout is not recognised (the checksum is verified first).
    """
    if len(payload) < 11 or crc64(payload[:-8]) != struct.unpack("<Q", payload[-8:])[0]:
        return None
    name = consumer.encode()
    if len(name) >= 64:
        return None
    body, version = bytearray(payload[:-10]), payload[-10:-8]
    marker = bytes([len(name)]) + name
    pos = body.find(marker)
    if pos < 0 or body.find(marker, pos + 1) >= 0:
        return None
    offset, changed = pos + len(marker), 0
    for _ in range(2):
        if offset + 8 > len(body):
            break
        (value,) = struct.unpack_from("<q", body, offset)
        if abs(value - now_ms) > 10 * MINUTE_MS:
            break
        struct.pack_into("<q", body, offset, seen_ms)
        offset, changed = offset + 8, changed + 1
    if not changed:
        return None
    out = bytes(body) + version
    return out + struct.pack("<Q", crc64(out))
