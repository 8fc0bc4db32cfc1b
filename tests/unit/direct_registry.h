// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// A MemoryRegistry for btl modules driven outside Open MPI (tests and
// benchmarks over FakeVerbs): direct ibv_reg_mr on the module's PD, no cache.
#pragma once

#include <map>
#include <memory>

#include "btl_roce_module.h"

namespace roce::testing {

/// Registers each request directly (ibv_reg_mr on `dev`'s PD, the access
/// the flags ask for) and deregisters what is left on destruction. `dev`
/// must outlive the registry. Not thread-safe.
class DirectRegistry final : public btl::MemoryRegistry {
public:
    explicit DirectRegistry(btl::Device &dev) : dev_(dev) {}
    ~DirectRegistry() override {
        for (auto &[h, r] : regs_) {
            (void)dev_.api().dereg_mr(r->mr);
        }
    }
    mca_btl_base_registration_handle_t *register_mem(void *base, size_t size,
                                                     uint32_t flags) override {
        int access = IBV_ACCESS_LOCAL_WRITE;
        access |= (flags & MCA_BTL_REG_FLAG_REMOTE_READ) ? IBV_ACCESS_REMOTE_READ : 0;
        access |= (flags & MCA_BTL_REG_FLAG_REMOTE_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0;
        access |= (flags & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) ? IBV_ACCESS_REMOTE_ATOMIC : 0;
        ibv_mr *mr = dev_.api().reg_mr(dev_.pd(), base, size, access);
        if (mr == nullptr) {
            return nullptr;
        }
        auto r = std::make_unique<Reg>();
        r->mr = mr;
        r->flags = flags;
        r->handle.rkey = mr->rkey;
        r->handle.lkey = mr->lkey;
        auto *h = &r->handle;
        regs_[h] = std::move(r);
        return h;
    }
    int deregister_mem(mca_btl_base_registration_handle_t *h) override {
        auto it = regs_.find(h);
        if (it == regs_.end()) {
            return OPAL_ERR_BAD_PARAM;
        }
        int rc = dev_.api().dereg_mr(it->second->mr);
        regs_.erase(it);
        return rc == 0 ? OPAL_SUCCESS : OPAL_ERROR;
    }
    Extent extent(const mca_btl_base_registration_handle_t *h) const override {
        Extent x;
        auto it = regs_.find(const_cast<mca_btl_base_registration_handle_t *>(h));
        if (it != regs_.end()) {
            x.base = it->second->mr->addr;
            x.size = it->second->mr->length;
            x.flags = it->second->flags;
        }
        return x;
    }
    /// Registrations held now.
    size_t live() const { return regs_.size(); }

private:
    struct Reg {
        ibv_mr *mr = nullptr;
        uint32_t flags = 0;
        mca_btl_base_registration_handle_t handle{};
    };
    btl::Device &dev_;
    std::map<mca_btl_base_registration_handle_t *, std::unique_ptr<Reg>> regs_;
};

} // namespace roce::testing
