// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/nl_parse.h"

#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>

#include <cstring>

#include "util/strings.h"

namespace roce::netmon {

namespace {

using util::Code;
using util::Status;

// libnl's nla_get_* read without checking the length: every fixed-size
// attribute goes through these, so a short attribute is an error, not an
// out-of-bounds read.
template <typename T>
bool get_fixed(const nlattr *a, T *out) {
    if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(T))) {
        return false;
    }
    std::memcpy(out, nla_data(a), sizeof(T));
    return true;
}

std::string get_string(const nlattr *a) {
    auto *p = static_cast<const char *>(nla_data(a));
    return std::string(p, strnlen(p, static_cast<size_t>(nla_len(a))));
}

std::string mac_text(const nlattr *a) {
    auto *p = static_cast<const uint8_t *>(nla_data(a));
    std::string s;
    for (int i = 0; i < nla_len(a); ++i) {
        s += util::format(i ? ":%02x" : "%02x", p[i]);
    }
    return s;
}

Status short_attr(const char *what) {
    return Status(Code::kProtocol, util::format("netlink attribute %s is truncated", what));
}

topo::OperState oper_state(uint8_t v) {
    switch (v) {
    case IF_OPER_NOTPRESENT:
        return topo::OperState::kNotPresent;
    case IF_OPER_DOWN:
        return topo::OperState::kDown;
    case IF_OPER_LOWERLAYERDOWN:
        return topo::OperState::kLowerLayerDown;
    case IF_OPER_TESTING:
        return topo::OperState::kTesting;
    case IF_OPER_DORMANT:
        return topo::OperState::kDormant;
    case IF_OPER_UP:
        return topo::OperState::kUp;
    default:
        return topo::OperState::kUnknown;
    }
}

const char *xmit_hash_name(uint8_t v) {
    // BOND_XMIT_POLICY_* in include/net/bonding.h, spelled as sysfs shows them.
    static const char *const kNames[] = {"layer2",   "layer3+4", "layer2+3",
                                         "encap2+3", "encap3+4", "vlan+srcmac"};
    return v < sizeof(kNames) / sizeof(kNames[0]) ? kNames[v] : "unknown";
}

topo::BondMode bond_mode(uint8_t v) {
    return v <= 6 ? static_cast<topo::BondMode>(v) : topo::BondMode::kUnknown;
}

Status parse_ad_info(nlattr *nest, topo::BondInfo *b) {
    nlattr *tb[IFLA_BOND_AD_INFO_MAX + 1];
    if (nla_parse_nested(tb, IFLA_BOND_AD_INFO_MAX, nest, nullptr) < 0) {
        return short_attr("IFLA_BOND_AD_INFO");
    }
    uint16_t v16 = 0;
    if (tb[IFLA_BOND_AD_INFO_AGGREGATOR] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_AD_INFO_AGGREGATOR], &v16)) {
            return short_attr("IFLA_BOND_AD_INFO_AGGREGATOR");
        }
        b->ad_aggregator_id = v16;
    }
    if (tb[IFLA_BOND_AD_INFO_NUM_PORTS] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_AD_INFO_NUM_PORTS], &v16)) {
            return short_attr("IFLA_BOND_AD_INFO_NUM_PORTS");
        }
        b->ad_num_ports = v16;
    }
    if (tb[IFLA_BOND_AD_INFO_ACTOR_KEY] != nullptr &&
        get_fixed(tb[IFLA_BOND_AD_INFO_ACTOR_KEY], &v16)) {
        b->ad_actor_key = v16;
    }
    if (tb[IFLA_BOND_AD_INFO_PARTNER_KEY] != nullptr &&
        get_fixed(tb[IFLA_BOND_AD_INFO_PARTNER_KEY], &v16)) {
        b->ad_partner_key = v16;
    }
    if (tb[IFLA_BOND_AD_INFO_PARTNER_MAC] != nullptr) {
        b->ad_partner_mac = mac_text(tb[IFLA_BOND_AD_INFO_PARTNER_MAC]);
    }
    return Status::ok();
}

