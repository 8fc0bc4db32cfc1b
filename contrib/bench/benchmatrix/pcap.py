"""A small, strict pcap reader for RoCE v2 traffic (no scapy), and the
figures contrib/bench/wire-counts takes from a capture.

Reads classic pcap (microsecond or nanosecond, either byte order), link type
Ethernet. Each frame is parsed down to what is needed: Ethernet (one or two
802.1Q tags), IPv4 or IPv6 (no extension headers), UDP; a frame to UDP port
4791 is RoCE v2 and its first payload byte is the BTH opcode; a UDP
broadcast to port 9 whose payload starts "ompi-roce-wire " is a phase marker
(tests/bench/wire.c). Everything else is counted as "other" and ignored.
Nothing is trusted: a file whose header or a record is cut short or
inconsistent raises PcapError; a frame too short for the headers it claims
is counted as malformed, never parsed past its end.
"""

import struct

ROCE_PORT = 4791
MARKER_PORT = 9
MARKER_MAGIC = b"ompi-roce-wire "
LINKTYPE_ETHERNET = 1

# BTH opcodes (IBTA 1.4 table 38, RC) that are not data-bearing: a pure
# acknowledgement (0x11) and a RoCE v2 congestion notification (0x81).
OP_ACK = 0x11
OP_CNP = 0x81
# RC opcodes 0x00-0x1f grouped by what they do, for the per-opcode tallies.
OP_CLASS = {}
for _op in range(0x00, 0x06):
    OP_CLASS[_op] = "send"
for _op in range(0x06, 0x0C):
    OP_CLASS[_op] = "write"
OP_CLASS[0x0C] = "read_req"
for _op in range(0x0D, 0x11):
    OP_CLASS[_op] = "read_resp"
OP_CLASS[OP_ACK] = "ack"
OP_CLASS[0x12] = "atomic_ack"
OP_CLASS[0x13] = "atomic"
OP_CLASS[0x14] = "atomic"
OP_CLASS[0x16] = "send"  # send last with invalidate
OP_CLASS[0x17] = "send"  # send only with invalidate
OP_CLASS[OP_CNP] = "cnp"


class PcapError(ValueError):
    """The capture file itself is malformed (not one frame in it)."""


class Packet:
    """One RoCE v2 frame or one marker."""

    __slots__ = ("ts", "src", "dst", "opcode", "wire_len", "marker", "qp", "psn")

    def __init__(self, ts, src, dst, opcode, wire_len, marker=None, qp=None, psn=None):
        self.ts, self.src, self.dst = ts, src, dst
        self.opcode, self.wire_len, self.marker = opcode, wire_len, marker
        self.qp, self.psn = qp, psn  # BTH destination QP and PSN (None: not captured)

    def __repr__(self):
        return (f"Packet({self.ts:.6f}, {self.src}->{self.dst}, op={self.opcode}, "
                f"len={self.wire_len}, marker={self.marker!r})")


def read_records(data):
    """Yields (ts, orig_len, frame bytes) of every record; PcapError when the
    file is not a classic Ethernet pcap or a record is cut short."""
    if len(data) < 24:
        raise PcapError(f"{len(data)} bytes: shorter than a pcap header (24)")
    magic = data[:4]
    table = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
             b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
    if magic not in table:
        raise PcapError(f"not a classic pcap file (magic {magic.hex()}; pcapng is not read)")
    end, unit = table[magic]
    _vmaj, _vmin, _zone, _sig, snaplen, linktype = struct.unpack(end + "HHiIII", data[4:24])
    if linktype & 0xFFFF != LINKTYPE_ETHERNET:
        raise PcapError(f"link type {linktype}, not Ethernet (1)")
    off = 24
    while off < len(data):
        if len(data) - off < 16:
            raise PcapError(f"record header at offset {off} cut short")
        sec, frac, incl, orig = struct.unpack(end + "IIII", data[off:off + 16])
        off += 16
        if incl > orig or incl > max(snaplen, 65535) or len(data) - off < incl:
            raise PcapError(f"record at offset {off - 16}: captured {incl} of {orig} bytes, "
                            f"{len(data) - off} left in the file")
        yield sec + frac * unit, orig, data[off:off + incl]
        off += incl


