// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/strings.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace roce::util {

std::string_view trim(std::string_view s) noexcept {
    const char *blanks = " \t\r\n";
    size_t b = s.find_first_not_of(blanks);
    if (b == std::string_view::npos) {
        return {};
    }
    size_t e = s.find_last_not_of(blanks);
    return s.substr(b, e - b + 1);
}

std::vector<std::string> split_list(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(sep, start);
        if (end == std::string_view::npos) {
            end = s.size();
        }
        std::string_view piece = trim(s.substr(start, end - start));
        if (!piece.empty()) {
            out.emplace_back(piece);
        }
        start = end + 1;
    }
    return out;
}

namespace {

// strtoull accepts leading blanks, signs and "0x"; we want exactly digits.
std::optional<uint64_t> parse_digits(std::string_view s) noexcept {
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    }
    if (s.empty()) {
        return std::nullopt;
    }
    uint64_t v = 0;
    for (char c : s) {
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = static_cast<unsigned>(c - '0');
        } else if (base == 16 && c >= 'a' && c <= 'f') {
            d = static_cast<unsigned>(c - 'a' + 10);
        } else if (base == 16 && c >= 'A' && c <= 'F') {
            d = static_cast<unsigned>(c - 'A' + 10);
        } else {
            return std::nullopt;
        }
        if (v > (std::numeric_limits<uint64_t>::max() - d) / static_cast<unsigned>(base)) {
            return std::nullopt;
        }
        v = v * static_cast<unsigned>(base) + d;
    }
    return v;
}

} // namespace

std::optional<uint64_t> parse_uint(std::string_view s) noexcept {
    return parse_digits(trim(s));
}

std::optional<int64_t> parse_int(std::string_view s) noexcept {
    s = trim(s);
    bool neg = false;
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        s.remove_prefix(1);
    }
    auto mag = parse_digits(s);
    if (!mag) {
        return std::nullopt;
    }
    constexpr uint64_t kMaxPos = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (neg) {
        if (*mag > kMaxPos + 1) {
            return std::nullopt;
        }
        return *mag == kMaxPos + 1 ? std::numeric_limits<int64_t>::min()
                                   : -static_cast<int64_t>(*mag);
    }
    if (*mag > kMaxPos) {
        return std::nullopt;
    }
    return static_cast<int64_t>(*mag);
}

std::string join(const std::vector<std::string> &parts, std::string_view sep) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (i) {
            out += sep;
        }
        out += parts[i];
    }
    return out;
}

std::string format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string out;
    if (n > 0) {
        out.resize(static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data(), out.size(), fmt, ap2);
        out.resize(static_cast<size_t>(n));
    }
    va_end(ap2);
    return out;
}

std::string hex32(uint32_t v) { return format("0x%08x", v); }

std::string printable(std::string_view s, bool keep_newlines) {
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if ((c >= 0x20 && c < 0x7f) || (c == '\n' && keep_newlines)) {
            out += ch;
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    return out;
}

} // namespace roce::util
