"""The zip format, as far as archives need it: stored members aligned to 64 bytes.

:func:`write_members` lays every member out up front (sizes are known), so payloads
can be written in parallel with ``pwrite``; each payload starts at a multiple of
:data:`ALIGN` (padding goes in an extra field of the local header), so a reader can map
the archive once and view every tensor without copying. Zero payloads (``memmap_like``)
are left as holes. The end-of-archive comment records whether the checksums are
current (:data:`CLEAN`) or stale after in-place writes (:data:`DIRTY`).
"""

from __future__ import annotations

import os
import struct
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

ALIGN = 64
CLEAN = b"tensordict-archive:1:crc=current"
DIRTY = b"tensordict-archive:1:crc=stale  "
_PAD_ID = 0x6474  # "td"
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_EOCD64 = struct.Struct("<IQHHIIQQQQ")
_LOC64 = struct.Struct("<IIQI")
_LIMIT = 0xFFFFFFFF
_CHUNK = 1 << 26
#: Payloads below this size are written together with the headers around them.
_SMALL = 1 << 16
#: Size of one gathered write of headers and small payloads.
_BATCH = 1 << 23


@dataclass
class Member:
    """One member of an archive being written."""

    name: str
    nbytes: int
    align: bool
    data: memoryview | None  # the payload's bytes; None: zeros (left as a hole)
    header_offset: int = 0
    data_offset: int = 0
    crc: int = 0
    local_extra: bytes = b""

    @cached_property
    def encoded(self) -> bytes:
        return self.name.encode("utf-8")


def _dos_time() -> tuple[int, int]:
    t = time.localtime()
    return (t.tm_hour << 11) | (t.tm_min << 5) | (t.tm_sec // 2), ((t.tm_year - 1980) << 9) | (
        t.tm_mon << 5
    ) | t.tm_mday


def _flags(name: bytes) -> int:
    try:
        name.decode("ascii")
        return 0
    except UnicodeDecodeError:
        return 0x800


def layout(members: list[Member]) -> int:
    """Assign header and data offsets; returns where the central directory starts."""
    offset = 0
    for m in members:
        zip64 = m.nbytes >= _LIMIT
        extra = struct.pack("<HHQQ", 1, 16, m.nbytes, m.nbytes) if zip64 else b""
        header = _LOCAL.size + len(m.encoded) + len(extra)
        pad = (-(offset + header)) % ALIGN if m.align else 0
        if 0 < pad < 4:
            pad += ALIGN
        if pad:
            extra += struct.pack("<HH", _PAD_ID, pad - 4) + b"\0" * (pad - 4)
        m.local_extra = extra
        m.header_offset = offset
        m.data_offset = offset + header + pad
        offset = m.data_offset + m.nbytes
    return offset


def _local_header(m: Member, tm: int, dt: int) -> bytes:
    zip64 = m.nbytes >= _LIMIT
    size = _LIMIT if zip64 else m.nbytes
    return (
        _LOCAL.pack(
            0x04034B50,
            45 if zip64 else 20,
            _flags(m.encoded),
            0,
            tm,
            dt,
            m.crc,
            size,
            size,
            len(m.encoded),
            len(m.local_extra),
        )
        + m.encoded
        + m.local_extra
    )


def write_members(fd: int, members: list[Member], num_threads: int, on_done: Any = None) -> int:
    """Write every member (headers and payloads) at its offset; returns the end offset.

    Payloads of :data:`_SMALL` bytes or more are written on their own (in ``num_threads``
    threads when > 1); headers and small payloads, which lie back to back in file order,
    are gathered into writes of about :data:`_BATCH` bytes, so 10,000 small members cost a
    handful of system calls rather than 20,000.
    """
    end = layout(members)
    large = [m for m in members if m.data is not None and m.nbytes >= _SMALL]

    def one(m: Member) -> None:
        assert m.data is not None
        m.crc = write_payload(fd, m.data, m.data_offset)
        if on_done is not None:
            on_done(m.nbytes)

    if num_threads > 1 and len(large) > 1:
        with ThreadPoolExecutor(num_threads) as pool:
            list(pool.map(one, large))
    else:
        for m in large:
            one(m)
    run = bytearray()
    run_start = 0
    tm, dt = _dos_time()
    for m in members:
        data = m.data if m.nbytes < _SMALL else None
        if data is not None:
            m.crc = zlib.crc32(data)
        if not run:
            run_start = m.header_offset
        run += _local_header(m, tm, dt)
        if data is not None:
            run += data
            if on_done is not None:
                on_done(m.nbytes)
        if data is None or len(run) >= _BATCH:  # the next bytes are not right after these
            write_payload(fd, memoryview(run), run_start)
            run = bytearray()
    if run:
        write_payload(fd, memoryview(run), run_start)
    return end


