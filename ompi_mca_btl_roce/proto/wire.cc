// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "proto/wire.h"

#include <cstring>

#include "util/strings.h"

namespace roce::btl::wire {

using util::Code;
using util::Result;
using util::Status;

namespace {

class Writer {
public:
    void u8(uint8_t v) { out_.push_back(v); }
    void u16(uint16_t v) {
        for (int i = 0; i < 2; ++i) {
            out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    void u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) {
            out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    void u64(uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    void bytes(const uint8_t *p, size_t n) { out_.insert(out_.end(), p, p + n); }
    void gid(const Gid &g) { bytes(g.data(), g.size()); }
    /// Strings are u8 length + bytes, cut to `max`.
    void str(const std::string &s, size_t max) {
        size_t n = s.size() < max ? s.size() : max;
        u8(static_cast<uint8_t>(n));
        bytes(reinterpret_cast<const uint8_t *>(s.data()), n);
    }
    size_t size() const { return out_.size(); }
    void patch_u16(size_t at, uint16_t v) {
        out_[at] = static_cast<uint8_t>(v);
        out_[at + 1] = static_cast<uint8_t>(v >> 8);
    }
    std::vector<uint8_t> take() { return std::move(out_); }

private:
    std::vector<uint8_t> out_;
};

/// Reads little-endian fields; the first read past the end latches an error
/// naming the field, and every later read returns zeros.
class Reader {
public:
    Reader(const uint8_t *p, size_t n, const char *what) : p_(p), n_(n), what_(what) {}

    uint8_t u8(const char *field) { return static_cast<uint8_t>(take(1, field)); }
    uint16_t u16(const char *field) { return static_cast<uint16_t>(take(2, field)); }
    uint32_t u32(const char *field) { return static_cast<uint32_t>(take(4, field)); }
    uint64_t u64(const char *field) { return take(8, field); }
    Gid gid(const char *field) {
        Gid g{};
        if (need(16, field)) {
            std::memcpy(g.data(), p_ + off_, 16);
            off_ += 16;
        }
        return g;
    }
    std::string str(size_t max, const char *field) {
        uint8_t n = u8(field);
        if (!ok()) {
            return {};
        }
        if (n > max) {
            fail(util::format("%s: %s length %u exceeds %zu", what_, field, n, max));
            return {};
        }
        std::string s;
        if (need(n, field)) {
            s.assign(reinterpret_cast<const char *>(p_ + off_), n);
            off_ += n;
        }
        return s;
    }

    bool ok() const { return status_.is_ok(); }
    size_t remaining() const { return n_ - off_; }
    void fail(std::string msg) {
        if (status_.is_ok()) {
            status_ = Status(Code::kProtocol, std::move(msg));
        }
    }
    const Status &status() const { return status_; }

private:
    bool need(size_t k, const char *field) {
        if (!ok()) {
            return false;
        }
        if (k > n_ - off_) {
            fail(util::format("%s truncated at %s (offset %zu, need %zu bytes, have %zu)", what_,
                              field, off_, k, n_ - off_));
            return false;
        }
        return true;
    }
    uint64_t take(size_t k, const char *field) {
        if (!need(k, field)) {
            return 0;
        }
        uint64_t v = 0;
        for (size_t i = 0; i < k; ++i) {
            v |= static_cast<uint64_t>(p_[off_ + i]) << (8 * i);
        }
        off_ += k;
        return v;
    }

    const uint8_t *p_;
    size_t n_;
    size_t off_ = 0;
    const char *what_;
    Status status_;
};

} // namespace

// ---------------------------------------------------------------- modex ---

std::vector<uint8_t> encode(const ModexAddress &m) {
    Writer w;
    w.u32(kModexMagic);
    w.u8(kVersion);
    w.u64(m.token);
    w.u8(static_cast<uint8_t>(m.ports.size()));
    for (const auto &p : m.ports) {
        w.str(p.device, kMaxDeviceName);
        w.u8(p.port);
        w.u8(p.lag_members);
        w.u8(p.path_mtu);
        w.u8(p.flags);
        w.u32(p.ud_qpn);
        w.u32(p.qkey);
        if ((p.flags & kPortFlagDct) != 0) {
            w.u32(p.dct_number);
            w.u64(p.dc_key);
        }
        size_t n = p.gids.size() < kMaxGidsPerPort ? p.gids.size() : kMaxGidsPerPort;
        w.u8(static_cast<uint8_t>(n));
        for (size_t i = 0; i < n; ++i) {
            w.gid(p.gids[i].gid);
            w.u8(p.gids[i].type);
            w.u8(p.gids[i].prefix_len);
            w.u16(p.gids[i].index);
        }
    }
    return w.take();
}

Result<ModexAddress> parse_modex(const uint8_t *data, size_t len) {
    Reader r(data, len, "roce modex address");
    uint32_t magic = r.u32("magic");
    uint8_t version = r.u8("version");
    if (r.ok() && magic == kModexMagic && version != kVersion) {
        return Status(Code::kProtocol,
                      util::format("roce modex address: version %u, this build speaks %u (mixed "
                                   "ompi-roce versions in one job?)",
                                   version, kVersion));
    }
    uint64_t token = r.u64("token");
    uint8_t nports = r.u8("port count");
    if (!r.ok()) {
        return r.status();
    }
    if (magic != kModexMagic) {
        return Status(Code::kProtocol, util::format("roce modex address: bad magic 0x%08x", magic));
    }
    if (nports > kMaxPorts) {
        return Status(Code::kProtocol,
                      util::format("roce modex address: %u ports exceeds %zu", nports, kMaxPorts));
    }
    if (token == 0) {
        return Status(Code::kProtocol, "roce modex address: no connection token");
    }
    ModexAddress m;
    m.token = token;
    for (uint8_t i = 0; i < nports && r.ok(); ++i) {
        PortAdvert p;
        p.device = r.str(kMaxDeviceName, "device name");
        p.port = r.u8("port");
        p.lag_members = r.u8("lag members");
        p.path_mtu = r.u8("path mtu");
        p.flags = r.u8("flags");
        p.ud_qpn = r.u32("ud qpn");
        p.qkey = r.u32("qkey");
        if (r.ok() && (p.port == 0 || p.lag_members == 0 || p.lag_members > kMaxLagMembers ||
                       p.path_mtu < 1 || p.path_mtu > 5 || p.ud_qpn <= 1 ||
                       p.ud_qpn > 0xffffffu)) {
            r.fail(util::format("roce modex address: port %u of %s out of range (port %u, "
                                "LAG members %u, path MTU enum %u, UD QPN 0x%x)",
                                i, util::printable(p.device).c_str(), p.port, p.lag_members,
                                p.path_mtu, p.ud_qpn));
        }
        if (r.ok() && (p.flags & ~kPortFlagsKnown) != 0) {
            r.fail(util::format("roce modex address: port %u of %s has unknown flags 0x%02x "
                                "(a newer ompi-roce in the same job?)",
                                i, util::printable(p.device).c_str(), p.flags));
        }
        if (r.ok() && (p.flags & kPortFlagDct) != 0) {
            p.dct_number = r.u32("dct number");
            p.dc_key = r.u64("dc access key");
            if (r.ok() && (p.dct_number == 0 || p.dct_number > 0xffffffu || p.dc_key == 0)) {
                r.fail(util::format("roce modex address: port %u of %s advertises a DC target "
                                    "out of range (DCT number 0x%x, %s key)",
                                    i, util::printable(p.device).c_str(), p.dct_number,
                                    p.dc_key == 0 ? "no" : "a"));
            }
        }
        uint8_t ngids = r.u8("gid count");
        if (ngids > kMaxGidsPerPort) {
            r.fail(util::format("roce modex address: %u GIDs exceeds %zu", ngids, kMaxGidsPerPort));
        }
        for (uint8_t g = 0; g < ngids && r.ok(); ++g) {
            GidAdvert a;
            a.gid = r.gid("gid");
            a.type = r.u8("gid type");
            a.prefix_len = r.u8("prefix length");
            a.index = r.u16("gid index");
            if (a.type > 2 || a.prefix_len > 128) {
                r.fail(util::format("roce modex address: GID entry with type %u prefix %u", a.type,
                                    a.prefix_len));
            }
            p.gids.push_back(a);
        }
        m.ports.push_back(std::move(p));
    }
    if (!r.ok()) {
        return r.status();
    }
    if (r.remaining() != 0) {
        return Status(Code::kProtocol, util::format("roce modex address: %zu trailing bytes",
                                                    r.remaining()));
    }
    return m;
}

// ------------------------------------------------------------------- CM ---

const char *to_string(CmType t) noexcept {
    switch (t) {
    case CmType::kRequest: return "REQ";
    case CmType::kReply: return "REP";
    case CmType::kReadyToUse: return "RTU";
    case CmType::kReject: return "REJ";
    }
    return "?";
}

bool CmMessage::operator==(const CmMessage &o) const {
    return type == o.type && src_name == o.src_name && dst_name == o.dst_name &&
           src_token == o.src_token && dst_token == o.dst_token && conn_id == o.conn_id && src_ud_qpn == o.src_ud_qpn && src_port == o.src_port &&
           dst_port == o.dst_port && first_path == o.first_path && path_mtu == o.path_mtu &&
           credits == o.credits && superseded == o.superseded &&
           src_gid == o.src_gid && dst_gid == o.dst_gid && paths == o.paths &&
           reason == o.reason && text == o.text;
}

std::vector<uint8_t> encode(const CmMessage &m) {
    Writer w;
    w.u32(kCmMagic);
    w.u8(kVersion);
    w.u8(static_cast<uint8_t>(m.type));
    size_t len_at = w.size();
    w.u16(0); // total length, patched below
    w.u64(m.src_name);
    w.u64(m.dst_name);
    w.u64(m.src_token);
    w.u64(m.dst_token);
    w.u32(m.conn_id);
    w.u32(m.src_ud_qpn);
    w.u16(m.src_port);
    w.u16(m.dst_port);
    if (m.type == CmType::kRequest || m.type == CmType::kReply) {
        size_t n = m.paths.size() < kMaxPaths ? m.paths.size() : kMaxPaths;
        w.u8(static_cast<uint8_t>(n));
        w.u8(m.first_path);
        w.u8(m.path_mtu);
        w.u32(m.credits);
        w.u32(m.superseded);
        w.gid(m.src_gid);
        w.gid(m.dst_gid);
        for (size_t i = 0; i < n; ++i) {
            w.u32(m.paths[i].qpn);
            w.u32(m.paths[i].psn & 0xffffffu);
        }
    } else if (m.type == CmType::kReject) {
        w.u16(static_cast<uint16_t>(m.reason));
        w.str(m.text, kMaxRejectText);
    }
    w.patch_u16(len_at, static_cast<uint16_t>(w.size()));
    return w.take();
}

Result<CmMessage> parse_cm(const uint8_t *data, size_t len) {
    Reader r(data, len, "roce CM message");
    uint32_t magic = r.u32("magic");
    uint8_t version = r.u8("version");
    uint8_t type = r.u8("type");
    uint16_t total = r.u16("length");
    if (!r.ok()) {
        return r.status();
    }
    if (magic != kCmMagic) {
        return Status(Code::kProtocol, util::format("roce CM message: bad magic 0x%08x", magic));
    }
    if (version != kVersion) {
        return Status(Code::kProtocol,
                      util::format("roce CM message: version %u, this build speaks %u", version,
                                   kVersion));
    }
    if (type < 1 || type > 4) {
        return Status(Code::kProtocol, util::format("roce CM message: unknown type %u", type));
    }
    // UD delivers whole datagrams, possibly padded by the receive buffer:
    // the declared length must fit in what arrived.
    if (total > len) {
        return Status(Code::kProtocol,
                      util::format("roce CM message: declares %u bytes, only %zu arrived", total,
                                   len));
    }
    Reader body(data, total, "roce CM message");
    (void)body.u32("magic");
    (void)body.u8("version");
    (void)body.u8("type");
    (void)body.u16("length");
    CmMessage m;
    m.type = static_cast<CmType>(type);
    m.src_name = body.u64("source name");
    m.dst_name = body.u64("destination name");
    m.src_token = body.u64("source token");
    m.dst_token = body.u64("destination token");
    m.conn_id = body.u32("connection id");
    m.src_ud_qpn = body.u32("source UD QPN");
    m.src_port = body.u16("source port index");
    m.dst_port = body.u16("destination port index");
    if (m.type == CmType::kRequest || m.type == CmType::kReply) {
        uint8_t npaths = body.u8("path count");
        m.first_path = body.u8("first path");
        m.path_mtu = body.u8("path mtu");
        m.credits = body.u32("credits");
        m.superseded = body.u32("superseded id");
        m.src_gid = body.gid("source GID");
        m.dst_gid = body.gid("destination GID");
        if (body.ok() && (npaths == 0 || npaths > kMaxPaths)) {
            body.fail(util::format("roce CM message: path count %u outside 1..%zu", npaths,
                                   kMaxPaths));
        }
        if (body.ok() && m.first_path + npaths > kMaxPaths) {
            body.fail(util::format("roce CM message: paths %u..%u beyond the %zu allowed",
                                   m.first_path, m.first_path + npaths - 1, kMaxPaths));
        }
        if (body.ok() && (m.credits == 0 || m.credits > kMaxCredits)) {
            body.fail(util::format("roce CM message: %u credits outside 1..%u", m.credits,
                                   kMaxCredits));
        }
        if (body.ok() && (m.path_mtu < 1 || m.path_mtu > 5)) {
            body.fail(util::format("roce CM message: path MTU enum %u outside 1..5", m.path_mtu));
        }
        for (uint8_t i = 0; i < npaths && body.ok(); ++i) {
            PathInfo p;
            p.qpn = body.u32("path QPN");
            p.psn = body.u32("path PSN");
            if (body.ok() && (p.psn > 0xffffffu || p.qpn > 0xffffffu || p.qpn == 0)) {
                body.fail(util::format("roce CM message: path %u has QPN 0x%x PSN 0x%x", i, p.qpn,
                                       p.psn));
            }
            m.paths.push_back(p);
        }
    } else if (m.type == CmType::kReject) {
        m.reason = static_cast<RejectReason>(body.u16("reject reason"));
        m.text = body.str(kMaxRejectText, "reject text");
    }
    if (!body.ok()) {
        return body.status();
    }
    if (body.remaining() != 0) {
        return Status(Code::kProtocol,
                      util::format("roce CM message: %zu bytes after the %s body",
                                   body.remaining(), to_string(m.type)));
    }
    return m;
}

// ----------------------------------------------------------- RC frames ---

void encode(const FragHeader &h, uint8_t *out) noexcept {
    out[0] = h.tag;
    out[1] = static_cast<uint8_t>(h.type);
    out[2] = static_cast<uint8_t>(h.credits);
    out[3] = static_cast<uint8_t>(h.credits >> 8);
    for (int i = 0; i < 4; ++i) {
        out[4 + i] = static_cast<uint8_t>(h.seq >> (8 * i));
    }
}

Result<FragHeader> parse_frag_header(const uint8_t *data, size_t len) {
    if (len < kFragHeaderSize) {
        return Status(Code::kProtocol,
                      util::format("roce fragment of %zu bytes is shorter than its %zu-byte header",
                                   len, kFragHeaderSize));
    }
    FragHeader h;
    h.tag = data[0];
    if (data[1] != static_cast<uint8_t>(FragType::kData) &&
        data[1] != static_cast<uint8_t>(FragType::kCredit) &&
        data[1] != static_cast<uint8_t>(FragType::kForward)) {
        return Status(Code::kProtocol,
                      util::format("roce fragment with unknown type %u", data[1]));
    }
    h.type = static_cast<FragType>(data[1]);
    h.credits = static_cast<uint16_t>(data[2] | (data[3] << 8));
    h.seq = static_cast<uint32_t>(data[4]) | static_cast<uint32_t>(data[5]) << 8 |
            static_cast<uint32_t>(data[6]) << 16 | static_cast<uint32_t>(data[7]) << 24;
    return h;
}

void encode(const ForwardHeader &h, uint8_t *out) noexcept {
    out[0] = static_cast<uint8_t>(h.kind);
    out[1] = h.tag;
    out[2] = static_cast<uint8_t>(h.origin_src_port);
    out[3] = static_cast<uint8_t>(h.origin_src_port >> 8);
    out[4] = static_cast<uint8_t>(h.origin_dst_port);
    out[5] = static_cast<uint8_t>(h.origin_dst_port >> 8);
    out[6] = 0;
    out[7] = 0;
    for (int i = 0; i < 4; ++i) {
        out[8 + i] = static_cast<uint8_t>(h.seq >> (8 * i));
        out[12 + i] = static_cast<uint8_t>(h.length >> (8 * i));
    }
}

Result<ForwardHeader> parse_forward(const uint8_t *data, size_t len) {
    auto u16 = [&](size_t at) { return static_cast<uint16_t>(data[at] | (data[at + 1] << 8)); };
    auto u32 = [&](size_t at) {
        return static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8 |
               static_cast<uint32_t>(data[at + 2]) << 16 | static_cast<uint32_t>(data[at + 3]) << 24;
    };
    if (len < kForwardHeaderSize) {
        return Status(Code::kProtocol,
                      util::format("forwarded fragment of %zu bytes is shorter than its %zu-byte "
                                   "header",
                                   len, kForwardHeaderSize));
    }
    if (data[0] != static_cast<uint8_t>(ForwardKind::kSend) &&
        data[0] != static_cast<uint8_t>(ForwardKind::kPortDown)) {
        return Status(Code::kProtocol,
                      util::format("forwarded fragment of unknown kind %u", data[0]));
    }
    if (data[6] != 0 || data[7] != 0) {
        return Status(Code::kProtocol, "forwarded fragment with reserved bytes set");
    }
    ForwardHeader h;
    h.kind = static_cast<ForwardKind>(data[0]);
    h.tag = data[1];
    h.origin_src_port = u16(2);
    h.origin_dst_port = u16(4);
    h.seq = u32(8);
    h.length = u32(12);
    if (h.origin_src_port >= kMaxPorts || h.origin_dst_port >= kMaxPorts) {
        return Status(Code::kProtocol,
                      util::format("forwarded fragment names ports %u (sender) and %u "
                                   "(receiver): at most %zu ports",
                                   h.origin_src_port, h.origin_dst_port, kMaxPorts));
    }
    if (h.length != len - kForwardHeaderSize) {
        return Status(Code::kProtocol,
                      util::format("forwarded fragment declares %u payload bytes, carries %zu",
                                   h.length, len - kForwardHeaderSize));
    }
    if (h.kind == ForwardKind::kPortDown && (h.tag != 0 || h.seq != 0 || h.length != 0)) {
        return Status(Code::kProtocol,
                      util::format("forwarded fragment: a port-down notice with tag %u, "
                                   "number %u, %u payload bytes (all must be 0)",
                                   h.tag, h.seq, h.length));
    }
    return h;
}

namespace {

// An IPv4 header (no options) whose checksum is right: the ones' complement
// sum of its ten 16-bit words, checksum included, is 0xffff.
bool valid_ipv4_header(const uint8_t *h) {
    if (h[0] != 0x45) {
        return false;
    }
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) {
        sum += static_cast<uint32_t>(h[i]) << 8 | h[i + 1];
    }
    while (sum > 0xffff) {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    return sum == 0xffff;
}

void ipv4_source(const uint8_t *h, Gid *out) {
    out->fill(0);
    (*out)[10] = 0xff;
    (*out)[11] = 0xff;
    std::memcpy(out->data() + 12, h + 12, 4);
}

} // namespace

bool grh_source_gid(const uint8_t *grh, Gid *out) {
    // For RoCE v2 over IPv4 the device writes the IPv4 header into the last
    // 20 bytes and leaves the first 20 as they were - possibly the start of
    // an earlier IPv6 datagram in the same buffer. So, as rdma-core decides
    // in ibv_init_ah_from_wc: IPv6 unless bytes 20..39 are an IPv4 header
    // with a correct checksum (a version-6 first byte alone proves nothing).
    const uint8_t *ip4 = grh + 20;
    if (valid_ipv4_header(ip4)) {
        ipv4_source(ip4, out);
        return true;
    }
    if ((grh[0] >> 4) == 6) { // IPv6 header or IB GRH (IP version 6)
        std::memcpy(out->data(), grh + 8, 16);
        return true;
    }
    return false;
}

void encode(const DcSender &s, uint8_t *out) noexcept {
    for (int i = 0; i < 8; ++i) {
        out[i] = static_cast<uint8_t>(s.name >> (8 * i));
    }
    out[8] = static_cast<uint8_t>(s.port);
    out[9] = static_cast<uint8_t>(s.port >> 8);
    std::memset(out + 10, 0, kDcSenderSize - 10);
}

Result<DcSender> parse_dc_sender(const uint8_t *data, size_t len) {
    if (len != kDcSenderSize) {
        return Status(Code::kProtocol,
                      util::format("DC sender trailer of %zu bytes (not %zu)", len, kDcSenderSize));
    }
    DcSender s;
    for (int i = 0; i < 8; ++i) {
        s.name |= static_cast<uint64_t>(data[i]) << (8 * i);
    }
    s.port = static_cast<uint16_t>(data[8] | (data[9] << 8));
    for (size_t i = 10; i < kDcSenderSize; ++i) {
        if (data[i] != 0) {
            return Status(Code::kProtocol,
                          util::format("DC sender trailer with reserved byte %zu set", i));
        }
    }
    if (s.name == 0) {
        return Status(Code::kProtocol, "DC sender trailer names process 0");
    }
    if (s.port >= kMaxPorts) {
        return Status(
            Code::kProtocol,
            util::format("DC sender trailer names port %u: at most %zu ports", s.port, kMaxPorts));
    }
    return s;
}

} // namespace roce::btl::wire
