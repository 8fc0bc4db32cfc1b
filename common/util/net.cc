// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/net.h"

#include <arpa/inet.h>

#include "util/strings.h"

namespace roce::util {

IpAddress IpAddress::v4(const std::array<uint8_t, 4> &b) {
    IpAddress a;
    a.family_ = Family::kIPv4;
    for (size_t i = 0; i < 4; ++i) {
        a.bytes_[i] = b[i];
    }
    return a;
}

IpAddress IpAddress::v6(const std::array<uint8_t, 16> &b) {
    IpAddress a;
    a.family_ = Family::kIPv6;
    a.bytes_ = b;
    return a;
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
    std::string s(trim(text));
    std::array<uint8_t, 16> buf{};
    if (inet_pton(AF_INET, s.c_str(), buf.data()) == 1) {
        return v4({buf[0], buf[1], buf[2], buf[3]});
    }
    if (inet_pton(AF_INET6, s.c_str(), buf.data()) == 1) {
        return v6(buf);
    }
    return std::nullopt;
}

IpAddress IpAddress::from_gid(const std::array<uint8_t, 16> &gid) {
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    bool mapped = true;
    for (size_t i = 0; i < 12; ++i) {
        mapped = mapped && gid[i] == kMapped[i];
    }
    if (mapped) {
        return v4({gid[12], gid[13], gid[14], gid[15]});
    }
    return v6(gid);
}

std::array<uint8_t, 16> IpAddress::to_gid() const {
    if (family_ != Family::kIPv4) {
        return bytes_;
    }
    std::array<uint8_t, 16> g{};
    g[10] = 0xff;
    g[11] = 0xff;
    for (size_t i = 0; i < 4; ++i) {
        g[12 + i] = bytes_[i];
    }
    return g;
}

bool IpAddress::is_link_local() const noexcept {
    if (family_ == Family::kIPv4) {
        return bytes_[0] == 169 && bytes_[1] == 254;
    }
    if (family_ == Family::kIPv6) {
        return bytes_[0] == 0xfe && (bytes_[1] & 0xc0) == 0x80;
    }
    return false;
}

bool IpAddress::is_unique_local() const noexcept {
    return family_ == Family::kIPv6 && (bytes_[0] & 0xfe) == 0xfc;
}

bool IpAddress::is_zero() const noexcept {
    for (int i = 0; i < bits() / 8; ++i) {
        if (bytes_[static_cast<size_t>(i)] != 0) {
            return false;
        }
    }
    return true;
}

int IpAddress::bits() const noexcept {
    switch (family_) {
    case Family::kIPv4: return 32;
    case Family::kIPv6: return 128;
    case Family::kNone: return 0;
    }
    return 0;
}

std::string IpAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family_ == Family::kIPv4) {
        inet_ntop(AF_INET, bytes_.data(), buf, sizeof(buf));
    } else if (family_ == Family::kIPv6) {
        inet_ntop(AF_INET6, bytes_.data(), buf, sizeof(buf));
    }
    return buf;
}

namespace {

IpAddress masked(const IpAddress &addr, int prefix_len) {
    std::array<uint8_t, 16> b{};
    int nbytes = addr.bits() / 8;
    for (int i = 0; i < nbytes; ++i) {
        int keep = prefix_len - 8 * i;
        uint8_t mask = keep >= 8 ? 0xff : keep <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - keep));
        b[static_cast<size_t>(i)] = addr.bytes()[i] & mask;
    }
    if (addr.is_v4()) {
        return IpAddress::v4({b[0], b[1], b[2], b[3]});
    }
    return IpAddress::v6(b);
}

} // namespace

std::optional<Subnet> Subnet::parse(std::string_view text, std::string *error) {
    auto fail = [&](std::string why) -> std::optional<Subnet> {
        if (error) {
            *error = std::move(why);
        }
        return std::nullopt;
    };
    text = trim(text);
    size_t slash = text.find('/');
    if (slash == std::string_view::npos) {
        return fail("expected ADDRESS/PREFIXLEN");
    }
    auto addr = IpAddress::parse(text.substr(0, slash));
    if (!addr) {
        return fail("'" + std::string(text.substr(0, slash)) + "' is not an IPv4 or IPv6 address");
    }
    auto len = parse_uint(text.substr(slash + 1));
    if (!len || *len > static_cast<uint64_t>(addr->bits())) {
        return fail(format("prefix length must be 0..%d for %s", addr->bits(),
                           addr->is_v4() ? "IPv4" : "IPv6"));
    }
    return of(*addr, static_cast<int>(*len));
}

Subnet Subnet::of(const IpAddress &addr, int prefix_len) {
    return Subnet{masked(addr, prefix_len), prefix_len};
}

bool Subnet::contains(const IpAddress &addr) const noexcept {
    return addr.family() == address.family() && masked(addr, prefix_len) == address;
}

std::string Subnet::to_string() const {
    return address.to_string() + "/" + std::to_string(prefix_len);
}

} // namespace roce::util
