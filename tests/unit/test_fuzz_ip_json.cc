// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Fuzz target: the `ip -j` readers (topo/ip_json). Netdevs generated at
// random, written the way iproute2 writes them, must read back exactly;
// mutated documents (structure and bytes) must read into netdevs that keep
// the readers' promises, or fail with a clean error naming the input.
#include <algorithm>
#include <climits>

#include "catch.h"
#include "fixtures.h"
#include "fuzz_util.h"
#include "topo/fs.h"
#include "topo/ip_json.h"
#include "util/json.h"
#include "util/strings.h"

using namespace roce;
using namespace roce::testing::fuzz;
using util::Json;

namespace {

const std::vector<std::string> kOperstates = {"UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN",
                                              "TESTING", "DORMANT",    "UP"};
const std::vector<std::string> kModes = {"balance-rr", "active-backup", "balance-xor", "broadcast",
                                         "802.3ad",    "balance-tlb",   "balance-alb"};

/// A name of 1..15 characters, control characters included (valid UTF-8:
/// JSON carries any text, and the reader must give it back unchanged).
std::string any_name(Rng &r) {
    static const std::string kChars = "abcdefghijklmnopqrstuvwxyz0123456789._-@\x1b\x7f\n\"\\";
    std::string s(static_cast<size_t>(r.range(1, 15)), 'x');
    for (auto &c : s) {
        c = kChars[r.below(kChars.size())];
    }
    return s;
}

/// Random netdevs in the shape `ip -j -d link show` prints, and what the
/// reader must make of them.
struct Generated {
    std::string text;
    std::vector<topo::NetdevInfo> expect;
};

Generated random_links(Rng &r) {
    Json doc = Json::array();
    std::vector<topo::NetdevInfo> want;
    const int64_t n = r.range(0, 8);
    std::vector<std::string> names;
    for (int64_t i = 0; i < n; ++i) {
        names.push_back(any_name(r) + std::to_string(i)); // unique
    }
    for (int64_t i = 0; i < n; ++i) {
        topo::NetdevInfo nd;
        Json e = Json::object();
        nd.ifindex = static_cast<int>(r.range(1, INT_MAX));
        nd.name = names[static_cast<size_t>(i)];
        e["ifindex"] = nd.ifindex;
        e["ifname"] = nd.name;
        Json flags = Json::array();
        flags.push("BROADCAST");
        if (r.chance(60)) {
            flags.push("LOWER_UP");
            nd.carrier = true;
        }
        e["flags"] = flags;
        nd.mtu = static_cast<int>(r.range(0, 65536));
        e["mtu"] = nd.mtu;
        const std::string &op = r.pick(kOperstates);
        e["operstate"] = op;
        nd.operstate = static_cast<topo::OperState>(
            std::find(kOperstates.begin(), kOperstates.end(), op) - kOperstates.begin());
        nd.mac = "52:54:00:00:00:" + std::to_string(r.below(100));
        e["address"] = nd.mac;
        if (r.chance(30) && n > 1) {
            nd.master = r.pick(names);
            e["master"] = nd.master;
        }
        switch (r.below(4)) {
        case 0: {
            nd.kind = "bond";
            topo::BondInfo b;
            Json data = Json::object();
            const std::string &mode = r.pick(kModes);
            data["mode"] = mode;
            b.mode = static_cast<topo::BondMode>(std::find(kModes.begin(), kModes.end(), mode) -
                                                 kModes.begin());
            if (r.chance(50)) {
                b.active_slave = r.pick(names);
                data["active_slave"] = b.active_slave;
            }
            b.miimon_ms = static_cast<int>(r.range(0, 1000));
            data["miimon"] = b.miimon_ms;
            b.xmit_hash_policy = r.chance(50) ? "layer3+4" : "layer2";
            data["xmit_hash_policy"] = b.xmit_hash_policy;
            if (r.chance(50)) {
                b.ad_num_ports = static_cast<int>(r.range(0, 8));
                data["ad_info"]["num_ports"] = b.ad_num_ports;
            }
            e["linkinfo"]["info_kind"] = "bond";
            e["linkinfo"]["info_data"] = data;
            nd.bond = b;
            break;
        }
        case 1:
            nd.kind = "vlan";
            nd.vlan_id = static_cast<int>(r.range(0, 4095));
            nd.parent = r.pick(names);
            e["link"] = nd.parent;
            e["linkinfo"]["info_kind"] = "vlan";
            e["linkinfo"]["info_data"]["protocol"] = "802.1Q";
            e["linkinfo"]["info_data"]["id"] = nd.vlan_id;
            break;
        case 2:
            nd.kind = "macvlan";
            nd.parent = r.pick(names);
            e["link"] = nd.parent;
            e["linkinfo"]["info_kind"] = "macvlan";
            break;
        default:
            break;
        }
        doc.push(e);
        want.push_back(nd);
    }
    std::stable_sort(want.begin(), want.end(),
                     [](const auto &a, const auto &b) { return a.ifindex < b.ifindex; });
    for (auto &bond : want) {
        if (bond.bond) {
            for (const auto &m : want) {
                if (m.master == bond.name) {
                    bond.bond->slaves.push_back(m.name);
                }
            }
        }
    }
    return {r.chance(50) ? doc.dump() : doc.dump(2), want};
}

std::string describe(const std::vector<topo::NetdevInfo> &n) {
    topo::Snapshot s;
    s.netdevs = n;
    return testing::dump(s);
}

/// A copy of `v` with a few random changes deep inside: a value replaced by
/// one of another type or a boundary number, a member added, an element
/// duplicated or dropped.
Json mutate_tree(const Json &v, Rng &r, int depth = 0) {
    if (r.chance(depth == 0 ? 2 : 6)) {
        switch (r.below(8)) {
        case 0:
            return Json();
        case 1:
            return Json(r.chance(50));
        case 2:
            return Json(static_cast<int64_t>(r.pick(interesting())));
        case 3:
            return Json(-static_cast<int64_t>(r.below(1ull << 40)));
        case 4:
            return Json(r.pick(std::vector<double>{1.5, -0.0, 1e300, 4294967297.0, -1e-300}));
        case 5:
            return Json(any_name(r));
        case 6:
            return Json::array();
        default:
            return Json::object();
        }
    }
    if (v.is_array()) {
        Json a = Json::array();
        for (const auto &x : v.items()) {
            if (r.chance(4)) {
                continue; // dropped
            }
            a.push(mutate_tree(x, r, depth + 1));
            if (r.chance(3)) {
                a.push(mutate_tree(x, r, depth + 1)); // duplicated
            }
        }
        return a;
    }
    if (v.is_object()) {
        Json o = Json::object();
        for (const auto &m : v.members()) {
            if (r.chance(4)) {
                continue;
            }
            o[m.first] = mutate_tree(m.second, r, depth + 1);
        }
        if (r.chance(5)) {
            o[r.chance(50) ? any_name(r) : "ifindex"] = mutate_tree(Json(), r, depth + 1);
        }
        return o;
    }
    return v;
}

/// The reader's promises about a successful parse of `ip -j -d link`.
std::string check_links(const std::vector<topo::NetdevInfo> &out, size_t entries) {
    if (out.size() != entries) {
        return "an entry was lost or invented";
    }
    for (size_t i = 0; i < out.size(); ++i) {
        const auto &n = out[i];
        if (n.name.empty() || n.ifindex <= 0) {
            return "a netdev without name or ifindex";
        }
        if (i > 0 && out[i - 1].ifindex > n.ifindex) {
            return "not sorted by ifindex";
        }
        if (n.bond) {
            std::vector<std::string> slaves;
            for (const auto &m : out) {
                if (m.master == n.name) {
                    slaves.push_back(m.name);
                }
            }
            if (slaves != n.bond->slaves) {
                return "bond " + n.name + ": slaves are not its members";
            }
        }
    }
    return "";
}

std::string check_error(const util::Status &st, const std::string &what) {
    if (st.code() != util::Code::kInvalidArgument || st.message().rfind(what + ": ", 0) != 0 ||
        !is_printable(st.message())) {
        return "bad error: " + util::printable(st.message());
    }
    return "";
}

std::vector<std::string> fixture_texts(const char *file) {
    std::vector<std::string> out;
    for (const char *fix :
         {"mlx5_lag", "mlx4_two_ports", "rxe_bond", "mlx5_ipv6_only", "mlx5_lag_readdressed"}) {
        auto t = topo::fs::read_text(testing::fixture_dir(fix) + file);
        REQUIRE(t.is_ok());
        out.push_back(*t);
    }
    return out;
}

} // namespace

