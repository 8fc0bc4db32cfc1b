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

using util::Code;
using util::Result;
using util::Status;

namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
constexpr int kFileFlags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
constexpr const char *kOutRule = ": a capture is written only into a new directory or an empty "
                                 "one you own";

const char *kind_of(mode_t mode) {
    switch (mode & S_IFMT) {
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFDIR:
        return "a directory";
    case S_IFLNK:
        return "a symbolic link";
    default:
        return "not a file";
    }
}

/// The components of a relative path, without empty ones and ".".
std::vector<std::string> components(std::string_view rel) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= rel.size()) {
        size_t end = rel.find('/', start);
        if (end == std::string_view::npos) {
            end = rel.size();
        }
        std::string_view c = rel.substr(start, end - start);
        if (!c.empty() && c != ".") {
            out.emplace_back(c);
        }
        start = end + 1;
    }
    return out;
}

Status link_refused(const std::string &shown, Links links) {
    return Status(Code::kInvalidArgument,
                  shown + (links == Links::kRefuse
                               ? " is a symbolic link; links inside a capture are not followed (a "
                                 "capture holds only directories and regular files)"
                               : " is a symbolic link where a regular file belongs; not followed"));
}

/// The error for a failed openat(dfd, name, ...|O_NOFOLLOW): a link is named
/// as such (the kernel says ELOOP, or ENOTDIR with O_DIRECTORY).
Status open_error(int err, int dfd, const std::string &name, const std::string &verb,
                  const std::string &shown, Links links) {
    struct stat st {};
    if ((err == ELOOP || err == ENOTDIR) &&
        ::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        return link_refused(shown, links);
    }
    return Status::from_errno(err, verb + " " + shown);
}

/// Reads the file `name` in directory `dfd` under the reading rules.
Result<std::string> read_at(int dfd, const std::string &name, const std::string &shown,
                            size_t max_bytes, Links links) {
    Fd fd(::openat(dfd, name.c_str(), kFileFlags));
    if (!fd) {
        // A socket fails the open itself (ENXIO): say what it is.
        int err = errno;
        struct stat st {};
        if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
            !S_ISLNK(st.st_mode)) {
            return Status(Code::kInvalidArgument,
                          shown + " is not a regular file (" + kind_of(st.st_mode) + ")");
        }
        return open_error(err, dfd, name, "open", shown, links);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
        return Status::from_errno(errno, "fstat " + shown);
    }
    if (!S_ISREG(st.st_mode)) {
        return Status(Code::kInvalidArgument,
                      shown + " is not a regular file (" + kind_of(st.st_mode) + ")");
    }
    auto too_big = [&]() {
        return Status(Code::kResourceExhausted,
                      util::format("%s is larger than %zu bytes, too big for a sysfs attribute or "
                                   "a capture file",
                                   shown.c_str(), max_bytes));
    };
    if (st.st_size > 0 && static_cast<unsigned long long>(st.st_size) > max_bytes) {
        return too_big();
    }
    std::string out;
    char buf[4096];
    for (;;) {
        size_t want = std::min(sizeof(buf), max_bytes + 1 - out.size());
        ssize_t n = ::read(fd.get(), buf, want);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            // sysfs answers some attributes (an empty GID slot's type, a down
            // netdev's carrier) with an errno on read, not on open.
            return Status::from_errno(errno, "read " + shown);
        }
        if (n == 0) {
            break;
        }
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > max_bytes) {
            return too_big();
        }
    }
    return out;
}

/// The directory descriptor for the *at() calls: AT_FDCWD when parent_of
/// left the resolution to the kernel (Links::kFollow).
int at(const Fd &dir) {
    return dir ? dir.get() : AT_FDCWD;
}

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

Fd &Fd::operator=(Fd &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = o.release();
    }
    return *this;
}

Fd::~Fd() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

int Fd::release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
}

std::string Tree::path(std::string_view rel) const {
    return rel.empty() ? root_ : join(root_, std::string(rel));
}

std::string Tree::shown(std::string_view rel) const {
    return util::printable(path(rel));
}