def parse_frame(ts, orig_len, frame):
    """A Packet for a RoCE v2 frame or a marker, "other" for anything else,
    "malformed" for a frame too short for the headers it claims."""
    if len(frame) < 14:
        return "malformed"
    etype = struct.unpack("!H", frame[12:14])[0]
    off = 14
    for _ in range(2):  # up to two 802.1Q/802.1ad tags
        if etype in (0x8100, 0x88A8):
            if len(frame) < off + 4:
                return "malformed"
            etype = struct.unpack("!H", frame[off + 2:off + 4])[0]
            off += 4
    if etype == 0x0800:
        if len(frame) < off + 20:
            return "malformed"
        vihl = frame[off]
        ihl = (vihl & 0x0F) * 4
        if vihl >> 4 != 4 or ihl < 20 or len(frame) < off + ihl:
            return "malformed"
        if frame[off + 9] != 17:
            return "other"
        flags_frag = struct.unpack("!H", frame[off + 6:off + 8])[0]
        if flags_frag & 0x1FFF:  # a later fragment has no UDP header
            return "other"
        src = ".".join(str(b) for b in frame[off + 12:off + 16])
        dst = ".".join(str(b) for b in frame[off + 16:off + 20])
        off += ihl
    elif etype == 0x86DD:
        if len(frame) < off + 40:
            return "malformed"
        if frame[off] >> 4 != 6:
            return "malformed"
        if frame[off + 6] != 17:
            return "other"
        src = frame[off + 8:off + 24].hex()
        dst = frame[off + 24:off + 40].hex()
        off += 40
    else:
        return "other"
    if len(frame) < off + 8:
        return "malformed"
    _sport, dport, ulen = struct.unpack("!HHH", frame[off:off + 6])
    if ulen < 8:
        return "malformed"
    payload = frame[off + 8:]
    if dport == ROCE_PORT:
        if ulen < 8 + 12:  # a BTH is 12 bytes
            return "malformed"
        if not payload:  # the opcode byte was not captured
            return "malformed"
        qp = psn = None
        if len(payload) >= 12:
            qp = int.from_bytes(payload[5:8], "big")
            psn = int.from_bytes(payload[9:12], "big")
        return Packet(ts, src, dst, payload[0], orig_len, qp=qp, psn=psn)
    if dport == MARKER_PORT and payload.startswith(MARKER_MAGIC):
        words = payload[len(MARKER_MAGIC):].split()
        if len(words) != 2 or not all(w.isdigit() for w in words):
            return "malformed"
        return Packet(ts, src, dst, None, orig_len, (int(words[0]), int(words[1])))
    return "other"


def read_capture(data):
    """(packets, tallies): the RoCE frames and markers of a capture, in
    order, and how many frames were other traffic or malformed."""
    packets, tallies = [], {"other": 0, "malformed": 0}
    for ts, orig, frame in read_records(data):
        p = parse_frame(ts, orig, frame)
        if isinstance(p, str):
            tallies[p] += 1
        else:
            packets.append(p)
    return packets, tallies


def merge(*captures):
    """Several captures' packets (one per bond member) in time order."""
    out = [p for c in captures for p in c]
    out.sort(key=lambda p: p.ts)  # stable: one file's order is kept on equal stamps
    return out


def is_data(p):
    """Data-bearing for the turn count: every RoCE frame but a pure ACK or a CNP."""
    return p.marker is None and p.opcode not in (OP_ACK, OP_CNP)


def phase_figures(packets):
    """Figures of one phase: frames, bytes on the wire (as captured: Ethernet
    header to payload, no FCS), data-bearing frames, retransmitted frames (a
    data-bearing frame whose sender, destination QP and PSN were seen before
    in the phase: RC resends after a timeout or a NAK; a read response's PSN
    is in the requester's sequence, every other frame's in its sender's, so
    the two are told apart), turns (how often the
    sender of consecutive data-bearing first transmissions changes; the first
    frame is not a turn) and frames per opcode class."""
    fig = {"pkts": 0, "bytes": 0, "data_pkts": 0, "turns": 0, "retx": 0}
    last, seen = None, set()
    for p in packets:
        fig["pkts"] += 1
        fig["bytes"] += p.wire_len
        cls = OP_CLASS.get(p.opcode, "other_op")
        fig["op_" + cls] = fig.get("op_" + cls, 0) + 1
        if not is_data(p):
            continue
        fig["data_pkts"] += 1
        if p.psn is not None:
            key = (p.src, p.qp, p.psn, cls == "read_resp")
            if key in seen:
                fig["retx"] += 1
                continue
            seen.add(key)
        if last is not None and p.src != last:
            fig["turns"] += 1
        last = p.src
    return fig


