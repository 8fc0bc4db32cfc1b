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

/// `s` safe to put into a message: every byte outside printable ASCII
/// (0x20..0x7e) is written as "\xNN" (lower-case hex), so contents read from
/// a file, a capture or the wire cannot reach a terminal as control sequences
/// (ESC, BEL, C1 such as 0x9b) or forge lines. With `keep_newlines`, '\n'
/// is kept (for multi-line text whose lines are ours). Printable ASCII,
/// backslash included, is unchanged. Use it wherever such contents (names,
/// file text, paths built from directory entries) go into a message.
std::string printable(std::string_view s, bool keep_newlines = false);

} // namespace roce::util