Status parse_bond(nlattr *data, LinkMessage *m) {
    nlattr *tb[IFLA_BOND_MAX + 1];
    if (nla_parse_nested(tb, IFLA_BOND_MAX, data, nullptr) < 0) {
        return short_attr("IFLA_INFO_DATA (bond)");
    }
    topo::BondInfo b;
    uint8_t v8 = 0;
    uint32_t v32 = 0;
    if (tb[IFLA_BOND_MODE] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_MODE], &v8)) {
            return short_attr("IFLA_BOND_MODE");
        }
        b.mode = bond_mode(v8);
    }
    if (tb[IFLA_BOND_ACTIVE_SLAVE] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_ACTIVE_SLAVE], &v32)) {
            return short_attr("IFLA_BOND_ACTIVE_SLAVE");
        }
        m->bond_active_slave_ifindex = static_cast<int>(v32);
    }
    if (tb[IFLA_BOND_MIIMON] != nullptr && get_fixed(tb[IFLA_BOND_MIIMON], &v32)) {
        b.miimon_ms = static_cast<int>(v32);
    }
    if (tb[IFLA_BOND_MIN_LINKS] != nullptr && get_fixed(tb[IFLA_BOND_MIN_LINKS], &v32)) {
        b.min_links = static_cast<int>(v32);
    }
    if (tb[IFLA_BOND_XMIT_HASH_POLICY] != nullptr &&
        get_fixed(tb[IFLA_BOND_XMIT_HASH_POLICY], &v8)) {
        b.xmit_hash_policy = xmit_hash_name(v8);
    }
    if (b.mode == topo::BondMode::k8023ad) {
        // The kernel omits IFLA_BOND_AD_INFO when no aggregator is active:
        // then no member carries traffic, which is a count of 0, not "unknown".
        b.ad_num_ports = 0;
        if (tb[IFLA_BOND_AD_INFO] != nullptr) {
            Status st = parse_ad_info(tb[IFLA_BOND_AD_INFO], &b);
            if (!st) {
                return st;
            }
        }
    }
    m->bond = std::move(b);
    return Status::ok();
}

Status parse_bond_slave(nlattr *data, LinkMessage *m) {
    nlattr *tb[IFLA_BOND_SLAVE_MAX + 1];
    if (nla_parse_nested(tb, IFLA_BOND_SLAVE_MAX, data, nullptr) < 0) {
        return short_attr("IFLA_INFO_SLAVE_DATA (bond)");
    }
    topo::BondSlaveInfo s;
    uint8_t v8 = 0;
    uint16_t v16 = 0;
    uint32_t v32 = 0;
    if (tb[IFLA_BOND_SLAVE_STATE] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_SLAVE_STATE], &v8)) {
            return short_attr("IFLA_BOND_SLAVE_STATE");
        }
        s.active = v8 == 0; // BOND_STATE_ACTIVE
    }
    if (tb[IFLA_BOND_SLAVE_MII_STATUS] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_SLAVE_MII_STATUS], &v8)) {
            return short_attr("IFLA_BOND_SLAVE_MII_STATUS");
        }
        s.mii_status =
            v8 <= 3 ? static_cast<topo::BondMiiStatus>(v8) : topo::BondMiiStatus::kUnknown;
    }
    if (tb[IFLA_BOND_SLAVE_LINK_FAILURE_COUNT] != nullptr &&
        get_fixed(tb[IFLA_BOND_SLAVE_LINK_FAILURE_COUNT], &v32)) {
        s.link_failure_count = static_cast<int>(v32);
    }
    if (tb[IFLA_BOND_SLAVE_PERM_HWADDR] != nullptr) {
        s.perm_hwaddr = mac_text(tb[IFLA_BOND_SLAVE_PERM_HWADDR]);
    }
    if (tb[IFLA_BOND_SLAVE_QUEUE_ID] != nullptr && get_fixed(tb[IFLA_BOND_SLAVE_QUEUE_ID], &v16)) {
        s.queue_id = v16;
    }
    if (tb[IFLA_BOND_SLAVE_AD_AGGREGATOR_ID] != nullptr) {
        if (!get_fixed(tb[IFLA_BOND_SLAVE_AD_AGGREGATOR_ID], &v16)) {
            return short_attr("IFLA_BOND_SLAVE_AD_AGGREGATOR_ID");
        }
        s.ad_aggregator_id = v16;
    }
    if (tb[IFLA_BOND_SLAVE_AD_ACTOR_OPER_PORT_STATE] != nullptr &&
        get_fixed(tb[IFLA_BOND_SLAVE_AD_ACTOR_OPER_PORT_STATE], &v8)) {
        s.ad_actor_oper_port_state = v8;
    }
    if (tb[IFLA_BOND_SLAVE_AD_PARTNER_OPER_PORT_STATE] != nullptr &&
        get_fixed(tb[IFLA_BOND_SLAVE_AD_PARTNER_OPER_PORT_STATE], &v16)) {
        s.ad_partner_oper_port_state = v16;
    }
    m->bond_slave = std::move(s);
    return Status::ok();
}

