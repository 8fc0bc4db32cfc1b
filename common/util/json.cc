// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "util/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/strings.h"

namespace roce::util {

namespace {

const std::string kEmptyString;
const std::vector<Json> kEmptyArray;
const std::vector<std::pair<std::string, Json>> kEmptyObject;

// Deep documents would recurse deeply; `ip -j` output is 4-5 levels, so a
// generous bound keeps a hostile or corrupt capture from exhausting the stack.
constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(std::string_view text) : s_(text) {}

    Result<Json> run() {
        Json v;
        Status st = value(v, 0);
        if (!st) {
            return st;
        }
        skip_ws();
        if (pos_ != s_.size()) {
            return error("end of input");
        }
        return v;
    }

private:
    Status error(const char *expected) const {
        std::string near;
        if (pos_ < s_.size()) {
            near = " (found '" + printable(s_.substr(pos_, 1)) + "')";
        } else {
            near = " (found end of input)";
        }
        return Status(Code::kInvalidArgument,
                      format("malformed JSON at byte %zu: expected %s%s", pos_, expected,
                             near.c_str()));
    }

    void skip_ws() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
            ++pos_;
        }
    }

    bool consume(std::string_view word) {
        if (s_.substr(pos_, word.size()) == word) {
            pos_ += word.size();
            return true;
        }
        return false;
    }

    Status value(Json &out, int depth) {
        if (depth > kMaxDepth) {
            return error("a shallower document (nesting limit reached)");
        }
        skip_ws();
        if (pos_ >= s_.size()) {
            return error("a value");
        }
        char c = s_[pos_];
        if (c == '{') {
            return object(out, depth);
        }
        if (c == '[') {
            return array(out, depth);
        }
        if (c == '"') {
            std::string str;
            Status st = string(str);
            if (st) {
                out = Json(std::move(str));
            }
            return st;
        }
        if (consume("true")) {
            out = Json(true);
            return Status::ok();
        }
        if (consume("false")) {
            out = Json(false);
            return Status::ok();
        }
        if (consume("null")) {
            out = Json();
            return Status::ok();
        }
        return number(out);
    }

    Status object(Json &out, int depth) {
        ++pos_; // '{'
        out = Json::object();
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == '}') {
            ++pos_;
            return Status::ok();
        }
        for (;;) {
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != '"') {
                return error("a member name in double quotes");
            }
            std::string key;
            Status st = string(key);
            if (!st) {
                return st;
            }
            skip_ws();
            if (pos_ >= s_.size() || s_[pos_] != ':') {
                return error("':' after a member name");
            }
            ++pos_;
            Json member;
            st = value(member, depth + 1);
            if (!st) {
                return st;
            }
            out[key] = std::move(member);
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (pos_ < s_.size() && s_[pos_] == '}') {
                ++pos_;
                return Status::ok();
            }
            return error("',' or '}' in an object");
        }
    }

    Status array(Json &out, int depth) {
        ++pos_; // '['
        out = Json::array();
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ']') {
            ++pos_;
            return Status::ok();
        }
        for (;;) {
            Json item;
            Status st = value(item, depth + 1);
            if (!st) {
                return st;
            }
            out.push(std::move(item));
            skip_ws();
            if (pos_ < s_.size() && s_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (pos_ < s_.size() && s_[pos_] == ']') {
                ++pos_;
                return Status::ok();
            }
            return error("',' or ']' in an array");
        }
    }

    bool hex4(uint32_t &cp) {
        if (pos_ + 4 > s_.size()) {
            return false;
        }
        cp = 0;
        for (int i = 0; i < 4; ++i) {
            char c = s_[pos_++];
            cp <<= 4;
            if (c >= '0' && c <= '9') {
                cp |= static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                cp |= static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                cp |= static_cast<uint32_t>(c - 'A' + 10);
            } else {
                return false;
            }
        }
        return true;
    }

    static void append_utf8(std::string &out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }

    Status escape(std::string &out) {
        if (pos_ >= s_.size()) {
            return error("an escape character");
        }
        char c = s_[pos_++];
        switch (c) {
        case '"': out += '"'; return Status::ok();
        case '\\': out += '\\'; return Status::ok();
        case '/': out += '/'; return Status::ok();
        case 'b': out += '\b'; return Status::ok();
        case 'f': out += '\f'; return Status::ok();
        case 'n': out += '\n'; return Status::ok();
        case 'r': out += '\r'; return Status::ok();
        case 't': out += '\t'; return Status::ok();
        case 'u': break;
        default: --pos_; return error("one of \" \\ / b f n r t u after '\\'");
        }
        uint32_t cp = 0;
        if (!hex4(cp)) {
            return error("four hex digits after \\u");
        }
        if (cp >= 0xd800 && cp < 0xdc00) {
            uint32_t lo = 0;
            if (!consume("\\u") || !hex4(lo) || lo < 0xdc00 || lo > 0xdfff) {
                return error("a low surrogate \\uDC00..\\uDFFF after a high surrogate");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        append_utf8(out, cp);
        return Status::ok();
    }

    Status string(std::string &out) {
        ++pos_; // opening quote
        while (pos_ < s_.size()) {
            char c = s_[pos_++];
            if (c == '"') {
                return Status::ok();
            }
            if (c == '\\') {
                Status st = escape(out);
                if (!st) {
                    return st;
                }
            } else if (static_cast<unsigned char>(c) < 0x20) {
                --pos_;
                return error("no raw control character inside a string");
            } else {
                out += c;
            }
        }
        return error("a closing '\"'");
    }

    Status number(Json &out) {
        size_t start = pos_;
        if (pos_ < s_.size() && s_[pos_] == '-') {
            ++pos_;
        }
        size_t digits = pos_;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            ++pos_;
        }
        if (pos_ == digits) {
            pos_ = start;
            return error("a value (object, array, string, number, true, false or null)");
        }
        bool integral = true;
        if (pos_ < s_.size() && s_[pos_] == '.') {
            integral = false;
            ++pos_;
            size_t frac = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
                ++pos_;
            }
            if (pos_ == frac) {
                return error("digits after '.'");
            }
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            integral = false;
            ++pos_;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
                ++pos_;
            }
            size_t exp = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
                ++pos_;
            }
            if (pos_ == exp) {
                return error("digits in the exponent");
            }
        }
        std::string text(s_.substr(start, pos_ - start));
        if (integral) {
            // Exact for every integer ip(8) prints (ifindex, mtu, lifetimes);
            // past int64 it is a double like any other number.
            errno = 0;
            long long v = std::strtoll(text.c_str(), nullptr, 10);
            if (errno != ERANGE) {
                out = Json(static_cast<int64_t>(v));
                return Status::ok();
            }
        }
        double v = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(v)) {
            // 1e400 would become inf, which no JSON text can say back.
            pos_ = start;
            return error("a number within the range of a double");
        }
        out = Json(v);
        return Status::ok();
    }

    std::string_view s_;
    size_t pos_ = 0;
};