Result<Fd> Tree::parent_of(std::string_view rel, std::string *last, const char *verb) const {
    if (links_ == Links::kFollow) {
        // The kernel's tree: the kernel resolves the directories, links
        // included, from the whole path (no descriptor: AT_FDCWD).
        *last = rel.empty() && root_.empty() ? "." : path(rel);
        return Fd();
    }
    Fd d(::open(root_.empty() ? "." : root_.c_str(), kDirFlags));
    if (!d) {
        return Status::from_errno(errno, std::string(verb) + " " + shown(rel));
    }
    std::vector<std::string> parts = components(rel);
    *last = parts.empty() ? "." : parts.back();
    std::string prefix;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i] == "..") {
            return Status(Code::kInvalidArgument,
                          shown(rel) + ": '..' does not stay inside " + shown(""));
        }
        if (i + 1 == parts.size()) {
            break;
        }
        prefix = prefix.empty() ? parts[i] : prefix + "/" + parts[i];
        Fd next(::openat(d.get(), parts[i].c_str(), kDirFlags | O_NOFOLLOW));
        if (!next) {
            // A link is named where it is; anything else by the path asked for.
            Status st = open_error(errno, d.get(), parts[i], verb, shown(prefix), links_);
            return st.sys_errno() == 0
                       ? st
                       : Status::from_errno(st.sys_errno(), std::string(verb) + " " + shown(rel));
        }
        d = std::move(next);
    }
    return d;
}

Result<std::string> Tree::read_text(std::string_view rel, size_t max_bytes) const {
    std::string last;
    auto dir = parent_of(rel, &last, "open");
    if (!dir) {
        return dir.status();
    }
    return read_at(at(*dir), last, shown(rel), max_bytes, links_);
}

Result<std::string> Tree::read_line(std::string_view rel) const {
    auto text = read_text(rel);
    if (!text) {
        return text.status();
    }
    const std::string &s = *text;
    size_t nl = s.find('\n');
    return std::string(util::trim(std::string_view(s).substr(0, nl)));
}

