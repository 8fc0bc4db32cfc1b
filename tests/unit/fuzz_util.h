// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Deterministic fuzzing helpers for the Catch2 fuzz targets (test_fuzz_*.cc):
// a seeded generator that gives the same numbers on every platform (the
// std:: distributions do not), byte-level mutations in the style of AFL, and
// the property checks the targets share.
//
// Every target runs a fixed number of cases from a fixed seed, so `make
// check` is reproducible. For a longer exploratory run:
//   ROCE_FUZZ_SEED=12345 ROCE_FUZZ_SCALE=20 ./test_fuzz "[fuzz][json]"
// A failure prints the seed and the case number to replay it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roce::testing::fuzz {

/// splitmix64: small, fast, the same sequence everywhere.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /// Uniform in [0, n) (n > 0; the modulo bias is irrelevant here).
    uint64_t below(uint64_t n) { return next() % n; }
    /// Uniform in [lo, hi].
    int64_t range(int64_t lo, int64_t hi) {
        return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
    }
    bool chance(unsigned percent) { return below(100) < percent; }
    uint8_t byte() { return static_cast<uint8_t>(next()); }
    template <typename T>
    const T &pick(const std::vector<T> &v) {
        return v[below(v.size())];
    }

private:
    uint64_t s_;
};

/// The seed of a target: `dflt`, or ROCE_FUZZ_SEED mixed with it when set.
inline uint64_t seed(uint64_t dflt) {
    const char *e = std::getenv("ROCE_FUZZ_SEED");
    return e != nullptr && *e ? dflt ^ std::strtoull(e, nullptr, 0) * 0x9e3779b97f4a7c15ull : dflt;
}

/// `n` cases, times ROCE_FUZZ_SCALE when set (at least 1).
inline size_t cases(size_t n) {
    const char *e = std::getenv("ROCE_FUZZ_SCALE");
    double k = e != nullptr && *e ? std::strtod(e, nullptr) : 1.0;
    size_t out = static_cast<size_t>(static_cast<double>(n) * (k > 0 ? k : 1.0));
    return out > 0 ? out : 1;
}

/// Values that find boundary bugs in lengths, counts and indices.
inline const std::vector<uint64_t> &interesting() {
    static const std::vector<uint64_t> v = {
        0,     1,     2,          3,          4,          7,          8,          15,
        16,    31,    32,         63,         64,         127,        128,        255,
        256,   1023,  1024,       4095,       4096,       32767,      32768,      65534,
        65535, 65536, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 1ull << 32, ~0ull};
    return v;
}

/// One random mutation of `in` (never longer than `max_len`): flip a bit,
/// set a byte to a random or boundary value, overwrite a little-endian
/// 16/32-bit word with a boundary value, insert random bytes, delete or
/// duplicate a range, insert a dictionary token, splice in part of `other`,
/// or truncate.
inline std::string mutate_once(const std::string &in, Rng &r, const std::vector<std::string> &dict,
                               const std::string &other, size_t max_len) {
    std::string s = in;
    const size_t n = s.size();
    switch (r.below(10)) {
    case 0: // bit flip
        if (n) {
            s[r.below(n)] ^= static_cast<char>(1u << r.below(8));
        }
        break;
    case 1: // random byte
        if (n) {
            s[r.below(n)] = static_cast<char>(r.byte());
        }
        break;
    case 2: { // boundary word, 1, 2 or 4 bytes, little endian
        size_t w = size_t{1} << r.below(3);
        if (n >= w) {
            uint64_t v = r.pick(interesting());
            size_t at = r.below(n - w + 1);
            for (size_t i = 0; i < w; ++i) {
                s[at + i] = static_cast<char>(v >> (8 * i));
            }
        }
        break;
    }
    case 3: { // insert random bytes
        std::string ins(static_cast<size_t>(r.range(1, 8)), '\0');
        for (auto &c : ins) {
            c = static_cast<char>(r.byte());
        }
        s.insert(n ? r.below(n + 1) : 0, ins);
        break;
    }
    case 4: // delete a range
        if (n) {
            size_t at = r.below(n);
            s.erase(at, static_cast<size_t>(r.range(1, 16)));
        }
        break;
    case 5: // duplicate a range
        if (n) {
            size_t at = r.below(n);
            size_t len = std::min<size_t>(static_cast<size_t>(r.range(1, 64)), n - at);
            s.insert(r.below(n + 1), s.substr(at, len));
        }
        break;
    case 6: // dictionary token
        if (!dict.empty()) {
            const std::string &tok = r.pick(dict);
            size_t at = n ? r.below(n + 1) : 0;
            if (r.chance(50) && at + tok.size() <= n) {
                s.replace(at, tok.size(), tok);
            } else {
                s.insert(at, tok);
            }
        }
        break;
    case 7: // splice with another input
        if (!other.empty()) {
            size_t cut = n ? r.below(n + 1) : 0;
            size_t from = r.below(other.size());
            s = s.substr(0, cut) + other.substr(from);
        }
        break;
    case 8: // truncate
        if (n) {
            s.resize(r.below(n));
        }
        break;
    default: // swap two bytes
        if (n > 1) {
            std::swap(s[r.below(n)], s[r.below(n)]);
        }
        break;
    }
    if (s.size() > max_len) {
        s.resize(max_len);
    }
    return s;
}

/// 1 to `max_rounds` mutations of `in` in a row.
inline std::string mutate(const std::string &in, Rng &r, const std::vector<std::string> &dict,
                          const std::string &other, size_t max_len, unsigned max_rounds = 4) {
    std::string s = in;
    for (int64_t i = 0, k = r.range(1, max_rounds); i < k; ++i) {
        s = mutate_once(s, r, dict, other, max_len);
    }
    return s;
}

/// Random bytes, biased towards the bytes that matter to text formats.
inline std::string random_bytes(Rng &r, size_t max_len, std::string_view alphabet = {}) {
    std::string s(r.below(max_len + 1), '\0');
    for (auto &c : s) {
        c = !alphabet.empty() && r.chance(80) ? alphabet[r.below(alphabet.size())]
                                              : static_cast<char>(r.byte());
    }
    return s;
}

/// True when `s` holds no byte a terminal could act on (printable ASCII,
/// and '\n' when `newlines` is allowed).
inline bool is_printable(std::string_view s, bool newlines = false) {
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (!((u >= 0x20 && u < 0x7f) || (newlines && c == '\n'))) {
            return false;
        }
    }
    return true;
}

/// True when `s` is valid UTF-8 (RFC 3629: no overlong forms, surrogates or
/// code points past U+10FFFF); with `controls` false, also without C0/C1
/// controls or DEL.
inline bool is_utf8(std::string_view s, bool controls = true) {
    for (size_t i = 0; i < s.size();) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            if (!controls && (c < 0x20 || c == 0x7f)) {
                return false;
            }
            ++i;
            continue;
        }
        size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
        if (n == 0 || i + n > s.size()) {
            return false;
        }
        uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
        for (size_t k = 1; k < n; ++k) {
            auto b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xc0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (b & 0x3f);
        }
        const uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
            (!controls && cp < 0xa0)) {
            return false;
        }
        i += n;
    }
    return true;
}

/// Valid UTF-8 with no C0/C1 control or DEL (what a terminal shows as text).
inline bool is_clean_utf8(std::string_view s) {
    return is_utf8(s, false);
}

} // namespace roce::testing::fuzz
