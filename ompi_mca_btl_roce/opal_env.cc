// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "opal_env.h"

#include <cstddef>
#include <cstdlib>

#include "opal_pmix_compat.h"
#include "opal/mca/rcache/base/base.h"
#include "opal/mca/rcache/rcache.h"
#include "opal/util/proc.h"

#include "btl_roce.h"
#include "topo/readers.h"
#include "util/strings.h"
#include "verbs/handles.h"
#include "verbs/verbs_api.h"

namespace roce::btl {

using util::Code;
using util::Result;
using util::Status;

Result<wire::ModexAddress> OpalPeerDirectory::address(opal_proc_t *proc) {
    uint8_t *blob = nullptr;
    size_t size = 0;
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_RECV(rc, &mca_btl_roce_component.super.btl_version, &proc->proc_name,
                    reinterpret_cast<void **>(&blob), &size);
    if (rc != OPAL_SUCCESS || blob == nullptr) {
        return Status(Code::kNotFound,
                      "the peer published no roce address (no usable RoCE port there, or btl "
                      "roce excluded on it)");
    }
    auto addr = wire::parse_modex(blob, size);
    free(blob);
    return addr;
}

opal_proc_t *OpalPeerDirectory::proc_for(uint64_t name) {
    opal_process_name_t pn;
    pn.jobid = static_cast<opal_jobid_t>(name >> 32);
    pn.vpid = static_cast<opal_vpid_t>(name & 0xffffffffu);
    return opal_proc_for_name(pn);
}

uint64_t local_process_name() {
    opal_process_name_t me = opal_proc_local_get()->proc_name;
    return (static_cast<uint64_t>(me.jobid) << 32) | me.vpid;
}

namespace {

/// An rcache registration: the verbs MR behind a registration handle.
struct Reg {
    mca_rcache_base_registration_t base;
    ibv_mr *mr;
    mca_btl_base_registration_handle_t handle;
};

class GrdmaRegistry final : public MemoryRegistry {
public:
    GrdmaRegistry(Device &dev, util::LogSink &log) : dev_(dev), log_(log) {}
    ~GrdmaRegistry() override {
        if (rcache_ != nullptr) {
            mca_rcache_base_module_destroy(rcache_);
        }
    }
    Status open(const std::string &device) {
        mca_rcache_base_resources_t res{};
        std::string cache_name = "roce." + device;
        res.cache_name = const_cast<char *>(cache_name.c_str());
        res.reg_data = this;
        res.sizeof_reg = sizeof(Reg);
        res.register_mem = reg_mem_cb;
        res.deregister_mem = dereg_mem_cb;
        rcache_ = mca_rcache_base_module_create("grdma", this, &res);
        if (rcache_ == nullptr) {
            return Status(Code::kUnavailable,
                          "cannot create the grdma registration cache (mca_rcache_grdma missing?)");
        }
        return Status::ok();
    }
    mca_btl_base_registration_handle_t *register_mem(void *base, size_t size,
                                                     uint32_t flags) override {
        mca_rcache_base_registration_t *r = nullptr;
        int access = static_cast<int>(flags & MCA_BTL_REG_FLAG_ACCESS_ANY);
        int rc = rcache_->rcache_register(rcache_, base, size, 0, access, &r);
        if (rc != OPAL_SUCCESS || r == nullptr) {
            return nullptr;
        }
        return &reinterpret_cast<Reg *>(r)->handle;
    }
    int deregister_mem(mca_btl_base_registration_handle_t *handle) override {
        auto *reg =
            reinterpret_cast<Reg *>(reinterpret_cast<char *>(handle) - offsetof(Reg, handle));
        return rcache_->rcache_deregister(rcache_, &reg->base);
    }
    Extent extent(const mca_btl_base_registration_handle_t *handle) const override {
        const auto *reg = reinterpret_cast<const Reg *>(reinterpret_cast<const char *>(handle) -
                                                        offsetof(Reg, handle));
        Extent x;
        x.base = reg->base.base;
        x.size = static_cast<size_t>(reg->base.bound - reg->base.base) + 1; // bound: last byte
        x.flags = static_cast<uint32_t>(reg->base.access_flags);
        return x;
    }

private:
    static int reg_mem_cb(void *reg_data, void *base, size_t size,
                          mca_rcache_base_registration_t *r) {
        auto *self = static_cast<GrdmaRegistry *>(reg_data);
        auto *reg = reinterpret_cast<Reg *>(r);
        int access = IBV_ACCESS_LOCAL_WRITE;
        if (r->access_flags & MCA_BTL_REG_FLAG_REMOTE_READ) {
            access |= IBV_ACCESS_REMOTE_READ;
        }
        if (r->access_flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) {
            access |= IBV_ACCESS_REMOTE_WRITE;
        }
        if (r->access_flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) {
            access |= IBV_ACCESS_REMOTE_ATOMIC;
        }
        reg->mr = self->dev_.api().reg_mr(self->dev_.pd(), base, size, access);
        if (reg->mr == nullptr) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        // The cache reuses its registration objects: no key of an earlier
        // one, on any rail, may survive into this one.
        reg->handle = mca_btl_base_registration_handle_t{};
        reg->handle.rkey = reg->mr->rkey;
        reg->handle.lkey = reg->mr->lkey;
        return OPAL_SUCCESS;
    }
    static int dereg_mem_cb(void *reg_data, mca_rcache_base_registration_t *r) {
        auto *self = static_cast<GrdmaRegistry *>(reg_data);
        auto *reg = reinterpret_cast<Reg *>(r);
        if (reg->mr != nullptr) {
            int rc = verbs::normalize_rc(self->dev_.api().dereg_mr(reg->mr), errno);
            reg->mr = nullptr;
            if (rc != 0) {
                self->log_.write(util::LogLevel::kWarn,
                                 Status::from_errno(rc, "ibv_dereg_mr").message());
                return OPAL_ERROR;
            }
        }
        return OPAL_SUCCESS;
    }

    Device &dev_;
    util::LogSink &log_;
    mca_rcache_base_module_t *rcache_ = nullptr;
};

} // namespace

Result<std::unique_ptr<MemoryRegistry>> grdma_registry(Device &dev, util::LogSink &log) {
    auto r = std::make_unique<GrdmaRegistry>(dev, log);
    Status s = r->open(dev.name());
    if (!s) {
        return s;
    }
    return std::unique_ptr<MemoryRegistry>(std::move(r));
}

} // namespace roce::btl
