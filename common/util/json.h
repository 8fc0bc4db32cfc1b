// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace roce::util {

/// A JSON value: just enough to read `ip -j` output and to write the
/// roce-doctor report. Objects keep their keys in insertion order (so output
/// is stable and reads like the code that built it); a name given twice
/// keeps one member, at the position of its first appearance, with the last
/// value (when parsing as when building with operator[]). Objects of more
/// than kIndexFrom members also keep an ordered index of their names, so
/// find() and operator[] are O(log n) and parsing is O(n log n) in the
/// input: a sorted index, not a hash table, because crafted names can make
/// any fixed hash function collide and the documents come from files a user
/// hands us. Copyable value type; not thread-safe to mutate concurrently.
class Json {
public:
    enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
    /// Objects with more members than this get the name index.
    static constexpr size_t kIndexFrom = 16;

    Json() = default; ///< null
    Json(std::nullptr_t) {}
    Json(const Json &o);
    Json(Json &&o) noexcept = default;
    Json &operator=(const Json &o);
    Json &operator=(Json &&o) noexcept = default;
    ~Json() = default;
    Json(bool b) : type_(Type::kBool), bool_(b) {}
    Json(int v) : type_(Type::kNumber), num_(v), integral_(true) {}
    Json(int64_t v) : type_(Type::kNumber), num_(static_cast<double>(v)), integral_(true) {}
    Json(uint32_t v) : type_(Type::kNumber), num_(v), integral_(true) {}
    Json(uint64_t v) : type_(Type::kNumber), num_(static_cast<double>(v)), integral_(true) {}
    Json(double v) : type_(Type::kNumber), num_(v) {}
    Json(const char *s) : type_(Type::kString), str_(s) {}
    Json(std::string s) : type_(Type::kString), str_(std::move(s)) {}

    static Json array() { Json j; j.type_ = Type::kArray; return j; }
    static Json object() { Json j; j.type_ = Type::kObject; return j; }

    Type type() const noexcept { return type_; }
    bool is_null() const noexcept { return type_ == Type::kNull; }
    bool is_bool() const noexcept { return type_ == Type::kBool; }
    bool is_number() const noexcept { return type_ == Type::kNumber; }
    bool is_string() const noexcept { return type_ == Type::kString; }
    bool is_array() const noexcept { return type_ == Type::kArray; }
    bool is_object() const noexcept { return type_ == Type::kObject; }

    /// Typed accessors; each returns the fallback when the type differs.
    bool as_bool(bool fallback = false) const noexcept { return is_bool() ? bool_ : fallback; }
    double as_number(double fallback = 0) const noexcept { return is_number() ? num_ : fallback; }
    /// The number as an integer when it is one exactly; fallback otherwise.
    int64_t as_int(int64_t fallback = 0) const noexcept;
    const std::string &as_string() const noexcept;

    /// Arrays: elements in order (empty for other types).
    const std::vector<Json> &items() const noexcept;
    /// Appends to an array (a null value becomes an array first).
    Json &push(Json v);

    /// Objects: member lookup; nullptr when absent or not an object.
    const Json *find(std::string_view key) const noexcept;
    /// Member access for building: inserts null when absent (a null value
    /// becomes an object first).
    Json &operator[](std::string_view key);
    /// Members in insertion order (empty for other types).
    const std::vector<std::pair<std::string, Json>> &members() const noexcept;

    /// Parses a whole JSON text (RFC 8259; surrogate pairs supported). The
    /// error names the byte offset and what was expected there (the byte
    /// found escaped, util::printable). Strings are kept as the bytes the
    /// text holds (not checked for UTF-8). A number beyond the range of a
    /// double is an error (JSON has no infinity). Nesting deeper than 64
    /// levels is an error.
    static Result<Json> parse(std::string_view text);

    /// Serialises. indent < 0: compact, one line; otherwise pretty-printed
    /// with that many spaces per level. The output is valid UTF-8 with no
    /// raw control character: C0 controls, DEL and C1 controls are written
    /// as \uXXXX, and a byte that is not part of valid UTF-8 as U+FFFD.
    /// parse(dump()) gives back an equal value when every string is valid
    /// UTF-8; dump(parse(dump())) == dump() always. Non-finite numbers
    /// (only possible from code) are written as null.
    std::string dump(int indent = -1) const;

    bool operator==(const Json &o) const;
    bool operator!=(const Json &o) const { return !(*this == o); }

private:
    void dump_to(std::string &out, int indent, int level) const;

    Type type_ = Type::kNull;
    bool bool_ = false;
    double num_ = 0;
    bool integral_ = false; // printed without a fraction
    std::string str_;
    std::vector<Json> arr_;
    std::vector<std::pair<std::string, Json>> obj_;
    /// Member name -> position in obj_, kept once obj_ has more than
    /// kIndexFrom members (null before).
    std::unique_ptr<std::map<std::string, size_t, std::less<>>> index_;
};

} // namespace roce::util
