"""Which Unix account holds the other end of a loopback TCP connection (Linux ``/proc/net/tcp``).

Why: a learner's code runs on the hub's machine and can connect to the hub's
own port, past the proxy, with any ``X-Forwarded-For`` it likes. The hub's
proxy runs as the hub's own account, and a learner's code never does: the
account that owns the connecting socket tells the proxy apart from a learner,
where the address (127.0.0.1 for both) cannot.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def _proc_form(host: str, port: int, width: int) -> str:
    """``host:port`` as ``/proc/net/tcp{6}`` writes it: each 32-bit word of the address in host (little-endian) order."""
    address = ipaddress.ip_address(host)
    if width == 16 and address.version == 4:
        address = ipaddress.IPv6Address(f"::ffff:{address}")
    if width == 4 and address.version == 6:
        mapped = address.ipv4_mapped
        if mapped is None:
            return ""
        address = mapped
    packed = address.packed
    words = [packed[offset:offset + 4][::-1] for offset in range(0, len(packed), 4)]
    return f"{b''.join(words).hex().upper()}:{port:04X}"


def peer_uid(peer: tuple[str, int], local: tuple[str, int], tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid owning the socket at ``peer`` that is connected to ``local`` on this machine, or None if none is found."""
    for table, width in zip(tables, (4, 16)):
        wanted = (_proc_form(*peer, width), _proc_form(*local, width))
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and (fields[1], fields[2]) == wanted:
                return int(fields[7])
    return None