def split_phases(packets):
    """{(size, k): [packets]}: the RoCE frames after marker (size, k-1) and
    before marker (size, k), k = 1 (the N phase) and 2 (the 2N phase). A
    marker missing or out of order raises PcapError (the figures would mix
    phases)."""
    out, cur, key = {}, None, None
    for p in packets:
        if p.marker is not None:
            size, k = p.marker
            if cur is not None and key == (size, k):
                out[key] = cur
            elif k in (1, 2) and (size, k) not in out:
                raise PcapError(f"marker {size} {k} without marker {size} {k - 1} before it")
            cur, key = ([], (size, k + 1)) if k < 2 else (None, None)
            continue
        if cur is not None:
            cur.append(p)
    return out


def per_round_trip(phases, size, n):
    """(F(2N) - F(N)) / N for every figure of the two phases of `size`, and
    retx_mean: the retransmissions of both phases over their 3N round trips.
    Retransmissions come at random (a late ACK), not once per run, so the
    difference can even be negative; their mean rate is the figure to read."""
    a, b = phase_figures(phases[(size, 1)]), phase_figures(phases[(size, 2)])
    out = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in sorted(set(a) | set(b))}
    out["retx_mean"] = (a["retx"] + b["retx"]) / (3 * n)
    return out


# ---- the self-test: a handmade capture -------------------------------------

def _eth_ipv4_udp(src, dst, dport, payload, vlan=None):
    udp = struct.pack("!HHHH", 50000, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     bytes(src), bytes(dst)) + udp
    eth = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02"
    if vlan is not None:
        eth += struct.pack("!HH", 0x8100, vlan)
    return eth + struct.pack("!H", 0x0800) + ip


def _eth_ipv6_udp(src_last, dst_last, dport, payload):
    udp = struct.pack("!HHHH", 50000, dport, 8 + len(payload), 0) + payload
    s = b"\xfe\x80" + b"\x00" * 13 + bytes([src_last])
    d = b"\xfe\x80" + b"\x00" * 13 + bytes([dst_last])
    ip = struct.pack("!IHBB", 0x60000000, len(udp), 17, 64) + s + d + udp
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack("!H", 0x86DD) + ip


_psn = [0]


def _bth(opcode, psn=None):
    """A BTH (QP 0x11, the next PSN unless given) + a 4-byte ICRC."""
    if psn is None:
        _psn[0] += 1
        psn = _psn[0]
    return (bytes([opcode]) + b"\x00" * 4 + b"\x00\x00\x11" + b"\x00" + psn.to_bytes(3, "big") +
            b"\xaa" * 4)


def _pcap(frames, big_endian=False, nsec=False):
    end = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nsec else 0xA1B2C3D4
    out = struct.pack(end + "IHHiIII", magic, 2, 4, 0, 0, 262144, LINKTYPE_ETHERNET)
    for i, f in enumerate(frames):
        out += struct.pack(end + "IIII", 100 + i, 5, len(f), len(f)) + f
    return out