Result<std::vector<std::string>> Tree::list_dir(std::string_view rel) const {
    std::string last;
    auto dir = parent_of(rel, &last, "opendir");
    if (!dir) {
        return dir.status();
    }
    // In the kernel's tree the directory itself may be a link
    // (/sys/class/net/eth0); in a capture it may not.
    int flags = kDirFlags | (links_ == Links::kRefuse ? O_NOFOLLOW : 0);
    int fd = ::openat(at(*dir), last.c_str(), flags);
    if (fd < 0) {
        return open_error(errno, at(*dir), last, "opendir", shown(rel), links_);
    }
    DIR *d = ::fdopendir(fd);
    if (d == nullptr) {
        int err = errno;
        ::close(fd);
        return Status::from_errno(err, "opendir " + shown(rel));
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

bool Tree::exists(std::string_view rel) const {
    std::string last;
    auto dir = parent_of(rel, &last, "lstat");
    struct stat st {};
    return dir && ::fstatat(at(*dir), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool Tree::is_dir(std::string_view rel) const {
    std::string last;
    auto dir = parent_of(rel, &last, "stat");
    struct stat st {};
    int flags = links_ == Links::kRefuse ? AT_SYMLINK_NOFOLLOW : 0;
    return dir && ::fstatat(at(*dir), last.c_str(), &st, flags) == 0 && S_ISDIR(st.st_mode);
}

bool Tree::is_link(std::string_view rel) const {
    std::string last;
    auto dir = parent_of(rel, &last, "lstat");
    struct stat st {};
    return dir && ::fstatat(at(*dir), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISLNK(st.st_mode);
}

Result<std::string> Tree::link_name(std::string_view rel) const {
    std::string last;
    auto dir = parent_of(rel, &last, "lstat");
    if (!dir) {
        return dir.status();
    }
    struct stat st {};
    if (::fstatat(at(*dir), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return Status::from_errno(errno, "lstat " + shown(rel));
    }
    std::string target;
    if (S_ISLNK(st.st_mode)) {
        char buf[4096];
        ssize_t n = ::readlinkat(at(*dir), last.c_str(), buf, sizeof(buf) - 1);
        if (n < 0) {
            return Status::from_errno(errno, "readlink " + shown(rel));
        }
        target.assign(buf, static_cast<size_t>(n));
    } else {
        // A capture's link file: "../bond0\n".
        auto text = read_at(at(*dir), last, shown(rel), kMaxFileBytes, links_);
        if (!text) {
            return text.status();
        }
        target = std::string(util::trim(std::string_view(*text).substr(0, text->find('\n'))));
    }
    while (!target.empty() && target.back() == '/') {
        target.pop_back();
    }
    size_t slash = target.rfind('/');
    return slash == std::string::npos ? target : target.substr(slash + 1);
}

Result<std::string> read_text(const std::string &path, size_t max_bytes) {
    return Tree("", Links::kFollow).read_text(path, max_bytes);
}

Result<std::vector<std::string>> list_dir(const std::string &path) {
    return Tree("", Links::kFollow).list_dir(path);
}

Result<OutTree> OutTree::create(const std::string &root) {
    const std::string shown = util::printable(root);
    const bool created = ::mkdir(root.c_str(), 0700) == 0;
    if (!created && errno != EEXIST) {
        return Status::from_errno(errno, "mkdir " + shown);
    }
    Fd fd(::open(root.c_str(), kDirFlags | O_NOFOLLOW));
    if (!fd) {
        int err = errno;
        struct stat st {};
        if (::lstat(root.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            return Status(Code::kInvalidArgument, shown + " is a symbolic link" + kOutRule);
        }
        if (err == ENOTDIR) {
            return Status(Code::kInvalidArgument,
                          shown + " already exists and is not a directory" + kOutRule);
        }
        return Status::from_errno(err, "open " + shown);
    }
    if (!created) {
        Fd copy(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
        DIR *d = copy ? ::fdopendir(copy.get()) : nullptr;
        if (d == nullptr) {
            return Status::from_errno(errno, "opendir " + shown);
        }
        copy.release(); // closedir closes it
        bool empty = true;
        while (dirent *e = ::readdir(d)) {
            std::string n = e->d_name;
            empty = empty && (n == "." || n == "..");
        }
        ::closedir(d);
        if (!empty) {
            return Status(Code::kInvalidArgument,
                          shown + " already exists and is not empty" + kOutRule);
        }
    }
    // The descriptor decides, not the path: whatever was checked above by
    // name, this is the directory every file will be created in.
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
        return Status::from_errno(errno, "fstat " + shown);
    }
    if (st.st_uid != ::geteuid()) {
        return Status(Code::kPermissionDenied,
                      util::format("%s is owned by uid %u, not by you (uid %u)%s", shown.c_str(),
                                   static_cast<unsigned>(st.st_uid),
                                   static_cast<unsigned>(::geteuid()), kOutRule));
    }
    if (created && ::fchmod(fd.get(), 0700) != 0) { // whatever the umask
        return Status::from_errno(errno, "chmod 0700 " + shown);
    }
    return OutTree(root, std::move(fd));
}

Result<Fd> OutTree::dir(std::string_view rel) {
    Fd cur(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
    if (!cur) {
        return Status::from_errno(errno, "dup " + util::printable(root_));
    }
    std::string prefix;
    for (const auto &c : components(rel)) {
        prefix = prefix.empty() ? c : prefix + "/" + c;
        const std::string shown = util::printable(join(root_, prefix));
        if (c == "..") {
            return Status(Code::kInvalidArgument, shown + ": '..' is not allowed in a capture");
        }
        const bool fresh = made_.count(prefix) == 0;
        if (fresh && ::mkdirat(cur.get(), c.c_str(), 0700) != 0) {
            if (errno == EEXIST) {
                return Status(Code::kInvalidArgument,
                              shown + " already exists: something else is writing into the "
                                      "capture directory");
            }
            return Status::from_errno(errno, "mkdir " + shown);
        }
        made_.insert(prefix);
        Fd next(::openat(cur.get(), c.c_str(), kDirFlags | O_NOFOLLOW));
        if (!next) {
            return open_error(errno, cur.get(), c, "open", shown, Links::kRefuse);
        }
        if (fresh && ::fchmod(next.get(), 0700) != 0) {
            return Status::from_errno(errno, "chmod 0700 " + shown);
        }
        cur = std::move(next);
    }
    return cur;
}

Status OutTree::make_dirs(std::string_view rel) {
    return dir(rel).status();
}

Status OutTree::write_file(std::string_view rel, std::string_view text) {
    size_t slash = rel.rfind('/');
    std::string_view parent = slash == std::string_view::npos ? "" : rel.substr(0, slash);
    std::string name(slash == std::string_view::npos ? rel : rel.substr(slash + 1));
    const std::string shown = util::printable(join(root_, std::string(rel)));
    if (name.empty() || name == "." || name == "..") {
        return Status(Code::kInvalidArgument, shown + ": not a file name");
    }
    auto d = dir(parent);
    if (!d) {
        return d.status();
    }
    Fd fd(::openat(d->get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600));
    if (!fd) {
        if (errno == EEXIST) {
            return Status(Code::kInvalidArgument,
                          shown + " already exists; a capture file is never overwritten");
        }
        return Status::from_errno(errno, "create " + shown);
    }
    if (::fchmod(fd.get(), 0600) != 0) { // whatever the umask
        return Status::from_errno(errno, "chmod 0600 " + shown);
    }
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return Status::from_errno(errno, "write " + shown);
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd.release()) != 0) {
        return Status::from_errno(errno, "close " + shown);
    }
    return Status::ok();
}

} // namespace roce::topo::fs
