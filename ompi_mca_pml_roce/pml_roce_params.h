// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/status.h"

namespace roce::pml {

/// Limits of pml_roce_eager_limit: below the minimum the match header no
/// longer fits with useful payload; above the maximum eager copies cost more
/// than a rendezvous.
inline constexpr int64_t kMinEagerLimit = 64;
inline constexpr int64_t kMaxEagerLimit = 4 * 1024 * 1024;
inline constexpr int64_t kDefaultEagerLimit = 8192;
inline constexpr int kDefaultPriority = 5;

/// Limits of pml_roce_pipeline_depth (FRAGs in flight per message): one
/// keeps the pipeline alive; beyond 1024 a single message would hold most of
/// a btl's send descriptors.
inline constexpr int64_t kMinPipelineDepth = 1;
inline constexpr int64_t kMaxPipelineDepth = 1024;
inline constexpr int64_t kDefaultPipelineDepth = 8;
/// Largest pml_roce_rget_limit (bytes): 2^62, the wire's length limit.
/// pml_roce_stream_limit: default and largest value (bytes); the largest is
/// what a receiver accepts (wire::kMaxStream).
inline constexpr int64_t kDefaultStreamLimit = 64 * 1024;
inline constexpr int64_t kMaxStreamLimit = int64_t{1} << 20;
inline constexpr int64_t kMaxRgetLimit = int64_t{1} << 62;

/// Checks the rendezvous settings: pml_roce_pipeline_depth within
/// kMinPipelineDepth..kMaxPipelineDepth and pml_roce_rget_limit within
/// 0..kMaxRgetLimit; the error names the parameter, the value and what is
/// allowed.
util::Status check_rendezvous_options(int64_t pipeline_depth, int64_t rget_limit);
/// Checks pml_roce_stream_limit: 0..kMaxStreamLimit.
util::Status check_stream_limit(int64_t stream_limit);

/// pml_roce_split_min: default (bytes; issue 18: measured in
/// docs/mca-params.md) and largest value (the wire's length limit).
inline constexpr int64_t kDefaultSplitMin = 256 * 1024;
inline constexpr int64_t kMaxSplitMin = int64_t{1} << 62;
/// Checks pml_roce_split_min: 0 (off) or 128..kMaxSplitMin (a split
/// needs two parts of at least a 64-byte line each).
util::Status check_split_min(int64_t split_min);

/// Validated pml settings.
struct PmlOptions {
    size_t eager_limit = static_cast<size_t>(kDefaultEagerLimit);
    int priority = kDefaultPriority;
    int verbose = 0;
};

/// Checks the raw MCA values; the error names the parameter, the value and
/// what is allowed.
util::Result<PmlOptions> validate_pml_options(int64_t eager_limit, int64_t priority,
                                              int64_t verbose);

} // namespace roce::pml