def self_test():
    """Checks the reader on captures built here, byte by byte; returns a list
    of failures (empty: passed)."""
    fails = []

    def check(what, got, want):
        if got != want:
            fails.append(f"{what}: got {got!r}, want {want!r}")

    a, b = (198, 18, 0, 1), (198, 18, 0, 2)
    bcast = (198, 18, 0, 255)
    mk = lambda size, k: _eth_ipv4_udp(a, bcast, MARKER_PORT,  # noqa: E731
                                       MARKER_MAGIC + f"{size} {k}".encode())
    roce = lambda s, d, op, **kw: _eth_ipv4_udp(s, d, ROCE_PORT, _bth(op), **kw)  # noqa: E731
    frames = [
        roce(a, b, 0x04),  # warm-up traffic: before marker 0, not in any phase
        mk(8, 0),
        # N phase (N = 1): an eager ping and pong, each ACKed, a CNP, a tagged frame
        roce(a, b, 0x04), roce(b, a, OP_ACK), roce(b, a, OP_CNP),
        roce(b, a, 0x04, vlan=3027), roce(a, b, OP_ACK),
        b"\x02\x00",  # a runt frame: malformed, skipped
        _eth_ipv4_udp(a, b, 5353, b"mdns"),  # other UDP traffic: ignored
        mk(8, 1),
        # 2N phase: two round trips; the second is a read rendezvous over IPv6
        roce(a, b, 0x04), roce(b, a, 0x04),
        _eth_ipv6_udp(1, 2, ROCE_PORT, _bth(0x04, psn=7)),  # RTS a->b
        _eth_ipv6_udp(1, 2, ROCE_PORT, _bth(0x04, psn=7)),  # ... resent: no turn
        _eth_ipv6_udp(2, 1, ROCE_PORT, _bth(0x0C)),  # read request b->a
        # the read responses carry the requester's PSNs: the first equals
        # the RTS's (a's sequence), and is no retransmission
        _eth_ipv6_udp(1, 2, ROCE_PORT, _bth(0x0D, psn=7)),  # read response first a->b
        _eth_ipv6_udp(1, 2, ROCE_PORT, _bth(0x0F, psn=8)),  # read response last a->b
        _eth_ipv6_udp(2, 1, ROCE_PORT, _bth(OP_ACK)),
        _eth_ipv6_udp(2, 1, ROCE_PORT, _bth(0x04)),  # FIN b->a
        mk(8, 2),
        roce(a, b, 0x04),  # after the last marker: not in any phase
    ]
    for big, nsec in ((False, False), (True, False), (False, True)):
        pk, tallies = read_capture(_pcap(frames, big, nsec))
        check(f"tallies (big={big}, nsec={nsec})", tallies, {"other": 1, "malformed": 1})
        check("frames kept", len(pk), len(frames) - 2)
        phases = split_phases(pk)
        check("phases", sorted(phases), [(8, 1), (8, 2)])
        f1 = phase_figures(phases[(8, 1)])
        check("N phase", (f1["pkts"], f1["data_pkts"], f1["turns"], f1["op_ack"], f1["op_cnp"]),
              (5, 2, 1, 2, 1))
        check("N phase bytes", f1["bytes"], 4 * 58 + 62)  # 14 + 20 + 8 + 16 (+ a tag)
        f2 = phase_figures(phases[(8, 2)])
        check("2N phase", (f2["pkts"], f2["data_pkts"], f2["turns"], f2["op_read_req"],
                           f2["op_read_resp"], f2["retx"]), (9, 8, 5, 1, 2, 1))
        check("N phase retransmissions", f1["retx"], 0)
        rt = per_round_trip(phases, 8, 1)
        check("per round trip", (rt["pkts"], rt["turns"], rt["retx"], rt["retx_mean"]),
              (4.0, 4.0, 1.0, 1 / 3))
    # strictness: every cut of the file's tail is refused, never half-read
    good = _pcap(frames[:3])
    for cut in (1, 5, 16, 17):
        try:
            list(read_records(good[:-cut]))
            fails.append(f"a capture cut by {cut} bytes was read")
        except PcapError:
            pass
    for bad, what in ((b"\x0a\x0d\x0d\x0a" + good[4:], "pcapng"), (good[:20], "short header")):
        try:
            list(read_records(bad))
            fails.append(f"{what} was read")
        except PcapError:
            pass
    # a frame that claims more than it holds: malformed, not an IndexError
    for cut in range(1, 43):  # 42: headers whole, the BTH not captured
        frame = roce(a, b, 0x04)[:cut]
        got = parse_frame(0, len(frame), frame)
        if got not in ("malformed", "other"):
            fails.append(f"frame cut at {cut} bytes parsed as {got!r}")
    check("IPv4 frame cut after UDP", parse_frame(0, 42, roce(a, b, 0x04)[:42]), "malformed")
    # a later IPv4 fragment carries no UDP header: its bytes are not a BTH
    frag = bytearray(roce(a, b, 0x04))
    frag[14 + 6:14 + 8] = struct.pack("!H", 0x0010)  # fragment offset 16 (x 8 bytes)
    check("later IPv4 fragment", parse_frame(0, len(frag), bytes(frag)), "other")
    # a phase whose opening marker is missing is refused
    try:
        split_phases(read_capture(_pcap([mk(8, 1), roce(a, b, 4), mk(8, 2)]))[0])
        fails.append("a phase without its opening marker was accepted")
    except PcapError:
        pass
    return fails
