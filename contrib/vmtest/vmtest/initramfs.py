"""Build (and cache) the guests' tiny initramfs from the installed kernel.

The initramfs holds only busybox-static, the modules needed to reach the
guests' root over virtio-9p and stack a tmpfs overlay on it, and guest/init.
Everything else (bonding, rxe, sshd, Python) comes from that root once the
guest has switched into it, so nothing binary lives in the repository.

The guests' root is the host's / by default, or another root directory
(contrib/vmtest/run --root DIR, e.g. contrib/debian13-root --guest): then the
kernel is DIR/boot/vmlinuz-*, the modules come from DIR/lib/modules and the
image is cached under a key of its own. busybox is always the host's (static).
"""

import fcntl
import gzip
import hashlib
import io
import lzma
import os
import re
import stat
import tempfile

from .util import ToolError, log

# What /init needs before switch_root, plus the fabric's drivers: busybox
# insmod here is cheaper than a modprobe process per module under TCG. Others
# can still be modprobe'd from the host's /lib/modules through the 9p root.
INITRAMFS_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_console",
                     "virtio_net", "bonding", "8021q", "dummy", "rdma_rxe", "ib_uverbs")
# As systemd's modprobe.d does: no implicit bond0/dummy0, setup makes its own.
MODULE_OPTIONS = {"bonding": "max_bonds=0", "dummy": "numdummies=0"}

BUSYBOX = "/bin/busybox"
GUEST_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "guest")
# Bump when the layout of the image changes in a way the hash below cannot see.
FORMAT = "1"


def _in_root(root, path):
    """`path` (absolute, inside the guests' root) as seen from the host."""
    return os.path.join(root, path.lstrip("/")) if root != "/" else path


def find_kernel(version=None, root="/"):
    """Return (release, vmlinuz path) of the kernel to boot.

    Without a version, the newest ROOT/boot/vmlinuz-* whose modules
    (ROOT/lib/modules) include rdma_rxe (the whole point of the fabric) is chosen.
    """
    candidates = []
    boot = _in_root(root, "/boot")
    try:
        names = os.listdir(boot)
    except OSError as e:
        raise ToolError(f"cannot list {boot}: {e.strerror}") from None
    for name in names:
        m = re.fullmatch(r"vmlinuz-(.+)", name)
        if m:
            candidates.append(m.group(1))
    if version:
        candidates = [v for v in candidates if v == version]
    usable = [v for v in candidates if _module_path(v, "rdma_rxe", root)]
    if not usable:
        want = version or "any installed kernel"
        fix = ("install one with: apt-get install linux-image-amd64" if root == "/" else
               f"{root} is not a guest root (contrib/debian13-root --guest build makes one)")
        raise ToolError(
            f"no bootable kernel with rdma_rxe found for {want} under {boot} and "
            f"{_in_root(root, '/lib/modules')}; {fix}"
        )
    usable.sort(key=_version_key)
    release = usable[-1]
    return release, _in_root(root, f"/boot/vmlinuz-{release}")


def _version_key(release):
    return [int(x) if x.isdigit() else x for x in re.split(r"[.-]", release)]


def _module_path(release, name, root="/"):
    """Path of module `name` (relative to ROOT/lib/modules/RELEASE), or None."""
    dep = _modules_dep(release, root)
    for path in dep:
        base = os.path.basename(path)
        base = re.sub(r"\.ko(\.(xz|gz|zst))?$", "", base)
        if base.replace("-", "_") == name.replace("-", "_"):
            return path
    return None


_dep_cache = {}


def _modules_dep(release, root="/"):
    if (root, release) not in _dep_cache:
        table = {}
        try:
            with open(_in_root(root, f"/lib/modules/{release}/modules.dep")) as f:
                for line in f:
                    mod, _, deps = line.partition(":")
                    table[mod.strip()] = deps.split()
        except FileNotFoundError:
            pass
        _dep_cache[(root, release)] = table
    return _dep_cache[(root, release)]


def _builtin(release, name, root="/"):
    """True if module `name` is built into kernel `release` (modules.builtin)."""
    want = name.replace("-", "_")
    try:
        with open(_in_root(root, f"/lib/modules/{release}/modules.builtin")) as f:
            for line in f:
                base = re.sub(r"\.ko$", "", os.path.basename(line.strip()))
                if base.replace("-", "_") == want:
                    return True
    except FileNotFoundError:
        pass
    return False


def module_load_order(release, names, root="/"):
    """Modules (relative paths) in an order where each follows its dependencies.

    A module built into the kernel (another configuration than the host's,
    with --root) needs no loading and is left out."""
    dep = _modules_dep(release, root)
    order, seen = [], set()

    def visit(path, chain):
        if path in seen:
            return
        if path in chain:
            raise ToolError(f"module dependency cycle at {path}")
        for d in dep.get(path, []):
            visit(d, chain + (path,))
        seen.add(path)
        order.append(path)

    for name in names:
        path = _module_path(release, name, root)
        if path is None:
            if _builtin(release, name, root):
                continue
            raise ToolError(f"module {name} not found for kernel {release}")
        visit(path, ())
    return order