def write_central(fd: int, members: list[Member], start: int, comment: bytes) -> None:
    """Write the central directory and end records at ``start`` and truncate after them."""
    parts = []
    tm, dt = _dos_time()
    for m in members:
        extra = b""
        usize = csize = m.nbytes
        offset = m.header_offset
        fields = []
        if m.nbytes >= _LIMIT:
            fields += [m.nbytes, m.nbytes]
            usize = csize = _LIMIT
        if m.header_offset >= _LIMIT:
            fields.append(m.header_offset)
            offset = _LIMIT
        if fields:
            extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields)
        version = 45 if fields else 20
        parts.append(
            _CENTRAL.pack(
                0x02014B50,
                version | 0x0300,
                version,
                _flags(m.encoded),
                0,
                tm,
                dt,
                m.crc,
                csize,
                usize,
                len(m.encoded),
                len(extra),
                0,
                0,
                0,
                0o100644 << 16,
                offset,
            )
            + m.encoded
            + extra
        )
    central = b"".join(parts)
    size = len(central)
    count = len(members)
    tail = b""
    if count >= 0xFFFF or start >= _LIMIT or size >= _LIMIT:
        eocd64_at = start + size
        tail += _EOCD64.pack(0x06064B50, 44, 45, 45, 0, 0, count, count, size, start)
        tail += _LOC64.pack(0x07064B50, 0, eocd64_at, 1)
        tail += _EOCD.pack(0x06054B50, 0, 0, 0xFFFF, 0xFFFF, _LIMIT, _LIMIT, len(comment))
    else:
        tail += _EOCD.pack(0x06054B50, 0, 0, count, count, size, start, len(comment))
    payload = central + tail + comment
    os.pwrite(fd, payload, start)
    os.ftruncate(fd, start + len(payload))


def write_payload(fd: int, view: memoryview, offset: int) -> int:
    """Write ``view`` at ``offset`` (in chunks of :data:`_CHUNK`); returns its CRC-32."""
    crc = 0
    done = 0
    total = len(view)
    while done < total:
        chunk = view[done : done + _CHUNK]
        crc = zlib.crc32(chunk, crc)
        written = 0
        while written < len(chunk):
            written += os.pwrite(fd, chunk[written:], offset + done + written)
        done += len(chunk)
    return crc


# --------------------------------------------------------------------------- reading


def data_offset(fp: Any, info: zipfile.ZipInfo, file_size: int) -> int:
    """Where ``info``'s payload starts (from its local header), validated."""
    if info.header_offset < 0 or info.header_offset + _LOCAL.size > file_size:
        raise ValueError(
            f"member {info.filename!r}: header offset {info.header_offset} is outside the file"
        )
    fp.seek(info.header_offset)
    raw = fp.read(_LOCAL.size)
    fields = _LOCAL.unpack(raw)
    if fields[0] != 0x04034B50:
        raise ValueError(f"member {info.filename!r}: bad local header signature")
    start = int(info.header_offset + _LOCAL.size + fields[9] + fields[10])
    if start + info.compress_size > file_size:
        raise ValueError(
            f"member {info.filename!r}: {info.compress_size} bytes at offset {start} run past "
            f"the end of the file ({file_size} bytes)"
        )
    return start


def comment_state(path: str) -> bytes:
    """The archive comment (``CLEAN``, ``DIRTY`` or something else)."""
    with zipfile.ZipFile(path) as zf:
        return zf.comment


def set_comment(path: str, comment: bytes) -> None:
    """Replace the archive comment in place (the end record is rewritten)."""
    with zipfile.ZipFile(path) as zf:
        old = zf.comment
    with open(path, "r+b") as fp:
        fp.seek(0, os.SEEK_END)
        size = fp.tell()
        eocd_at = size - _EOCD.size - len(old)
        fp.seek(eocd_at)
        fields = list(_EOCD.unpack(fp.read(_EOCD.size)))
        if fields[0] != 0x06054B50:
            raise ValueError(f"{path!r}: cannot locate the end-of-archive record")
        fields[7] = len(comment)
        fp.seek(eocd_at)
        fp.write(_EOCD.pack(*fields) + comment)
        fp.truncate()
        fp.flush()
        os.fsync(fp.fileno())


def patch_crcs(path: str, crcs: dict[str, int]) -> None:
    """Write new CRC-32 values for members (local headers and central directory) in place."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        start = zf.start_dir
    with open(path, "r+b") as fp:
        for info in infos:
            if info.filename in crcs:
                fp.seek(info.header_offset + 14)
                fp.write(struct.pack("<I", crcs[info.filename]))
        fp.seek(start)
        for _ in infos:
            raw = fp.read(_CENTRAL.size)
            fields = _CENTRAL.unpack(raw)
            if fields[0] != 0x02014B50:
                raise ValueError(f"{path!r}: bad central directory record")
            name = fp.read(fields[10])
            flags = fields[3]
            decoded = name.decode("utf-8" if flags & 0x800 else "cp437")
            if decoded in crcs:
                fp.seek(-(_CENTRAL.size + len(name)) + 16, os.SEEK_CUR)
                fp.write(struct.pack("<I", crcs[decoded]))
                fp.seek(_CENTRAL.size + len(name) - 20, os.SEEK_CUR)
            fp.seek(fields[11] + fields[12], os.SEEK_CUR)
        fp.flush()
        os.fsync(fp.fileno())