Status parse_linkinfo(nlattr *nest, LinkMessage *m) {
    nlattr *tb[IFLA_INFO_MAX + 1];
    if (nla_parse_nested(tb, IFLA_INFO_MAX, nest, nullptr) < 0) {
        return short_attr("IFLA_LINKINFO");
    }
    if (tb[IFLA_INFO_KIND] != nullptr) {
        m->kind = get_string(tb[IFLA_INFO_KIND]);
    }
    if (tb[IFLA_INFO_SLAVE_KIND] != nullptr) {
        m->slave_kind = get_string(tb[IFLA_INFO_SLAVE_KIND]);
    }
    if (tb[IFLA_INFO_DATA] != nullptr) {
        if (m->kind == "bond") {
            Status st = parse_bond(tb[IFLA_INFO_DATA], m);
            if (!st) {
                return st;
            }
        } else if (m->kind == "vlan") {
            nlattr *vt[IFLA_VLAN_MAX + 1];
            uint16_t id = 0;
            if (nla_parse_nested(vt, IFLA_VLAN_MAX, tb[IFLA_INFO_DATA], nullptr) < 0 ||
                (vt[IFLA_VLAN_ID] != nullptr && !get_fixed(vt[IFLA_VLAN_ID], &id))) {
                return short_attr("IFLA_VLAN_ID");
            }
            if (vt[IFLA_VLAN_ID] != nullptr) {
                m->vlan_id = id;
            }
        }
    }
    if (tb[IFLA_INFO_SLAVE_DATA] != nullptr && m->slave_kind == "bond") {
        return parse_bond_slave(tb[IFLA_INFO_SLAVE_DATA], m);
    }
    return Status::ok();
}