/// The length of the valid UTF-8 sequence at s[i], 0 when there is none
/// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_length(const std::string &s, size_t i, uint32_t *cp) {
    auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = at(i);
    size_t n = 0;
    uint32_t v = 0;
    unsigned char lo = 0x80, hi = 0xbf; // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        v = c & 0x0f;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (i + n > s.size()) {
        return 0;
    }
    for (size_t k = 1; k < n; ++k) {
        unsigned char b = at(i + k);
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) {
            return 0;
        }
        v = v << 6 | (b & 0x3f);
    }
    *cp = v;
    return n;
}

void escape_to(std::string &out, const std::string &s) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    out += format("\\u%04x", c);
                } else {
                    out += static_cast<char>(c);
                }
            }
            ++i;
            continue;
        }
        uint32_t cp = 0;
        size_t n = utf8_length(s, i, &cp);
        if (n == 0) {
            out += "\xef\xbf\xbd"; // U+FFFD for a byte that is not UTF-8
            ++i;
        } else if (cp < 0xa0) {
            out += format("\\u%04x", cp); // a C1 control
            i += n;
        } else {
            out.append(s, i, n);
            i += n;
        }
    }
    out += '"';
}

void newline(std::string &out, int indent, int level) {
    if (indent >= 0) {
        out += '\n';
        out.append(static_cast<size_t>(indent * level), ' ');
    }
}

} // namespace

int64_t Json::as_int(int64_t fallback) const noexcept {
    if (!is_number() || std::floor(num_) != num_ || std::fabs(num_) > 9.2e18) {
        return fallback;
    }
    return static_cast<int64_t>(num_);
}

const std::string &Json::as_string() const noexcept { return is_string() ? str_ : kEmptyString; }

