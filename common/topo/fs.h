// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace roce::topo::fs {

/// File access for the sysfs and capture readers and the capture writer.
/// Every error carries the path (non-printable bytes escaped, see
/// util::printable) and the errno, e.g. "read /sys/class/infiniband/mlx5_0/
/// ports/1/gid_attrs/types/7 failed: Invalid argument (22)". No global
/// state; thread-safe.
///
/// Reading rules, the same for sysfs, captures and fixtures: a file is opened
/// with O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC (a FIFO cannot block the
/// open, a link at the end of the path is refused), then fstat must say it is
/// a regular file (a FIFO, socket or device is refused by name: "... is not a
/// regular file (a FIFO)") no larger than the cap, and it is read to EOF but
/// never past the cap. st_size only refuses files known to be too big: sysfs
/// reports 4096 or 0 for every attribute, whatever it holds, and some
/// attributes fail on read (EINVAL) rather than on open.

/// Largest file a reader accepts. sysfs attributes are at most a page; the
/// `ip -j` JSON of a host with thousands of VLANs is well below this.
inline constexpr size_t kMaxFileBytes = 4u << 20;

/// How a tree treats symbolic links below its root.
enum class Links {
    /// The kernel's own tree (ROOT/sys, ROOT/proc; ROOT is "/" except in a
    /// private mount namespace). sysfs is made of links
    /// (/sys/class/net/eth0 -> ../../devices/..., /sys/class/infiniband/
    /// mlx5_0 -> ...), so directories are reached through them. The file read
    /// at the end of a path must still not be a link (sysfs attributes are
    /// regular files; `master`, `lower_*`, `upper_*` are read as links with
    /// link_name, never followed).
    kFollow,
    /// A tree a user handed us (a capture, a fixture): nothing below ROOT may
    /// be a link. Each component is opened relative to its parent's file
    /// descriptor with O_NOFOLLOW, so a link anywhere in the tree is refused
    /// ("... is a symbolic link; ..."), never followed, whatever it points
    /// to. ROOT itself is the caller's choice and may be reached through
    /// links. link_name still reads a link's target text (readlinkat does not
    /// follow it).
    kRefuse,
};

/// "a" + "/" + "b", without doubling slashes ("/" + "sys" -> "/sys").
std::string join(const std::string &a, const std::string &b);

/// An owned file descriptor (closed by the destructor). Move-only.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(o.release()) {}
    Fd &operator=(Fd &&o) noexcept;
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd();
    int get() const noexcept { return fd_; }
    int release() noexcept;
    explicit operator bool() const noexcept { return fd_ >= 0; }

private:
    int fd_ = -1;
};

/// A directory tree read by paths relative to its root ("sys/class/net",
/// "" for the root itself), under the rules above and `links`. Cheap to
/// copy (two strings); opens nothing until asked.
class Tree {
public:
    Tree(std::string root, Links links) : root_(std::move(root)), links_(links) {}

    const std::string &root() const noexcept { return root_; }
    Links links() const noexcept { return links_; }
    /// ROOT/REL as a plain string (for building on, not for messages).
    std::string path(std::string_view rel) const;
    /// ROOT/REL for a message: non-printable bytes escaped.
    std::string shown(std::string_view rel) const;

    /// The whole regular file REL, at most `max_bytes` (kResourceExhausted
    /// beyond, kInvalidArgument for a FIFO, socket, device or directory, and
    /// for a link under either policy).
    util::Result<std::string> read_text(std::string_view rel,
                                        size_t max_bytes = kMaxFileBytes) const;
    /// The first line of REL without the trailing newline and blanks.
    util::Result<std::string> read_line(std::string_view rel) const;
    /// Names in directory REL (no "." and ".."), sorted. A missing directory
    /// fails with kNotFound.
    util::Result<std::vector<std::string>> list_dir(std::string_view rel) const;
    /// REL exists (a link counts as existing; it is not followed).
    bool exists(std::string_view rel) const;
    /// REL is a directory (kFollow: or a link to one).
    bool is_dir(std::string_view rel) const;
    /// REL is a symbolic link (not followed).
    bool is_link(std::string_view rel) const;
    /// The last path component a link points to ("../bond0" -> "bond0"). In
    /// sysfs REL is a symlink (read with readlinkat, not followed); in a
    /// capture it is a regular file holding the target ("../bond0\n"),
    /// because captures are tarred and copied by tools that follow symlinks,
    /// and sysfs links form cycles.
    util::Result<std::string> link_name(std::string_view rel) const;

private:
    /// The directory holding REL's last component, opened one component at
    /// a time with O_NOFOLLOW (kRefuse), and that component ("." for REL
    /// ""). kFollow opens nothing: an empty Fd, and `last` is the whole
    /// path, for the kernel to resolve (one open per file, as sysfs
    /// polling wants). Errors read "VERB ROOT/REL failed: ..." or name the
    /// link that was refused.
    util::Result<Fd> parent_of(std::string_view rel, std::string *last, const char *verb) const;

    std::string root_;
    Links links_;
};

/// One file named by a path (a file a test or a user names): Tree with
/// kFollow for the directories leading to it, the reading rules for the file.
util::Result<std::string> read_text(const std::string &path, size_t max_bytes = kMaxFileBytes);
/// Names in a directory named by a path (no "." and ".."), sorted.
util::Result<std::vector<std::string>> list_dir(const std::string &path);

/// A directory this process writes a new tree into (a capture): every
/// directory and file is created relative to its parent's descriptor, never
/// by a path string - directories with mkdirat (0700) and
/// openat(O_DIRECTORY|O_NOFOLLOW), files with
/// openat(O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600) - so a name
/// that already exists (a link or file somebody planted) fails the write
/// instead of being followed or overwritten. Move-only; not thread-safe.
class OutTree {
public:
    /// Creates ROOT with mode 0700 (its parent must exist), or takes an
    /// existing directory that is empty and owned by this process's
    /// effective uid. Refuses, with the rule in the message: a link ("ROOT
    /// is a symbolic link"), anything but a directory, a non-empty directory
    /// ("ROOT already exists and is not empty") - kInvalidArgument - and
    /// someone else's directory ("ROOT is owned by uid N, not by you (uid
    /// M)") - kPermissionDenied.
    static util::Result<OutTree> create(const std::string &root);

    const std::string &root() const noexcept { return root_; }
    /// Creates directory REL and any missing parents (each new, 0700).
    util::Status make_dirs(std::string_view rel);
    /// Creates file REL (0600) with `text`, and missing parent directories.
    /// Fails if REL exists in any form.
    util::Status write_file(std::string_view rel, std::string_view text);

private:
    OutTree(std::string root, Fd fd) : root_(std::move(root)), fd_(std::move(fd)) {}
    /// An open descriptor of directory REL, creating it (and parents) when
    /// this tree has not made it yet.
    util::Result<Fd> dir(std::string_view rel);

    std::string root_;
    Fd fd_;
    std::set<std::string> made_; ///< directories this tree created (relative)
};

} // namespace roce::topo::fs