Status parse_link(const nlmsghdr *h, ParsedMessage *out) {
    auto *nlh = const_cast<nlmsghdr *>(h); // libnl takes non-const, never writes
    if (!nlmsg_valid_hdr(nlh, sizeof(ifinfomsg))) {
        return Status(Code::kProtocol, "RTM_*LINK message shorter than struct ifinfomsg");
    }
    auto *ifi = static_cast<const ifinfomsg *>(nlmsg_data(nlh));
    if (ifi->ifi_family != AF_UNSPEC) {
        // AF_BRIDGE port info and AF_INET6 link info are partial views; an
        // AF_BRIDGE RTM_DELLINK only means "left the bridge".
        out->type = ParsedMessage::Type::kIgnored;
        return Status::ok();
    }
    nlattr *tb[IFLA_MAX + 1];
    if (nlmsg_parse(nlh, sizeof(ifinfomsg), tb, IFLA_MAX, nullptr) < 0) {
        return Status(Code::kProtocol, "malformed attributes in RTM_*LINK message");
    }
    LinkMessage &m = out->link;
    m.deleted = h->nlmsg_type == RTM_DELLINK;
    m.ifindex = ifi->ifi_index;
    m.ifi_flags = ifi->ifi_flags;
    m.carrier = (ifi->ifi_flags & IFF_LOWER_UP) != 0;
    uint8_t v8 = 0;
    uint32_t v32 = 0;
    if (tb[IFLA_IFNAME] != nullptr) {
        m.name = get_string(tb[IFLA_IFNAME]);
    }
    if (tb[IFLA_MTU] != nullptr) {
        if (!get_fixed(tb[IFLA_MTU], &v32)) {
            return short_attr("IFLA_MTU");
        }
        m.mtu = static_cast<int>(v32);
    }
    if (tb[IFLA_OPERSTATE] != nullptr) {
        if (!get_fixed(tb[IFLA_OPERSTATE], &v8)) {
            return short_attr("IFLA_OPERSTATE");
        }
        m.operstate = oper_state(v8);
    }
    if (tb[IFLA_CARRIER] != nullptr) {
        if (!get_fixed(tb[IFLA_CARRIER], &v8)) {
            return short_attr("IFLA_CARRIER");
        }
        m.carrier = v8 != 0;
    }
    if (tb[IFLA_ADDRESS] != nullptr) {
        m.mac = mac_text(tb[IFLA_ADDRESS]);
    }
    if (tb[IFLA_MASTER] != nullptr) {
        if (!get_fixed(tb[IFLA_MASTER], &v32)) {
            return short_attr("IFLA_MASTER");
        }
        m.master_ifindex = static_cast<int>(v32);
    }
    if (tb[IFLA_LINK] != nullptr) {
        if (!get_fixed(tb[IFLA_LINK], &v32)) {
            return short_attr("IFLA_LINK");
        }
        m.link_ifindex = static_cast<int>(v32);
    }
    m.link_in_other_netns = tb[IFLA_LINK_NETNSID] != nullptr;
    if (tb[IFLA_EVENT] != nullptr && get_fixed(tb[IFLA_EVENT], &v32)) {
        m.ifla_event = static_cast<int>(v32);
    }
    if (tb[IFLA_LINKINFO] != nullptr) {
        Status st = parse_linkinfo(tb[IFLA_LINKINFO], &m);
        if (!st) {
            return std::move(st).with_context(
                util::format("link %d (%s)", m.ifindex, util::printable(m.name).c_str()));
        }
    }
    out->type = ParsedMessage::Type::kLink;
    return Status::ok();
}