TEST_CASE("ip_json: numbers that do not fit an int read as absent, not wrapped", "[topo][json]") {
    auto r = topo::parse_ip_link_json(R"([{"ifindex": 4294967297, "ifname": "eth0"}])", "x");
    REQUIRE_FALSE(r.is_ok()); // ifindex 1 before
    CHECK(r.status().message() == "x: entry 0 has no \"ifname\" or \"ifindex\" (is this the "
                                  "output of `ip -j -d link show`?)");
    auto m = topo::parse_ip_link_json(R"([{"ifindex": 3, "ifname": "e", "mtu": 4294967296}])", "x");
    REQUIRE(m.is_ok());
    CHECK(m->at(0).mtu == 0); // 0 before, by accident of the wrap
    auto v = topo::parse_ip_link_json(
        R"([{"ifindex": 3, "ifname": "e", "linkinfo": {"info_kind": "vlan",
            "info_data": {"id": -4294967295}}}])",
        "x");
    REQUIRE(v.is_ok());
    CHECK(v->at(0).vlan_id == -1); // 1 before
}

TEST_CASE("fuzz ip_json: random netdevs read back exactly", "[fuzz][ip_json]") {
    Rng r(seed(0x69706a01));
    const size_t n = cases(1500);
    for (size_t i = 0; i < n; ++i) {
        Generated g = random_links(r);
        INFO("case " << i << ": " << util::printable(g.text));
        auto got = topo::parse_ip_link_json(g.text, "ip-link.json");
        REQUIRE(got.is_ok());
        REQUIRE(describe(*got) == describe(g.expect));
    }
}

