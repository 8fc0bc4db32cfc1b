// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "netmon/model.h"

#include <linux/if.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <unordered_set>

#include "util/strings.h"

namespace roce::netmon {

namespace {

bool same_address(const topo::AddressInfo &a, const topo::AddressInfo &b) {
    return a.prefix_len == b.prefix_len && a.address == b.address;
}

// Identity of an address on a netdev: family, bytes, prefix length.
std::string address_key(const topo::AddressInfo &a) {
    std::string k(reinterpret_cast<const char *>(a.address.bytes()),
                  static_cast<size_t>(a.address.bits() / 8));
    k += static_cast<char>(a.address.family());
    k += static_cast<char>(a.prefix_len);
    return k;
}

// Addresses of `from` missing in `other`, in `from`'s order. Hashing keeps a
// netdev with thousands of addresses linear, not quadratic.
std::vector<const topo::AddressInfo *> missing(const std::vector<topo::AddressInfo> &from,
                                               const std::vector<topo::AddressInfo> &other) {
    std::unordered_set<std::string> keys;
    keys.reserve(other.size());
    for (const auto &a : other) {
        keys.insert(address_key(a));
    }
    std::vector<const topo::AddressInfo *> out;
    for (const auto &a : from) {
        if (keys.count(address_key(a)) == 0) {
            out.push_back(&a);
        }
    }
    return out;
}

bool same_slave(const std::optional<topo::BondSlaveInfo> &a,
                const std::optional<topo::BondSlaveInfo> &b) {
    if (a.has_value() != b.has_value()) {
        return false;
    }
    if (!a) {
        return true;
    }
    return std::tie(a->active, a->mii_status, a->link_failure_count, a->ad_aggregator_id,
                    a->ad_actor_oper_port_state, a->ad_partner_oper_port_state) ==
           std::tie(b->active, b->mii_status, b->link_failure_count, b->ad_aggregator_id,
                    b->ad_actor_oper_port_state, b->ad_partner_oper_port_state);
}

// Kinds whose IFLA_LINK names the lower device they are stacked on (for a
// veth it names the peer, which is not a parent).
bool stacks_on_link(const std::string &kind) {
    return kind == "vlan" || kind == "macvlan" || kind == "macvtap" || kind == "ipvlan" ||
           kind == "ipvtap";
}

bool member_up(const topo::NetdevInfo &n) {
    if (!is_usable(n)) {
        return false;
    }
    return !n.bond_slave || n.bond_slave->mii_status == topo::BondMiiStatus::kUp ||
           n.bond_slave->mii_status == topo::BondMiiStatus::kUnknown;
}

Event make_event(EventKind k, int ifindex, const std::string &netdev,
                 const std::vector<RdmaPortRef> &rdma) {
    Event e;
    e.kind = k;
    e.ifindex = ifindex;
    e.netdev = netdev;
    e.rdma = rdma;
    return e;
}

} // namespace

bool is_usable(const topo::NetdevInfo &n) noexcept {
    return n.admin_up && n.carrier &&
           (n.operstate == topo::OperState::kUp || n.operstate == topo::OperState::kUnknown);
}

std::string Model::name_of(int ifindex) const {
    auto it = links_.find(ifindex);
    return it == links_.end() ? std::string() : it->second.info.name;
}

std::optional<topo::NetdevInfo> Model::materialize(int ifindex) const {
    auto it = links_.find(ifindex);
    if (it == links_.end()) {
        return std::nullopt;
    }
    const Link &l = it->second;
    topo::NetdevInfo n = l.info;
    n.master = name_of(l.master_ifindex);
    n.parent = l.link_ifindex != 0 && !l.link_in_other_netns && stacks_on_link(n.kind)
                   ? name_of(l.link_ifindex)
                   : l.info.parent;
    if (n.bond) {
        n.bond->slaves.clear();
        for (const auto &[idx, other] : links_) {
            if (other.master_ifindex == ifindex) {
                n.bond->slaves.push_back(other.info.name);
            }
        }
        n.bond->active_slave = name_of(l.active_slave_ifindex);
    }
    auto a = addresses_.find(ifindex);
    if (a != addresses_.end()) {
        n.addresses = a->second;
    }
    return n;
}

std::vector<topo::NetdevInfo> Model::netdevs() const {
    std::vector<topo::NetdevInfo> out;
    out.reserve(links_.size());
    for (const auto &entry : links_) {
        out.push_back(*materialize(entry.first));
    }
    return out;
}

std::optional<topo::NetdevInfo> Model::netdev(int ifindex) const {
    return materialize(ifindex);
}

std::optional<topo::NetdevInfo> Model::netdev(const std::string &name) const {
    for (const auto &[idx, l] : links_) {
        if (l.info.name == name) {
            return materialize(idx);
        }
    }
    return std::nullopt;
}

std::vector<RdmaPortRef> Model::rdma_ports(int ifindex) const {
    std::vector<RdmaPortRef> out;
    auto it = links_.find(ifindex);
    if (it == links_.end()) {
        return out;
    }
    auto collect = [this, &out](int idx) {
        const std::string name = name_of(idx);
        for (const auto &b : bindings_) {
            bool match = b.netdev_ifindex != 0 ? b.netdev_ifindex == idx : b.netdev == name;
            if (match && !name.empty()) {
                out.push_back({b.device, b.port});
            }
        }
    };
    collect(ifindex);
    if (it->second.master_ifindex != 0) {
        collect(it->second.master_ifindex);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

int Model::lag_member_count(int ifindex) const {
    auto it = links_.find(ifindex);
    if (it == links_.end() || !it->second.info.bond) {
        return -1;
    }
    const topo::BondInfo &b = *it->second.info.bond;
    if (b.mode == topo::BondMode::k8023ad && b.ad_num_ports >= 0) {
        return b.ad_num_ports;
    }
    int up = 0;
    for (const auto &entry : links_) {
        if (entry.second.master_ifindex == ifindex && member_up(entry.second.info)) {
            ++up;
        }
    }
    return up;
}

Model::View Model::view(int ifindex) const {
    View v;
    v.n = materialize(ifindex);
    if (!v.n) {
        return v;
    }
    const Link &l = links_.at(ifindex);
    v.master_ifindex = l.master_ifindex;
    auto m = links_.find(l.master_ifindex);
    v.master_is_bond =
        l.master_ifindex != 0 &&
        (l.info.bond_slave.has_value() || (m != links_.end() && m->second.info.kind == "bond"));
    v.active_slave_ifindex = l.active_slave_ifindex;
    v.lag = lag_member_count(ifindex);
    v.rdma = rdma_ports(ifindex);
    return v;
}

void Model::diff_view(int ifindex, const View &b, const View &a, std::vector<Event> *out) {
    if (!b.n && !a.n) {
        return;
    }
    if (!b.n) {
        out->push_back(make_event(EventKind::kNetdevAdded, ifindex, a.n->name, a.rdma));
        if (a.master_is_bond) {
            Event e = make_event(EventKind::kBondMemberAdded, ifindex, a.n->name, a.rdma);
            e.bond = a.n->master;
            out->push_back(std::move(e));
        }
        for (const auto &addr : a.n->addresses) {
            Event e = make_event(EventKind::kAddressAdded, ifindex, a.n->name, a.rdma);
            e.address = addr;
            out->push_back(std::move(e));
        }
        return;
    }
    if (!a.n) {
        for (const auto &addr : b.n->addresses) {
            Event e = make_event(EventKind::kAddressRemoved, ifindex, b.n->name, b.rdma);
            e.address = addr;
            out->push_back(std::move(e));
        }
        if (b.master_is_bond) {
            Event e = make_event(EventKind::kBondMemberRemoved, ifindex, b.n->name, b.rdma);
            e.bond = b.n->master;
            out->push_back(std::move(e));
        }
        out->push_back(make_event(EventKind::kNetdevRemoved, ifindex, b.n->name, b.rdma));
        return;
    }
    const topo::NetdevInfo &bn = *b.n;
    const topo::NetdevInfo &an = *a.n;
    if (bn.name != an.name) {
        Event e = make_event(EventKind::kNetdevRenamed, ifindex, an.name, a.rdma);
        e.old_name = bn.name;
        e.new_name = an.name;
        out->push_back(std::move(e));
    }
    if (bn.mtu != an.mtu) {
        Event e = make_event(EventKind::kMtuChanged, ifindex, an.name, a.rdma);
        e.old_value = bn.mtu;
        e.new_value = an.mtu;
        out->push_back(std::move(e));
    }
    if (is_usable(bn) != is_usable(an)) {
        out->push_back(make_event(is_usable(an) ? EventKind::kLinkUp : EventKind::kLinkDown,
                                  ifindex, an.name, a.rdma));
    }
    int bmaster = b.master_is_bond ? b.master_ifindex : 0;
    int amaster = a.master_is_bond ? a.master_ifindex : 0;
    if (bmaster != amaster) {
        if (bmaster != 0) {
            Event e = make_event(EventKind::kBondMemberRemoved, ifindex, an.name, b.rdma);
            e.bond = bn.master;
            out->push_back(std::move(e));
        }
        if (amaster != 0) {
            Event e = make_event(EventKind::kBondMemberAdded, ifindex, an.name, a.rdma);
            e.bond = an.master;
            out->push_back(std::move(e));
        }
    } else if (amaster != 0 && member_up(bn) != member_up(an)) {
        Event e = make_event(member_up(an) ? EventKind::kBondMemberUp : EventKind::kBondMemberDown,
                             ifindex, an.name, a.rdma);
        e.bond = an.master;
        out->push_back(std::move(e));
    }
    if (bn.bond && an.bond) {
        if (b.active_slave_ifindex != a.active_slave_ifindex) {
            Event e = make_event(EventKind::kActiveSlaveChanged, ifindex, an.name, a.rdma);
            e.bond = an.name;
            e.old_name = bn.bond->active_slave;
            e.new_name = an.bond->active_slave;
            out->push_back(std::move(e));
        }
        if (b.lag != a.lag) {
            Event e = make_event(EventKind::kLagMemberCountChanged, ifindex, an.name, a.rdma);
            e.bond = an.name;
            e.old_value = b.lag;
            e.new_value = a.lag;
            out->push_back(std::move(e));
        }
    }
    if (bn.addresses.size() != an.addresses.size() ||
        !std::equal(bn.addresses.begin(), bn.addresses.end(), an.addresses.begin(), same_address)) {
        for (const auto *addr : missing(bn.addresses, an.addresses)) {
            Event e = make_event(EventKind::kAddressRemoved, ifindex, an.name, a.rdma);
            e.address = *addr;
            out->push_back(std::move(e));
        }
        for (const auto *addr : missing(an.addresses, bn.addresses)) {
            Event e = make_event(EventKind::kAddressAdded, ifindex, an.name, a.rdma);
            e.address = *addr;
            out->push_back(std::move(e));
        }
    }
}

void Model::note_lacp_refresh(int ifindex, const View &b, const View &a) {
    auto lacp_bond = [this](int master) {
        auto it = links_.find(master);
        return it != links_.end() && it->second.info.bond &&
               it->second.info.bond->mode == topo::BondMode::k8023ad;
    };
    bool changed =
        b.n.has_value() != a.n.has_value() || b.master_ifindex != a.master_ifindex ||
        (b.n && a.n &&
         (is_usable(*b.n) != is_usable(*a.n) || !same_slave(b.n->bond_slave, a.n->bond_slave)));
    if (!changed) {
        return;
    }
    for (int master : {b.master_ifindex, a.master_ifindex}) {
        if (master != 0 && master != ifindex && lacp_bond(master)) {
            refresh_.insert(master);
        }
    }
}

std::vector<Event> Model::apply(const LinkMessage &m) {
    if (m.ifindex <= 0) {
        return {};
    }
    std::vector<int> affected{m.ifindex};
    auto old = links_.find(m.ifindex);
    if (old != links_.end() && old->second.master_ifindex != 0) {
        affected.push_back(old->second.master_ifindex);
    }
    if (!m.deleted && m.master_ifindex != 0 &&
        std::find(affected.begin(), affected.end(), m.master_ifindex) == affected.end()) {
        affected.push_back(m.master_ifindex);
    }
    std::vector<View> before;
    for (int idx : affected) {
        before.push_back(view(idx));
    }

    if (m.deleted) {
        links_.erase(m.ifindex);
        addresses_.erase(m.ifindex);
    } else {
        Link l;
        topo::NetdevInfo &n = l.info;
        n.name = m.name;
        n.ifindex = m.ifindex;
        n.kind = m.kind;
        n.mtu = m.mtu;
        n.operstate = m.operstate;
        n.carrier = m.carrier;
        n.mac = m.mac;
        n.vlan_id = m.kind == "vlan" ? m.vlan_id : -1;
        n.admin_up = (m.ifi_flags & IFF_UP) != 0;
        n.bond = m.bond;
        if (m.slave_kind == "bond") {
            n.bond_slave = m.bond_slave.value_or(topo::BondSlaveInfo{});
        }
        l.master_ifindex = m.master_ifindex;
        l.link_ifindex = m.link_ifindex;
        l.link_in_other_netns = m.link_in_other_netns;
        l.active_slave_ifindex = m.bond_active_slave_ifindex;
        links_[m.ifindex] = std::move(l);
    }

    std::vector<Event> out;
    for (size_t i = 0; i < affected.size(); ++i) {
        View after = view(affected[i]);
        diff_view(affected[i], before[i], after, &out);
        if (i == 0) {
            note_lacp_refresh(m.ifindex, before[i], after);
        }
    }
    return out;
}

std::vector<Event> Model::apply(const AddrMessage &m) {
    if (m.ifindex <= 0 || m.address.address.empty()) {
        return {};
    }
    auto &list = addresses_[m.ifindex];
    auto it = std::find_if(list.begin(), list.end(),
                           [&m](const auto &x) { return same_address(x, m.address); });
    if (m.deleted) {
        if (it == list.end()) {
            return {};
        }
        list.erase(it);
        if (list.empty()) {
            addresses_.erase(m.ifindex);
        }
    } else {
        if (it != list.end()) {
            return {};
        }
        list.push_back(m.address);
    }
    // What diff_view() would find, without copying the netdev's (possibly
    // thousands of) addresses twice per message. Unknown netdev: no event
    // now; the address is reported with the netdev when its link arrives.
    auto l = links_.find(m.ifindex);
    if (l == links_.end()) {
        return {};
    }
    Event e = make_event(m.deleted ? EventKind::kAddressRemoved : EventKind::kAddressAdded,
                         m.ifindex, l->second.info.name, rdma_ports(m.ifindex));
    e.address = m.address;
    return {std::move(e)};
}

std::vector<Event> Model::diff_rdma(const std::vector<RdmaBinding> &before,
                                    const std::vector<RdmaBinding> &after) {
    using Key = std::pair<std::string, int>;
    auto group = [](const std::vector<RdmaBinding> &v) {
        std::map<Key, std::vector<const RdmaBinding *>> g;
        for (const auto &b : v) {
            g[{b.device, b.port}].push_back(&b);
        }
        return g;
    };
    auto names = [](const std::vector<const RdmaBinding *> &v) {
        std::set<std::string> s;
        for (const auto *b : v) {
            s.insert(b->netdev);
        }
        return s;
    };
    auto gb = group(before);
    auto ga = group(after);
    std::vector<Event> out;
    auto emit = [&out](EventKind k, const Key &key, const RdmaBinding &first) {
        Event e;
        e.kind = k;
        e.rdma_device = key.first;
        e.rdma_port = key.second;
        e.netdev = first.netdev;
        e.ifindex = first.netdev_ifindex;
        out.push_back(std::move(e));
    };
    for (const auto &[key, rows] : gb) {
        if (ga.count(key) == 0) {
            emit(EventKind::kRdmaDeviceDisappeared, key, *rows.front());
        }
    }
    for (const auto &[key, rows] : ga) {
        auto it = gb.find(key);
        if (it == gb.end()) {
            emit(EventKind::kRdmaDeviceAppeared, key, *rows.front());
        } else if (names(it->second) != names(rows)) {
            emit(EventKind::kRdmaNetdevsChanged, key, *rows.front());
        }
    }
    return out;
}

std::vector<Event> Model::set_rdma_bindings(std::vector<RdmaBinding> bindings) {
    std::vector<Event> out = diff_rdma(bindings_, bindings);
    bindings_ = std::move(bindings);
    return out;
}

std::vector<Event> Model::diff(const Model &before, const Model &after) {
    std::set<int> all;
    for (const auto &e : before.links_) {
        all.insert(e.first);
    }
    for (const auto &e : after.links_) {
        all.insert(e.first);
    }
    std::vector<Event> out;
    for (int idx : all) {
        View b = before.view(idx);
        View a = after.view(idx);
        // The same ifindex with another kind is a new netdev, not a rename.
        if (b.n && a.n && b.n->kind != a.n->kind) {
            diff_view(idx, b, View{}, &out);
            diff_view(idx, View{}, a, &out);
        } else {
            diff_view(idx, b, a, &out);
        }
    }
    auto rdma = diff_rdma(before.bindings_, after.bindings_);
    out.insert(out.end(), rdma.begin(), rdma.end());
    return out;
}

Model Model::from_netdevs(const std::vector<topo::NetdevInfo> &netdevs) {
    Model m;
    std::map<std::string, int> index;
    int synthetic = 1 << 24;
    for (const auto &n : netdevs) {
        index[n.name] = n.ifindex > 0 ? n.ifindex : synthetic++;
    }
    auto idx = [&index](const std::string &name) {
        auto it = index.find(name);
        return name.empty() || it == index.end() ? 0 : it->second;
    };
    for (const auto &n : netdevs) {
        Link l;
        l.info = n;
        l.info.ifindex = idx(n.name);
        l.info.addresses.clear();
        l.master_ifindex = idx(n.master);
        l.link_ifindex = idx(n.parent);
        if (n.bond) {
            l.active_slave_ifindex = idx(n.bond->active_slave);
        }
        if (!n.addresses.empty()) {
            m.addresses_[l.info.ifindex] = n.addresses;
        }
        m.links_[l.info.ifindex] = std::move(l);
    }
    // A reader may list a bond's members only in the bond.
    for (const auto &n : netdevs) {
        if (!n.bond) {
            continue;
        }
        for (const auto &s : n.bond->slaves) {
            auto it = m.links_.find(idx(s));
            if (it != m.links_.end() && it->second.master_ifindex == 0) {
                it->second.master_ifindex = idx(n.name);
            }
        }
    }
    return m;
}

std::vector<int> Model::take_refresh_requests() {
    std::vector<int> out(refresh_.begin(), refresh_.end());
    refresh_.clear();
    return out;
}

std::string describe(const topo::NetdevInfo &n) {
    std::string s = util::format(
        "%d %s kind=%s mtu=%d oper=%s carrier=%d admin=%d mac=%s master=%s "
        "parent=%s vlan=%d",
        n.ifindex, n.name.c_str(), n.kind.c_str(), n.mtu, topo::to_string(n.operstate), n.carrier,
        n.admin_up, n.mac.c_str(), n.master.c_str(), n.parent.c_str(), n.vlan_id);
    if (n.bond) {
        const auto &b = *n.bond;
        s += util::format(" bond{%s slaves=%s active=%s ad_ports=%d agg=%d keys=%d/%d partner=%s "
                          "hash=%s miimon=%d min_links=%d}",
                          topo::to_string(b.mode), util::join(b.slaves, ",").c_str(),
                          b.active_slave.c_str(), b.ad_num_ports, b.ad_aggregator_id,
                          b.ad_actor_key, b.ad_partner_key, b.ad_partner_mac.c_str(),
                          b.xmit_hash_policy.c_str(), b.miimon_ms, b.min_links);
    }
    if (n.bond_slave) {
        const auto &sl = *n.bond_slave;
        s += util::format(
            " slave{%s mii=%s failures=%d perm=%s queue=%d agg=%d actor=%d partner=%d}",
            sl.active ? "active" : "backup", topo::to_string(sl.mii_status), sl.link_failure_count,
            sl.perm_hwaddr.c_str(), sl.queue_id, sl.ad_aggregator_id, sl.ad_actor_oper_port_state,
            sl.ad_partner_oper_port_state);
    }
    std::vector<std::string> addrs;
    for (const auto &a : n.addresses) {
        addrs.push_back(a.address.to_string() + "/" + std::to_string(a.prefix_len));
    }
    std::sort(addrs.begin(), addrs.end());
    s += " addrs=" + util::join(addrs, ",");
    return s;
}

} // namespace roce::netmon
