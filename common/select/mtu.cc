// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "select/mtu.h"

namespace roce::select {

int iboe_mtu_bytes(int netdev_mtu) noexcept {
    int payload = netdev_mtu - kRoceHeaderBytes;
    for (int bytes = 4096; bytes >= 256; bytes /= 2) {
        if (payload >= bytes) {
            return bytes;
        }
    }
    return 0;
}

int carried_mtu_bytes(int active_mtu, int netdev_mtu) noexcept {
    int iboe = netdev_mtu > 0 ? iboe_mtu_bytes(netdev_mtu) : 0;
    if (active_mtu > 0 && iboe > 0) {
        return active_mtu < iboe ? active_mtu : iboe;
    }
    return active_mtu > 0 ? active_mtu : iboe;
}

ibv_mtu mtu_enum(int bytes) noexcept {
    if (bytes >= 4096) {
        return IBV_MTU_4096;
    }
    if (bytes >= 2048) {
        return IBV_MTU_2048;
    }
    if (bytes >= 1024) {
        return IBV_MTU_1024;
    }
    if (bytes >= 512) {
        return IBV_MTU_512;
    }
    return IBV_MTU_256;
}

bool mtu_valid(int mtu_enum) noexcept { return mtu_enum >= IBV_MTU_256 && mtu_enum <= IBV_MTU_4096; }

int mtu_bytes(ibv_mtu mtu) noexcept { return mtu_valid(mtu) ? 128 << mtu : 0; }

const char *mtu_name(ibv_mtu mtu) noexcept {
    switch (mtu) {
    case IBV_MTU_256: return "IBV_MTU_256";
    case IBV_MTU_512: return "IBV_MTU_512";
    case IBV_MTU_1024: return "IBV_MTU_1024";
    case IBV_MTU_2048: return "IBV_MTU_2048";
    case IBV_MTU_4096: return "IBV_MTU_4096";
    }
    return "invalid";
}

} // namespace roce::select