TEST_CASE("fuzz ip_json: mutated documents keep the readers' promises or fail cleanly",
          "[fuzz][ip_json]") {
    Rng r(seed(0x69706a02));
    const auto links = fixture_texts("/ip-link.json");
    const auto addrs = fixture_texts("/ip-addr.json");
    const std::vector<std::string> dict = {"\"ifindex\":",
                                           "\"ifname\":",
                                           "\"master\":",
                                           "\"linkinfo\":",
                                           "\"info_kind\":\"bond\"",
                                           "\"addr_info\":",
                                           "\"prefixlen\":",
                                           "\"local\":",
                                           "4294967297",
                                           "-1",
                                           "null",
                                           "[]",
                                           "{}",
                                           "\"\x1b\""};
    const size_t n = cases(5000);
    size_t ok_links = 0, ok_addrs = 0;
    for (size_t i = 0; i < n; ++i) {
        const bool is_link = r.chance(50);
        const auto &corpus = is_link ? links : addrs;
        std::string text;
        if (r.chance(60)) {
            auto doc = Json::parse(r.pick(corpus));
            REQUIRE(doc.is_ok());
            text = mutate_tree(*doc, r).dump();
        } else {
            text = mutate(r.pick(corpus), r, dict, r.pick(corpus), 64 << 10);
        }
        INFO("case " << i << (is_link ? " link: " : " addr: ") << util::printable(text));
        const std::string what = is_link ? "ip-link.json" : "ip-addr.json";
        auto doc = Json::parse(text);
        if (is_link) {
            auto got = topo::parse_ip_link_json(text, what);
            if (got) {
                ++ok_links;
                REQUIRE(doc.is_ok());
                REQUIRE(check_links(*got, doc->items().size()) == "");
            } else {
                REQUIRE(check_error(got.status(), what) == "");
            }
        } else {
            auto got = topo::parse_ip_addr_json(text, what);
            if (got) {
                ++ok_addrs;
                REQUIRE(doc.is_ok());
                size_t count = 0;
                for (const auto &e : doc->items()) {
                    const Json *infos = e.find("addr_info");
                    count += infos != nullptr ? infos->items().size() : 0;
                }
                size_t read = 0;
                for (const auto &[name, list] : *got) {
                    REQUIRE_FALSE(name.empty());
                    for (const auto &a : list) {
                        REQUIRE(a.prefix_len >= 0);
                        REQUIRE(a.prefix_len <= a.address.bits());
                        ++read;
                    }
                }
                REQUIRE(read == count);
            } else {
                REQUIRE(check_error(got.status(), what) == "");
            }
        }
    }
    CHECK(ok_links > n / 50);
    CHECK(ok_addrs > n / 50);
}
