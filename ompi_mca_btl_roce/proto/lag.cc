// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "proto/lag.h"

namespace roce::btl {

const char *to_string(LagPolicy p) noexcept {
    switch (p) {
    case LagPolicy::kAuto: return "auto";
    case LagPolicy::kOff: return "off";
    case LagPolicy::kAffinity: return "affinity";
    case LagPolicy::kSport: return "sport";
    }
    return "?";
}

uint16_t flow_label_to_sport(uint32_t fl) noexcept {
    uint32_t folded = (fl & 0x3fffu) ^ ((fl & 0xfc000u) >> 14);
    return static_cast<uint16_t>(folded | 0xc000u);
}

namespace {

uint16_t bswap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }

// An IPv4 address as the kernel reads its __be32 into a u32 on a
// little-endian machine (the byte order the bond hash sees).
uint32_t wire_u32(const util::IpAddress &a) {
    const uint8_t *b = a.bytes();
    return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
           static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

} // namespace

unsigned bond_l34_member(const util::IpAddress &saddr, const util::IpAddress &daddr,
                         uint16_t sport, uint16_t dport, unsigned members) noexcept {
    if (members == 0) {
        return 0;
    }
    // flow.ports.ports is {be16 sport, be16 dport} read as a u32.
    uint32_t hash = static_cast<uint32_t>(bswap16(sport)) |
                    static_cast<uint32_t>(bswap16(dport)) << 16;
    hash ^= wire_u32(daddr) ^ wire_u32(saddr);
    hash ^= hash >> 16;
    hash ^= hash >> 8;
    hash >>= 1; // the lowest bit is dropped for layer3+4
    return hash % members;
}

uint32_t calc_flow_label(uint32_t lqpn, uint32_t rqpn) noexcept {
    uint64_t v = static_cast<uint64_t>(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    return static_cast<uint32_t>(v & 0xfffffu);
}

SpreadModel spread_model(unsigned members, const std::string &hash_policy,
                         const util::IpAddress &saddr, const util::IpAddress &daddr) {
    SpreadModel m;
    m.members = members == 0 ? 1 : members;
    m.saddr = saddr;
    m.daddr = daddr;
    m.predictable = m.members > 1 && hash_policy == "layer3+4" && saddr.is_v4() && daddr.is_v4();
    return m;
}

int SpreadModel::member_of(uint32_t lqpn, uint32_t rqpn) const noexcept {
    if (!predictable) {
        return -1;
    }
    uint16_t sport = flow_label_to_sport(calc_flow_label(lqpn, rqpn));
    return static_cast<int>(bond_l34_member(saddr, daddr, sport, kRoceV2Port, members));
}

PathSpread spread_of(const SpreadModel &m, uint32_t lqpn, uint32_t rqpn) noexcept {
    PathSpread p;
    p.flow_label = calc_flow_label(lqpn, rqpn);
    p.sport = flow_label_to_sport(p.flow_label);
    p.member = m.member_of(lqpn, rqpn);
    return p;
}

} // namespace roce::btl
