// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Catch2 2.x (Debian 12) or 3.x, whichever configure found.
#pragma once
#ifdef ROCE_CATCH2_V3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <string>

// The substring matcher: Catch2 2's Catch::Matchers::Contains(std::string);
// in Catch2 3 that name is the range matcher (an element of a container) and
// the substring one is ContainsSubstring.
inline auto contains_text(const std::string &s) {
#ifdef ROCE_CATCH2_V3
    return Catch::Matchers::ContainsSubstring(s);
#else
    return Catch::Matchers::Contains(s);
#endif
}
