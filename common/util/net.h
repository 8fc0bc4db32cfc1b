// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace roce::util {

/// An IPv4 or IPv6 address as a value. IPv4 is kept as 4 bytes; a RoCE GID
/// carrying an IPv4 address (::ffff:a.b.c.d) converts to/from it with
/// to_gid()/from_gid().
class IpAddress {
public:
    enum class Family : uint8_t { kNone = 0, kIPv4 = 4, kIPv6 = 6 };

    IpAddress() = default;
    static IpAddress v4(const std::array<uint8_t, 4> &b);
    static IpAddress v6(const std::array<uint8_t, 16> &b);

    /// Parses dotted IPv4 or textual IPv6 (inet_pton); nullopt otherwise.
    static std::optional<IpAddress> parse(std::string_view text);

    /// A 16-byte GID as an address: IPv4-mapped GIDs become IPv4.
    static IpAddress from_gid(const std::array<uint8_t, 16> &gid);
    /// The 16-byte GID form (IPv4 becomes ::ffff:a.b.c.d).
    std::array<uint8_t, 16> to_gid() const;

    Family family() const noexcept { return family_; }
    bool is_v4() const noexcept { return family_ == Family::kIPv4; }
    bool is_v6() const noexcept { return family_ == Family::kIPv6; }
    bool empty() const noexcept { return family_ == Family::kNone; }
    /// fe80::/10 (IPv6) or 169.254/16 (IPv4).
    bool is_link_local() const noexcept;
    /// Unique-local IPv6, fc00::/7 (RFC 4193; fd00::/8 in practice): not
    /// global, but routable within a site. False for IPv4.
    bool is_unique_local() const noexcept;
    /// All zero bytes (an unset GID slot reads like this).
    bool is_zero() const noexcept;
    /// Bit length: 32 or 128 (0 when empty).
    int bits() const noexcept;
    const uint8_t *bytes() const noexcept { return bytes_.data(); }

    /// inet_ntop text ("" when empty).
    std::string to_string() const;

    bool operator==(const IpAddress &o) const noexcept {
        return family_ == o.family_ && bytes_ == o.bytes_;
    }
    bool operator!=(const IpAddress &o) const noexcept { return !(*this == o); }

private:
    Family family_ = Family::kNone;
    std::array<uint8_t, 16> bytes_{}; // IPv4 uses the first 4 bytes
};

/// An address with a prefix length, e.g. 198.18.0.0/24.
struct Subnet {
    IpAddress address;
    int prefix_len = 0;

    /// Parses "addr/len"; the address is masked to the prefix. nullopt when
    /// the text is not an address, the length is not a number, or it exceeds
    /// 32 (IPv4) / 128 (IPv6). `error` (optional) receives the reason.
    static std::optional<Subnet> parse(std::string_view text, std::string *error = nullptr);

    /// The subnet containing `addr` with that prefix length.
    static Subnet of(const IpAddress &addr, int prefix_len);

    /// True when `addr` has the same family and lies inside.
    bool contains(const IpAddress &addr) const noexcept;
    /// "198.18.0.0/24".
    std::string to_string() const;

    bool operator==(const Subnet &o) const noexcept {
        return prefix_len == o.prefix_len && address == o.address;
    }
};

} // namespace roce::util
