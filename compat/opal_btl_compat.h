/*
 * Copyright (c) 2026 ompi-roce developers. See LICENSE.
 *
 * The btl receive callback, whose shape differs between the series (see
 * ompi_series.h): 4.1 calls cbfunc(btl, tag, descriptor, cbdata) with a
 * send descriptor; 5.0 (btl 3.3.0) calls cbfunc(btl, receive_descriptor)
 * with the tag, endpoint, segments and cbdata in it. Both carry
 * des_segments and des_segment_count, which is all a receiver reads, so
 * receivers are written once against RecvDesc and registered through
 * recv_cb<>, and the btl delivers through deliver().
 */
#ifndef ROCE_OPAL_BTL_COMPAT_H
#define ROCE_OPAL_BTL_COMPAT_H

#include "opal_cxx_compat.h"

#include <cstddef>

#include "ompi_series.h"
#include "opal/mca/btl/btl.h"

namespace roce::compat {

#if ROCE_OMPI_SERIES == 41
using RecvDesc = mca_btl_base_descriptor_t;
#else
using RecvDesc = mca_btl_base_receive_descriptor_t;
#endif

/// A receiver in the series-neutral form.
using RecvFn = void (*)(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag, const RecvDesc *des);

/// The callback to register (bml_register, or the active message table)
/// for the receiver `F`.
#if ROCE_OMPI_SERIES == 41
template <RecvFn F>
void recv_cb(mca_btl_base_module_t *btl, mca_btl_base_tag_t tag, mca_btl_base_descriptor_t *des,
             void *) {
    F(btl, tag, des);
}
#else
template <RecvFn F>
void recv_cb(mca_btl_base_module_t *btl, const mca_btl_base_receive_descriptor_t *des) {
    F(btl, des->tag, des);
}
#endif

/// The btl side: hands `count` received segments from `ep` to the callback
/// `reg` registered for `tag` (which must be set).
inline void deliver(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, mca_btl_base_tag_t tag,
                    mca_btl_base_segment_t *segs, std::size_t count,
                    const mca_btl_active_message_callback_t *reg) {
#if ROCE_OMPI_SERIES == 41
    (void)ep;
    mca_btl_base_descriptor_t des{};
    des.des_segments = segs;
    des.des_segment_count = count;
    reg->cbfunc(btl, tag, &des, reg->cbdata);
#else
    mca_btl_base_receive_descriptor_t des{};
    des.endpoint = ep;
    des.des_segments = segs;
    des.des_segment_count = count;
    des.tag = tag;
    des.cbdata = reg->cbdata;
    reg->cbfunc(btl, &des);
#endif
}

} // namespace roce::compat

#endif
