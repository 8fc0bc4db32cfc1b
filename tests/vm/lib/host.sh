# shellcheck shell=sh
# Host-side helpers for tests/vm/*.test (POSIX sh; set top= first).

# need WHAT PACKAGE...: WHAT (a command, or an absolute path) must exist;
# install the PACKAGEs with apt-get when it does not (as root), else say what to install.
need() {
    what=$1
    shift
    if have "$what"; then return 0; fi
    if [ "$(id -u)" = 0 ]; then
        echo "installing $* for $what" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
    fi
    have "$what" || {
        echo "missing $what: apt-get install $*" >&2
        return 1
    }
}
have() {
    case $1 in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
    esac
}

# build_probes DIR: compile tests/vm/src/*_probe.c against the real rdma-core
# libraries into DIR (readable by the guest's unprivileged user too).
build_probes() {
    need gcc gcc libc6-dev && need /usr/include/infiniband/mlx5dv.h libibverbs-dev || return 1
    chmod 0755 "$1"
    gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$1/ud_init_probe" \
        "$top/tests/vm/src/ud_init_probe.c" -libverbs &&
        gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$1/dv_probe" \
            "$top/tests/vm/src/dv_probe.c" -lmlx5 -libverbs
}