Status parse_addr(const nlmsghdr *h, ParsedMessage *out) {
    auto *nlh = const_cast<nlmsghdr *>(h);
    if (!nlmsg_valid_hdr(nlh, sizeof(ifaddrmsg))) {
        return Status(Code::kProtocol, "RTM_*ADDR message shorter than struct ifaddrmsg");
    }
    auto *ifa = static_cast<const ifaddrmsg *>(nlmsg_data(nlh));
    if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) {
        out->type = ParsedMessage::Type::kIgnored;
        return Status::ok();
    }
    nlattr *tb[IFA_MAX + 1];
    if (nlmsg_parse(nlh, sizeof(ifaddrmsg), tb, IFA_MAX, nullptr) < 0) {
        return Status(Code::kProtocol, "malformed attributes in RTM_*ADDR message");
    }
    AddrMessage &m = out->addr;
    m.deleted = h->nlmsg_type == RTM_DELADDR;
    m.ifindex = static_cast<int>(ifa->ifa_index);
    m.flags = ifa->ifa_flags;
    m.scope = ifa->ifa_scope;
    m.address.prefix_len = ifa->ifa_prefixlen;
    uint32_t flags32 = 0;
    if (tb[IFA_FLAGS] != nullptr && get_fixed(tb[IFA_FLAGS], &flags32)) {
        m.flags = flags32;
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer on
    // point-to-point links (iproute2 reads them the same way).
    const nlattr *a = tb[IFA_LOCAL] != nullptr ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
    if (a == nullptr) {
        return Status(Code::kProtocol,
                      util::format("RTM_*ADDR for ifindex %d has no address", m.ifindex));
    }
    if (ifa->ifa_family == AF_INET) {
        std::array<uint8_t, 4> b{};
        if (!get_fixed(a, &b)) {
            return short_attr("IFA_LOCAL (IPv4)");
        }
        m.address.address = util::IpAddress::v4(b);
    } else {
        std::array<uint8_t, 16> b{};
        if (!get_fixed(a, &b)) {
            return short_attr("IFA_ADDRESS (IPv6)");
        }
        m.address.address = util::IpAddress::v6(b);
    }
    if (m.address.prefix_len > m.address.address.bits()) {
        // The kernel never sends one; the model and the policy would take it
        // for a subnet that cannot exist.
        return Status(Code::kProtocol,
                      util::format("RTM_*ADDR for ifindex %d has prefix length %d, longer than "
                                   "the address (%d bits)",
                                   m.ifindex, m.address.prefix_len, m.address.address.bits()));
    }
    out->type = ParsedMessage::Type::kAddress;
    return Status::ok();
}

} // namespace

util::Result<ParsedMessage> parse_message(const nlmsghdr *h) {
    if (h == nullptr || h->nlmsg_len < NLMSG_HDRLEN) {
        return Status(Code::kProtocol, "netlink message shorter than its header");
    }
    ParsedMessage out;
    out.seq = h->nlmsg_seq;
    out.portid = h->nlmsg_pid;
    out.nl_flags = h->nlmsg_flags;
    out.nl_type = h->nlmsg_type;
    Status st;
    switch (h->nlmsg_type) {
    case NLMSG_DONE:
        out.type = ParsedMessage::Type::kDone;
        break;
    case NLMSG_ERROR: {
        auto *nlh = const_cast<nlmsghdr *>(h);
        if (!nlmsg_valid_hdr(nlh, sizeof(nlmsgerr))) {
            return Status(Code::kProtocol, "truncated NLMSG_ERROR");
        }
        auto *e = static_cast<const nlmsgerr *>(nlmsg_data(nlh));
        out.type = ParsedMessage::Type::kError;
        out.error = -e->error;
        break;
    }
    case RTM_NEWLINK:
    case RTM_DELLINK:
        st = parse_link(h, &out);
        break;
    case RTM_NEWADDR:
    case RTM_DELADDR:
        st = parse_addr(h, &out);
        break;
    default:
        out.type = ParsedMessage::Type::kIgnored;
        break;
    }
    if (!st) {
        return st;
    }
    return out;
}

const char *nl_type_name(uint16_t type) noexcept {
    switch (type) {
    case NLMSG_NOOP:
        return "NLMSG_NOOP";
    case NLMSG_ERROR:
        return "NLMSG_ERROR";
    case NLMSG_DONE:
        return "NLMSG_DONE";
    case NLMSG_OVERRUN:
        return "NLMSG_OVERRUN";
    case RTM_NEWLINK:
        return "RTM_NEWLINK";
    case RTM_DELLINK:
        return "RTM_DELLINK";
    case RTM_NEWADDR:
        return "RTM_NEWADDR";
    case RTM_DELADDR:
        return "RTM_DELADDR";
    case RTM_GETLINK:
        return "RTM_GETLINK";
    case RTM_GETADDR:
        return "RTM_GETADDR";
    default:
        return "other";
    }
}

} // namespace roce::netmon
