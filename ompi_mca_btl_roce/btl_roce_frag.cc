// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include "btl_roce_frag.h"

#include "proto/wire.h"

namespace roce::btl {

void FragPool::init(uint8_t *slab, uint32_t lkey, size_t slot_size, size_t count) {
    frags_ = std::vector<Frag>(count);
    free_.clear();
    free_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        Frag &f = frags_[i];
        // The descriptor is an opal object for Open MPI's sake (ob1 may keep
        // it on its lists); construct it in place.
        OBJ_CONSTRUCT(&f.base, mca_btl_base_descriptor_t);
        f.buf = slab + i * slot_size;
        f.lkey = lkey;
        f.capacity = static_cast<uint32_t>(slot_size - wire::kFragHeaderSize);
        f.slot = static_cast<uint32_t>(i);
        f.base.des_segments = f.segments;
        f.base.des_segment_count = 1;
        free_.push_back(&f);
    }
}

FragPool::~FragPool() {
    for (auto &f : frags_) {
        OBJ_DESTRUCT(&f.base);
    }
}

Frag *FragPool::get() {
    if (free_.empty()) {
        return nullptr;
    }
    Frag *f = free_.back();
    free_.pop_back();
    f->in_use = true;
    f->inplace = false;
    f->inplace_reg = nullptr;
    f->endpoint = nullptr;
    f->next = nullptr;
    f->path = -1;
    f->seq = 0;
    f->has_seq = false;
    f->control = false;
    f->forward = false;
    f->dc_errors = 0;
    f->tag = 0;
    f->base.des_cbfunc = nullptr;
    f->base.des_cbdata = nullptr;
    f->base.des_context = nullptr;
    f->base.des_flags = 0;
    f->base.order = MCA_BTL_NO_ORDER;
    f->base.des_segments = f->segments;
    f->base.des_segment_count = 1;
    f->segments[0].seg_addr.pval = f->buf + wire::kFragHeaderSize;
    f->segments[0].seg_len = 0;
    return f;
}

void FragPool::put(Frag *f) {
    f->in_use = false;
    free_.push_back(f);
}

} // namespace roce::btl