class _Cpio:
    """Minimal writer of the 'newc' cpio format the kernel unpacks."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name, mode, data=b"", nlink=1):
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(
            f"{v:08x}"
            for v in (self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name_b), 0)
        )
        self.ino += 1
        self.buf.write(hdr.encode() + name_b)
        self._pad()
        self.buf.write(data)
        self._pad()

    def _pad(self):
        self.buf.write(b"\0" * (-self.buf.tell() % 4))

    def directory(self, name):
        self._entry(name, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, name, data, perm=0o644):
        self._entry(name, stat.S_IFREG | perm, data)

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def finish(self):
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


def _file_digest(path, h):
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def _cache_key(release, vmlinuz, modules, root="/"):
    """Key over everything that ends up in (or decides) the image."""
    h = hashlib.sha256()
    h.update(f"format {FORMAT}\nrelease {release}\n{sorted(MODULE_OPTIONS.items())}\n".encode())
    if root != "/":
        h.update(f"root {root}\n".encode())  # the host's key stays what it was
    for path in (vmlinuz, BUSYBOX, os.path.join(GUEST_DIR, "init"), os.path.abspath(__file__)):
        st = os.stat(path)
        h.update(f"{path} {st.st_size} {st.st_mtime_ns}\n".encode())
    _file_digest(os.path.join(GUEST_DIR, "init"), h)
    _file_digest(os.path.abspath(__file__), h)
    for m in modules:
        st = os.stat(_in_root(root, f"/lib/modules/{release}/{m}"))
        h.update(f"{m} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _check_cache_dir(path):
    """Create the cache dir; refuse one that others could plant an image in."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    st = os.stat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise ToolError(
            f"cache dir {path} must be owned by uid {os.geteuid()} and not group/world "
            "writable (the guest kernel would run whatever image is found there)"
        )


def _image_prefix(release, root):
    """File name prefix of the images of `release` from `root`: the host's keep
    their old names; another root's carry a hash of its path, so neither prunes
    the other's images even for the same release."""
    if root == "/":
        return f"initramfs-{release}-"
    return f"initramfs-root{hashlib.sha256(root.encode()).hexdigest()[:8]}-{release}-"


def get_initramfs(release, vmlinuz, cache_dir, root="/"):
    """Return the path of a cached initramfs for `release` (modules from ROOT),
    building it if needed."""
    _check_cache_dir(cache_dir)
    modules = module_load_order(release, INITRAMFS_MODULES, root)
    key = _cache_key(release, vmlinuz, modules, root)
    prefix = _image_prefix(release, root)
    final = os.path.join(cache_dir, f"{prefix}{key}.cpio.gz")
    lock_path = os.path.join(cache_dir, ".lock")
    with open(lock_path, "w") as lock:
        # Serialise concurrent runs: one builds, the others then find it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(final):
            log(f"initramfs: cached {final}")
            return final
        data = _build(release, modules, root)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".build-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.rename(tmp, final)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(cache_dir, prefix, keep=final)
        log(f"initramfs: built {final} ({len(data) // 1024} KiB, {len(modules)} modules)")
        return final


def _prune(cache_dir, prefix, keep):
    """Drop older images of the same kernel release and root (their inputs changed)."""
    for name in os.listdir(cache_dir):
        path = os.path.join(cache_dir, name)
        if name.startswith(prefix) and path != keep:
            try:
                os.unlink(path)
            except OSError:
                pass


def _read_module(path):
    """(file name, uncompressed bytes): busybox insmod wants a plain .ko."""
    with open(path, "rb") as f:
        data = f.read()
    base = os.path.basename(path)
    if base.endswith(".ko.xz"):
        return base[:-3], lzma.decompress(data)
    if base.endswith(".ko.gz"):
        return base[:-3], gzip.decompress(data)
    if base.endswith(".ko.zst"):
        raise ToolError(f"{path}: zstd-compressed modules are not supported (no zstd in stdlib)")
    return base, data


def _build(release, modules, root="/"):
    cpio = _Cpio()
    for d in ("bin", "dev", "proc", "sys", "lib", "lib/modules", "lower", "upper", "newroot"):
        cpio.directory(d)
    with open(BUSYBOX, "rb") as f:
        cpio.file("bin/busybox", f.read(), 0o755)
    cpio.symlink("bin/sh", "busybox")
    with open(os.path.join(GUEST_DIR, "init"), "rb") as f:
        cpio.file("init", f.read(), 0o755)
    order = ""
    for m in modules:
        name, data = _read_module(_in_root(root, f"/lib/modules/{release}/{m}"))
        cpio.file(f"lib/modules/{name}", data)
        order += f"{name} {MODULE_OPTIONS.get(name[:-3], '')}".rstrip() + "\n"
    cpio.file("modules.order", order.encode())
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0) as gz:
        gz.write(cpio.finish())
    return out.getvalue()
