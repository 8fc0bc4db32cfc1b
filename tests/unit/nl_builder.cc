// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "nl_builder.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <stdexcept>

namespace roce::netmon::test {

namespace {

struct MsgFree {
    void operator()(nl_msg *m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

void check(int rc, const char *what) {
    if (rc < 0) {
        throw std::runtime_error(std::string("nl builder: ") + what);
    }
}

Bytes bytes_of(nl_msg *m) {
    nlmsghdr *h = nlmsg_hdr(m);
    auto *p = reinterpret_cast<const uint8_t *>(h);
    return Bytes(p, p + NLMSG_ALIGN(h->nlmsg_len));
}

// bond_fill_info() of Linux 6.1, in its order. Values the model ignores are
// the driver defaults; ARP/NS target nests are cancelled when empty, as the
// kernel does, so they are absent.
void put_bond(nl_msg *m, const BondSpec &b) {
    check(nla_put_u8(m, IFLA_BOND_MODE, b.mode), "MODE");
    if (b.active_slave != 0) {
        check(nla_put_u32(m, IFLA_BOND_ACTIVE_SLAVE, b.active_slave), "ACTIVE_SLAVE");
    }
    check(nla_put_u32(m, IFLA_BOND_MIIMON, b.miimon), "MIIMON");
    check(nla_put_u32(m, IFLA_BOND_UPDELAY, 0), "UPDELAY");
    check(nla_put_u32(m, IFLA_BOND_DOWNDELAY, 0), "DOWNDELAY");
    check(nla_put_u32(m, IFLA_BOND_PEER_NOTIF_DELAY, 0), "PEER_NOTIF_DELAY");
    check(nla_put_u8(m, IFLA_BOND_USE_CARRIER, 1), "USE_CARRIER");
    check(nla_put_u32(m, IFLA_BOND_ARP_INTERVAL, 0), "ARP_INTERVAL");
    check(nla_put_u32(m, IFLA_BOND_ARP_VALIDATE, 0), "ARP_VALIDATE");
    check(nla_put_u32(m, IFLA_BOND_ARP_ALL_TARGETS, 0), "ARP_ALL_TARGETS");
    check(nla_put_u8(m, IFLA_BOND_PRIMARY_RESELECT, 0), "PRIMARY_RESELECT");
    check(nla_put_u8(m, IFLA_BOND_FAIL_OVER_MAC, 0), "FAIL_OVER_MAC");
    check(nla_put_u8(m, IFLA_BOND_XMIT_HASH_POLICY, b.xmit_hash_policy), "XMIT_HASH_POLICY");
    check(nla_put_u32(m, IFLA_BOND_RESEND_IGMP, 1), "RESEND_IGMP");
    check(nla_put_u8(m, IFLA_BOND_NUM_PEER_NOTIF, 1), "NUM_PEER_NOTIF");
    check(nla_put_u8(m, IFLA_BOND_ALL_SLAVES_ACTIVE, 0), "ALL_SLAVES_ACTIVE");
    check(nla_put_u32(m, IFLA_BOND_MIN_LINKS, b.min_links), "MIN_LINKS");
    check(nla_put_u32(m, IFLA_BOND_LP_INTERVAL, 1), "LP_INTERVAL");
    check(nla_put_u32(m, IFLA_BOND_PACKETS_PER_SLAVE, 1), "PACKETS_PER_SLAVE");
    check(nla_put_u8(m, IFLA_BOND_AD_LACP_ACTIVE, 1), "AD_LACP_ACTIVE");
    check(nla_put_u8(m, IFLA_BOND_AD_LACP_RATE, 0), "AD_LACP_RATE");
    check(nla_put_u8(m, IFLA_BOND_AD_SELECT, 0), "AD_SELECT");
    check(nla_put_u8(m, IFLA_BOND_TLB_DYNAMIC_LB, 1), "TLB_DYNAMIC_LB");
    check(nla_put_u8(m, IFLA_BOND_MISSED_MAX, 2), "MISSED_MAX");
    if (b.mode == 4) {
        // CAP_NET_ADMIN readers also get the actor system settings.
        check(nla_put_u16(m, IFLA_BOND_AD_ACTOR_SYS_PRIO, 65535), "AD_ACTOR_SYS_PRIO");
        check(nla_put_u16(m, IFLA_BOND_AD_USER_PORT_KEY, 0), "AD_USER_PORT_KEY");
        Mac sys{};
        check(nla_put(m, IFLA_BOND_AD_ACTOR_SYSTEM, 6, sys.data()), "AD_ACTOR_SYSTEM");
        if (b.ad_info) {
            nlattr *nest = nla_nest_start(m, IFLA_BOND_AD_INFO);
            check(nest ? 0 : -1, "AD_INFO");
            check(nla_put_u16(m, IFLA_BOND_AD_INFO_AGGREGATOR, b.ad_info->aggregator), "AGG");
            check(nla_put_u16(m, IFLA_BOND_AD_INFO_NUM_PORTS, b.ad_info->num_ports), "NUM_PORTS");
            check(nla_put_u16(m, IFLA_BOND_AD_INFO_ACTOR_KEY, b.ad_info->actor_key), "ACTOR_KEY");
            check(nla_put_u16(m, IFLA_BOND_AD_INFO_PARTNER_KEY, b.ad_info->partner_key), "PKEY");
            check(nla_put(m, IFLA_BOND_AD_INFO_PARTNER_MAC, 6, b.ad_info->partner_mac.data()),
                  "PARTNER_MAC");
            nla_nest_end(m, nest);
        }
    }
}

// bond_fill_slave_info() of Linux 6.1.
void put_bond_slave(nl_msg *m, const BondSlaveSpec &s) {
    check(nla_put_u8(m, IFLA_BOND_SLAVE_STATE, s.state), "SLAVE_STATE");
    check(nla_put_u8(m, IFLA_BOND_SLAVE_MII_STATUS, s.mii_status), "MII_STATUS");
    check(nla_put_u32(m, IFLA_BOND_SLAVE_LINK_FAILURE_COUNT, s.link_failure_count), "LFC");
    check(nla_put(m, IFLA_BOND_SLAVE_PERM_HWADDR, 6, s.perm_hwaddr.data()), "PERM_HWADDR");
    check(nla_put_u16(m, IFLA_BOND_SLAVE_QUEUE_ID, s.queue_id), "QUEUE_ID");
    check(nla_put_s32(m, IFLA_BOND_SLAVE_PRIO, 0), "PRIO");
    if (s.mode_8023ad) {
        check(nla_put_u16(m, IFLA_BOND_SLAVE_AD_AGGREGATOR_ID, s.ad_aggregator_id), "AGG_ID");
        check(nla_put_u8(m, IFLA_BOND_SLAVE_AD_ACTOR_OPER_PORT_STATE, s.ad_actor_oper_port_state),
              "ACTOR_STATE");
        check(nla_put_u16(m, IFLA_BOND_SLAVE_AD_PARTNER_OPER_PORT_STATE,
                          s.ad_partner_oper_port_state),
              "PARTNER_STATE");
    }
}

} // namespace

Bytes build_link(const LinkSpec &s) {
    Msg m(nlmsg_alloc_simple(s.type, 0));
    ifinfomsg ifi{};
    ifi.ifi_family = s.family;
    ifi.ifi_type = 1; // ARPHRD_ETHER
    ifi.ifi_index = s.ifindex;
    ifi.ifi_flags = s.flags;
    check(nlmsg_append(m.get(), &ifi, sizeof(ifi), NLMSG_ALIGNTO), "ifinfomsg");
    nl_msg *p = m.get();
    // rtnl_fill_ifinfo() of Linux 6.1, same order, the attributes a bond,
    // a member or a VLAN carries (statistics and AF_SPEC as opaque blobs).
    check(nla_put_string(p, IFLA_IFNAME, s.name.c_str()), "IFNAME");
    check(nla_put_u32(p, IFLA_TXQLEN, 1000), "TXQLEN");
    check(nla_put_u8(p, IFLA_OPERSTATE, s.operstate), "OPERSTATE");
    check(nla_put_u8(p, IFLA_LINKMODE, 0), "LINKMODE");
    if (s.truncate_mtu) {
        uint16_t half = 1500;
        check(nla_put(p, IFLA_MTU, sizeof(half), &half), "MTU");
    } else {
        check(nla_put_u32(p, IFLA_MTU, s.mtu), "MTU");
    }
    check(nla_put_u32(p, IFLA_MIN_MTU, 68), "MIN_MTU");
    check(nla_put_u32(p, IFLA_MAX_MTU, 65535), "MAX_MTU");
    check(nla_put_u32(p, IFLA_GROUP, 0), "GROUP");
    check(nla_put_u32(p, IFLA_PROMISCUITY, 0), "PROMISCUITY");
    check(nla_put_u32(p, IFLA_NUM_TX_QUEUES, 16), "NUM_TX_QUEUES");
    check(nla_put_u32(p, IFLA_GSO_MAX_SEGS, 65535), "GSO_MAX_SEGS");
    check(nla_put_u32(p, IFLA_GSO_MAX_SIZE, 65536), "GSO_MAX_SIZE");
    check(nla_put_u32(p, IFLA_GRO_MAX_SIZE, 65536), "GRO_MAX_SIZE");
    check(nla_put_u32(p, IFLA_TSO_MAX_SIZE, 65536), "TSO_MAX_SIZE");
    check(nla_put_u32(p, IFLA_TSO_MAX_SEGS, 65535), "TSO_MAX_SEGS");
    check(nla_put_u32(p, IFLA_NUM_RX_QUEUES, 16), "NUM_RX_QUEUES");
    if (s.master != 0) {
        check(nla_put_u32(p, IFLA_MASTER, s.master), "MASTER");
    }
    check(nla_put_u8(p, IFLA_CARRIER, s.carrier ? 1 : 0), "CARRIER");
    check(nla_put_string(p, IFLA_QDISC, "noqueue"), "QDISC");
    check(nla_put_u32(p, IFLA_CARRIER_CHANGES, 2), "CARRIER_CHANGES");
    check(nla_put_u8(p, IFLA_PROTO_DOWN, 0), "PROTO_DOWN");
    check(nla_put_u32(p, IFLA_CARRIER_UP_COUNT, 1), "CARRIER_UP_COUNT");
    check(nla_put_u32(p, IFLA_CARRIER_DOWN_COUNT, 1), "CARRIER_DOWN_COUNT");
    if (s.ifla_event != 0) {
        check(nla_put_u32(p, IFLA_EVENT, s.ifla_event), "EVENT");
    }
    check(nla_put(p, IFLA_ADDRESS, 6, s.mac.data()), "ADDRESS");
    Mac bcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    check(nla_put(p, IFLA_BROADCAST, 6, bcast.data()), "BROADCAST");
    std::vector<uint8_t> stats64(24 * 8, 0);
    check(nla_put(p, IFLA_STATS64, static_cast<int>(stats64.size()), stats64.data()), "STATS64");
    std::vector<uint8_t> stats(24 * 4, 0);
    check(nla_put(p, IFLA_STATS, static_cast<int>(stats.size()), stats.data()), "STATS");
    nlattr *xdp = nla_nest_start(p, IFLA_XDP);
    check(nla_put_u8(p, IFLA_XDP_ATTACHED, 0), "XDP_ATTACHED");
    nla_nest_end(p, xdp);
    if (!s.kind.empty() || !s.slave_kind.empty()) {
        nlattr *li = nla_nest_start(p, IFLA_LINKINFO);
        if (!s.kind.empty()) {
            check(nla_put_string(p, IFLA_INFO_KIND, s.kind.c_str()), "INFO_KIND");
            if (s.bond || s.kind == "vlan") {
                nlattr *data = nla_nest_start(p, IFLA_INFO_DATA);
                if (s.bond) {
                    put_bond(p, *s.bond);
                } else {
                    check(nla_put_u16(p, IFLA_VLAN_PROTOCOL, htons(0x8100)), "VLAN_PROTOCOL");
                    check(nla_put_u16(p, IFLA_VLAN_ID, s.vlan_id), "VLAN_ID");
                    ifla_vlan_flags f{1, 0xffffffff}; // REORDER_HDR
                    check(nla_put(p, IFLA_VLAN_FLAGS, sizeof(f), &f), "VLAN_FLAGS");
                }
                nla_nest_end(p, data);
            }
        }
        if (!s.slave_kind.empty()) {
            check(nla_put_string(p, IFLA_INFO_SLAVE_KIND, s.slave_kind.c_str()), "SLAVE_KIND");
            if (s.slave) {
                nlattr *sd = nla_nest_start(p, IFLA_INFO_SLAVE_DATA);
                put_bond_slave(p, *s.slave);
                nla_nest_end(p, sd);
            }
        }
        nla_nest_end(p, li);
    }
    if (s.link != 0) {
        check(nla_put_u32(p, IFLA_LINK, s.link), "LINK");
    }
    nlattr *af = nla_nest_start(p, IFLA_AF_SPEC);
    nlattr *inet = nla_nest_start(p, AF_INET);
    std::vector<uint8_t> conf(32 * 4, 0);
    check(nla_put(p, IFLA_INET_CONF, static_cast<int>(conf.size()), conf.data()), "INET_CONF");
    nla_nest_end(p, inet);
    nla_nest_end(p, af);
    return bytes_of(p);
}

Bytes build_addr(const AddrSpec &s) {
    Msg m(nlmsg_alloc_simple(s.type, 0));
    bool v6 = s.address.find(':') != std::string::npos;
    ifaddrmsg ifa{};
    ifa.ifa_family = v6 ? AF_INET6 : AF_INET;
    ifa.ifa_prefixlen = static_cast<uint8_t>(s.prefix_len);
    ifa.ifa_flags = static_cast<uint8_t>(s.flags & 0xff);
    ifa.ifa_scope = 0;
    ifa.ifa_index = static_cast<uint32_t>(s.ifindex);
    check(nlmsg_append(m.get(), &ifa, sizeof(ifa), NLMSG_ALIGNTO), "ifaddrmsg");
    uint8_t local[16] = {};
    uint8_t peer[16] = {};
    int len = v6 ? 16 : 4;
    check(inet_pton(ifa.ifa_family, s.address.c_str(), local) == 1 ? 0 : -1, "address");
    std::memcpy(peer, local, sizeof(peer));
    if (!s.peer.empty()) {
        check(inet_pton(ifa.ifa_family, s.peer.c_str(), peer) == 1 ? 0 : -1, "peer");
    }
    // inet_fill_ifaddr / inet6_fill_ifaddr: IPv4 has IFA_ADDRESS (peer) then
    // IFA_LOCAL; IPv6 has IFA_ADDRESS only (IFA_LOCAL too with a peer).
    if (v6) {
        if (!s.peer.empty()) {
            check(nla_put(m.get(), IFA_LOCAL, len, local), "IFA_LOCAL");
            check(nla_put(m.get(), IFA_ADDRESS, len, peer), "IFA_ADDRESS");
        } else {
            check(nla_put(m.get(), IFA_ADDRESS, len, local), "IFA_ADDRESS");
        }
    } else {
        check(nla_put(m.get(), IFA_ADDRESS, len, peer), "IFA_ADDRESS");
        check(nla_put(m.get(), IFA_LOCAL, len, local), "IFA_LOCAL");
        check(nla_put_string(m.get(), IFA_LABEL, "x"), "IFA_LABEL");
    }
    check(nla_put_u32(m.get(), IFA_FLAGS, s.flags), "IFA_FLAGS");
    ifa_cacheinfo ci{0xffffffff, 0xffffffff, 100, 100};
    check(nla_put(m.get(), IFA_CACHEINFO, sizeof(ci), &ci), "IFA_CACHEINFO");
    return bytes_of(m.get());
}

Bytes build_done(uint32_t seq, uint32_t portid) {
    Msg m(nlmsg_alloc_simple(NLMSG_DONE, NLM_F_MULTI));
    int zero = 0;
    check(nlmsg_append(m.get(), &zero, sizeof(zero), NLMSG_ALIGNTO), "done");
    nlmsg_hdr(m.get())->nlmsg_seq = seq;
    nlmsg_hdr(m.get())->nlmsg_pid = portid;
    return bytes_of(m.get());
}

Bytes build_error(int err, uint32_t seq, uint32_t portid) {
    Msg m(nlmsg_alloc_simple(NLMSG_ERROR, 0));
    nlmsgerr e{};
    e.error = -err;
    check(nlmsg_append(m.get(), &e, sizeof(e), NLMSG_ALIGNTO), "error");
    nlmsg_hdr(m.get())->nlmsg_seq = seq;
    nlmsg_hdr(m.get())->nlmsg_pid = portid;
    return bytes_of(m.get());
}

Bytes datagram(std::initializer_list<Bytes> msgs) {
    Bytes out;
    for (const auto &m : msgs) {
        out.insert(out.end(), m.begin(), m.end());
    }
    return out;
}

} // namespace roce::netmon::test
