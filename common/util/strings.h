// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace roce::util {

/// `s` without leading and trailing blanks (space, tab, newline).
std::string_view trim(std::string_view s) noexcept;

/// Splits on `sep`, trims each piece and drops empty pieces:
/// "a, b,,c " -> {"a","b","c"}.
std::vector<std::string> split_list(std::string_view s, char sep = ',');

/// Parses a whole decimal (or 0x-prefixed hexadecimal) integer; nullopt on
/// any trailing garbage, sign where unsigned, or overflow.
std::optional<int64_t> parse_int(std::string_view s) noexcept;
std::optional<uint64_t> parse_uint(std::string_view s) noexcept;

/// Joins with `sep` between elements.
std::string join(const std::vector<std::string> &parts, std::string_view sep);

/// printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/// "0x1ee7a330" style hex of a 32-bit value.
std::string hex32(uint32_t v);

} // namespace roce::util
