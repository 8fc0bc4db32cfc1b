// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "qp/transitions.h"

#include <cstring>
#include <vector>

#include "util/strings.h"

namespace roce::qp {

const char *to_string(QpType t) noexcept {
    switch (t) {
    case QpType::kUD: return "UD";
    case QpType::kRC: return "RC";
    case QpType::kDCI: return "DCI";
    case QpType::kDCT: return "DCT";
    }
    return "?";
}

const char *to_string(Transition t) noexcept {
    switch (t) {
    case Transition::kResetToInit: return "RESET->INIT";
    case Transition::kInitToRtr: return "INIT->RTR";
    case Transition::kRtrToRts: return "RTR->RTS";
    }
    return "?";
}

ibv_qp_state from_state(Transition t) noexcept {
    switch (t) {
    case Transition::kResetToInit: return IBV_QPS_RESET;
    case Transition::kInitToRtr: return IBV_QPS_INIT;
    case Transition::kRtrToRts: return IBV_QPS_RTR;
    }
    return IBV_QPS_UNKNOWN;
}

ibv_qp_state to_state(Transition t) noexcept {
    switch (t) {
    case Transition::kResetToInit: return IBV_QPS_INIT;
    case Transition::kInitToRtr: return IBV_QPS_RTR;
    case Transition::kRtrToRts: return IBV_QPS_RTS;
    }
    return IBV_QPS_UNKNOWN;
}

std::optional<MaskRule> transition_masks(QpType type, Transition t) noexcept {
    constexpr int S = IBV_QP_STATE;
    constexpr int kAlt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
    switch (t) {
    case Transition::kResetToInit:
        switch (type) {
        case QpType::kUD: return MaskRule{S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0};
        case QpType::kDCI: return MaskRule{S | IBV_QP_PKEY_INDEX | IBV_QP_PORT, 0};
        case QpType::kRC:
        case QpType::kDCT:
            return MaskRule{S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
        }
        break;
    case Transition::kInitToRtr:
        switch (type) {
        case QpType::kUD: return MaskRule{S, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
        case QpType::kRC:
            return MaskRule{S | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                            IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
        case QpType::kDCI: return MaskRule{S | IBV_QP_PATH_MTU, IBV_QP_PKEY_INDEX | IBV_QP_AV};
        case QpType::kDCT:
            return MaskRule{S | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, 0};
        }
        break;
    case Transition::kRtrToRts:
        switch (type) {
        case QpType::kUD: return MaskRule{S | IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY};
        case QpType::kRC:
            return MaskRule{S | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                            IBV_QP_CUR_STATE | kAlt | IBV_QP_MIN_RNR_TIMER};
        case QpType::kDCI:
            return MaskRule{S | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                            IBV_QP_MIN_RNR_TIMER};
        case QpType::kDCT: return std::nullopt;
        }
        break;
    }
    return std::nullopt;
}

namespace {

struct BitName {
    unsigned bit;
    const char *name;
};

/// "A|B|0x40": the names of the bits set in `flags`, unknown bits in hex.
template <size_t N>
std::string bit_names(unsigned flags, const BitName (&bits)[N]) {
    std::vector<std::string> names;
    unsigned rest = flags;
    for (const auto &b : bits) {
        if (flags & b.bit) {
            names.emplace_back(b.name);
            rest &= ~b.bit;
        }
    }
    if (rest != 0) {
        names.push_back(util::format("0x%x", rest));
    }
    return names.empty() ? "0" : util::join(names, "|");
}

} // namespace

std::string mask_names(int mask) {
    static const BitName kBits[] = {
        {IBV_QP_STATE, "IBV_QP_STATE"},
        {IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE"},
        {IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"},
        {IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"},
        {IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"},
        {IBV_QP_PORT, "IBV_QP_PORT"},
        {IBV_QP_QKEY, "IBV_QP_QKEY"},
        {IBV_QP_AV, "IBV_QP_AV"},
        {IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU"},
        {IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT"},
        {IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT"},
        {IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY"},
        {IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN"},
        {IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"},
        {IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"},
        {IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"},
        {IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN"},
        {IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"},
        {IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"},
        {IBV_QP_CAP, "IBV_QP_CAP"},
        {IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN"},
    };
    return bit_names(static_cast<unsigned>(mask), kBits);
}

std::string access_names(unsigned flags) {
    static const BitName kBits[] = {{IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE"},
                                    {IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE"},
                                    {IBV_ACCESS_REMOTE_READ, "REMOTE_READ"},
                                    {IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC"}};
    return bit_names(flags, kBits);
}

ibv_ah_attr build_ah_attr(const select::Selection &sel, const std::array<uint8_t, 16> &dgid,
                          const QpParams &params) {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, dgid.data(), 16);
    ah.grh.sgid_index = static_cast<uint8_t>(sel.gid_index);
    ah.grh.hop_limit = params.hop_limit;
    ah.grh.traffic_class = params.traffic_class;
    ah.grh.flow_label = params.flow_label & 0xfffffu;
    ah.sl = params.sl;
    ah.port_num = static_cast<uint8_t>(sel.port);
    return ah;
}

ModifyRequest build_request(QpType type, Transition t, const select::Selection &sel,
                            const RemoteEnd *remote, const QpParams &params) {
    ModifyRequest r;
    ibv_qp_attr &a = r.attr;
    a.qp_state = to_state(t);
    r.mask = IBV_QP_STATE;
    if (t == Transition::kResetToInit) {
        a.pkey_index = static_cast<uint16_t>(sel.pkey_index);
        a.port_num = static_cast<uint8_t>(sel.port);
        r.mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (type == QpType::kUD) {
            a.qkey = sel.qkey;
            r.mask |= IBV_QP_QKEY;
        } else if (type == QpType::kRC || type == QpType::kDCT) {
            a.qp_access_flags = static_cast<unsigned>(params.access_flags);
            r.mask |= IBV_QP_ACCESS_FLAGS;
        }
    } else if (t == Transition::kInitToRtr && type != QpType::kUD) {
        a.path_mtu = sel.path_mtu;
        r.mask |= IBV_QP_PATH_MTU;
        bool with_av = type == QpType::kRC || type == QpType::kDCT || remote != nullptr;
        if (with_av) {
            a.ah_attr = build_ah_attr(sel, remote ? remote->gid : sel.gid, params);
            r.mask |= IBV_QP_AV;
        }
        if (type == QpType::kRC) {
            a.dest_qp_num = remote ? remote->qpn : 0;
            a.rq_psn = remote ? remote->psn : 0;
            a.max_dest_rd_atomic = params.max_dest_rd_atomic;
            r.mask |= IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC;
        }
        if (type == QpType::kRC || type == QpType::kDCT) {
            a.min_rnr_timer = params.min_rnr_timer;
            r.mask |= IBV_QP_MIN_RNR_TIMER;
        }
    } else if (t == Transition::kRtrToRts) {
        a.sq_psn = params.sq_psn;
        r.mask |= IBV_QP_SQ_PSN;
        if (type != QpType::kUD) {
            a.timeout = params.timeout;
            a.retry_cnt = params.retry_cnt;
            a.rnr_retry = params.rnr_retry;
            a.max_rd_atomic = params.max_rd_atomic;
            r.mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
    }
    return r;
}

} // namespace roce::qp