const std::vector<Json> &Json::items() const noexcept { return is_array() ? arr_ : kEmptyArray; }

Json &Json::push(Json v) {
    if (type_ == Type::kNull) {
        type_ = Type::kArray;
    }
    arr_.push_back(std::move(v));
    return arr_.back();
}

Json::Json(const Json &o)
    : type_(o.type_), bool_(o.bool_), num_(o.num_), integral_(o.integral_), str_(o.str_),
      arr_(o.arr_), obj_(o.obj_),
      index_(o.index_ ? std::make_unique<std::map<std::string, size_t, std::less<>>>(*o.index_)
                      : nullptr) {}

Json &Json::operator=(const Json &o) {
    if (this != &o) {
        Json copy(o);
        *this = std::move(copy);
    }
    return *this;
}

const Json *Json::find(std::string_view key) const noexcept {
    if (!is_object()) {
        return nullptr;
    }
    if (index_) {
        auto it = index_->find(key);
        return it == index_->end() ? nullptr : &obj_[it->second].second;
    }
    for (const auto &m : obj_) {
        if (m.first == key) {
            return &m.second;
        }
    }
    return nullptr;
}

Json &Json::operator[](std::string_view key) {
    if (type_ == Type::kNull) {
        type_ = Type::kObject;
    }
    if (index_) {
        auto it = index_->lower_bound(key);
        if (it != index_->end() && it->first == key) {
            return obj_[it->second].second;
        }
        index_->emplace_hint(it, std::string(key), obj_.size());
        obj_.emplace_back(std::string(key), Json());
        return obj_.back().second;
    }
    for (auto &m : obj_) {
        if (m.first == key) {
            return m.second;
        }
    }
    obj_.emplace_back(std::string(key), Json());
    if (obj_.size() > kIndexFrom) {
        index_ = std::make_unique<std::map<std::string, size_t, std::less<>>>();
        for (size_t i = 0; i < obj_.size(); ++i) {
            index_->emplace(obj_[i].first, i);
        }
    }
    return obj_.back().second;
}

const std::vector<std::pair<std::string, Json>> &Json::members() const noexcept {
    return is_object() ? obj_ : kEmptyObject;
}

Result<Json> Json::parse(std::string_view text) { return Parser(text).run(); }

std::string Json::dump(int indent) const {
    std::string out;
    dump_to(out, indent, 0);
    return out;
}

void Json::dump_to(std::string &out, int indent, int level) const {
    switch (type_) {
    case Type::kNull: out += "null"; return;
    case Type::kBool: out += bool_ ? "true" : "false"; return;
    case Type::kNumber:
        if (!std::isfinite(num_)) {
            out += "null";
        } else if ((integral_ && std::fabs(num_) < 9.2e18) ||
                   (std::floor(num_) == num_ && std::fabs(num_) < 1e15)) {
            // Below 2^63, so the conversion is defined; larger integral
            // values print as doubles (their exact digits are gone anyway).
            out += std::to_string(static_cast<long long>(num_));
        } else {
            out += format("%.17g", num_);
        }
        return;
    case Type::kString: escape_to(out, str_); return;
    case Type::kArray:
        if (arr_.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < arr_.size(); ++i) {
            out += i ? "," : "";
            newline(out, indent, level + 1);
            arr_[i].dump_to(out, indent, level + 1);
        }
        newline(out, indent, level);
        out += ']';
        return;
    case Type::kObject:
        if (obj_.empty()) {
            out += "{}";
            return;
        }
        out += '{';
        for (size_t i = 0; i < obj_.size(); ++i) {
            out += i ? "," : "";
            newline(out, indent, level + 1);
            escape_to(out, obj_[i].first);
            out += indent >= 0 ? ": " : ":";
            obj_[i].second.dump_to(out, indent, level + 1);
        }
        newline(out, indent, level);
        out += '}';
        return;
    }
}

bool Json::operator==(const Json &o) const {
    if (type_ != o.type_) {
        return false;
    }
    switch (type_) {
    case Type::kNull: return true;
    case Type::kBool: return bool_ == o.bool_;
    case Type::kNumber: return num_ == o.num_;
    case Type::kString: return str_ == o.str_;
    case Type::kArray: return arr_ == o.arr_;
    case Type::kObject: return obj_ == o.obj_;
    }
    return false;
}

} // namespace roce::util
