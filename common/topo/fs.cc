// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "topo/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/strings.h"

namespace roce::topo::fs {

using util::Result;
using util::Status;

namespace {
constexpr size_t kMaxFile = 4u << 20;
} // namespace

std::string join(const std::string &a, const std::string &b) {
    if (a.empty()) {
        return b;
    }
    if (a.back() == '/') {
        return b.size() && b.front() == '/' ? a + b.substr(1) : a + b;
    }
    return b.size() && b.front() == '/' ? a + b : a + "/" + b;
}

Result<std::string> read_text(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::from_errno(errno, "open " + path);
    }
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            int err = errno;
            ::close(fd);
            // sysfs answers some attributes (an empty GID slot's type, a down
            // netdev's carrier) with an errno on read, not on open.
            return Status::from_errno(err, "read " + path);
        }
        if (n == 0) {
            break;
        }
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > kMaxFile) {
            ::close(fd);
            return Status(util::Code::kResourceExhausted,
                          "read " + path + ": larger than 4 MiB, not a sysfs attribute or capture");
        }
    }
    ::close(fd);
    return out;
}

Result<std::string> read_line(const std::string &path) {
    auto text = read_text(path);
    if (!text) {
        return text.status();
    }
    const std::string &s = *text;
    size_t nl = s.find('\n');
    return std::string(util::trim(std::string_view(s).substr(0, nl)));
}

Result<std::vector<std::string>> list_dir(const std::string &path) {
    DIR *d = ::opendir(path.c_str());
    if (d == nullptr) {
        return Status::from_errno(errno, "opendir " + path);
    }
    std::vector<std::string> names;
    while (dirent *e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") {
            names.push_back(std::move(n));
        }
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

bool exists(const std::string &path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string &path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<std::string> link_name(const std::string &path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        return Status::from_errno(errno, "lstat " + path);
    }
    std::string target;
    if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
        if (n < 0) {
            return Status::from_errno(errno, "readlink " + path);
        }
        target.assign(buf, static_cast<size_t>(n));
    } else {
        auto line = read_line(path); // a capture's link file
        if (!line) {
            return line.status();
        }
        target = *line;
    }
    while (!target.empty() && target.back() == '/') {
        target.pop_back();
    }
    size_t slash = target.rfind('/');
    return slash == std::string::npos ? target : target.substr(slash + 1);
}

Status make_dirs(const std::string &path) {
    if (path.empty() || is_dir(path)) {
        return Status::ok();
    }
    size_t slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
        Status st = make_dirs(path.substr(0, slash));
        if (!st) {
            return st;
        }
    }
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::from_errno(errno, "mkdir " + path);
    }
    return Status::ok();
}

Status write_text(const std::string &path, const std::string &text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return Status::from_errno(errno, "create " + path);
    }
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            int err = errno;
            ::close(fd);
            return Status::from_errno(err, "write " + path);
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) {
        return Status::from_errno(errno, "close " + path);
    }
    return Status::ok();
}

} // namespace roce::topo::fs
